//! Arbiter from Python: what the `arbiter` package computes, as plain Rust, and (with the
//! `python` feature, which maturin turns on) the PyO3 module `arbiter._native` around it.
//!
//! Everything crosses the boundary as the JSON the command line already prints (`arbiter run
//! --json`, `arbiter trace analyze --json`) or the CSV it writes (per-job records, the native
//! trace format), which the Python side turns into DataFrames; the scenario machinery is `arbiter-sim`'s, so a
//! Python run and `arbiter run` with the same `--set` give the same numbers and the same errors.
//!
//! - [`assign`]: Python values of `set={...}` as `--set` assignments.
//! - [`scenario`]: loading and running scenarios (stoppable), and ad-hoc simulations.
//! - [`tables`]: result rows and published numbers as JSON, per-job records as CSV.
//! - [`traces`]: reading and characterising trace files.
//! - [`policies`]: the policies' descriptors.
//! - [`episode`]: one simulation on its own thread answered by an agent over channels (the
//!   Gymnasium environment).
//! - [`inprocess`]: policies written in Python: scheduling points packed for NumPy, orders back.
//! - [`error`]: one error type, with the Python exception class each error raises.

pub mod assign;
pub mod episode;
pub mod error;
pub mod inprocess;
pub mod policies;
pub mod scenario;
pub mod tables;
pub mod traces;

#[cfg(feature = "python")]
#[allow(unsafe_code)]
mod py;

pub use error::{Error, ErrorClass};
