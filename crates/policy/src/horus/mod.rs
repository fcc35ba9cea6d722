//! Horus (Yeung et al., "Horus: Interference-Aware and Prediction-Based Scheduling in Deep
//! Learning Systems", IEEE TPDS 33(1), 2022): co-locate a job on a GPU another job already uses
//! only where the *predicted* GPU utilization and memory of the GPU's jobs stay under limits,
//! choose among the GPUs by a cost that penalises load and over-subscription, and look ahead over
//! the first k queued jobs.
//!
//! # What the authors' simulator does
//!
//! The paper's trace-driven simulation is public (github `matthewygf/GPUSchedule`, Jan 2021;
//! read at commit `4d4278c`). Its Horus is `--schedule horus --scheme horus`:
//!
//! - **Queue** (`core/jobs/base_factory.py`, `job_queue_manager.py`): for the `horus*` schedules
//!   the queue is a min-heap on the job's `gpu_utilization_avg` — the job with the lowest
//!   predicted utilization comes out first.
//! - **Look-ahead** (`core/scheduling/algorithm.py`, `schedule_horus`, `k=5`): pop the first
//!   `min(k, queued)` jobs, try to place each in that order, start the first that fits, put the
//!   others back. One job is started per simulated tick.
//! - **Placement** (`horus_placement` in the same file, scores from `core/scheduling/horus.py`,
//!   `horus_score`): every node with a device that can take the task is scored; per device
//!   `cost = MEMCOST · mem + util_cost / 100 + len(running_tasks)` with `MEMCOST = 1.3`, `mem` the
//!   device's memory in use plus the task's, over the device's memory, and `util_cost =
//!   |util + task.gpu_utilization_max − 100|`, multiplied by `UTILCOST = 1.6` when the sum is over
//!   100. Nodes are ranked by their cheapest device (a heap of `NodeDeviceInfo` keeping the
//!   `gpus` best), each candidate is expanded to the nodes of the closest racks until every task
//!   has a device, and the candidate using the fewest nodes wins.
//! - **Fit** (`infra/device.py`, `Device.can_fit`): a device takes a task while it runs fewer
//!   than 3 tasks and `memory − (used + task.gpu_memory_max) > 500` MiB; the device memory is the
//!   `--gpu_memory_capacity` flag, 32 GB (`run_sim.py`). There is no hard utilization limit: the
//!   cost penalises a sum over 100 %.
//! - **Predictions**: each trace row carries `gpu_utilization_avg`, `gpu_utilization_max`,
//!   `memory_max` (`core/jobs/jobs_manager.py`, `gen_jobs`) — the paper predicts them from the
//!   model's computation graph. Device utilization is sampled from a normal around the running
//!   tasks' average (`get_current_utilization`), memory is the sum of their maxima.
//! - **Interference** (`infra/interference.py`, `FACTOR = 0.2`; `infra/node.py`, `execute_job`;
//!   `core/jobs/jobs_manager.py`, `reset_interference`): a task started on a device that runs two
//!   or more tasks has its duration multiplied by 1.2; when the device is back to one task, the
//!   survivors' durations are multiplied by 0.8.
//! - **No preemption**: placed jobs run to the end where they started. `execute.py` turns on the
//!   migration scan (`Scheduler._scan_for_migrate`), but it can never fire: it looks only at idle
//!   nodes, never raises its overload count above 0 (it must exceed 2), and its `preempt` call
//!   lacks an argument.
//!
//! # What this module does, and where it deviates
//!
//! - Order: pending jobs by predicted utilization (ascending), then submission, then id (the
//!   reference's heap breaks ties by heap position). Jobs that can never fit the cluster are left
//!   out of the look-ahead (in the reference they would hold a window slot forever).
//! - Look-ahead: the first [`HorusConfig::lookahead`] jobs of that order (k = 5); the first that
//!   can be placed starts, and the step repeats until no job of the window can be placed — the
//!   reference's one-start-per-tick loop run to a fixed point at each scheduling point, since
//!   the engine has no ticks. Non-preemptive: running jobs are never moved or stopped.
//! - Predictions ([`predict`]): utilization = the GPU stage's share of an iteration
//!   (`JobSpec::stages.gpu_s / iteration_s`, Muri's per-resource profile: the closest our traces
//!   come to a per-job utilization), else [`HorusConfig::default_util_pct`] (100: a job without a
//!   profile is assumed to fill its GPUs and is never co-located under the default limit). No
//!   trace we ship has per-job GPU memory, so every job is predicted to use
//!   [`HorusConfig::job_memory_gib`] (configurable). One number per job (no avg/max split), so the
//!   GPU's utilization is the sum of its jobs' predictions — deterministic, not sampled.
//! - Fit: a GPU in use takes another job only while it runs fewer than
//!   [`HorusConfig::max_jobs_per_gpu`] (3) jobs, the memory sum stays at most
//!   [`HorusConfig::memory_limit_gib`] (32 GiB − 500 MiB) and — the paper's condition, which the
//!   reference only prices — the utilization sum stays at most [`HorusConfig::util_limit_pct`]
//!   (100; set it to 300 to let only the cost decide, as the reference does). A job alone on idle
//!   GPUs is always allowed.
//! - Cost: `horus_score` with its operator precedence fixed (the reference adds the task's memory
//!   *fraction* to the device's memory in MiB, so any used memory dwarfs the other terms) and used
//!   to choose GPUs, not only nodes (the reference fills a chosen node's devices first-fit in
//!   index order, co-locating before using an idle device of the same node). With the `+1` per
//!   running job, an idle GPU is always cheaper than a shared one, so a job shares only when the
//!   idle GPUs cannot take it. Idle GPUs are taken by the scenario's placement strategy
//!   (consolidated by default: fewest nodes, like the reference's final choice).
//! - Granularity: Arbiter's co-location is a group of jobs on the same placement
//!   ([`Colocation`]), so a job joins GPUs in use only when its gang is exactly the placement of
//!   the jobs there (same nodes, same GPU count) — per GPU for single-GPU jobs, as in the
//!   reference; a multi-GPU gang joins only an equal gang.
//! - Interference: every job on a shared GPU runs at `speed / (1 + interference)` (0.2), the
//!   reference's factor, symmetric (the reference restores with ×0.8, not ÷1.2). Where the
//!   scenario has Gavel's measured pair throughputs and both jobs of a *pair* are in the table on
//!   the GPU type, their measured co-located speeds are used instead (and a pair measured not to
//!   run together there is not formed). Groups of three have no measurement and use the factor.
//!   Note: as committed, the reference never applies its factor — `execute_job` tests a task
//!   object against a set of task ids — so its Horus runs had no interference at all; we apply
//!   the factor the code and paper intend.
//! - `horus+` (k-means queues with credits) is not implemented.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::colocation::{PairKey, PairSpeeds};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{
    Assignment, Cluster, Colocation, Decision, GpuTypeId, JobId, JobSpec, MAX_GROUP, PendingReason,
    Placement, SimTime,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `horus`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("horus", Family::Events, "Horus: co-locate on GPUs in use only under predicted utilization/memory limits, cheapest GPU by its cost, look-ahead k, no preemption (TPDS'21)").pair_speeds()
    .paper("Horus (TPDS'21), as the authors' simulator (`matthewygf/GPUSchedule`) runs it; deviations in `crates/policy/src/horus/mod.rs`")
    .detail("interference-aware co-location: each job's GPU utilization is predicted from its profile (the GPU stage's share of an iteration, Muri-style stage times; `policy.horus.default_util_pct` without one) and its GPU memory is `policy.horus.job_memory_gib`; queue by predicted utilization, lowest first; the first of the `policy.horus.lookahead` queued jobs that fits starts, repeatedly; a job takes idle GPUs when it can, else joins the GPUs of an equal gang already running where the jobs' predicted utilization stays ≤ `policy.horus.util_limit_pct` and memory ≤ `policy.horus.memory_limit_gib`, at most `policy.horus.max_jobs_per_gpu`, choosing the cheapest GPU by Horus' cost (1.3 × memory share + utilization distance from 100 %, ×1.6 over it, + 1 per job); jobs sharing GPUs run at speed / (1 + `policy.horus.interference`) (by default the authors' value), or at Gavel's measured pair speeds when the scenario has a throughput table; non-preemptive");

/// Builds `horus` with its knobs (checked), the caller's placement strategy and the measured pair
/// speeds where there are some.
pub fn build(
    horus: &HorusConfig,
    pair_speeds: &Option<Arc<PairSpeeds>>,
    placing: Placing,
) -> Result<Horus, PolicyError> {
    Horus::new(*horus, placing.strategy, pair_speeds.clone())
}

/// `MEMCOST` of `core/scheduling/horus.py`: weight of the memory fraction in the cost.
pub const MEMORY_COST: f64 = 1.3;
/// `UTILCOST` of `core/scheduling/horus.py`: weight of utilization over 100 %.
pub const OVER_UTIL_COST: f64 = 1.6;

/// Horus' settings (scenario table `[policy.horus]`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HorusConfig {
    /// Queued jobs looked at per step (`k`, 5 in the reference).
    pub lookahead: usize,
    /// Most predicted utilization, percent, of the jobs sharing a GPU.
    pub util_limit_pct: f64,
    /// Most predicted memory, GiB, of the jobs sharing a GPU.
    pub memory_limit_gib: f64,
    /// A GPU's memory, GiB: the cost's denominator (`--gpu_memory_capacity`, 32).
    pub gpu_memory_gib: f64,
    /// Most jobs on one GPU (the reference's `len(running_tasks) >= 3`), at most [`MAX_GROUP`].
    pub max_jobs_per_gpu: usize,
    /// Slowdown of each job on a shared GPU: speed / (1 + interference) (`FACTOR`, 0.2).
    pub interference: f64,
    /// Predicted utilization, percent, of a job without a profile (stage times).
    pub default_util_pct: f64,
    /// Predicted GPU memory of every job, GiB (no trace we ship carries one).
    pub job_memory_gib: f64,
}

impl Default for HorusConfig {
    fn default() -> Self {
        HorusConfig {
            lookahead: 5,
            util_limit_pct: 100.0,
            // The reference: capacity − (used + new) > 500 MiB, with a 32 GB device.
            memory_limit_gib: 32.0 - 500.0 / 1024.0,
            gpu_memory_gib: 32.0,
            max_jobs_per_gpu: 3,
            interference: 0.2,
            default_util_pct: 100.0,
            job_memory_gib: 8.0,
        }
    }
}

impl HorusConfig {
    /// Checks the settings; the error names the scenario key.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if self.lookahead == 0 {
            return Err("horus.lookahead must be at least 1".into());
        }
        if !positive(self.util_limit_pct) {
            return Err(format!(
                "horus.util_limit_pct {} is not a positive number",
                self.util_limit_pct
            ));
        }
        if !positive(self.memory_limit_gib) {
            return Err(format!(
                "horus.memory_limit_gib {} is not a positive number",
                self.memory_limit_gib
            ));
        }
        if !positive(self.gpu_memory_gib) {
            return Err(format!(
                "horus.gpu_memory_gib {} is not a positive number",
                self.gpu_memory_gib
            ));
        }
        if !(1..=MAX_GROUP).contains(&self.max_jobs_per_gpu) {
            return Err(format!(
                "horus.max_jobs_per_gpu {} is not in 1..={MAX_GROUP}",
                self.max_jobs_per_gpu
            ));
        }
        if !(self.interference.is_finite() && self.interference >= 0.0) {
            return Err(format!(
                "horus.interference {} is not a number >= 0",
                self.interference
            ));
        }
        if !(self.default_util_pct.is_finite() && self.default_util_pct >= 0.0) {
            return Err(format!(
                "horus.default_util_pct {} is not a number >= 0",
                self.default_util_pct
            ));
        }
        if !(self.job_memory_gib.is_finite() && self.job_memory_gib >= 0.0) {
            return Err(format!(
                "horus.job_memory_gib {} is not a number >= 0",
                self.job_memory_gib
            ));
        }
        Ok(())
    }
}

/// What Horus predicts a job uses on each of its GPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// GPU utilization, percent.
    pub util_pct: f64,
    /// GPU memory, GiB.
    pub memory_gib: f64,
}

/// The prediction for `spec`: utilization from its stage times (the GPU stage's share of an
/// iteration, percent, at most 100), else the configured default; memory the configured figure.
pub fn predict(spec: &JobSpec, config: &HorusConfig) -> Prediction {
    let util_pct = spec
        .stages
        .and_then(|s| {
            let iteration_s = spec
                .iteration_s
                .filter(|t| t.is_finite() && *t > 0.0)
                .unwrap_or_else(|| s.total_s());
            (iteration_s > 0.0 && s.gpu_s.is_finite() && s.gpu_s >= 0.0)
                .then(|| (100.0 * s.gpu_s / iteration_s).min(100.0))
        })
        .unwrap_or(config.default_util_pct);
    Prediction {
        util_pct,
        memory_gib: config.job_memory_gib,
    }
}

/// `horus_score` for one GPU: what it costs to add a job predicted to use `new` to a GPU whose
/// `jobs` jobs are predicted to use `used` together.
pub fn gpu_cost(used: Prediction, jobs: usize, new: Prediction, config: &HorusConfig) -> f64 {
    let memory = (used.memory_gib + new.memory_gib) / config.gpu_memory_gib;
    let over = used.util_pct + new.util_pct - 100.0;
    let util = if over > 0.0 {
        over * OVER_UTIL_COST
    } else {
        -over
    };
    MEMORY_COST * memory + util / 100.0 + jobs as f64
}

/// Whether `spec` may run on GPUs of type `t`.
fn type_allowed(spec: &JobSpec, t: GpuTypeId) -> bool {
    spec.gpu_type.is_none_or(|g| g == t) && spec.speed_on(t) > 0.0
}

/// GPUs shared by a set of jobs: one placement, the jobs on it in the order they came.
#[derive(Clone, Debug, PartialEq)]
struct Unit {
    placement: Placement,
    members: Vec<JobId>,
}

/// The Horus policy. It remembers which jobs share which GPUs (placements count GPUs per node,
/// so two jobs with equal placements need not share); the memory is brought in line with the view
/// at every call (jobs that finished or stopped leave their group, running jobs it did not place
/// are taken as running alone).
#[derive(Clone, Debug)]
pub struct Horus {
    config: HorusConfig,
    strategy: PlacementStrategy,
    pair_speeds: Option<Arc<PairSpeeds>>,
    units: BTreeMap<u64, Unit>,
    unit_of: BTreeMap<JobId, u64>,
    next_unit: u64,
}

/// Where a job goes.
#[derive(Clone, Debug, PartialEq)]
enum Choice {
    /// Idle GPUs (already taken from the placer).
    Fresh(Placement),
    /// The GPUs of a unit in use.
    Join(u64),
}

impl Horus {
    /// A Horus policy; `strategy` places jobs on idle GPUs; `pair_speeds` (Gavel's measured
    /// co-located speeds), when given, replaces the constant interference factor for pairs.
    pub fn new(
        config: HorusConfig,
        strategy: PlacementStrategy,
        pair_speeds: Option<Arc<PairSpeeds>>,
    ) -> Result<Self, PolicyError> {
        config.validate().map_err(PolicyError::Config)?;
        Ok(Horus {
            config,
            strategy,
            pair_speeds,
            units: BTreeMap::new(),
            unit_of: BTreeMap::new(),
            next_unit: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &HorusConfig {
        &self.config
    }

    fn add_unit(&mut self, placement: Placement, job: JobId) {
        let id = self.next_unit;
        self.next_unit += 1;
        self.units.insert(
            id,
            Unit {
                placement,
                members: vec![job],
            },
        );
        self.unit_of.insert(job, id);
    }

    /// Brings the groups in line with the view: members no longer running where their group is
    /// leave it; running jobs not in a group run alone.
    fn reconcile(&mut self, view: &SchedulerView<'_>) {
        let running: BTreeMap<JobId, &Placement> = view
            .jobs
            .iter()
            .filter_map(|j| j.placement().map(|p| (j.id, p)))
            .collect();
        let unit_of = &mut self.unit_of;
        self.units.retain(|_, unit| {
            unit.members.retain(|m| {
                let stays = running.get(m).is_some_and(|p| **p == unit.placement);
                if !stays {
                    unit_of.remove(m);
                }
                stays
            });
            !unit.members.is_empty()
        });
        for (&id, &placement) in &running {
            if !self.unit_of.contains_key(&id) {
                self.add_unit(placement.clone(), id);
            }
        }
    }

    /// The unit's predicted use of each of its GPUs.
    fn used(&self, unit: &Unit, specs: &[JobSpec]) -> Prediction {
        unit.members.iter().fold(
            Prediction {
                util_pct: 0.0,
                memory_gib: 0.0,
            },
            |acc, m| {
                let p = predict(&specs[m.index()], &self.config);
                Prediction {
                    util_pct: acc.util_pct + p.util_pct,
                    memory_gib: acc.memory_gib + p.memory_gib,
                }
            },
        )
    }

    fn pair_key(spec: &JobSpec) -> Option<PairKey> {
        Some((spec.model.clone()?, spec.gpus))
    }

    /// Measured speeds of `a` and `b` sharing GPUs of type `t`, if the table has the pair.
    fn measured_pair(&self, a: &JobSpec, b: &JobSpec, t: GpuTypeId) -> Option<(f64, f64)> {
        let pairs = self.pair_speeds.as_ref()?;
        pairs.speeds(
            &Self::pair_key(a)?,
            &Self::pair_key(b)?,
            t.index(),
            (a.speed_on(t), b.speed_on(t)),
        )
    }

    /// The GPU type of a placement (its first node's; placements stay on one type).
    fn type_of(cluster: &Cluster, placement: &Placement) -> Option<GpuTypeId> {
        placement
            .slots
            .first()
            .and_then(|(n, _)| cluster.node(*n))
            .map(|n| n.gpu_type)
    }

    /// Whether `spec` may join `unit`: same gang, a type it runs on, room, and the predicted sums
    /// within the limits (and, for a measured pair, speeds at which both make progress).
    fn may_join(
        &self,
        view: &SchedulerView<'_>,
        unit: &Unit,
        spec: &JobSpec,
        new: Prediction,
    ) -> bool {
        if unit.placement.gpus() != spec.gpus || unit.members.len() >= self.config.max_jobs_per_gpu
        {
            return false;
        }
        let types_ok = unit.placement.slots.iter().all(|(n, _)| {
            view.cluster
                .node(*n)
                .is_some_and(|node| type_allowed(spec, node.gpu_type))
        });
        if !types_ok {
            return false;
        }
        let used = self.used(unit, view.specs);
        if used.util_pct + new.util_pct > self.config.util_limit_pct
            || used.memory_gib + new.memory_gib > self.config.memory_limit_gib
        {
            return false;
        }
        if let ([other], Some(t)) = (
            unit.members.as_slice(),
            Self::type_of(view.cluster, &unit.placement),
        ) && let Some((x, y)) = self.measured_pair(&view.specs[other.index()], spec, t)
        {
            return x > 0.0 && y > 0.0;
        }
        true
    }

    /// Where `spec` goes, or why it cannot start now. Idle GPUs it gets are taken from `placer`.
    fn choose(
        &self,
        view: &SchedulerView<'_>,
        placer: &mut Placer<'_>,
        spec: &JobSpec,
        pending_since: SimTime,
        now: SimTime,
    ) -> Result<Choice, PendingReason> {
        let new = predict(spec, &self.config);
        let idle = Prediction {
            util_pct: 0.0,
            memory_gib: 0.0,
        };
        // The cheapest GPUs in use it may join (the first unit on a tie).
        let mut join: Option<(f64, u64)> = None;
        for (&id, unit) in &self.units {
            if !self.may_join(view, unit, spec, new) {
                continue;
            }
            let cost = gpu_cost(
                self.used(unit, view.specs),
                unit.members.len(),
                new,
                &self.config,
            );
            if join.is_none_or(|(c, _)| cost < c) {
                join = Some((cost, id));
            }
        }
        // Idle GPUs win ties (with the +1 per job on GPUs in use, they are never dearer).
        match (placer.place(spec, pending_since, now), join) {
            (Ok(p), Some((cost, id))) if cost < gpu_cost(idle, 0, new, &self.config) => {
                placer.give_back(&p);
                Ok(Choice::Join(id))
            }
            (Ok(p), _) => Ok(Choice::Fresh(p)),
            (Err(_), Some((_, id))) => Ok(Choice::Join(id)),
            (Err(reason), None) => Err(reason),
        }
    }

    /// Speed of member `index` of `unit` while the unit's jobs share its GPUs.
    fn shared_speed(&self, view: &SchedulerView<'_>, unit: &Unit, index: usize) -> f64 {
        let spec = &view.specs[unit.members[index].index()];
        let Some(t) = Self::type_of(view.cluster, &unit.placement) else {
            return 1.0 / (1.0 + self.config.interference);
        };
        if let [a, b] = unit.members.as_slice()
            && let Some((x, y)) =
                self.measured_pair(&view.specs[a.index()], &view.specs[b.index()], t)
            && x > 0.0
            && y > 0.0
        {
            return if index == 0 { x } else { y };
        }
        spec.speed_on(t) / (1.0 + self.config.interference)
    }

    /// The groups of jobs sharing GPUs now, as (placement, members) — for tests and reports.
    pub fn groups(&self) -> Vec<(Placement, Vec<JobId>)> {
        self.units
            .values()
            .map(|u| (u.placement.clone(), u.members.clone()))
            .collect()
    }
}

impl Policy for Horus {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn set_pair_speeds(&mut self, speeds: Arc<PairSpeeds>) {
        self.pair_speeds = Some(speeds);
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.reconcile(view);
        let mut placer = Placer::new(view.cluster, self.strategy);
        for unit in self.units.values() {
            placer.take_overlap(&unit.placement);
        }
        let mut decision = Decision::default();
        // The queue: lowest predicted utilization first (the reference's heap), then submission.
        let mut queue: Vec<(u64, SimTime, JobId, SimTime)> = Vec::new();
        for job in view.jobs.iter().filter(|j| !j.is_running()) {
            let spec = view.spec(job);
            if Placer::could_ever_fit(view.cluster, spec) && spec.gpus > 0 {
                queue.push((
                    order_key(predict(spec, &self.config).util_pct),
                    job.submit,
                    job.id,
                    job.pending_since,
                ));
            } else {
                decision.pending.push((job.id, PendingReason::NeverFits));
            }
        }
        queue.sort();
        let mut reasons: BTreeMap<JobId, PendingReason> = BTreeMap::new();
        loop {
            let mut started = None;
            for (pos, &(_, _, id, pending_since)) in
                queue.iter().take(self.config.lookahead).enumerate()
            {
                let spec = &view.specs[id.index()];
                match self.choose(view, &mut placer, spec, pending_since, now) {
                    Ok(choice) => {
                        started = Some((pos, id, choice));
                        break;
                    }
                    Err(reason) => {
                        reasons.insert(id, reason);
                    }
                }
            }
            let Some((pos, id, choice)) = started else {
                break;
            };
            queue.remove(pos);
            reasons.remove(&id);
            match choice {
                Choice::Fresh(placement) => self.add_unit(placement, id),
                Choice::Join(unit) => {
                    let members = &mut self
                        .units
                        .get_mut(&unit)
                        .ok_or_else(|| {
                            PolicyError::Invariant(format!("horus: unit {unit} vanished"))
                        })?
                        .members;
                    members.push(id);
                    self.unit_of.insert(id, unit);
                }
            }
        }
        for (i, &(_, _, id, _)) in queue.iter().enumerate() {
            let reason = if i < self.config.lookahead {
                reasons
                    .get(&id)
                    .copied()
                    .unwrap_or(PendingReason::InsufficientGpus)
            } else {
                PendingReason::BlockedByHeadOfLine
            };
            decision.pending.push((id, reason));
        }
        for unit in self.units.values() {
            if let [only] = unit.members.as_slice() {
                decision
                    .run
                    .push(Assignment::exclusive(*only, unit.placement.clone()));
                continue;
            }
            // A ring: each member names the next, the last the first.
            for (i, &member) in unit.members.iter().enumerate() {
                let partner = unit.members[(i + 1) % unit.members.len()];
                let speed = self.shared_speed(view, unit, i);
                decision.run.push(Assignment {
                    colocation: Some(Colocation { partner, speed }),
                    ..Assignment::exclusive(member, unit.placement.clone())
                });
            }
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests;
