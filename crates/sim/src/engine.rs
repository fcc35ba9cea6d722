//! The discrete-event engine: virtual time, arrivals, completions, scheduling points, and the
//! application of policy decisions (start, preempt, migrate).
//!
//! Time is integer milliseconds; events are ordered by `(time, sequence)` ([`crate::events`]); a
//! job's completion or failure event holds while its generation or attempt number (bumped at
//! every start and stop) is the one it was drawn for, and superseded events are dropped. All
//! events at one timestamp are handled together and followed by at most one scheduling point. No
//! wall clock and no hash-map order is consulted: the same inputs and seed give the same output.
//!
//! Progress is kept per job as of its last accounting and extrapolated on demand, so a scheduling
//! point costs nothing per untouched running job (except under Muri's per-event overhead model,
//! which by definition touches every running job at every event).

use crate::events::{EventKind, EventQueue};
use crate::metrics::{GpuSharing, JobOutcome, JobRecord, Window, gpu_time};
use crate::timeline::{QuotaReclaim, RunSegment};
use crate::unplaceable::GpuPools;
use arbiter_model::{
    Action, ActiveJob, Assignment, Cluster, Decision, HostShare, JobId, JobSpec, Occupancy,
    Placement, Plan, Planner, RunState, SimDuration, SimTime, Standing, default_price_per_gpu_hour,
    proportional_share,
};
use arbiter_policy::{Current, Policy, SchedulerView};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How start-up (checkpoint-restore) cost is charged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverheadModel {
    /// No cost: a job makes progress from the moment it gets GPUs.
    None,
    /// Each start, restart after preemption, or migration costs the job's restart overhead before
    /// it makes progress (the usual checkpoint/restart model).
    #[default]
    OnRestart,
    /// Muri's simulator: at *every* scheduling point, each running job loses its overhead from the
    /// progress credited since the previous point, while its completion is predicted without it;
    /// a job interleaved with others loses the sum of its group's overheads. Only for
    /// reproducing Muri's numbers.
    PerEvent,
}

/// Random job failures and retries (Philly study, ATC'19 §5).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureConfig {
    /// Chance that an attempt (a start or restart) fails before finishing; the failure time is
    /// uniform over the attempt's remaining run.
    pub probability_per_attempt: f64,
    /// Retries after which a failing job is given up (marked failed).
    pub max_retries: u32,
}

/// Engine settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Call the policy at every arrival and completion.
    pub schedule_on_events: bool,
    /// Also call it every `round_s` seconds (Gavel-style rounds); `None` for no rounds.
    pub round_s: Option<f64>,
    /// Rounds fall on multiples of `round_s` from time zero (the first one after the first
    /// arrival, and never at zero) rather than starting at the first arrival: Pollux's simulator
    /// steps time by its interval from zero and decides at the end of each step.
    pub align_rounds: bool,
    /// How restart overhead is charged.
    pub overhead: OverheadModel,
    /// Restart overhead in seconds for jobs whose spec does not set one.
    pub restart_overhead_s: f64,
    /// Random failures; `None` for none.
    pub failures: Option<FailureConfig>,
    /// Seed of the engine's random stream (failures).
    pub seed: u64,
    /// Realize Gavel allocations exactly (fluid, [`crate::ideal`]) instead of with placements and
    /// rounds; only for Gavel's allocation policies.
    pub ideal: bool,
    /// Stop as soon as every job in this window has finished (set from a scenario's
    /// `window.stop_when_done`); jobs still active then are reported unfinished.
    #[serde(skip)]
    pub stop_when_finished: Option<Window>,
    /// Record every job's [`RunSegment`]s in [`SimOutput::timeline`] (for reports; set by
    /// `--report`, not a scenario key). Changes no result.
    #[serde(skip)]
    pub record_timeline: bool,
    /// Raised by the caller to stop the simulation early ([`SimError::Stopped`]); not a
    /// scenario key. Changes no result of a simulation it does not stop.
    #[serde(skip)]
    pub stop: crate::StopFlag,
    /// Reservations and maintenance windows ([`crate::reservations`]).
    pub reservations: Vec<crate::reservations::ReservationSpec>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            schedule_on_events: true,
            round_s: None,
            align_rounds: false,
            overhead: OverheadModel::OnRestart,
            restart_overhead_s: 0.0,
            failures: None,
            seed: 0,
            ideal: false,
            stop_when_finished: None,
            record_timeline: false,
            stop: crate::StopFlag::default(),
            reservations: Vec::new(),
        }
    }
}

impl SimConfig {
    /// Checks the settings; the message names the offending key (relative to `[simulation]`).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(r) = self.round_s
            && !(r.is_finite() && r > 0.0)
        {
            return Err(format!("round_s must be > 0, got {r}"));
        }
        if let Some(f) = self.failures
            && !(0.0..=1.0).contains(&f.probability_per_attempt)
        {
            return Err(format!(
                "failures.probability_per_attempt must be in [0, 1], got {}",
                f.probability_per_attempt
            ));
        }
        if !(self.restart_overhead_s.is_finite() && self.restart_overhead_s >= 0.0) {
            return Err(format!(
                "restart_overhead_s must be >= 0, got {}",
                self.restart_overhead_s
            ));
        }
        for (i, r) in self.reservations.iter().enumerate() {
            r.validate(i)?;
        }
        Ok(())
    }
}

/// Why a simulation stopped early.
#[derive(Debug, Error)]
pub enum SimError {
    /// The policy returned an error.
    #[error("policy {policy} failed at t={at}: {error}")]
    Policy {
        /// Policy name.
        policy: &'static str,
        /// Simulated time.
        at: SimTime,
        /// The error (part of the message, not a `source`, so a printed chain says it once).
        error: arbiter_policy::PolicyError,
    },
    /// The policy returned a decision that breaks an invariant (over-allocation, unknown job,
    /// wrong gang size). A bug in the policy; reported, never applied.
    #[error("policy {policy} returned an invalid decision at t={at}: {reason}")]
    InvalidDecision {
        /// Policy name.
        policy: &'static str,
        /// Simulated time.
        at: SimTime,
        /// What is wrong.
        reason: String,
    },
    /// Bad configuration.
    #[error("invalid simulation settings: {0}")]
    Config(String),
    /// Job ids are not dense and in order.
    #[error("job specs must be numbered 0..n in submission order; {0} is out of place")]
    BadJobIds(JobId),
    /// The caller raised [`SimConfig::stop`].
    #[error("stopped at t={0}")]
    Stopped(SimTime),
}

/// Counters about the run itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineStats {
    /// Events handled (arrivals, completions, failures, wake-ups, rounds).
    pub events: u64,
    /// Times the policy was called.
    pub scheduling_points: u64,
    /// GPU-seconds left idle while some job waited (fragmentation, including CPU/memory that
    /// strands GPUs, and rounds that leave GPUs empty).
    pub idle_gpu_s_while_waiting: f64,
    /// Seconds from the first arrival to the last event.
    pub span_s: f64,
    /// Running jobs a quota tree reclaimed (preempted) for their owners' guaranteed quota.
    pub quota_reclaims: u64,
}

impl EngineStats {
    /// Share of the cluster's GPU time left idle while jobs waited.
    pub fn stranded_gpu_fraction(&self, capacity_gpus: u32) -> f64 {
        let total = self.span_s * capacity_gpus as f64;
        if total > 0.0 {
            self.idle_gpu_s_while_waiting / total
        } else {
            0.0
        }
    }
}

/// A finished simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimOutput {
    /// One record per job, indexed by job id.
    pub records: Vec<JobRecord>,
    /// GPUs in the cluster.
    pub capacity_gpus: u32,
    /// Engine counters.
    pub stats: EngineStats,
    /// Every job's time on GPUs, in the order the pieces ended; empty unless
    /// [`SimConfig::record_timeline`].
    pub timeline: Vec<RunSegment>,
    /// Each job a quota tree reclaimed, when (in time order, by job id at one time); empty
    /// without a quota tree. `stats.quota_reclaims` counts them.
    pub quota_reclaims: Vec<QuotaReclaim>,
}

const NOT_ACTIVE: u32 = u32::MAX;

/// What makes a queued event hold or not.
struct Epochs {
    /// Per job: bumped at every start and stop (and at every scheduling point under Muri's
    /// per-event model), so a completion predicted before is void.
    generation: Vec<u32>,
    /// Per job: bumped at every start and stop, so a failure drawn for one attempt (stint) is
    /// void once that attempt ends.
    attempt: Vec<u32>,
    /// Bumped at every decision: only the latest decision's wake-up holds.
    wake_token: u64,
}

impl Epochs {
    /// Whether a queued event still holds.
    fn live(&self, kind: &EventKind) -> bool {
        match *kind {
            EventKind::Completion { job, generation } => {
                self.generation[job as usize] == generation
            }
            EventKind::Failure { job, attempt } => self.attempt[job as usize] == attempt,
            EventKind::Wake { token } => token == self.wake_token,
            EventKind::Round | EventKind::Window => true,
        }
    }
}

struct Engine<'a> {
    cluster: &'a Cluster,
    /// The jobs; copied (once) only when reservations set the nodes each must avoid.
    specs: std::borrow::Cow<'a, [JobSpec]>,
    config: &'a SimConfig,
    active: Vec<ActiveJob>,
    /// Position in `active` per job id, or `NOT_ACTIVE`.
    slot: Vec<u32>,
    /// Positions in `active` of the jobs not running (offered to policies as
    /// [`Current::queued`], so that a decision by changes costs what waits, not what runs).
    queued: Vec<u32>,
    /// Position in `queued` per job id, or `NOT_ACTIVE`.
    queued_at: Vec<u32>,
    epochs: Epochs,
    /// Remaining work when the current stint started (for failures).
    stint_start_remaining_s: Vec<f64>,
    records: Vec<JobRecord>,
    occupancy: Occupancy,
    events: EventQueue,
    rng: ChaCha8Rng,
    stats: EngineStats,
    /// Checks decisions (the daemon's rules too) and remembers which jobs the last one assigned.
    planner: Planner,
    /// Jobs of `config.stop_when_finished` not finished yet.
    window_outstanding: Option<usize>,
    /// Per job id: the running job it shares its GPUs with (space sharing). The pair's GPUs
    /// count once, and are given back when the last of the two stops.
    partner: Vec<Option<JobId>>,
    /// Per job id: its own CPU/memory share while it runs (`None`: GPU-proportional).
    host: Vec<Option<HostShare>>,
    /// Per job id: whether it runs as a guest (opportunistically, on GPUs it does not hold: not
    /// in the occupancy; its GPU time is credited to it and its time counts as co-located), and
    /// then how many of its GPUs another job holds ([`arbiter_model::Guest::on_held`]).
    guest: Vec<Option<u32>>,
    /// Per job id: when its GPU-seconds were last credited to its record.
    gpu_credited_at: Vec<SimTime>,
    /// Per node: dollars per GPU-hour of its GPU type (for the cost metric).
    price_per_gpu_hour: Vec<f64>,
    /// Jobs holding GPUs.
    running: usize,
    /// Whether any decision so far shared GPUs or set CPU/memory shares.
    shares_seen: bool,
    /// Per job id: whether its current speed came from sharing GPUs or a CPU/memory share (and
    /// must be re-rated when its assignment becomes plain).
    special_rate: Vec<bool>,
    /// Free GPUs while some job waits (0 when none waits), since `idle_since`.
    idle_gpus: u32,
    idle_since: SimTime,
    /// The run segments recorded so far (with `config.record_timeline`).
    timeline: Vec<RunSegment>,
    /// The quota tree's reclaims so far.
    quota_reclaims: Vec<QuotaReclaim>,
    /// The time of the last event handled.
    last_event: SimTime,
    /// Jobs waiting on dependencies before they join the queue.
    dependents: crate::dependencies::Dependents,
    /// Job arrays' running limits: which tasks may join the queue.
    arrays: crate::arrays::ArrayLimits,
    /// Reservations and maintenance windows on this cluster.
    windows: Vec<crate::reservations::Window>,
    /// With a policy that weighs tenants by decayed usage: every stint's GPU time, by tenant.
    ledger: Option<arbiter_policy::UsageLedger>,
    /// Debug builds: credit toward the next full check of the occupancy, [`DEBUG_CHECK_SPAN`]
    /// more per call; the check runs once it reaches the active jobs' count
    /// ([`Engine::debug_check_occupancy`]).
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    debug_check_credit: usize,
}

/// Active jobs a full debug check of the occupancy is spread over per event: with this many or
/// fewer active, every event is checked.
const DEBUG_CHECK_SPAN: usize = 64;

/// Runs `policy` over `specs` on `cluster`.
pub fn simulate(
    cluster: &Cluster,
    specs: &[JobSpec],
    policy: &mut dyn Policy,
    config: &SimConfig,
) -> Result<SimOutput, SimError> {
    if let Some(s) = specs
        .iter()
        .enumerate()
        .find(|(i, s)| s.id.index() != *i)
        .map(|(_, s)| s)
    {
        return Err(SimError::BadJobIds(s.id));
    }
    if let Some(bad) = specs
        .iter()
        .find(|s| s.gpus == 0 || !s.run_time_s.is_finite() || s.run_time_s < 0.0)
    {
        return Err(SimError::Config(format!(
            "{} asks for {} GPUs with {} s of work; jobs need at least one GPU and finite, non-negative work",
            bad.id, bad.gpus, bad.run_time_s
        )));
    }
    if specs.windows(2).any(|w| w[1].submit < w[0].submit) {
        return Err(SimError::Config(
            "job specs must be sorted by submission time".into(),
        ));
    }
    config.validate().map_err(SimError::Config)?;
    let n = specs.len();
    let windows = crate::reservations::Window::resolve(&config.reservations, cluster)
        .map_err(SimError::Config)?;
    let mut engine = Engine {
        cluster,
        specs: std::borrow::Cow::Borrowed(specs),
        config,
        active: Vec::new(),
        slot: vec![NOT_ACTIVE; n],
        queued: Vec::new(),
        queued_at: vec![NOT_ACTIVE; n],
        epochs: Epochs {
            generation: vec![0; n],
            attempt: vec![0; n],
            wake_token: 0,
        },
        stint_start_remaining_s: vec![0.0; n],
        records: specs.iter().map(JobRecord::new).collect(),
        occupancy: Occupancy::new(cluster),
        events: EventQueue::default(),
        rng: ChaCha8Rng::seed_from_u64(config.seed),
        stats: EngineStats::default(),
        planner: Planner::new(n),
        // Jobs that can never run would keep the window open to the end of the trace.
        window_outstanding: config.stop_when_finished.map(|w| {
            let pools = GpuPools::new(cluster);
            specs
                .iter()
                .filter(|s| w.contains(s.id.0) && pools.check(s).is_none())
                .count()
        }),
        partner: vec![None; n],
        host: vec![None; n],
        guest: vec![None; n],
        gpu_credited_at: vec![SimTime::ZERO; n],
        price_per_gpu_hour: cluster
            .nodes
            .iter()
            .map(|node| default_price_per_gpu_hour(cluster.gpu_type_name(node.gpu_type)))
            .collect(),
        running: 0,
        shares_seen: false,
        special_rate: vec![false; n],
        idle_gpus: 0,
        idle_since: specs.first().map_or(SimTime::ZERO, |s| s.submit),
        timeline: Vec::new(),
        quota_reclaims: Vec::new(),
        last_event: SimTime::ZERO,
        dependents: crate::dependencies::Dependents::new(specs),
        arrays: crate::arrays::ArrayLimits::new(specs),
        windows,
        ledger: policy
            .fairshare_half_life_s()
            .map(arbiter_policy::UsageLedger::new),
        debug_check_credit: DEBUG_CHECK_SPAN,
    };
    engine.run(policy)?;
    engine.close_timeline();
    crate::unplaceable::mark(cluster, specs, &mut engine.records);
    Ok(SimOutput {
        records: engine.records,
        capacity_gpus: cluster.total_gpus(),
        stats: engine.stats,
        timeline: engine.timeline,
        quota_reclaims: engine.quota_reclaims,
    })
}

impl Engine<'_> {
    fn push(&mut self, at: SimTime, kind: EventKind) {
        self.events.push(at.as_ms(), kind, |k| self.epochs.live(k));
    }

    /// `id` (active, not running) joins the waiting jobs.
    fn enqueue(&mut self, id: JobId) {
        if self.queued_at[id.index()] == NOT_ACTIVE {
            self.queued_at[id.index()] = self.queued.len() as u32;
            self.queued.push(self.slot[id.index()]);
        }
    }

    /// `id` leaves the waiting jobs (it starts or ends).
    fn dequeue(&mut self, id: JobId) {
        let at = std::mem::replace(&mut self.queued_at[id.index()], NOT_ACTIVE);
        if at != NOT_ACTIVE {
            self.queued.swap_remove(at as usize);
            if let Some(&moved) = self.queued.get(at as usize) {
                self.queued_at[self.active[moved as usize].id.index()] = at;
            }
        }
    }

    /// Preempts the runs on nodes whose reservation has begun and does not admit them.
    fn evict_reserved(&mut self, now: SimTime) {
        let evicted: Vec<usize> = (0..self.active.len())
            .filter(|&i| {
                let job = &self.active[i];
                let spec = &self.specs[job.id.index()];
                job.placement().is_some_and(|p| {
                    p.slots.iter().any(|(n, _)| {
                        self.windows
                            .iter()
                            .any(|w| w.holds(*n) && w.evicts(spec, now))
                    })
                })
            })
            .collect();
        // From the last: `stop` keeps positions in `active` as they are.
        for i in evicted.into_iter().rev() {
            self.stop(i, now, true);
            let job = &mut self.active[i];
            job.pending_since = now;
            job.preemptions += 1;
        }
    }

    /// Gives each active job's spec the nodes it must avoid at `now`.
    fn mark_avoided(&mut self, now: SimTime) {
        let marks: Vec<(usize, Option<std::sync::Arc<Vec<arbiter_model::NodeId>>>)> = self
            .active
            .iter()
            .map(|job| {
                (
                    job.id.index(),
                    crate::reservations::avoided(
                        &self.windows,
                        &self.specs[job.id.index()],
                        job,
                        now,
                    ),
                )
            })
            .collect();
        let specs = self.specs.to_mut();
        for (i, avoid) in marks {
            specs[i].avoid_nodes = avoid;
        }
    }

    /// Job `id` joins the queue at `now` (its arrival, or when its dependencies hold), unless
    /// it is a task of an array that has as many tasks active as its limit: then it joins when
    /// one of them ends.
    fn join(&mut self, id: JobId, now: SimTime) {
        if self.arrays.let_in(id) {
            self.activate(id, now);
        }
    }

    /// Job `id` joins the queue at `now`.
    fn activate(&mut self, id: JobId, now: SimTime) {
        let spec = &self.specs[id.index()];
        self.slot[id.index()] = self.active.len() as u32;
        let mut job = ActiveJob::submitted(spec.id, spec.gpus, spec.submit, spec.run_time_s);
        job.pending_since = now;
        self.active.push(job);
        self.enqueue(id);
    }

    /// Where job `index` stands for a job depending on it.
    fn stand(&self, index: u32) -> arbiter_model::DependedOn {
        use arbiter_model::DependedOn;
        let record = &self.records[index as usize];
        match record.outcome {
            JobOutcome::Completed => DependedOn::Succeeded,
            JobOutcome::Failed | JobOutcome::DependencyNeverSatisfied => DependedOn::EndedNotOk {
                started: record.first_start_s.is_some(),
            },
            JobOutcome::Unfinished | JobOutcome::Unplaceable => match self.slot[index as usize] {
                NOT_ACTIVE => DependedOn::Waiting,
                at if self.active[at as usize].first_start.is_some() => DependedOn::Started,
                _ => DependedOn::Waiting,
            },
        }
    }

    /// Lets the blocked jobs whose dependencies hold join the queue and ends those whose
    /// dependencies never can (which may settle others: repeated until nothing changes).
    /// Returns whether a job joined the queue.
    fn release_dependents(&mut self, now: SimTime) -> bool {
        let mut joined = false;
        loop {
            let mut dependents = std::mem::take(&mut self.dependents);
            let (free, never) = dependents.settle(
                |j| self.stand(j),
                |j| self.records[j as usize].outcome != JobOutcome::Unfinished,
            );
            self.dependents = dependents;
            for &id in &free {
                self.join(id, now);
            }
            for &id in &never {
                let record = &mut self.records[id.index()];
                record.outcome = JobOutcome::DependencyNeverSatisfied;
                record.finish_s = Some(now.as_secs_f64());
                if let (Some(left), Some(w)) = (
                    self.window_outstanding.as_mut(),
                    self.config.stop_when_finished,
                ) && w.contains(id.0)
                {
                    *left = left.saturating_sub(1);
                }
            }
            joined |= !free.is_empty();
            if never.is_empty() {
                return joined;
            }
        }
    }

    fn overhead_s(&self, id: JobId) -> f64 {
        if self.config.overhead == OverheadModel::None {
            return 0.0;
        }
        self.specs[id.index()]
            .restart_overhead
            .map(|d| d.as_secs_f64())
            .unwrap_or(self.config.restart_overhead_s)
    }

    fn run(&mut self, policy: &mut dyn Policy) -> Result<(), SimError> {
        let round = self
            .config
            .round_s
            .map(SimDuration::from_secs_f64)
            .filter(|d| d.as_ms() > 0);

        let mut next_arrival = 0usize;
        let edges: Vec<SimTime> = self.windows.iter().flat_map(|w| [w.start, w.end]).collect();
        for at in edges {
            self.push(at, EventKind::Window);
        }
        if let (Some(r), Some(first)) = (round, self.specs.first()) {
            let at = if self.config.align_rounds {
                let r_ms = r.as_ms();
                SimTime::from_ms(first.submit.as_ms().div_ceil(r_ms).max(1) * r_ms)
            } else {
                first.submit
            };
            self.push(at, EventKind::Round);
        }
        loop {
            let arrival_at = self.specs.get(next_arrival).map(|s| s.submit.as_ms());
            let event_at = self.events.next_time_ms(|k| self.epochs.live(k));
            let now = match (arrival_at, event_at) {
                (None, None) => break,
                (Some(a), None) => a,
                (None, Some(e)) => e,
                (Some(a), Some(e)) => a.min(e),
            };
            let now = SimTime::from_ms(now);
            if self.config.stop.is_raised() {
                return Err(SimError::Stopped(now));
            }
            self.last_event = now;
            self.stats.idle_gpu_s_while_waiting +=
                now.saturating_since(self.idle_since).as_secs_f64() * self.idle_gpus as f64;
            self.idle_since = now;
            if let Some(first) = self.specs.first() {
                self.stats.span_s = now.saturating_since(first.submit).as_secs_f64();
            }
            let mut reschedule = false;
            let mut round_due = false;
            while let Some(spec) = self.specs.get(next_arrival).filter(|s| s.submit == now) {
                if self.dependents.has(spec.id) {
                    self.dependents.block(spec.id);
                } else {
                    self.join(spec.id, now);
                }
                next_arrival += 1;
                self.stats.events += 1;
                reschedule |= self.config.schedule_on_events;
            }
            while let Some(kind) = self.events.pop_due(now.as_ms(), |k| self.epochs.live(k)) {
                self.stats.events += 1;
                // Events are checked again as they are handled: handling one may end another's
                // job (a failure, then the completion at the same instant).
                match kind {
                    EventKind::Completion { job, generation } => {
                        if self.epochs.generation[job as usize] == generation {
                            self.finish(JobId(job), now, JobOutcome::Completed, policy);
                            reschedule |= self.config.schedule_on_events;
                        }
                    }
                    EventKind::Failure { job, attempt } => {
                        if self.epochs.attempt[job as usize] == attempt {
                            self.fail(JobId(job), now, policy);
                            reschedule |= self.config.schedule_on_events;
                        }
                    }
                    EventKind::Wake { token } => reschedule |= token == self.epochs.wake_token,
                    EventKind::Round => {
                        reschedule = true;
                        round_due = true;
                    }
                    EventKind::Window => {
                        self.evict_reserved(now);
                        reschedule = true;
                    }
                }
            }
            if self.dependents.any_blocked() {
                reschedule |= self.release_dependents(now) && self.config.schedule_on_events;
            }
            if self.window_outstanding == Some(0) {
                break;
            }
            if reschedule && !self.active.is_empty() {
                self.scheduling_point(now, policy)?;
                // Jobs waiting for others to start (`after`) may start at the same instant.
                while self.dependents.any_blocked() && self.release_dependents(now) {
                    self.scheduling_point(now, policy)?;
                }
            }
            let waiting = self.active.len() > self.running;
            self.idle_gpus = if waiting {
                self.occupancy.free_total()
            } else {
                0
            };
            // The next round, unless nothing can change any more: no job runs, no arrival or
            // other event is ahead, so another round would see the same snapshot forever.
            if let (true, Some(r)) = (round_due, round) {
                let anything_running = self.running > 0;
                if anything_running
                    || next_arrival < self.specs.len()
                    || self.events.has_live(|k| self.epochs.live(k))
                {
                    let at = self.next_round(now, r, next_arrival);
                    self.push(at, EventKind::Round);
                }
            }
        }
        Ok(())
    }

    /// When the round after `now` falls: `now + r`, unless no job is active (none waits or
    /// runs) — then the first round from `now` on, every `r`, at or after the next arrival or
    /// event, as the rounds between would see nothing. (A trace with months of idle time
    /// between two jobs otherwise cost a loop turn every `r`: ≈ 1.3 s per 10⁹ idle seconds.)
    fn next_round(&mut self, now: SimTime, r: SimDuration, next_arrival: usize) -> SimTime {
        let step = now + r;
        if !self.active.is_empty() {
            return step;
        }
        let arrival = self.specs.get(next_arrival).map(|s| s.submit.as_ms());
        let event = self.events.next_time_ms(|k| self.epochs.live(k));
        let Some(target) = arrival.into_iter().chain(event).min() else {
            return step;
        };
        let r_ms = r.as_ms().max(1);
        let rounds = target.saturating_sub(now.as_ms()).div_ceil(r_ms).max(1);
        SimTime::from_ms(now.as_ms().saturating_add(rounds.saturating_mul(r_ms)))
    }

    fn scheduling_point(&mut self, now: SimTime, policy: &mut dyn Policy) -> Result<(), SimError> {
        if !self.windows.is_empty() {
            self.mark_avoided(now);
        }
        if self.config.overhead == OverheadModel::PerEvent {
            for i in 0..self.active.len() {
                if self.active[i].is_running() {
                    let id = self.active[i].id;
                    // (A job in a group pays its whole group's: set once the decision is in force.)
                    let overhead = self.overhead_s(id);
                    let job = &mut self.active[i];
                    job.account(now);
                    job.startup_left_s = overhead;
                    self.epochs.generation[id.index()] += 1;
                    self.schedule_end(id, now);
                }
            }
        }
        self.stats.scheduling_points += 1;
        // While no GPUs are shared, the occupancy is every running job's placement: a policy may
        // then decide by changes.
        let current = (!self.shares_seen).then_some(Current {
            free: &self.occupancy,
            queued: &self.queued,
            positions: Some(&self.slot),
        });
        if let Some(ledger) = &self.ledger {
            policy.set_tenant_usage(&ledger.usage_at(now, self.running_usage()));
        }
        let view = SchedulerView {
            cluster: self.cluster,
            jobs: &self.active,
            specs: &self.specs,
            current,
        };
        let decision = policy
            .schedule(&view, now)
            .map_err(|error| SimError::Policy {
                policy: policy.name(),
                at: now,
                error,
            })?;
        if let Some((_, round)) = policy.quota_round() {
            self.stats.quota_reclaims += round.reclaimed.len() as u64;
            // (`reclaimed` is sorted by id: the same order every run.)
            self.quota_reclaims
                .extend(round.reclaimed.iter().map(|j| QuotaReclaim {
                    job: j.0,
                    at_s: now.as_secs_f64(),
                }));
        }
        if decision.keep_unlisted && decision.run.is_empty() {
            // Nothing starts, moves or stops: the planner would hand the occupancy back as it
            // is (a copy of every node's free GPUs per event, at a million jobs a fifth of the
            // run).
            self.record_reasons(&decision);
        } else {
            self.plan_and_apply(policy, &decision, now)?;
        }
        // The latest decision's wish replaces earlier ones.
        self.epochs.wake_token += 1;
        if let Some(at) = decision.wake_at {
            let at = at.max(now + SimDuration::from_ms(1));
            self.push(
                at,
                EventKind::Wake {
                    token: self.epochs.wake_token,
                },
            );
        }
        Ok(())
    }

    /// Checks `decision` with the planner (the daemon's path too) and carries out its actions.
    fn plan_and_apply(
        &mut self,
        policy: &dyn Policy,
        decision: &Decision,
        now: SimTime,
    ) -> Result<(), SimError> {
        let (active, slot, partner, host, shares_seen) = (
            &self.active,
            &self.slot,
            &self.partner,
            &self.host,
            self.shares_seen,
        );
        let standing = |id: JobId| {
            let i = *slot.get(id.index())?;
            let job = active.get(i as usize).filter(|_| i != NOT_ACTIVE)?;
            Some(match job.placement() {
                // Before the first decision that shares GPUs or sets CPU/memory shares, no job has
                // a partner or a share (and the two tables are not read: a cache miss each).
                Some(placement) if !shares_seen => Standing::Running {
                    placement,
                    partner: None,
                    host: None,
                },
                Some(placement) => Standing::Running {
                    placement,
                    partner: partner[id.index()],
                    host: host[id.index()],
                },
                None => Standing::Queued,
            })
        };
        // Every running job, and no further scan once all are found.
        let running = active
            .iter()
            .filter(|j| j.is_running())
            .map(|j| j.id)
            .take(self.running);
        let plan = self
            .planner
            .plan(
                self.cluster,
                &self.specs,
                standing,
                running,
                Some(&self.occupancy),
                decision,
            )
            .map_err(|e| SimError::InvalidDecision {
                policy: policy.name(),
                at: now,
                reason: e.to_string(),
            })?;
        self.shares_seen |= self.planner.last_decision_had_shares();
        self.apply(decision, plan, now);
        Ok(())
    }

    /// Records the waiting jobs' reasons and the admissions a decision gives.
    fn record_reasons(&mut self, decision: &Decision) {
        for &(job, reason) in &decision.pending {
            if let Some(record) = self.records.get_mut(job.index()) {
                record.last_wait_reason = Some(reason);
            }
        }
        for &(job, admitted) in &decision.admitted {
            if let Some(record) = self.records.get_mut(job.index()) {
                record.admitted.get_or_insert(admitted);
            }
        }
    }

    /// Carries out a checked decision's plan. The plan's occupancy is the decision's GPU use,
    /// which the cluster has once the decision is in force. (Placements name GPU counts per node,
    /// not GPUs, so two jobs that shared a GPU may keep their placements and each run alone — on
    /// two GPUs of the node. Taking the decision's occupancy as a whole keeps such transitions
    /// exact.)
    fn apply(&mut self, decision: &Decision, plan: Plan<'_>, now: SimTime) {
        self.record_reasons(decision);
        // Stop first (preemptions and the old side of migrations), then start, so that GPUs
        // handed from one job to another are free when taken.
        for &id in &plan.preempt {
            let i = self.slot[id.index()] as usize;
            self.stop(i, now, false);
            let job = &mut self.active[i];
            job.state = RunState::Pending;
            job.pending_since = now;
            job.preemptions += 1;
        }
        // Then the old side of migrations, so that every job leaving shared GPUs has left before
        // the jobs staying on them learn their new partner (or none).
        for action in &plan.actions {
            if let Action::Migrate(a) = action {
                let i = self.slot[a.job.index()] as usize;
                self.stop(i, now, false);
                self.active[i].migrations += 1;
            }
        }
        // Kept jobs can change speed only where GPUs are shared or CPU/memory shares are set (in
        // this decision or an earlier one); classic policies never do, and skip the check.
        if self.shares_seen {
            // Every job sharing GPUs before or after is credited at its old share before any
            // partner link changes: a job credited while its ring is half re-linked would find
            // no closed ring and count the shared GPUs as its own.
            for action in &plan.actions {
                if let Action::Keep(a) | Action::Reshare(a) = action
                    && (self.partner[a.job.index()].is_some() || a.colocation.is_some())
                {
                    let index = self.slot[a.job.index()] as usize;
                    self.credit_gpu_time(index, now);
                }
            }
            for action in &plan.actions {
                if let Action::Keep(a) | Action::Reshare(a) = action {
                    self.keep(a, now);
                }
            }
        }
        for action in &plan.actions {
            if let Action::Start(a) | Action::Migrate(a) = action {
                self.start(a, now);
            }
        }
        // Muri's per-event model: a job interleaved with others loses its whole group's
        // overheads in the interval that follows.
        if self.config.overhead == OverheadModel::PerEvent && self.shares_seen {
            for action in &plan.actions {
                let id = action.assignment().job;
                let members = self.group_members(id);
                if !members.is_empty() {
                    let overhead = self.overhead_s(id)
                        + members.iter().map(|m| self.overhead_s(*m)).sum::<f64>();
                    let index = self.slot[id.index()] as usize;
                    self.active[index].startup_left_s = overhead;
                }
            }
        }
        let replaced = plan
            .occupancy
            .put_in_force(&mut self.occupancy, &plan.actions);
        self.planner.give_back(replaced, plan.actions, plan.preempt);
        self.debug_check_occupancy();
    }

    /// Debug builds: the occupancy equals the running jobs' placements, a shared placement
    /// counted once — the engine's partner links and GPU accounting agree. The check is a pass
    /// over every active job: it runs after every decision and end while at most
    /// [`DEBUG_CHECK_SPAN`] jobs are active (every test's small workload), and beyond that once
    /// every (active jobs / [`DEBUG_CHECK_SPAN`]) calls, so that its cost per event stays
    /// bounded. (At every event it made a debug-built simulation with tens of thousands of
    /// waiting jobs quadratic: three quarters of a Philly replay's time in the test suite.)
    fn debug_check_occupancy(&mut self) {
        #[cfg(debug_assertions)]
        {
            self.debug_check_credit += DEBUG_CHECK_SPAN;
            if self.debug_check_credit < self.active.len() {
                return;
            }
            self.debug_check_credit = 0;
            let mut expected = Occupancy::new(self.cluster);
            for job in &self.active {
                let Some(placement) = job
                    .placement()
                    .filter(|_| self.guest[job.id.index()].is_none())
                else {
                    continue;
                };
                let members = self.group_members(job.id);
                let counted_with_group = members.iter().any(|m| {
                    *m < job.id
                        && self.active[self.slot[m.index()] as usize].placement() == Some(placement)
                });
                if !counted_with_group {
                    let allocated = expected.allocate(placement);
                    debug_assert!(allocated.is_ok(), "running jobs over-commit: {allocated:?}");
                }
            }
            debug_assert_eq!(
                expected, self.occupancy,
                "engine occupancy differs from the running jobs"
            );
            debug_assert_eq!(
                self.running,
                self.active.iter().filter(|j| j.is_running()).count(),
                "running-job count drifted"
            );
            let waiting: Vec<u32> = (0..self.active.len() as u32)
                .filter(|&i| !self.active[i as usize].is_running())
                .collect();
            let mut listed = self.queued.clone();
            listed.sort_unstable();
            debug_assert_eq!(waiting, listed, "the waiting jobs' list drifted");
        }
    }

    /// The other jobs of `id`'s co-located group, in ring order from its partner (empty when it
    /// runs alone, or if the ring does not close).
    fn group_members(&self, id: JobId) -> Vec<JobId> {
        let mut members = Vec::new();
        let mut at = self.partner[id.index()];
        while let Some(m) = at {
            if m == id {
                return members;
            }
            if members.len() >= arbiter_model::MAX_GROUP || self.slot[m.index()] == NOT_ACTIVE {
                break;
            }
            members.push(m);
            at = self.partner[m.index()];
        }
        Vec::new()
    }

    /// The speed a job runs at under `assignment`: its speed on the GPU type, or its shared
    /// speed when co-located.
    fn speed_of(&self, assignment: &Assignment) -> f64 {
        if let Some(c) = assignment.colocation {
            return c.speed;
        }
        if let Some(g) = assignment.guest {
            return g.speed;
        }
        let spec = &self.specs[assignment.job.index()];
        // The planner refused placements a job's profile does not cover.
        let shape = spec.placement_speed(&assignment.placement).unwrap_or(1.0);
        shape
            * assignment
                .placement
                .slots
                .first()
                .and_then(|(node, _)| self.cluster.node(*node))
                .map_or(1.0, |node| {
                    let proportional = proportional_share(node);
                    spec.speed_on(node.gpu_type)
                        * spec.host_speedup(assignment.host.unwrap_or(proportional), proportional)
                })
    }

    /// The running jobs as the fair-share ledger counts them: tenant, GPUs held (a co-located
    /// job half of its), since when not yet credited.
    fn running_usage(&self) -> Vec<(&str, f64, SimTime)> {
        let running = self
            .active
            .iter()
            .filter_map(|job| Some((job, job.placement()?)));
        running
            .map(|(job, placement)| {
                let share = 1.0 / (1 + self.group_members(job.id).len()) as f64;
                (
                    self.specs[job.id.index()].tenant.as_str(),
                    placement.gpus() as f64 * share,
                    self.gpu_credited_at[job.id.index()],
                )
            })
            .collect()
    }

    /// Credits a running job's GPU-seconds up to `now` (a co-located job holds half of its
    /// GPUs), and its part of the busy and shared GPU time ([`gpu_time`]: each GPU once).
    fn credit_gpu_time(&mut self, index: usize, now: SimTime) {
        if self.config.record_timeline {
            self.record_segment(index, now);
        }
        let job = &self.active[index];
        if let RunState::Running { placement, .. } = &job.state {
            let id = job.id.index();
            let elapsed_s = now.saturating_since(self.gpu_credited_at[id]).as_secs_f64();
            let share = 1.0 / (1 + self.group_members(job.id).len()) as f64;
            let gpu_s = elapsed_s * placement.gpus() as f64 * share;
            self.records[id].gpu_s_allocated += gpu_s;
            if let Some(ledger) = self.ledger.as_mut() {
                ledger.add_run(
                    &self.specs[id].tenant,
                    placement.gpus() as f64 * share,
                    self.gpu_credited_at[id],
                    now,
                );
            }
            let sharing = match self.guest[id] {
                Some(on_held) => GpuSharing::Guest { on_held },
                None => GpuSharing::Held { share },
            };
            let counted = gpu_time(elapsed_s, placement.gpus(), sharing);
            self.records[id].busy_gpu_s += counted.busy;
            self.records[id].shared_gpu_s += counted.shared;
            self.records[id].guest_gpu_s += counted.guest;
            let price = placement
                .slots
                .first()
                .and_then(|(node, _)| self.price_per_gpu_hour.get(node.index()))
                .copied()
                .unwrap_or(1.0);
            self.records[id].cost_usd += gpu_s / 3600.0 * price;
            if self.partner[id].is_some() || self.guest[id].is_some() {
                self.records[id].colocated_s += elapsed_s;
            }
        }
        self.gpu_credited_at[job.id.index()] = now;
    }

    /// Ends the timeline of the jobs still running when the simulation stopped (a window that
    /// stops early), without crediting them: their records stay as the metrics saw them.
    fn close_timeline(&mut self) {
        if self.config.record_timeline {
            for index in 0..self.active.len() {
                self.record_segment(index, self.last_event);
            }
        }
    }

    /// Adds the running job at `index`'s segment from its last credit to `end` to the timeline.
    fn record_segment(&mut self, index: usize, end: SimTime) {
        let job = &self.active[index];
        let RunState::Running { placement, .. } = &job.state else {
            return;
        };
        let id = job.id.index();
        let start = self.gpu_credited_at[id];
        if end > start {
            let segment = RunSegment {
                job: job.id.0,
                start_s: start.as_secs_f64(),
                end_s: end.as_secs_f64(),
                slots: placement
                    .slots
                    .iter()
                    .map(|(node, gpus)| (node.0, *gpus))
                    .collect(),
                gpu_share: 1.0 / (1 + self.group_members(job.id).len()) as f64,
                guest: self.guest[id].is_some(),
                on_held: self.guest[id].unwrap_or(0),
            };
            self.timeline.push(segment);
        }
    }

    /// A running job stays on its GPUs; its partner (and so its speed) may change.
    fn keep(&mut self, assignment: &Assignment, now: SimTime) {
        let id = assignment.job;
        // Same GPUs, alone before and after, proportional CPU/memory: nothing changes. (A job
        // with a host share before and none now is re-rated below.)
        let plain = assignment.colocation.is_none()
            && assignment.host.is_none()
            && assignment.guest.is_none()
            && self.partner[id.index()].is_none();
        if plain && !self.special_rate[id.index()] {
            return;
        }
        self.special_rate[id.index()] = assignment.host.is_some()
            || assignment.colocation.is_some()
            || assignment.guest.is_some();
        self.host[id.index()] = assignment.host;
        let partner = assignment.colocation.map(|c| c.partner);
        let speed = self.speed_of(assignment);
        let index = self.slot[id.index()] as usize;
        // A guest whose GPUs another job took or left: its GPU time so far counted as it was.
        let guest = assignment.guest.map(|g| g.on_held);
        if self.guest[id.index()] != guest {
            self.credit_gpu_time(index, now);
            self.guest[id.index()] = guest;
        }
        if self.partner[id.index()] == partner && self.active[index].speed() == speed {
            return;
        }
        self.credit_gpu_time(index, now);
        self.partner[id.index()] = partner;
        let job = &mut self.active[index];
        job.account(now);
        if let RunState::Running { speed: current, .. } = &mut job.state {
            *current = speed;
        }
        self.epochs.generation[id.index()] += 1;
        self.schedule_end(id, now);
    }

    /// Ends the current stint of a running job: progress accounted, GPUs released.
    /// `release`: give the GPUs back to the occupancy (a job ending between decisions); inside
    /// [`Self::apply`] the decision's occupancy replaces it as a whole.
    fn stop(&mut self, index: usize, now: SimTime, release: bool) {
        self.credit_gpu_time(index, now);
        let id = self.active[index].id;
        // The rest of its group keeps the shared GPUs: the ring closes around the leaving job
        // (a pair's other job is alone from now on). Their GPU time is credited first, at the
        // share they had.
        let others = self.group_members(id);
        for m in &others {
            let m_index = self.slot[m.index()] as usize;
            self.credit_gpu_time(m_index, now);
        }
        let partner_keeps = match (others.first(), others.last()) {
            (Some(&next), Some(&before)) => {
                self.partner[before.index()] = (before != next).then_some(next);
                others
                    .iter()
                    .any(|m| self.active[self.slot[m.index()] as usize].is_running())
            }
            _ => false,
        };
        self.partner[id.index()] = None;
        let job = &mut self.active[index];
        job.account(now);
        if let RunState::Running { placement, .. } = &job.state
            && release
            && !partner_keeps
            && self.guest[id.index()].is_none()
        {
            // The engine only releases what it allocated, so this cannot fail; an error here
            // would be an engine bug, and the occupancy is left unchanged by a failed release.
            let released = self.occupancy.release(placement);
            debug_assert!(
                released.is_ok(),
                "engine released GPUs it did not hold: {released:?}"
            );
        }
        if job.is_running() {
            self.running -= 1;
        }
        job.state = RunState::Pending;
        self.epochs.generation[id.index()] += 1;
        self.epochs.attempt[id.index()] += 1;
        self.enqueue(id);
    }

    fn start(&mut self, assignment: &Assignment, now: SimTime) {
        let id = assignment.job;
        let placement: Placement = assignment.placement.clone();
        let overhead = self.overhead_s(id);
        self.partner[id.index()] = assignment.colocation.map(|c| c.partner);
        self.host[id.index()] = assignment.host;
        self.guest[id.index()] = assignment.guest.map(|g| g.on_held);
        self.special_rate[id.index()] = assignment.host.is_some()
            || assignment.colocation.is_some()
            || assignment.guest.is_some();
        self.gpu_credited_at[id.index()] = now;
        let index = self.slot[id.index()] as usize;
        let speed = self.speed_of(assignment);
        self.dequeue(id);
        let job = &mut self.active[index];
        job.account(now);
        if !job.is_running() {
            self.running += 1;
        }
        job.state = RunState::Running {
            placement,
            since: now,
            speed,
        };
        job.startup_left_s = overhead;
        job.first_start.get_or_insert(now);
        self.stint_start_remaining_s[id.index()] = job.remaining_s;
        self.epochs.generation[id.index()] += 1;
        self.epochs.attempt[id.index()] += 1;
        let to_finish_s = self.schedule_end(id, now);
        // Whether this attempt fails, and when: drawn once per attempt, uniform over its run.
        if let Some(f) = self
            .config
            .failures
            .filter(|f| f.probability_per_attempt > 0.0)
            && self.rng.random::<f64>() < f.probability_per_attempt
        {
            let at = now + SimDuration::from_secs_f64(to_finish_s * self.rng.random::<f64>());
            self.push(
                at,
                EventKind::Failure {
                    job: id.0,
                    attempt: self.epochs.attempt[id.index()],
                },
            );
        }
    }

    /// Pushes the completion event of a running job from its state at `now`; returns the seconds
    /// until then.
    fn schedule_end(&mut self, id: JobId, now: SimTime) -> f64 {
        let job = &self.active[self.slot[id.index()] as usize];
        let to_finish_s = match self.config.overhead {
            // Muri predicts completion without the overhead it charges at the next event.
            OverheadModel::PerEvent => job.remaining_s_at(now) / job.speed().max(f64::MIN_POSITIVE),
            _ => job.time_to_finish_s_at(now),
        };
        let generation = self.epochs.generation[id.index()];
        self.push(
            now + SimDuration::from_secs_f64_ceil(to_finish_s),
            EventKind::Completion {
                job: id.0,
                generation,
            },
        );
        to_finish_s
    }

    fn finish(&mut self, id: JobId, now: SimTime, outcome: JobOutcome, policy: &mut dyn Policy) {
        let index = self.slot[id.index()] as usize;
        if self.active[index].is_running() {
            self.stop(index, now, true);
        }
        self.dequeue(id);
        let job = self.active.swap_remove(index);
        if let Some(moved) = self.active.get(index) {
            self.slot[moved.id.index()] = index as u32;
            let at = self.queued_at[moved.id.index()];
            if at != NOT_ACTIVE {
                self.queued[at as usize] = index as u32;
            }
        }
        self.slot[id.index()] = NOT_ACTIVE;
        self.debug_check_occupancy();
        if let (Some(left), Some(w)) = (
            self.window_outstanding.as_mut(),
            self.config.stop_when_finished,
        ) && w.contains(id.0)
        {
            *left = left.saturating_sub(1);
        }
        let record = &mut self.records[id.index()];
        record.first_start_s = job.first_start.map(SimTime::as_secs_f64);
        record.finish_s = Some(now.as_secs_f64());
        record.outcome = outcome;
        // (Only a job with a deadline has a value to read from its spec, by then long out of
        // the cache: the record, in hand, says whether it has one.)
        if outcome == JobOutcome::Completed && record.deadline_s.is_some() {
            record.deadline_value = self.specs[id.index()].slo_value_at(now);
        }
        record.preemptions = job.preemptions;
        record.migrations = job.migrations;
        record.failures = job.failures;
        record.executed_s = job.executed_s;
        policy.job_finished(&self.specs[id.index()], &job, now);
        if let Some(next) = self.arrays.left(id) {
            self.activate(next, now);
        }
    }

    fn fail(&mut self, id: JobId, now: SimTime, policy: &mut dyn Policy) {
        let index = self.slot[id.index()] as usize;
        self.stop(index, now, true);
        let max_retries = self.config.failures.map_or(0, |f| f.max_retries);
        let job = &mut self.active[index];
        job.failures += 1;
        // No checkpoint inside an attempt: the work of the failed attempt is lost.
        job.remaining_s = self.stint_start_remaining_s[id.index()];
        job.pending_since = now;
        if job.failures > max_retries {
            self.finish(id, now, JobOutcome::Failed, policy);
        }
    }
}
