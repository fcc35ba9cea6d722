//! Arbiter's simulator: a deterministic discrete-event engine ([`engine`]), the metrics every
//! report uses ([`metrics`]) and the scenario runner that reproduces published numbers
//! ([`scenario`]).
#![deny(missing_docs)]

mod arrays;
mod dependencies;
pub mod engine;
mod events;
pub mod ideal;
pub mod metrics;
pub mod reservations;
pub mod scenario;
pub mod stop;
pub mod sweep;
pub mod timeline;
pub mod unplaceable;

pub use engine::{
    EngineStats, FailureConfig, OverheadModel, SimConfig, SimError, SimOutput, simulate,
};
pub use metrics::{GpuSharing, GpuTime, JobOutcome, JobRecord, Summary, Window, gpu_time};
pub use stop::StopFlag;
pub use timeline::{QuotaLayout, QuotaLeaf, QuotaReclaim, RunSegment};
pub use unplaceable::{Unplaceable, UnplaceableJobs};
