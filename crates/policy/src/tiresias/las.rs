//! `las`: Tiresias-L, discretized two-dimensional least-attained-service (Gu et al., NSDI'19, §4.1).
//!
//! A job's attained service is GPUs × seconds run (2D: a wide job ages faster). Service is
//! discretized into K queues by thresholds (defaults: 3 queues with boundaries 3,250 and 7,200
//! GPU-seconds, as in Tiresias' simulator): a new job enters Q0 and is demoted to the next queue
//! when its attained service crosses the queue's limit. Queues are served in order; inside a queue,
//! jobs are FIFO by the time they entered it, and a running job keeps precedence over pending jobs
//! of its own queue (preemption happens only across queues). Placement is greedy fit-first.
//!
//! Starvation guard (Tiresias' `STARVELIMIT`, off when the factor is 0, as in its simulator): a
//! job in a lower queue that has waited `factor × its executed time` since it last ran is promoted
//! back to Q0 and its executed time for queueing purposes restarts from zero.

use crate::Current;
use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, GreedyScratch, schedule_changes_in_order_reusing};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobId, JobSpec, SimDuration, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// `las`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("las", Family::Events, "Tiresias-L: discretized 2D least-attained-service (Gu et al., NSDI'19)")
    .aliases(&["tiresias-l"])
    .paper("Tiresias (NSDI'19)")
    .detail("Tiresias-L: discretized two-dimensional least-attained-service; queues by attained GPU-seconds (`policy.las`: the first `queues` − 1 limits), FIFO by queue entry inside a queue, running jobs keep precedence in their queue, optional starvation guard; preemptive");

/// Builds `las` with its queues (checked).
pub fn build(las: &LasConfig, placing: Placing) -> Result<Las, PolicyError> {
    Las::new(las.clone(), GreedyOptions::fit_first(placing))
}

/// Tiresias-L parameters (scenario table `[policy.las]`; also Tiresias-G's queues).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LasConfig {
    /// Queue limits in GPU-seconds, increasing; a job in queue i moves to i+1 once its attained
    /// service reaches `limits[i]`. With K queues, the first K-1 limits are used.
    pub queue_limits_gpu_s: Vec<f64>,
    /// Number of queues K (≥ 1).
    pub queues: usize,
    /// Starvation factor; 0 disables the guard.
    pub starvation_factor: f64,
}

impl Default for LasConfig {
    fn default() -> Self {
        LasConfig {
            queue_limits_gpu_s: vec![3250.0, 7200.0, 18000.0],
            queues: 3,
            starvation_factor: 0.0,
        }
    }
}

/// Per-job queue bookkeeping.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct QueueSlot {
    queue: usize,
    entered: SimTime,
    /// Executed seconds not counted for queueing (reset by a starvation promotion).
    executed_offset_s: f64,
    known: bool,
    /// While the job is tracked as running: when it crosses its queue's limit, as computed when
    /// its entry in [`Las::crossings`] was made (entries that differ are stale).
    crossing: Option<SimTime>,
}

/// How far a crossing time computed at one event may be from the same job's computed at
/// another: the two differ by rounding (at most a millisecond's ceiling); a job whose kept
/// time is within this of `now` (or of the earliest) is computed again.
const CROSSING_SLACK: SimDuration = SimDuration::from_ms(1_000);

/// Tiresias-L.
#[derive(Clone, Debug)]
pub struct Las {
    config: LasConfig,
    options: GreedyOptions,
    slots: Vec<QueueSlot>,
    /// With the engine's present (and no starvation guard): the running jobs below the last
    /// queue by when they cross their queue's limit, so that an event costs the jobs that
    /// wait, start, stop or cross, not every active job. Lazily pruned (see
    /// [`QueueSlot::crossing`]).
    crossings: BinaryHeap<Reverse<(SimTime, u32)>>,
    /// Whether `crossings` holds every running job below the last queue (built at the first
    /// event with a present, dropped at one without).
    tracking: bool,
    /// The jobs the last decision listed: those that may have started since.
    listed: Vec<JobId>,
    scratch: GreedyScratch,
}

impl Las {
    /// With the given parameters and placement options.
    pub fn new(config: LasConfig, options: GreedyOptions) -> Result<Self, PolicyError> {
        if config.queues == 0 {
            return Err(PolicyError::Config("LAS needs at least one queue".into()));
        }
        if config.queue_limits_gpu_s.len() + 1 < config.queues {
            return Err(PolicyError::Config(format!(
                "{} queues need {} limits, got {}",
                config.queues,
                config.queues - 1,
                config.queue_limits_gpu_s.len()
            )));
        }
        if config.queue_limits_gpu_s.windows(2).any(|w| w[0] >= w[1]) {
            return Err(PolicyError::Config("LAS queue limits must increase".into()));
        }
        Ok(Las {
            config,
            options: GreedyOptions {
                preemptive: true,
                head_of_line_blocking: false,
                ..options
            },
            slots: Vec::new(),
            crossings: BinaryHeap::new(),
            tracking: false,
            listed: Vec::new(),
            scratch: GreedyScratch::default(),
        })
    }

    fn attained_for_queueing(&self, job: &ActiveJob, slot: &QueueSlot, now: SimTime) -> f64 {
        (job.executed_s_at(now) - slot.executed_offset_s).max(0.0) * job.gpus as f64
    }

    /// The job's slot, made on first sight (queue 0, entered at submission).
    fn slot_of(&mut self, job: &ActiveJob) -> QueueSlot {
        let i = job.id.index();
        if i >= self.slots.len() {
            self.slots.resize(i + 1, QueueSlot::default());
        }
        if !self.slots[i].known {
            self.slots[i] = QueueSlot {
                queue: 0,
                entered: job.submit,
                executed_offset_s: 0.0,
                known: true,
                crossing: None,
            };
        }
        self.slots[i]
    }

    /// Demotion: as many queues as the attained service has crossed. The job entered its new
    /// queue when it crossed the limit, which may be before `now` if no scheduling point fell
    /// on the crossing.
    fn demote(&self, job: &ActiveJob, slot: &mut QueueSlot, now: SimTime) {
        let last_queue = self.config.queues - 1;
        while slot.queue < last_queue {
            let limit = self.config.queue_limits_gpu_s[slot.queue];
            let attained = self.attained_for_queueing(job, slot, now);
            if attained < limit {
                break;
            }
            let since_crossing = SimDuration::from_secs_f64((attained - limit) / job.gpus as f64);
            let crossed_at = SimTime(now.as_ms().saturating_sub(since_crossing.as_ms()));
            slot.queue += 1;
            slot.entered = crossed_at.max(slot.entered).max(job.accounted_at.min(now));
        }
    }

    /// When running job `job` reaches its queue's limit, computed at `now`; `None` in the last
    /// queue.
    fn crossing_at(&self, job: &ActiveJob, slot: &QueueSlot, now: SimTime) -> Option<SimTime> {
        (slot.queue < self.config.queues - 1).then(|| {
            let left_gpu_s = self.config.queue_limits_gpu_s[slot.queue]
                - self.attained_for_queueing(job, slot, now);
            now + SimDuration::from_secs_f64_ceil(left_gpu_s / job.gpus as f64)
        })
    }

    /// Updates queue membership of every active job at `now`; returns the next time a running
    /// job crosses a limit or a pending job becomes due for promotion.
    fn update_queues(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Option<SimTime> {
        let mut next: Option<SimTime> = None;
        for job in view.jobs {
            let mut slot = self.slot_of(job);
            self.demote(job, &mut slot, now);
            if job.is_running() {
                if let Some(at) = self.crossing_at(job, &slot, now) {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            } else if self.config.starvation_factor > 0.0 && slot.queue > 0 {
                let executed = (job.executed_s_at(now) - slot.executed_offset_s).max(0.0);
                let due = job.pending_since
                    + SimDuration::from_secs_f64(executed * self.config.starvation_factor);
                if executed > 0.0 && now >= due {
                    slot = QueueSlot {
                        queue: 0,
                        entered: now,
                        executed_offset_s: job.executed_s_at(now),
                        known: true,
                        crossing: None,
                    };
                } else if executed > 0.0 {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
            self.slots[job.id.index()] = slot;
        }
        next
    }

    /// [`Las::update_queues`] with the engine's present and its jobs' positions: the same
    /// queues and the same answer, at the cost of the jobs that wait, started or cross a limit.
    /// A waiting job's attained service does not change, so its queue does not either once
    /// brought up to date after it last ran; a running job's crossing time is kept in a heap
    /// and only the jobs whose time is near are computed again.
    fn update_queues_by_changes(
        &mut self,
        view: &SchedulerView<'_>,
        current: Current<'_>,
        positions: &[u32],
        now: SimTime,
    ) -> Option<SimTime> {
        let job_of = |id: u32| {
            positions
                .get(id as usize)
                .and_then(|&at| view.jobs.get(at as usize))
        };
        if !self.tracking {
            let next = self.update_queues(view, now);
            self.crossings.clear();
            for job in view.jobs.iter().filter(|j| j.is_running()) {
                self.track(job, now);
            }
            self.tracking = true;
            return next;
        }
        // Waiting: new jobs get their slot; a job that ran since it was last brought up to date
        // (stopped by the last decision, or failed) is brought up to date once.
        for &at in current.queued {
            let Some(job) = view.jobs.get(at as usize) else {
                continue;
            };
            let mut slot = self.slot_of(job);
            if slot.crossing.take().is_some() {
                self.demote(job, &mut slot, now);
            }
            self.slots[job.id.index()] = slot;
        }
        // Started by the last decision: tracked from now.
        for id in std::mem::take(&mut self.listed) {
            if let Some(job) = job_of(id.0).filter(|j| j.is_running())
                && self
                    .slots
                    .get(id.index())
                    .is_some_and(|s| s.crossing.is_none())
            {
                self.track(job, now);
            }
        }
        // Near their crossing, and the earliest with those near it: computed again at `now`, as
        // the whole pass computes them (a time kept since differs by rounding only).
        let mut next: Option<SimTime> = None;
        let mut again = Vec::new();
        while let Some(&Reverse((kept_at, id))) = self.crossings.peek() {
            // (Until one is found, the earliest kept is computed again whatever its time.)
            if kept_at > now + CROSSING_SLACK
                && next.is_some_and(|n| kept_at > n.max(now) + CROSSING_SLACK)
            {
                break;
            }
            self.crossings.pop();
            let Some(slot) = self.slots.get(id as usize).copied() else {
                continue;
            };
            if slot.crossing != Some(kept_at) {
                continue;
            }
            match job_of(id).filter(|j| j.is_running()) {
                Some(job) => {
                    let mut slot = slot;
                    self.demote(job, &mut slot, now);
                    slot.crossing = self.crossing_at(job, &slot, now);
                    if let Some(at) = slot.crossing {
                        next = Some(next.map_or(at, |n| n.min(at)));
                        again.push(Reverse((at, id)));
                    }
                    self.slots[id as usize] = slot;
                }
                None => {
                    // Ended (its slot is reset) or stopped without showing as waiting.
                    if let Some(job) = job_of(id) {
                        let mut slot = slot;
                        self.demote(job, &mut slot, now);
                        slot.crossing = None;
                        self.slots[id as usize] = slot;
                    }
                }
            }
        }
        self.crossings.extend(again);
        next
    }

    /// Brings running job `job` up to date and keeps its crossing time.
    fn track(&mut self, job: &ActiveJob, now: SimTime) {
        let mut slot = self.slot_of(job);
        self.demote(job, &mut slot, now);
        slot.crossing = self.crossing_at(job, &slot, now);
        if let Some(at) = slot.crossing {
            self.crossings.push(Reverse((at, job.id.0)));
        }
        self.slots[job.id.index()] = slot;
    }
}

impl Policy for Las {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let (wake_at, anyone_waiting) = match view.current {
            Some(current)
                if self.config.starvation_factor == 0.0
                    && let Some(positions) = current.positions =>
            {
                let wake_at = self.update_queues_by_changes(view, current, positions, now);
                (wake_at, !current.queued.is_empty())
            }
            _ => {
                self.tracking = false;
                let wake_at = self.update_queues(view, now);
                (wake_at, view.jobs.iter().any(|j| !j.is_running()))
            }
        };
        // Queue changes only matter when some job waits: without one, the next arrival is the
        // next chance for anything to change, and it triggers a scheduling point anyway.
        let wake_at = wake_at.filter(|_| anyone_waiting);
        let slots = &self.slots;
        let (scratch, options) = (&mut self.scratch, self.options);
        let mut decision = schedule_changes_in_order_reusing(scratch, view, now, options, |job| {
            let slot = &slots[job.id.index()];
            // (queue, pending after running, queue entry, submission) packed into one integer:
            // 8 + 1 + 55 bits (ms, ~1,100 years) + 64 bits; sorting integers is what makes a
            // scheduling point cheap.
            let entered = slot.entered.as_ms().min((1 << 55) - 1) as u128;
            ((slot.queue.min(255) as u128) << 120)
                | (u128::from(!job.is_running()) << 119)
                | (entered << 64)
                | u128::from(job.submit.as_ms())
        });
        decision.wake_at = wake_at;
        if self.tracking {
            self.listed.clear();
            self.listed.extend(decision.run.iter().map(|a| a.job));
        }
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        if let Some(slot) = self.slots.get_mut(job.id.index()) {
            *slot = QueueSlot::default();
        }
    }
}
