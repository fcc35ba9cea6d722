//! Metrics, defined once (DESIGN.md §4) and used by every report.
//!
//! Percentiles are exact over the sorted values with linear interpolation between closest ranks
//! (numpy's default), so goldens are deterministic.

use arbiter_model::{JobSpec, PendingReason, SimTime};
use serde::{Deserialize, Serialize};

mod contention;

pub use contention::ftf_rhos;

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobOutcome {
    /// Did all its work.
    Completed,
    /// Failed more often than retries allow.
    Failed,
    /// Still pending or running when the simulation ended.
    Unfinished,
    /// Could never run on the cluster (more GPUs than it has of a usable type, or no usable
    /// type); see [`crate::unplaceable`].
    Unplaceable,
    /// Its dependencies can never hold (a job it needed to succeed failed, or the like): it
    /// never started. Counted with the failed jobs.
    DependencyNeverSatisfied,
}

/// One job's history, as written to the per-job CSV.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Dense job id.
    pub job: u32,
    /// Id in the source trace.
    pub trace_id: String,
    /// Tenant.
    pub tenant: arbiter_model::TenantName,
    /// Its priority class, by name (`None`: no class).
    #[serde(default)]
    pub priority_class: Option<String>,
    /// GPUs requested.
    pub gpus: u32,
    /// Submission, seconds.
    pub submit_s: f64,
    /// First start, seconds.
    pub first_start_s: Option<f64>,
    /// Completion (or final failure), seconds.
    pub finish_s: Option<f64>,
    /// Work at full speed, seconds.
    pub run_time_s: f64,
    /// Seconds it held GPUs.
    pub executed_s: f64,
    /// GPU-seconds allocated to it (half of a GPU's time while sharing it with another job; a
    /// guest's every GPU, held by another job or not).
    pub gpu_s_allocated: f64,
    /// Its part of the cluster's busy GPU-seconds, each physical GPU counted once
    /// ([`gpu_time`]): what [`Summary::gpu_utilization`] adds up. Equal to `gpu_s_allocated`
    /// except as a guest, whose GPUs held by another job count for that job.
    #[serde(default)]
    pub busy_gpu_s: f64,
    /// Its part of the busy GPU-seconds of GPUs that more than one job ran on ([`gpu_time`]).
    #[serde(default)]
    pub shared_gpu_s: f64,
    /// GPU-seconds it ran as a guest (opportunistically, on GPUs it did not hold): all its GPUs.
    #[serde(default)]
    pub guest_gpu_s: f64,
    /// Seconds it ran sharing its GPUs with another job (space sharing).
    #[serde(default)]
    pub colocated_s: f64,
    /// What its GPU time cost, dollars, at the default GPU-hour prices of the types it ran on.
    #[serde(default)]
    pub cost_usd: f64,
    /// Preemptions.
    pub preemptions: u32,
    /// Migrations.
    pub migrations: u32,
    /// Failures.
    pub failures: u32,
    /// How it ended.
    pub outcome: JobOutcome,
    /// The last reason the policy gave for not placing it (best effort; `None` if never given).
    pub last_wait_reason: Option<PendingReason>,
    /// Its SLO deadline, seconds, if it has one.
    pub deadline_s: Option<f64>,
    /// Share of its SLO's value earned (the first deadline option met; 0 unfinished or late);
    /// `None` without an SLO. Set when it completes.
    pub deadline_value: Option<f64>,
    /// Whether the policy guaranteed its deadline at submission (Chronus' admission); `None`
    /// where no answer was given.
    pub admitted: Option<bool>,
}

impl JobRecord {
    /// A record for a job that has not run yet.
    pub fn new(spec: &JobSpec) -> Self {
        JobRecord {
            job: spec.id.0,
            trace_id: spec.trace_id.clone(),
            tenant: spec.tenant.clone(),
            priority_class: spec.class.name.as_deref().map(str::to_string),
            gpus: spec.gpus,
            submit_s: spec.submit.as_secs_f64(),
            first_start_s: None,
            finish_s: None,
            run_time_s: spec.run_time_s,
            executed_s: 0.0,
            gpu_s_allocated: 0.0,
            busy_gpu_s: 0.0,
            shared_gpu_s: 0.0,
            guest_gpu_s: 0.0,
            colocated_s: 0.0,
            cost_usd: 0.0,
            preemptions: 0,
            migrations: 0,
            failures: 0,
            outcome: JobOutcome::Unfinished,
            last_wait_reason: None,
            deadline_s: spec.deadline.map(SimTime::as_secs_f64),
            deadline_value: spec.deadline.map(|_| 0.0),
            admitted: None,
        }
    }

    /// Job completion time: finish − submit.
    pub fn jct_s(&self) -> Option<f64> {
        self.finish_s.map(|f| f - self.submit_s)
    }

    /// Queueing delay: first start − submit.
    pub fn queue_s(&self) -> Option<f64> {
        self.first_start_s.map(|s| s - self.submit_s)
    }
}

/// Which jobs a summary measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First job id measured (inclusive), in submission order.
    pub first_job: Option<u32>,
    /// Last job id measured (inclusive).
    pub last_job: Option<u32>,
    /// End the simulation once every measured job has finished (Gavel measures a window of a
    /// stream that keeps arriving; later jobs need not run to completion).
    #[serde(default)]
    pub stop_when_done: bool,
}

impl Window {
    /// Whether a job id is inside.
    pub fn contains(&self, job: u32) -> bool {
        self.first_job.is_none_or(|f| job >= f) && self.last_job.is_none_or(|l| job <= l)
    }
}

/// Summary metrics over the measured jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Jobs measured (completed ones; see `failed`, `unfinished`, `unplaceable`).
    pub jobs: usize,
    /// Mean JCT, seconds.
    pub avg_jct_s: f64,
    /// Median JCT.
    pub p50_jct_s: f64,
    /// 95th percentile JCT.
    pub p95_jct_s: f64,
    /// 99th percentile JCT.
    pub p99_jct_s: f64,
    /// Mean queueing delay (first start − submit).
    pub avg_queue_s: f64,
    /// Last finish − first submit over the measured jobs.
    pub makespan_s: f64,
    /// Busy GPU-seconds / (GPUs × busy window), over all jobs of the run: the share of the
    /// cluster's GPU time in which a GPU had at least one job on it, each GPU counted once
    /// however many jobs shared it ([`gpu_time`]); at most 1.
    pub gpu_utilization: f64,
    /// Share of the busy GPU-seconds (of `gpu_utilization`) on GPUs that more than one job ran on:
    /// a group sharing GPUs (Gandiva's and Gavel's pairs, Muri's groups, Horus' co-location) or a
    /// guest on a held GPU (AntMan). Over all jobs of the run.
    #[serde(default)]
    pub shared_gpu_fraction: f64,
    /// The guests' (opportunistic jobs') own GPU-seconds — every GPU they ran on, held by another
    /// job or not — over GPUs × busy window, the scale of `gpu_utilization`. Over all jobs of the
    /// run; 0 without guests.
    #[serde(default)]
    pub guest_gpu_fraction: f64,
    /// Preemptions per measured job.
    pub preemptions_per_job: f64,
    /// Migrations per measured job.
    pub migrations_per_job: f64,
    /// Measured jobs that failed for good.
    pub failed: usize,
    /// Measured jobs that never finished (though they could have run).
    pub unfinished: usize,
    /// Measured jobs that could never run on the cluster (asked for more GPUs than it has, or
    /// for a GPU type it lacks); not counted in `unfinished` or the JCT metrics.
    #[serde(default)]
    pub unplaceable: usize,
    /// Share of measured jobs with an SLO that completed by their deadline (`None` without SLOs).
    pub deadlines_met: Option<f64>,
    /// Mean share of their SLO's value the measured SLO jobs earned (a soft SLO's later options
    /// earn less: Chronus' `1 − deadline-miss rate`); `None` without SLOs.
    #[serde(default)]
    pub deadline_value: Option<f64>,
    /// Share of the measured jobs given an admission answer that were admitted (their deadline
    /// guaranteed at submission); `None` where the policy gives no answers.
    #[serde(default)]
    pub admitted: Option<f64>,
    /// Average JCT of the completed measured jobs without an SLO (best effort), when some jobs
    /// have one and some do not; `None` otherwise.
    #[serde(default)]
    pub best_effort_avg_jct_s: Option<f64>,
    /// Share of the measured jobs' GPU time spent sharing GPUs with another job (space sharing).
    #[serde(default)]
    pub colocated_fraction: f64,
    /// Dollars the measured jobs' GPU time cost (default GPU-hour prices per type).
    #[serde(default)]
    pub cost_usd: f64,
    /// Themis' finish-time fairness (NSDI'20) over the completed measured jobs: the largest
    /// `ρ = JCT / T_independent`, `T_independent` the job's work on its own `1/N` of the cluster
    /// with `N` the mean number of jobs in the system over its lifetime
    /// ([`arbiter_policy::themis::finish_time_fairness`]); 0 without completed jobs.
    #[serde(default)]
    pub max_ftf_rho: f64,
    /// Share of the completed measured jobs with `ρ > 1`: that finished later than they would
    /// have on their own fair share.
    #[serde(default)]
    pub ftf_unfair_fraction: f64,
}

/// How a job runs on its GPUs, for counting each physical GPU once ([`gpu_time`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GpuSharing {
    /// It holds its GPUs, alone (`share` 1) or in a group of `k` jobs on the same GPUs
    /// (`share` 1/k).
    Held {
        /// Its share of the GPUs' time.
        share: f64,
    },
    /// A guest (opportunistic, AntMan): it holds none of its GPUs; `on_held` of them another job
    /// holds, the rest nobody does.
    Guest {
        /// Its GPUs that another job holds.
        on_held: u32,
    },
}

/// One job's part of the cluster's GPU time over `elapsed_s` on `gpus` GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuTime {
    /// Busy GPU-seconds: a GPU's time counts once, split evenly among the group holding it; a
    /// guest's GPUs that another job holds count for that job, the others for the guest.
    pub busy: f64,
    /// The part of `busy` on GPUs with more than one job: a group member's whole share; for a
    /// guest, its GPUs that another job holds (which that job's `busy` counts).
    pub shared: f64,
    /// A guest's own GPU-seconds (all its GPUs); 0 for a job that holds its GPUs.
    pub guest: f64,
}

/// The one rule by which GPU time is counted for utilization — in the engine's records, the
/// report's utilization over time, every policy alike: each physical GPU once while at least one
/// job runs on it, shared time apart. Summed over the jobs, `busy` is the GPU-seconds in which
/// GPUs had a job and `shared` those in which they had more than one.
pub fn gpu_time(elapsed_s: f64, gpus: u32, sharing: GpuSharing) -> GpuTime {
    match sharing {
        GpuSharing::Held { share } => {
            let busy = elapsed_s * gpus as f64 * share;
            GpuTime {
                busy,
                shared: if share < 1.0 { busy } else { 0.0 },
                guest: 0.0,
            }
        }
        GpuSharing::Guest { on_held } => {
            let on_held = on_held.min(gpus);
            GpuTime {
                busy: elapsed_s * (gpus - on_held) as f64,
                shared: elapsed_s * on_held as f64,
                guest: elapsed_s * gpus as f64,
            }
        }
    }
}

/// Utilization, its shared part and the guests' own GPU time of a run's `records` on
/// `capacity_gpus` GPUs, over the busy window (first submission to last finish of all of them):
/// `(gpu_utilization, shared_gpu_fraction, guest_gpu_fraction)` of [`Summary`].
pub fn utilization(records: &[JobRecord], capacity_gpus: u32) -> (f64, f64, f64) {
    RunSpan::of(records).utilization(records, capacity_gpus)
}

/// A run's span: from its first submission to its last completion (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSpan {
    start_s: f64,
    end_s: f64,
}

impl RunSpan {
    /// The span of the run `records` make up.
    pub fn of(records: &[JobRecord]) -> Self {
        RunSpan {
            start_s: records
                .iter()
                .map(|r| r.submit_s)
                .fold(f64::INFINITY, f64::min),
            end_s: records
                .iter()
                .filter_map(|r| r.finish_s)
                .fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// [`utilization`] of `records` (all of the run, or some of its jobs) over this span.
    pub fn utilization(self, records: &[JobRecord], capacity_gpus: u32) -> (f64, f64, f64) {
        let mut time = GpuTimeSums::default();
        for r in records {
            time.add(r);
        }
        self.utilization_of(time, capacity_gpus)
    }

    /// [`RunSpan::utilization`] of GPU time summed already.
    fn utilization_of(self, time: GpuTimeSums, capacity_gpus: u32) -> (f64, f64, f64) {
        let window = (self.end_s - self.start_s) * capacity_gpus as f64;
        if !(window > 0.0 && window.is_finite()) {
            return (0.0, 0.0, 0.0);
        }
        let GpuTimeSums {
            busy,
            shared,
            guest,
        } = time;
        // (Shared time can exceed busy time only where a guest runs on a group's GPUs, which no
        // policy does: its held GPUs would be counted shared twice.)
        (
            busy / window,
            if busy > 0.0 {
                (shared / busy).min(1.0)
            } else {
                0.0
            },
            guest / window,
        )
    }
}

/// Records' GPU time summed in record order (busy from −0.0, as `Iterator::sum` does; the
/// others from +0.0, which prints `0.00` when nothing is added), for [`RunSpan::utilization`].
#[derive(Clone, Copy)]
struct GpuTimeSums {
    busy: f64,
    shared: f64,
    guest: f64,
}

impl Default for GpuTimeSums {
    fn default() -> Self {
        GpuTimeSums {
            busy: -0.0,
            shared: 0.0,
            guest: 0.0,
        }
    }
}

impl GpuTimeSums {
    fn add(&mut self, r: &JobRecord) {
        self.busy += r.busy_gpu_s;
        self.shared += r.shared_gpu_s;
        self.guest += r.guest_gpu_s;
    }
}

/// Exact percentile with linear interpolation; `sorted` must be ascending and non-empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

impl Summary {
    /// The value of a metric by its field name (`avg_jct_s`, `p50_jct_s`, `p95_jct_s`,
    /// `p99_jct_s`, `avg_queue_s`, `makespan_s`, `gpu_utilization`, `shared_gpu_fraction`,
    /// `guest_gpu_fraction`, `deadlines_met`,
    /// `deadline_value`, `best_effort_avg_jct_s`,
    /// `colocated_fraction`, `cost_usd`, `max_ftf_rho`, `ftf_unfair_fraction`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "avg_jct_s" => self.avg_jct_s,
            "p50_jct_s" => self.p50_jct_s,
            "p95_jct_s" => self.p95_jct_s,
            "p99_jct_s" => self.p99_jct_s,
            "avg_queue_s" => self.avg_queue_s,
            "makespan_s" => self.makespan_s,
            "gpu_utilization" => self.gpu_utilization,
            "shared_gpu_fraction" => self.shared_gpu_fraction,
            "guest_gpu_fraction" => self.guest_gpu_fraction,
            "deadlines_met" => self.deadlines_met?,
            "deadline_value" => self.deadline_value?,
            "admitted" => self.admitted?,
            "best_effort_avg_jct_s" => self.best_effort_avg_jct_s?,
            "colocated_fraction" => self.colocated_fraction,
            "cost_usd" => self.cost_usd,
            "max_ftf_rho" => self.max_ftf_rho,
            "ftf_unfair_fraction" => self.ftf_unfair_fraction,
            _ => return None,
        })
    }

    /// Summarizes the records inside `window`; `capacity_gpus` for utilization. One pass over
    /// the records (a million-job run's records are a quarter of a gigabyte: each pass costs
    /// its read from memory), then one over the completed jobs' finish-time fairness.
    pub fn compute(records: &[JobRecord], window: Window, capacity_gpus: u32) -> Self {
        let mut t = Tally::default();
        for (i, r) in records.iter().enumerate() {
            t.add(i, r, window);
        }
        let Tally {
            mut jcts,
            queue_sum,
            queues,
            first_submit,
            last_finish,
            measured,
            preemptions,
            migrations,
            failed,
            unfinished,
            unplaceable,
            executed,
            colocated,
            cost,
            answered,
            admitted,
            deadline_values,
            deadline_value_sum,
            best_effort,
            best_effort_jct_sum,
            with_slo,
            slo_met,
            span,
            gpu_time,
            changes,
            completed,
        } = t;
        jcts.sort_by(f64::total_cmp);
        let mean = |sum: f64, n: usize| if n == 0 { 0.0 } else { sum / n as f64 };
        let makespan_s = if last_finish.is_finite() && first_submit.is_finite() {
            last_finish - first_submit
        } else {
            0.0
        };
        let (gpu_utilization, shared_gpu_fraction, guest_gpu_fraction) =
            span.utilization_of(gpu_time, capacity_gpus);
        let n = measured.max(1) as f64;
        let contention = contention::Contention::of(changes);
        let (mut max_ftf_rho, mut rhos, mut unfair) = (0.0, 0, 0);
        for &i in &completed {
            let i = i as usize;
            if let Some(rho) = contention.rho(i, &records[i], capacity_gpus) {
                max_ftf_rho = f64::max(max_ftf_rho, rho);
                rhos += 1;
                unfair += usize::from(rho > 1.0);
            }
        }
        Summary {
            max_ftf_rho,
            ftf_unfair_fraction: if rhos == 0 {
                0.0
            } else {
                unfair as f64 / rhos as f64
            },
            jobs: completed.len(),
            avg_jct_s: mean(jcts.iter().sum(), jcts.len()),
            p50_jct_s: percentile(&jcts, 0.5),
            p95_jct_s: percentile(&jcts, 0.95),
            p99_jct_s: percentile(&jcts, 0.99),
            avg_queue_s: mean(queue_sum, queues),
            makespan_s,
            gpu_utilization,
            shared_gpu_fraction,
            guest_gpu_fraction,
            preemptions_per_job: preemptions / n,
            migrations_per_job: migrations / n,
            failed,
            unfinished,
            unplaceable,
            colocated_fraction: if executed > 0.0 {
                colocated / executed
            } else {
                0.0
            },
            cost_usd: cost,
            admitted: (answered > 0).then(|| admitted as f64 / answered as f64),
            deadline_value: (deadline_values > 0)
                .then(|| mean(deadline_value_sum, deadline_values)),
            best_effort_avg_jct_s: (with_slo > 0 && best_effort > 0)
                .then(|| mean(best_effort_jct_sum, best_effort)),
            deadlines_met: (with_slo > 0).then(|| slo_met as f64 / with_slo as f64),
        }
    }
}

/// What one pass over a run's records gathers for its [`Summary`]: sums and counts over the
/// measured records (those inside the window), the whole run's span and GPU time, and the
/// changes in the number of jobs in the system. Every sum adds in record order, from the start
/// the summary's definition used (`Iterator::sum`'s −0.0, or `fold(0.0, +)`'s +0.0, which prints `0.00` where −0.0 prints `-0.00`), so the figures
/// are the same to the bit as summing each over its own list.
struct Tally {
    /// Completed measured jobs' JCTs.
    jcts: Vec<f64>,
    queue_sum: f64,
    queues: usize,
    first_submit: f64,
    last_finish: f64,
    measured: usize,
    preemptions: f64,
    migrations: f64,
    failed: usize,
    unfinished: usize,
    unplaceable: usize,
    executed: f64,
    colocated: f64,
    cost: f64,
    answered: usize,
    admitted: usize,
    deadline_values: usize,
    deadline_value_sum: f64,
    /// Completed measured jobs without an SLO, and their JCTs' sum.
    best_effort: usize,
    best_effort_jct_sum: f64,
    with_slo: usize,
    slo_met: usize,
    /// Over every record (not only the measured).
    span: RunSpan,
    gpu_time: GpuTimeSums,
    changes: contention::Changes,
    /// Indices of the completed measured records.
    completed: Vec<u32>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            jcts: Vec::new(),
            queue_sum: -0.0,
            queues: 0,
            first_submit: f64::INFINITY,
            last_finish: f64::NEG_INFINITY,
            measured: 0,
            preemptions: 0.0,
            migrations: 0.0,
            failed: 0,
            unfinished: 0,
            unplaceable: 0,
            executed: -0.0,
            colocated: 0.0,
            cost: 0.0,
            answered: 0,
            admitted: 0,
            deadline_values: 0,
            deadline_value_sum: -0.0,
            best_effort: 0,
            best_effort_jct_sum: -0.0,
            with_slo: 0,
            slo_met: 0,
            span: RunSpan {
                start_s: f64::INFINITY,
                end_s: f64::NEG_INFINITY,
            },
            gpu_time: GpuTimeSums::default(),
            changes: contention::Changes::default(),
            completed: Vec::new(),
        }
    }
}

impl Tally {
    /// Adds record `index` (every record is offered, in order).
    fn add(&mut self, index: usize, r: &JobRecord, window: Window) {
        self.span.start_s = self.span.start_s.min(r.submit_s);
        if let Some(f) = r.finish_s {
            self.span.end_s = self.span.end_s.max(f);
        }
        self.gpu_time.add(r);
        self.changes.add(index, r);
        if !window.contains(r.job) {
            return;
        }
        self.measured += 1;
        if r.outcome == JobOutcome::Completed {
            self.completed.push(index as u32);
            if let Some(jct) = r.jct_s() {
                self.jcts.push(jct);
                if r.deadline_s.is_none() {
                    self.best_effort += 1;
                    self.best_effort_jct_sum += jct;
                }
            }
        }
        if let Some(q) = r.queue_s() {
            self.queue_sum += q;
            self.queues += 1;
        }
        self.first_submit = self.first_submit.min(r.submit_s);
        if let Some(f) = r.finish_s {
            self.last_finish = self.last_finish.max(f);
        }
        self.preemptions += r.preemptions as f64;
        self.migrations += r.migrations as f64;
        match r.outcome {
            JobOutcome::Failed | JobOutcome::DependencyNeverSatisfied => self.failed += 1,
            JobOutcome::Unfinished => self.unfinished += 1,
            JobOutcome::Unplaceable => self.unplaceable += 1,
            JobOutcome::Completed => {}
        }
        self.executed += r.executed_s;
        self.colocated += r.colocated_s;
        self.cost += r.cost_usd;
        if let Some(a) = r.admitted {
            self.answered += 1;
            self.admitted += usize::from(a);
        }
        if let Some(v) = r.deadline_value {
            self.deadline_values += 1;
            self.deadline_value_sum += v;
        }
        if let Some(d) = r.deadline_s {
            self.with_slo += 1;
            let met =
                r.outcome == JobOutcome::Completed && r.finish_s.is_some_and(|f| f <= d + 1e-6);
            self.slo_met += usize::from(met);
        }
    }
}

/// The serde (kebab-case) name of a unit enum variant.
fn kebab<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The per-job CSV's columns (`arbiter run --jobs-dir`), in order.
pub const RECORD_CSV_COLUMNS: [&str; 23] = [
    "job",
    "trace_id",
    "tenant",
    "gpus",
    "submit_s",
    "first_start_s",
    "finish_s",
    "jct_s",
    "queue_s",
    "run_time_s",
    "executed_s",
    "gpu_s_allocated",
    "colocated_s",
    "cost_usd",
    "preemptions",
    "migrations",
    "failures",
    "outcome",
    "last_wait_reason",
    "deadline_s",
    "busy_gpu_s",
    "shared_gpu_s",
    "guest_gpu_s",
];

/// One record as the per-job CSV's fields ([`RECORD_CSV_COLUMNS`]): seconds to the millisecond
/// (the simulator's resolution), dollars to the hundredth of a cent, absent values empty.
pub fn record_csv_fields(r: &JobRecord) -> [String; 23] {
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    [
        r.job.to_string(),
        r.trace_id.clone(),
        r.tenant.to_string(),
        r.gpus.to_string(),
        format!("{:.3}", r.submit_s),
        opt(r.first_start_s),
        opt(r.finish_s),
        opt(r.jct_s()),
        opt(r.queue_s()),
        format!("{:.3}", r.run_time_s),
        format!("{:.3}", r.executed_s),
        format!("{:.3}", r.gpu_s_allocated),
        format!("{:.3}", r.colocated_s),
        format!("{:.4}", r.cost_usd),
        r.preemptions.to_string(),
        r.migrations.to_string(),
        r.failures.to_string(),
        kebab(&r.outcome),
        r.last_wait_reason.as_ref().map(kebab).unwrap_or_default(),
        opt(r.deadline_s),
        format!("{:.3}", r.busy_gpu_s),
        format!("{:.3}", r.shared_gpu_s),
        format!("{:.3}", r.guest_gpu_s),
    ]
}

/// Writes per-job records as CSV.
pub fn write_records_csv(
    out: impl std::io::Write,
    records: &[JobRecord],
) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(RECORD_CSV_COLUMNS)?;
    for r in records {
        w.write_record(record_csv_fields(r))?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_summary_has_no_negative_zeros() {
        // Regression (issue 9, item 25): a header-only trace printed `-0.00`.
        let s = Summary::compute(&[], Window::default(), 8);
        let json = serde_json::to_string(&s).expect("serializes");
        assert!(!json.contains("-0"), "{json}");
        for v in [
            s.avg_jct_s,
            s.preemptions_per_job,
            s.migrations_per_job,
            s.cost_usd,
            s.colocated_fraction,
            s.gpu_utilization,
            s.shared_gpu_fraction,
            s.guest_gpu_fraction,
            s.makespan_s,
        ] {
            assert!(v == 0.0 && v.is_sign_positive(), "{v} in {s:?}");
        }
    }

    pub(super) fn finished(
        id: u32,
        gpus: u32,
        submit_s: f64,
        finish_s: f64,
        run_time_s: f64,
    ) -> JobRecord {
        let spec = JobSpec::new(
            arbiter_model::JobId(id),
            SimTime::from_secs_f64(submit_s),
            gpus,
            run_time_s,
        );
        JobRecord {
            first_start_s: Some(submit_s),
            finish_s: Some(finish_s),
            outcome: JobOutcome::Completed,
            ..JobRecord::new(&spec)
        }
    }

    #[test]
    fn finish_time_fairness_is_reported_by_hand() {
        // 4 GPUs; two 4-GPU jobs of 50 s of work, submitted together, finishing at 100 s and
        // 150 s. A: two jobs in the system all its life, a fair share of half the cluster, so
        // T_independent = 100 s and ρ = 100 / 100 = 1. B: two jobs for 100 s, then one for 50 s,
        // a mean of 1.67 (rounded: 2), T_independent = 100 s, ρ = 150 / 100 = 1.5.
        let records = [
            finished(0, 4, 0.0, 100.0, 50.0),
            finished(1, 4, 0.0, 150.0, 50.0),
        ];
        let s = Summary::compute(&records, Window::default(), 4);
        assert!((s.max_ftf_rho - 1.5).abs() < 1e-12, "{s:?}");
        assert_eq!(s.ftf_unfair_fraction, 0.5);
        assert_eq!(s.metric("max_ftf_rho"), Some(s.max_ftf_rho));
        // A job alone on the cluster, finishing as soon as it could: ρ = 1, nobody unfair.
        let alone = Summary::compute(&[finished(0, 2, 10.0, 60.0, 50.0)], Window::default(), 4);
        assert_eq!((alone.max_ftf_rho, alone.ftf_unfair_fraction), (1.0, 0.0));
    }

    #[test]
    fn gpu_time_counts_each_gpu_once_and_sharing_apart() {
        let time = |busy, shared, guest| GpuTime {
            busy,
            shared,
            guest,
        };
        assert_eq!(
            gpu_time(10.0, 2, GpuSharing::Held { share: 1.0 }),
            time(20.0, 0.0, 0.0)
        );
        // Each job of a pair: half of the GPUs' time, all of it shared.
        assert_eq!(
            gpu_time(10.0, 2, GpuSharing::Held { share: 0.5 }),
            time(10.0, 10.0, 0.0)
        );
        // A guest on 3 GPUs, one of them held by another job (whose time it is): busy on 2.
        assert_eq!(
            gpu_time(10.0, 3, GpuSharing::Guest { on_held: 1 }),
            time(20.0, 10.0, 30.0)
        );
        assert_eq!(
            gpu_time(10.0, 1, GpuSharing::Guest { on_held: 5 }),
            time(0.0, 10.0, 10.0)
        );
        // 4 GPUs, 0–100 s: job 0 alone on one, jobs 1 and 2 a pair on two, job 3 a guest on two,
        // one of them job 0's, the other the fourth GPU. Busy: 100 + 2 × 100 + 100 = all 400
        // GPU-seconds; shared: the pair's 200 and job 0's GPU 100 (3/4); the guest's own 200
        // (1/2 of the cluster's time).
        let mut records =
            [0, 1, 2, 3].map(|id| finished(id, if id == 0 { 1 } else { 2 }, 0.0, 100.0, 50.0));
        let count = |r: &mut JobRecord, t: GpuTime| {
            (r.busy_gpu_s, r.shared_gpu_s, r.guest_gpu_s) = (t.busy, t.shared, t.guest)
        };
        count(
            &mut records[0],
            gpu_time(100.0, 1, GpuSharing::Held { share: 1.0 }),
        );
        count(
            &mut records[1],
            gpu_time(100.0, 2, GpuSharing::Held { share: 0.5 }),
        );
        count(
            &mut records[2],
            gpu_time(100.0, 2, GpuSharing::Held { share: 0.5 }),
        );
        count(
            &mut records[3],
            gpu_time(100.0, 2, GpuSharing::Guest { on_held: 1 }),
        );
        assert_eq!(utilization(&records, 4), (1.0, 0.75, 0.5));
        let s = Summary::compute(&records, Window::default(), 4);
        assert_eq!(
            (
                s.gpu_utilization,
                s.shared_gpu_fraction,
                s.guest_gpu_fraction
            ),
            (1.0, 0.75, 0.5)
        );
        assert_eq!(s.metric("shared_gpu_fraction"), Some(0.75));
    }

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 2.5);
        assert_eq!(percentile(&v, 1.0), 4.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert!((percentile(&v, 0.99) - 3.97).abs() < 1e-12);
    }
}
