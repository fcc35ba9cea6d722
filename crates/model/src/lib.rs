//! Arbiter's domain model: the vocabulary every other crate speaks.
//!
//! Time is integer milliseconds ([`SimTime`], [`SimDuration`]) so that a simulation is exactly
//! reproducible and seconds-vs-milliseconds mistakes (Muri's traces are in ms, Philly's in s) show
//! up as type errors rather than as numbers that are off by 1000. Work is measured in seconds of
//! run time at full speed on the job's requested gang ([`JobSpec::run_time_s`]).
//!
//! The crate does no I/O. Its one invariant with teeth is in [`Occupancy`]: an allocation can never
//! over-commit a node; every attempt to do so is an [`AllocError`], not a panic.
#![deny(missing_docs)]

mod active;
mod cluster;
mod decision;
mod dependency;
mod ids;
mod job;
mod occupancy;
mod plan;
mod quota;
mod scaling;
mod sensitivity;
mod tenant;
mod time;

pub use active::{ActiveJob, RunState};
pub use cluster::{Cluster, ClusterError, Node, default_price_per_gpu_hour};
pub use decision::{Assignment, Colocation, Decision, Guest, PendingReason, Placement};
pub use dependency::{DependedOn, Dependencies, Dependency, DependencyKind, Verdict};
pub use ids::{GpuTypeId, JobId, NodeId, RackId};
pub use job::{ArrayLimit, DeadlineOption, IterationStages, JobClass, JobSpec};
pub use occupancy::{AllocError, Occupancy};
pub use plan::{
    Action, MAX_GROUP, Plan, PlanError, PlannedOccupancy, Planner, Standing, proportional_share,
};
pub use quota::{Admission, QuotaHold, QuotaUse, Waiting, admit};
pub use scaling::{GpuRange, LocalitySlowdown, PlacementSpeed, Scaling, consolidated_shape};
pub use sensitivity::{HostShare, ResourceSensitivity, SensitivityError};
pub use tenant::{TenantName, TenantNames};
pub use time::{SimDuration, SimTime};
