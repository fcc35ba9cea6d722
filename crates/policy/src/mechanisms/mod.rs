//! What policies are built from: where a gang of GPUs goes ([`placement`]), "order the jobs,
//! then place greedily" ([`greedy`]), and choosing elastic jobs' GPU counts ([`elastic`]).
//! Co-location is Gavel's packing ([`crate::gavel::packing`]) and Muri's interleaving
//! ([`crate::muri::interleave`], with its matching [`crate::muri::matching`]).

pub(crate) mod elastic;
pub mod greedy;
pub mod placement;
