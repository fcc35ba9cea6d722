//! Jobs as submitted: what they ask for and how much work they carry.

use crate::ids::{GpuTypeId, JobId};
use crate::scaling::{GpuRange, Scaling};
use crate::sensitivity::{HostShare, ResourceSensitivity};
use crate::time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A training job as submitted. Immutable once submitted; progress lives in the engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Dense id within the workload.
    pub id: JobId,
    /// Id the job had in its source trace (for output and cross-checking).
    pub trace_id: String,
    /// Tenant (team / virtual cluster) that owns the job.
    pub tenant: crate::TenantName,
    /// Submitting user, when the trace has one.
    pub user: Option<String>,
    /// Job name, when the trace has one (Helios' predictor keys on it).
    pub name: Option<String>,
    /// Model name (`resnet18`, `bert`, ...), when known.
    pub model: Option<String>,
    /// Submission time.
    pub submit: SimTime,
    /// GPUs requested, all at once (a gang).
    pub gpus: u32,
    /// GPU type required, if any; `None` runs on any type.
    pub gpu_type: Option<GpuTypeId>,
    /// Run time in seconds at full speed on the requested gang, from an uninterrupted start: the
    /// amount of work. Oracle policies (SJF, SRTF) read it; others must not.
    pub run_time_s: f64,
    /// Training iterations, when the trace gives them (informational).
    pub iterations: Option<u64>,
    /// Larger runs first where a policy honours priorities.
    pub priority: i32,
    /// Its priority class (Kubernetes' PriorityClass, Slurm's QOS priority): a higher class is
    /// served before a lower one and may preempt a lower, preemptible one; the policy orders
    /// jobs within a class. Default: one class for every job (the policy alone decides).
    #[serde(default, skip_serializing_if = "JobClass::is_default")]
    pub class: JobClass,
    /// What it waits for before it may start (Slurm's `--dependency`, naming other jobs by
    /// trace id); `None`: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<Arc<crate::Dependencies>>,
    /// The job array it is a task of, where the array limits how many of its tasks run at once
    /// (Slurm's `--array=0-99%8`; a history records it): the simulator lets at most that many
    /// of the array's tasks be active (queued or running), the others waiting their turn in
    /// order, as the daemon offers its policy only as many of an array's queued tasks as its
    /// limit leaves room for. `None`: not a task of a limited array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_limit: Option<ArrayLimit>,
    /// Nodes it may not be placed on now (the daemon's reservations: a maintenance window or
    /// another tenant's reservation it would reach into). Placement avoids them and the
    /// planner refuses a decision that uses them. `None`: any node. Not serialised.
    #[serde(skip)]
    pub avoid_nodes: Option<Arc<Vec<crate::NodeId>>>,
    /// Start-up cost charged when the job (re)starts, overriding the simulator default.
    pub restart_overhead: Option<SimDuration>,
    /// Time by which the job should be done (its SLO), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<SimTime>,
    /// A soft SLO's options (Chronus): later deadlines worth less, in order, the first being
    /// `deadline` with the full value. Empty: `deadline` alone, all or nothing (a strict SLO).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadline_options: Vec<DeadlineOption>,
    /// The admission answer its deadline already got (the daemon, after a restart): a policy
    /// that admits deadlines keeps it — a guarantee stays a guarantee — instead of answering
    /// again. `None`: not answered yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_answer: Option<bool>,
    /// Speed on each GPU type of the cluster it runs on, indexed by [`GpuTypeId`], relative to
    /// the reference speed `run_time_s` is measured at (Gavel: throughput on the type ÷
    /// throughput on a V100). Empty: 1.0 everywhere. 0 on a type: cannot run there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speed_by_gpu_type: Vec<f64>,
    /// How its speed depends on the CPU cores and memory given with its GPUs (Synergy); `None`:
    /// it does not. `run_time_s` is measured at the node's GPU-proportional share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Arc<ResourceSensitivity>>,
    /// Per-iteration stage times (Muri's traces: `resource_time_0..2`), for policies that
    /// interleave jobs using different resources; `None` when the trace has none.
    pub stages: Option<IterationStages>,
    /// One iteration's time alone, seconds (the trace's iteration time, scaled like the work).
    pub iteration_s: Option<f64>,
    /// The trace's own `duration` column, seconds, where it differs from the simulated work
    /// (Muri-S ranks a job that never ran by it).
    pub trace_duration_s: Option<f64>,
    /// GPU counts it may also run with (an elastic job: AFS, Optimus); `None`: only `gpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic: Option<GpuRange>,
    /// How its speed depends on its placement's shape and size (Pollux's profiles); `None`: the
    /// same speed on any placement of `gpus` GPUs. Not serialised.
    #[serde(skip)]
    pub scaling: Option<Scaling>,
}

/// A job's priority class as the scheduler sees it: its value (higher is served first) and
/// whether a job of a higher class may preempt it. The name is for people (reports, `arbiter
/// jobs`); only the value and the flag decide.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobClass {
    /// The class's name (`high`, `normal`); `None`: no class given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Arc<str>>,
    /// Higher values are served first.
    #[serde(default)]
    pub value: i32,
    /// Whether a running job of this class may be preempted for a job of a higher class.
    #[serde(default = "preemptible_by_default")]
    pub preemptible: bool,
}

fn preemptible_by_default() -> bool {
    true
}

impl Default for JobClass {
    /// No class: value 0, preemptible (as every job is when there are no classes).
    fn default() -> Self {
        JobClass {
            name: None,
            value: 0,
            preemptible: true,
        }
    }
}

impl JobClass {
    /// The class every job has when none is given.
    pub fn is_default(&self) -> bool {
        *self == JobClass::default()
    }
}

/// One training iteration's time on each resource, seconds: storage I/O, CPU, GPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationStages {
    /// Storage I/O (`resource_time_0`).
    pub io_s: f64,
    /// CPU (`resource_time_1`).
    pub cpu_s: f64,
    /// GPU (`resource_time_2`).
    pub gpu_s: f64,
}

/// A job array's running limit, on each of its tasks ([`JobSpec::array_limit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayLimit {
    /// The array, numbered from 0 within its trace.
    pub array: u32,
    /// At most this many of its tasks run at once (at least 1).
    pub max_running: u32,
}

/// One deadline of a soft SLO and what meeting it is worth (Chronus: 10, 8, 5, 2).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadlineOption {
    /// Finish by this time...
    pub deadline: SimTime,
    /// ...to earn this much.
    pub value: f64,
}

impl IterationStages {
    /// Time on all resources.
    pub fn total_s(&self) -> f64 {
        self.io_s + self.cpu_s + self.gpu_s
    }
}

impl JobSpec {
    /// A job with the given id, submission time, gang size and work; other fields empty.
    pub fn new(id: JobId, submit: SimTime, gpus: u32, run_time_s: f64) -> Self {
        JobSpec {
            id,
            trace_id: id.0.to_string(),
            tenant: crate::TenantName::default(),
            user: None,
            name: None,
            model: None,
            submit,
            gpus,
            gpu_type: None,
            run_time_s,
            iterations: None,
            priority: 0,
            class: JobClass::default(),
            dependency: None,
            array_limit: None,
            avoid_nodes: None,
            restart_overhead: None,
            deadline: None,
            deadline_options: Vec::new(),
            deadline_answer: None,
            speed_by_gpu_type: Vec::new(),
            sensitivity: None,
            stages: None,
            iteration_s: None,
            trace_duration_s: None,
            elastic: None,
            scaling: None,
        }
    }

    /// Speed factor from CPU and memory: the job's throughput with `share` relative to that with
    /// `proportional` (the node's GPU-proportional share); 1 without a sensitivity profile.
    pub fn host_speedup(&self, share: HostShare, proportional: HostShare) -> f64 {
        self.sensitivity
            .as_ref()
            .map_or(1.0, |s| s.speedup(share, proportional))
    }

    /// Relative speed on GPUs of type `gpu_type` (1.0 when the job has no per-type speeds).
    #[inline]
    pub fn speed_on(&self, gpu_type: GpuTypeId) -> f64 {
        if self.speed_by_gpu_type.is_empty() {
            1.0
        } else {
            self.speed_by_gpu_type
                .get(gpu_type.index())
                .copied()
                .unwrap_or(0.0)
        }
    }

    /// Whether `gpus` GPUs is a size it may run with: its gang, or within its elastic range.
    #[inline]
    pub fn allows_gpus(&self, gpus: u32) -> bool {
        gpus == self.gpus || self.elastic.is_some_and(|r| r.contains(gpus))
    }

    /// Speed from the placement's shape (1 without a scaling profile); `None` where the profile
    /// does not cover it.
    pub fn placement_speed(&self, placement: &crate::Placement) -> Option<f64> {
        let Some(scaling) = &self.scaling else {
            return Some(1.0);
        };
        let mut shape: smallvec::SmallVec<[u32; 8]> = placement
            .slots
            .iter()
            .map(|(_, g)| *g)
            .filter(|g| *g > 0)
            .collect();
        shape.sort_unstable_by(|a, b| b.cmp(a));
        scaling.speed(&shape)
    }

    /// Share of its SLO's full value earned by finishing at `finish` (the value of the first
    /// option met, over the first option's; 1 or 0 for a strict SLO); `None` without an SLO.
    pub fn slo_value_at(&self, finish: SimTime) -> Option<f64> {
        let deadline = self.deadline?;
        let Some(first) = self.deadline_options.first().filter(|o| o.value > 0.0) else {
            return Some(if finish <= deadline { 1.0 } else { 0.0 });
        };
        Some(
            self.deadline_options
                .iter()
                .find(|o| finish <= o.deadline)
                .map_or(0.0, |o| o.value / first.value),
        )
    }

    /// Total GPU-seconds of work: run time × GPUs.
    pub fn gpu_seconds(&self) -> f64 {
        self.run_time_s * self.gpus as f64
    }
}
