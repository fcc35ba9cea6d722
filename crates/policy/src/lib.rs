//! Arbiter's scheduling policies.
//!
//! A policy is a pure function of a snapshot: it sees the cluster and the active jobs
//! ([`SchedulerView`]) at a time `now` that is passed in, and returns a [`Decision`] — the complete
//! set of jobs that should hold GPUs and where. It never reads a clock, never touches processes and
//! never iterates a hash map, so the simulator and the daemon run the very same code and a
//! simulation is reproducible bit for bit.
//!
//! Where the caller keeps the present state between calls (the simulator's engine:
//! [`SchedulerView::current`]), a policy may answer with only what changes
//! ([`Decision::keep_unlisted`]) — always the same schedule as the complete answer, at a cost in
//! the waiting jobs rather than every running one.
//!
//! Most classic policies are "order the jobs, then place greedily" ([`mechanisms::greedy`]); they differ in
//! the order and in whether running jobs can be displaced (preemptive) and whether a blocked job
//! blocks the ones behind it (head-of-line). Placement strategies live in [`mechanisms::placement`].
//!
//! ```text
//!   SchedulerView ──► order (key per job) ──► greedy placement ──► Decision { run, pending, wake_at }
//! ```
#![deny(missing_docs)]

// The registry of policies, what it knows of each, and what every policy builds on.
pub mod descriptor;
pub mod kind;
pub mod mechanisms;

// Policies, by family.
pub mod antman;
pub mod chronus;
pub mod classic;
pub mod elastic;
pub mod external;
pub mod fairshare;
pub mod gavel;
pub mod horus;
pub mod muri;
pub mod qssf;
pub mod quotas;
pub mod synergy;
#[cfg(test)]
mod test_support;
pub mod themis;
pub mod tiresias;
pub mod vtc;

use arbiter_model::{ActiveJob, Cluster, Decision, JobSpec, Occupancy, SimTime};
use thiserror::Error;

pub use descriptor::{DaemonSupport, Descriptor, Family};
pub use fairshare::{FairShareConfig, TenantUsage, UsageLedger};
pub use kind::{PolicyConfig, PolicyKind, build, build_gavel};
pub use mechanisms::placement::{PlacementStrategy, Placing};

/// What a policy sees at a scheduling point. Borrowed, never copied: building it is free.
#[derive(Clone, Copy, Debug)]
pub struct SchedulerView<'a> {
    /// The cluster inventory.
    pub cluster: &'a Cluster,
    /// Every submitted, unfinished job, in no particular order (policies break ties by id).
    pub jobs: &'a [ActiveJob],
    /// Specs of all jobs of the workload, indexed by job id.
    pub specs: &'a [JobSpec],
    /// What the caller keeps of the present, when it does: a policy that sees it may answer with
    /// a decision by changes ([`Decision::keep_unlisted`]) at a cost proportional to the jobs
    /// waiting rather than to every running job. `None`: decide every job.
    pub current: Option<Current<'a>>,
}

/// The present state of the cluster, as the simulator's engine keeps it between events.
#[derive(Clone, Copy, Debug)]
pub struct Current<'a> {
    /// Free GPUs: the cluster minus every running job's placement. Offered only while no jobs
    /// share GPUs (each running job holds its own).
    pub free: &'a Occupancy,
    /// Positions in `jobs` of the jobs that are not running, in no particular order.
    pub queued: &'a [u32],
    /// Position in `jobs` per job id (`u32::MAX`: not active), when the caller keeps one (the
    /// simulator): a policy that tracks some jobs between events finds them without a pass over
    /// every job. `None`: not kept.
    pub positions: Option<&'a [u32]>,
}

impl SchedulerView<'_> {
    /// The spec of an active job.
    #[inline]
    pub fn spec(&self, job: &ActiveJob) -> &JobSpec {
        &self.specs[job.id.index()]
    }
}

/// A policy failed to decide. The caller keeps the current allocation and may retry at the next
/// scheduling point; nothing is half-applied.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PolicyError {
    /// The policy's configuration cannot work (e.g. an empty Gittins prior).
    #[error("policy misconfigured: {0}")]
    Config(String),
    /// An internal invariant broke; a bug, reported instead of panicking.
    #[error("policy invariant violated: {0}")]
    Invariant(String),
}

/// Tenants' weights, for the policies that weigh tenants (`hierarchical`, `vtc`); a tenant not
/// listed weighs 1.
pub type TenantWeights = std::collections::BTreeMap<String, f64>;

/// A scheduling policy.
pub trait Policy: Send {
    /// The policy's identifier (as on the command line).
    fn name(&self) -> &'static str;

    /// Decides which jobs hold GPUs from `now` on.
    ///
    /// Contract: the returned placements must fit the cluster together (the caller checks and
    /// rejects the whole decision otherwise); a job absent from `run` is preempted if running.
    /// Calling twice with the same view and time gives the same decision, except where the
    /// policy documents state that it updates (queue membership, learned predictions).
    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime)
    -> Result<Decision, PolicyError>;

    /// Told when a job finishes, so policies that learn from history (QSSF) or keep per-job state
    /// (LAS queues) can update. Default: nothing.
    fn job_finished(&mut self, _spec: &JobSpec, _job: &ActiveJob, _now: SimTime) {}

    /// Gives the policy a new co-location table (speeds of job pairs sharing GPUs), such as the
    /// one a production daemon learns from its jobs' progress reports. Policies that use one
    /// (`gandiva`, `horus`, `max-min-fairness-packed`) read it from their next decision on,
    /// keeping the rest of their state (Gandiva's pairs); the others ignore it. Default: nothing.
    fn set_pair_speeds(&mut self, _speeds: std::sync::Arc<mechanisms::colocation::PairSpeeds>) {}

    /// Gives the policy the tenants' new weights (an admin changed one while the daemon runs).
    /// A policy that reads weights as it goes (`vtc`) uses them from its next decision on,
    /// keeping what it counted so far; the others ignore them. Default: nothing.
    fn set_tenant_weights(&mut self, _weights: &TenantWeights) -> Result<(), PolicyError> {
        Ok(())
    }

    /// The half-life (seconds) of the decayed fair share this policy was built with
    /// (`[policy.fairshare]`, the daemon's `fairshare_half_life`), `None` when it uses none.
    /// A caller that sees one keeps a [`UsageLedger`] with it and calls
    /// [`Policy::set_tenant_usage`] before every [`Policy::schedule`]. Default: none.
    fn fairshare_half_life_s(&self) -> Option<f64> {
        None
    }

    /// Gives the policy each tenant's decayed usage as of the coming decision (GPU-seconds,
    /// [`fairshare`]); only a policy with a half-life reads it. Default: nothing.
    fn set_tenant_usage(&mut self, _usage: &TenantUsage) {}

    /// The quota tree this policy runs under and what it decided at the last round, when it runs
    /// under one ([`quotas::Quotas`]). Default: none.
    fn quota_round(&self) -> Option<(&quotas::QuotaTree, &quotas::QuotaRound)> {
        None
    }

    /// Sets (or with `None`, lifts) the quota tree this policy runs under; only a policy built
    /// under quotas ([`quotas::Quotas`]) can. Default: refused.
    fn set_quota_tree(&mut self, _tree: Option<quotas::QuotaTree>) -> Result<(), PolicyError> {
        Err(PolicyError::Config(format!(
            "{} was not built under a quota tree",
            self.name()
        )))
    }
}

/// Maps a non-negative float to an integer with the same order, for sort keys (NaN and negative
/// values map to 0).
#[inline]
pub fn order_key(x: f64) -> u64 {
    if x > 0.0 { x.to_bits() } else { 0 }
}
