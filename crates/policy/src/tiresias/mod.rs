//! Tiresias (NSDI'19) and the simulators that reran it: Tiresias-L's discretized 2D
//! least-attained-service queues ([`las`]), the same as Tiresias' and Muri's simulators run it
//! ([`dlas`]), Tiresias-G's Gittins index ([`gittins`]), and Tiresias as Pollux's artifact runs
//! it ([`pollux_tiresias`]).

pub mod dlas;
pub mod gittins;
pub mod las;
pub mod pollux_tiresias;
