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

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, schedule_changes_in_order};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobSpec, SimDuration, SimTime};

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
}

/// Tiresias-L.
#[derive(Clone, Debug)]
pub struct Las {
    config: LasConfig,
    options: GreedyOptions,
    slots: Vec<QueueSlot>,
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
        })
    }

    fn attained_for_queueing(&self, job: &ActiveJob, slot: &QueueSlot, now: SimTime) -> f64 {
        (job.executed_s_at(now) - slot.executed_offset_s).max(0.0) * job.gpus as f64
    }

    /// Updates queue membership of every active job at `now`; returns the next time a running
    /// job crosses a limit or a pending job becomes due for promotion.
    fn update_queues(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Option<SimTime> {
        let last_queue = self.config.queues - 1;
        let mut next: Option<SimTime> = None;
        for job in view.jobs {
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
                };
            }
            let mut slot = self.slots[i];
            // Demotion: as many queues as the attained service has crossed. The job entered its
            // new queue when it crossed the limit, which may be before `now` if no scheduling
            // point fell on the crossing.
            while slot.queue < last_queue {
                let limit = self.config.queue_limits_gpu_s[slot.queue];
                let attained = self.attained_for_queueing(job, &slot, now);
                if attained < limit {
                    break;
                }
                let since_crossing =
                    SimDuration::from_secs_f64((attained - limit) / job.gpus as f64);
                let crossed_at = SimTime(now.as_ms().saturating_sub(since_crossing.as_ms()));
                slot.queue += 1;
                slot.entered = crossed_at.max(slot.entered).max(job.accounted_at.min(now));
            }
            if job.is_running() {
                if slot.queue < last_queue {
                    let left_gpu_s = self.config.queue_limits_gpu_s[slot.queue]
                        - self.attained_for_queueing(job, &slot, now);
                    let at = now + SimDuration::from_secs_f64_ceil(left_gpu_s / job.gpus as f64);
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
                    };
                } else if executed > 0.0 {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
            self.slots[i] = slot;
        }
        next
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
        let wake_at = self.update_queues(view, now);
        // Queue changes only matter when some job waits: without one, the next arrival is the
        // next chance for anything to change, and it triggers a scheduling point anyway.
        let anyone_waiting = view.jobs.iter().any(|j| !j.is_running());
        let wake_at = wake_at.filter(|_| anyone_waiting);
        let slots = &self.slots;
        let mut decision = schedule_changes_in_order(view, now, self.options, |job| {
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
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        if let Some(slot) = self.slots.get_mut(job.id.index()) {
            *slot = QueueSlot::default();
        }
    }
}
