//! `dlas-gpu`: Tiresias-L as the simulators of Tiresias and Muri (SIGCOMM'22) run it
//! (`dlas_sim_jobs` in Muri's `simulator/run_sim.py`), which is how Muri's Tiresias-L numbers
//! were produced. `las` is the paper's mechanism; this one reproduces the reference code, whose
//! queue order is not a sort key but the history of list operations:
//!
//! - three queues with limits of 3,250 and 7,200 GPU-seconds of attained service (seconds run ×
//!   GPUs, the per-event overhead included); no starvation guard;
//! - a new job joins the tail of Q0 (arrival order);
//! - at each scheduling point, each job that was running is demoted *one* level if its attained
//!   service reached its queue's limit, to the *tail* of the next queue (behind the jobs waiting
//!   there), visiting jobs in arrival order;
//! - the queues are scanned in order and each job that fits in the remaining GPU count runs
//!   (pure counting, any GPUs: Muri's `count` placement); one that does not is skipped;
//! - then each queue is stably partitioned: the jobs that run first, in their previous order,
//!   the others after — so a job preempted now heads its queue's waiting part, and a job that
//!   starts goes behind the jobs that were already running;
//! - a demotion timer wakes the scheduler when a running job's executed seconds reach
//!   `ceil(limit / GPUs)`, whether or not anything waits (each such point charges the per-event
//!   overhead to the running jobs, as in the reference).

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::tiresias::las::LasConfig;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{
    ActiveJob, Assignment, Decision, JobId, JobSpec, PendingReason, SimDuration, SimTime,
};

/// `dlas-gpu`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("dlas-gpu", Family::Events, "Tiresias-L as the Tiresias/Muri simulators run it (queue-list order, GPU counting; Muri SIGCOMM'22)")
    .paper("Muri (SIGCOMM'22) artifact")
    .detail("Tiresias-L as the Tiresias and Muri simulators run it (`dlas_sim_jobs`): the same queues, but the order inside a queue is the history of list operations — arrivals at the tail of Q0, a demoted job at the tail of its new queue (behind the jobs waiting there), after each pass the jobs that run first and the rest after, each in their previous order (a preempted job heads the waiting part); at most one demotion per job per scheduling point, demotion timers at `ceil(limit / GPUs)` seconds run whether or not anyone waits; pure GPU counting, any GPUs; no starvation guard; preemptive. Use it to compare with Muri's Tiresias-L numbers (the order alone moves average JCT by 10–14%)");

/// Builds `dlas-gpu` with Tiresias-L's queues (checked). It counts GPUs, as those simulators do,
/// so it ignores the placement strategy.
pub fn build(las: &LasConfig, _: Placing) -> Result<DlasGpu, PolicyError> {
    DlasGpu::new(las)
}

/// Where a job is: its queue, or not known (finished, or not seen yet).
const UNKNOWN: u8 = u8::MAX;

/// Muri's `dlas-gpu`.
#[derive(Clone, Debug)]
pub struct DlasGpu {
    /// Queue limits in GPU-seconds (the first `queues - 1` are used).
    limits_gpu_s: Vec<f64>,
    /// The queues, each a list of jobs in scan order.
    queues: Vec<Vec<JobId>>,
    /// Per job id: its queue, or [`UNKNOWN`].
    queue_of: Vec<u8>,
    /// Scratch, kept between scheduling points (they come at every event): per job id, its
    /// index in the view (`u32::MAX`: none) and whether it runs after this decision.
    position: Vec<u32>,
    runs: Vec<bool>,
    waiting: Vec<JobId>,
}

impl DlasGpu {
    /// With the queue limits and count of `config` (Muri: 3 queues, 3,250 and 7,200 GPU-s).
    pub fn new(config: &LasConfig) -> Result<Self, PolicyError> {
        if config.queues == 0 || config.queues >= UNKNOWN as usize {
            return Err(PolicyError::Config(format!(
                "dlas-gpu needs 1 to {} queues, got {}",
                UNKNOWN - 1,
                config.queues
            )));
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
            return Err(PolicyError::Config(
                "dlas-gpu queue limits must increase".into(),
            ));
        }
        Ok(DlasGpu {
            limits_gpu_s: config.queue_limits_gpu_s[..config.queues - 1].to_vec(),
            queues: vec![Vec::new(); config.queues],
            queue_of: Vec::new(),
            position: Vec::new(),
            runs: Vec::new(),
            waiting: Vec::new(),
        })
    }

    fn queue(&self, id: JobId) -> u8 {
        self.queue_of.get(id.index()).copied().unwrap_or(UNKNOWN)
    }

    fn set_queue(&mut self, id: JobId, queue: u8) {
        if self.queue_of.len() <= id.index() {
            self.queue_of.resize(id.index() + 1, UNKNOWN);
        }
        self.queue_of[id.index()] = queue;
    }
}

impl Policy for DlasGpu {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        // Arrivals: to the tail of Q0, in arrival order.
        let mut arrivals: Vec<&ActiveJob> = view
            .jobs
            .iter()
            .filter(|j| self.queue(j.id) == UNKNOWN)
            .collect();
        arrivals.sort_by_key(|j| (j.submit, j.id));
        for job in arrivals {
            self.set_queue(job.id, 0);
            self.queues[0].push(job.id);
        }
        // Demotions of the jobs that ran, one level each, in arrival (job id) order.
        let mut ran: Vec<&ActiveJob> = view.jobs.iter().filter(|j| j.is_running()).collect();
        ran.sort_by_key(|j| j.id);
        for job in ran {
            let queue = self.queue(job.id) as usize;
            let Some(limit) = self.limits_gpu_s.get(queue) else {
                continue;
            };
            if job.executed_s_at(now) * job.gpus as f64 >= *limit {
                self.queues[queue].retain(|id| *id != job.id);
                self.queues[queue + 1].push(job.id);
                self.set_queue(job.id, (queue + 1) as u8);
            }
        }
        // The scan: whoever fits in the GPUs left runs, on any GPUs.
        if self.position.len() < self.queue_of.len() {
            self.position.resize(self.queue_of.len(), u32::MAX);
            self.runs.resize(self.queue_of.len(), false);
        }
        for (i, job) in view.jobs.iter().enumerate() {
            self.position[job.id.index()] = i as u32;
        }
        let mut placer = Placer::new(view.cluster, PlacementStrategy::Anywhere);
        let mut decision = Decision {
            run: Vec::with_capacity(view.jobs.len().min(placer.free_total() as usize)),
            ..Decision::default()
        };
        let mut wake_at: Option<SimTime> = None;
        for (queue, list) in self.queues.iter().enumerate() {
            for id in list {
                let Some(job) = view.jobs.get(self.position[id.index()] as usize) else {
                    continue;
                };
                if placer.free_total() < job.gpus {
                    decision
                        .pending
                        .push((job.id, PendingReason::InsufficientGpus));
                    continue;
                }
                match placer.place(view.spec(job), job.pending_since, now) {
                    Ok(placement) => {
                        decision.run.push(Assignment::exclusive(job.id, placement));
                        self.runs[id.index()] = true;
                        if let Some(at_s) = self
                            .limits_gpu_s
                            .get(queue)
                            .map(|limit| (limit / job.gpus.max(1) as f64).ceil())
                        {
                            let at = now
                                + SimDuration::from_secs_f64_ceil(
                                    (at_s - job.executed_s_at(now)).max(0.0),
                                );
                            wake_at = Some(wake_at.map_or(at, |w| w.min(at)));
                        }
                    }
                    Err(reason) => decision.pending.push((job.id, reason)),
                }
            }
        }
        // Each queue: the jobs that run first, then the others, each part in its previous order.
        for list in &mut self.queues {
            self.waiting.clear();
            let runs = &self.runs;
            let waiting = &mut self.waiting;
            list.retain(|id| {
                runs[id.index()] || {
                    waiting.push(*id);
                    false
                }
            });
            list.extend_from_slice(waiting);
        }
        for job in view.jobs {
            self.position[job.id.index()] = u32::MAX;
        }
        for a in &decision.run {
            self.runs[a.job.index()] = false;
        }
        decision.wake_at = wake_at;
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        let queue = self.queue(job.id);
        if let Some(list) = self.queues.get_mut(queue as usize) {
            list.retain(|id| *id != job.id);
        }
        if let Some(q) = self.queue_of.get_mut(job.id.index()) {
            *q = UNKNOWN;
        }
    }
}
