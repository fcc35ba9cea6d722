//! What policies are built from: where a gang of GPUs goes ([`placement`]), "order the jobs,
//! then place greedily" ([`greedy`]), choosing elastic jobs' GPU counts ([`elastic`]) and the
//! co-location speed table every packing policy reads ([`colocation`]). Co-location decisions
//! themselves are Gavel's packing ([`crate::gavel::packing`]) and Muri's interleaving
//! ([`crate::muri::interleave`], with its matching [`crate::muri::matching`]).

pub mod classes;
pub mod colocation;
pub(crate) mod elastic;
pub mod greedy;
pub mod placement;
