//! What a policy returns: the set of jobs that should run, where, and why the rest wait.

use crate::ids::{JobId, NodeId};
use crate::sensitivity::HostShare;
use crate::time::SimTime;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::fmt;

/// Where a job's GPUs are: GPUs taken on each node. Most jobs fit on one node, so the list is
/// stored inline for up to two nodes.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// `(node, gpus on that node)`, one entry per node, each with at least one GPU.
    pub slots: SmallVec<[(NodeId, u32); 2]>,
}

impl Clone for Placement {
    /// A copy of the slots (`from_slice`: SmallVec's own `clone` goes through an iterator, and
    /// policies clone every running job's placement at every scheduling point).
    fn clone(&self) -> Self {
        Placement {
            slots: SmallVec::from_slice(&self.slots),
        }
    }
}

impl Placement {
    /// All of a job's GPUs on one node.
    pub fn single(node: NodeId, gpus: u32) -> Self {
        let mut slots = SmallVec::new();
        slots.push((node, gpus));
        Placement { slots }
    }

    /// Total GPUs in the placement.
    pub fn gpus(&self) -> u32 {
        self.slots.iter().map(|(_, g)| g).sum()
    }

    /// Number of distinct nodes used.
    pub fn node_count(&self) -> usize {
        self.slots.len()
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (node, gpus)) in self.slots.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{node}:{gpus}")?;
        }
        Ok(())
    }
}

/// One job the policy wants running, with its placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The job.
    pub job: JobId,
    /// Its GPUs. If the job already runs elsewhere, the engine migrates it.
    pub placement: Placement,
    /// Space sharing: the job shares these GPUs with another job (Gavel's packing). `None`: the
    /// GPUs are the job's alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocation: Option<Colocation>,
    /// CPU cores and memory per GPU; `None`: each node's GPU-proportional share (its CPUs and
    /// memory divided by its GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostShare>,
    /// An opportunistic job (AntMan): it runs on GPUs that other jobs hold or leave idle without
    /// taking them. `None`: the job holds its GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Guest>,
}

impl Assignment {
    /// The job runs alone on `placement`, with the GPU-proportional CPU and memory.
    pub fn exclusive(job: JobId, placement: Placement) -> Self {
        Assignment {
            job,
            placement,
            colocation: None,
            host: None,
            guest: None,
        }
    }

    /// The job runs opportunistically on `placement` at `speed`, `on_held` of its GPUs held by
    /// other jobs (see [`Guest`]).
    pub fn guest(job: JobId, placement: Placement, speed: f64, on_held: u32) -> Self {
        Assignment {
            job,
            placement,
            colocation: None,
            host: None,
            guest: Some(Guest { speed, on_held }),
        }
    }
}

/// An opportunistic job (AntMan's): it runs on GPUs without holding them — they stay free for
/// (or held by) the jobs that hold GPUs, and its speed reflects whom it shares them with. At
/// most one guest per GPU (a node's guests use at most its GPU count). The simulator credits
/// its GPU time to it and counts its time as co-located; for utilization its GPUs that no job
/// holds are busy because of it, and those held by another job are that job's, shared.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guest {
    /// Its speed relative to running alone (the policy's interference model), recomputed at
    /// every decision.
    pub speed: f64,
    /// How many of its GPUs a job that holds GPUs (not a guest) runs on too, recomputed at every
    /// decision; the rest are GPUs nobody holds. Placements count GPUs per node without naming
    /// them, so only the policy knows; the decision's guests together use at most the GPUs the
    /// decision leaves free plus those it holds (checked).
    #[serde(default)]
    pub on_held: u32,
}

/// Two jobs sharing the same GPUs. Both jobs' assignments name each other and the same
/// placement; the GPUs count once against capacity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Colocation {
    /// The job sharing the GPUs.
    pub partner: JobId,
    /// This job's speed while sharing, relative to its reference speed (the same unit as
    /// `JobSpec::speed_by_gpu_type`): the policy's interference model, e.g. Gavel's measured
    /// pair throughputs.
    pub speed: f64,
}

/// Why a job that wants to run was not placed (Nomad's `AllocMetric`, in small). Closed on
/// purpose: every reason says what would have to change for the job to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PendingReason {
    /// Enough GPUs are free in total, but not in the shape the placement strategy needs
    /// (consolidation/locality); waits for fragmentation to clear or the locality wait to pass.
    Fragmented,
    /// Fewer GPUs are free than the job asks for; waits for jobs to finish or be preempted.
    InsufficientGpus,
    /// A job ahead of it in policy order is blocked and the policy does not let later jobs pass.
    BlockedByHeadOfLine,
    /// Backfilling it would delay the reservation held for the job at the head of the queue.
    WouldDelayReservation,
    /// It was ranked below jobs that took all the capacity.
    LowerPriority,
    /// The job asks for more GPUs (or a GPU type) than the whole cluster has: it can never run.
    NeverFits,
    /// GPUs are free, but not with the CPU cores or memory the job needs on the same servers
    /// (multi-resource fragmentation).
    HostResources,
    /// Its tenant's quota holds it back (a limit on its path in the quota tree, or no idle
    /// quota to borrow); the quota tree says which.
    Quota,
}

impl PendingReason {
    /// The reason in words, as tenants read it.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Fragmented => "enough GPUs free, but not in the shape placement needs",
            PendingReason::InsufficientGpus => "not enough free GPUs",
            PendingReason::BlockedByHeadOfLine => "blocked behind the job at the head of the queue",
            PendingReason::WouldDelayReservation => "would delay the head job's reservation",
            PendingReason::LowerPriority => "lower priority than the running jobs",
            PendingReason::NeverFits => "asks for more than the cluster has",
            PendingReason::HostResources => "GPUs free, but not enough CPU or memory next to them",
            PendingReason::Quota => "held back by its tenant's quota",
        }
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy's answer at one scheduling point: the complete set of jobs that should be running.
/// Jobs running now but absent here are preempted (unless [`Decision::keep_unlisted`]); jobs
/// present but not running are started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Jobs to run, with placements.
    pub run: Vec<Assignment>,
    /// Why some waiting jobs were not placed (best effort: policies may report only some).
    pub pending: Vec<(JobId, PendingReason)>,
    /// Ask to be called again at this time even if nothing else happens (a queue demotion, a
    /// locality wait expiring).
    pub wake_at: Option<SimTime>,
    /// Admission answers given at this point (Chronus): whether the policy guarantees a newly
    /// seen job's deadline (`true`) or not (`false`); each job is answered once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admitted: Vec<(JobId, bool)>,
    /// A decision by changes: running jobs it does not list keep their GPUs as they are (instead
    /// of being preempted), and `run` lists only jobs that start, each alone on its GPUs. A policy
    /// returns one only when its caller offered the current state
    /// (`SchedulerView::current`): deciding every running job again at every event makes a
    /// simulation cost O(events × running jobs). Checked like any decision; a caller that
    /// offers no current state refuses it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_unlisted: bool,
}
