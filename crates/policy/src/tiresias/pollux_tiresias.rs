//! `pollux-tiresias`: Tiresias as Pollux's simulator runs it (OSDI'21 artifact,
//! `simulator/tiresias.py`), the baseline behind Pollux's published Tiresias numbers. Not the
//! paper's mechanism (`las`) nor Muri's variant (`dlas-gpu`):
//!
//! - two queues; a job is demoted once its executed time × GPUs reaches 16 GPU-hours, to the
//!   tail of the second queue; no promotion back (the artifact's starvation guard is off);
//! - executed time is wall time in the running state, counted at each scheduling point (so it
//!   includes the restart delay);
//! - new jobs join the first queue's tail in submission order;
//! - the queues are scanned in order and every job whose GPU count still fits in the cluster's
//!   remaining count runs (counting only, jobs that do not fit are skipped, not blocking);
//! - a job that keeps running keeps its GPUs; the others get GPUs most-free-node first
//!   ([`crate::mechanisms::elastic`]), so a job may be spread over nodes and run slower (its profile says).
//!
//! Jobs run with their requested GPU count (an elastic job's range is not used).

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::elastic::place_counts;
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{Decision, JobId, PendingReason, SimTime};

/// `pollux-tiresias`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("pollux-tiresias", Family::OtherRounds, "Tiresias as Pollux's simulator runs it: 2 queues at 16 GPU-hours, FIFO inside, requested GPUs, most-free-node placement (OSDI'21 artifact)")
    .paper("Pollux (OSDI'21) artifact")
    .detail("Tiresias as Pollux's simulator runs it (its `tiresias.py`): two queues, demotion at 16 GPU-hours of executed time × GPUs, FIFO inside, jobs with their requested GPUs and batch size, scanned by GPU count (a job that does not fit is skipped), running jobs keep their GPUs, new ones take the most-free nodes first (and may be spread, running slower as their profile says)");

/// Builds `pollux-tiresias`: the artifact's threshold, its own placement (no parameters).
pub fn build(_: Placing) -> Result<PolluxTiresias, PolicyError> {
    PolluxTiresias::new(QUEUE_THRESHOLD_GPU_S)
}

/// The artifact's demotion threshold: 16 GPU-hours.
pub const QUEUE_THRESHOLD_GPU_S: f64 = 16.0 * 3600.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Unknown,
    Pending,
    Running,
}

/// Pollux's Tiresias baseline.
#[derive(Clone, Debug)]
pub struct PolluxTiresias {
    threshold_gpu_s: f64,
    queues: [Vec<JobId>; 2],
    status: Vec<Status>,
    last_check: Vec<SimTime>,
    executed_s: Vec<f64>,
}

impl PolluxTiresias {
    /// With a demotion threshold in GPU-seconds (the artifact: [`QUEUE_THRESHOLD_GPU_S`]).
    pub fn new(threshold_gpu_s: f64) -> Result<Self, PolicyError> {
        if !(threshold_gpu_s.is_finite() && threshold_gpu_s > 0.0) {
            return Err(PolicyError::Config(format!(
                "pollux-tiresias needs a positive queue threshold, got {threshold_gpu_s} GPU-s"
            )));
        }
        Ok(PolluxTiresias {
            threshold_gpu_s,
            queues: [Vec::new(), Vec::new()],
            status: Vec::new(),
            last_check: Vec::new(),
            executed_s: Vec::new(),
        })
    }

    fn grow(&mut self, n: usize) {
        if self.status.len() < n {
            self.status.resize(n, Status::Unknown);
            self.last_check.resize(n, SimTime::ZERO);
            self.executed_s.resize(n, 0.0);
        }
    }
}

impl Policy for PolluxTiresias {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.grow(view.specs.len());
        let mut jobs: Vec<_> = view.jobs.iter().collect();
        jobs.sort_by_key(|j| j.id);
        let mut active = vec![false; view.specs.len()];
        for j in &jobs {
            active[j.id.index()] = true;
        }
        for queue in &mut self.queues {
            queue.retain(|id| active[id.index()]);
        }
        for j in &jobs {
            if self.status[j.id.index()] == Status::Unknown {
                self.status[j.id.index()] = Status::Pending;
                self.queues[0].push(j.id);
            }
        }
        for j in &jobs {
            let i = j.id.index();
            let elapsed_s = now.saturating_since(self.last_check[i]).as_secs_f64();
            self.last_check[i] = now;
            if self.status[i] == Status::Running {
                self.executed_s[i] += elapsed_s;
                let gpu_s = self.executed_s[i] * f64::from(view.specs[i].gpus);
                if gpu_s >= self.threshold_gpu_s
                    && let Some(at) = self.queues[0].iter().position(|id| *id == j.id)
                {
                    self.queues[0].remove(at);
                    self.queues[1].push(j.id);
                }
            }
        }
        // Which jobs run: by count, in queue order.
        let mut left = view.cluster.total_gpus();
        let mut pending = Vec::new();
        for queue in &self.queues {
            for &id in queue {
                let gpus = view.specs[id.index()].gpus;
                if gpus <= left {
                    self.status[id.index()] = Status::Running;
                    left -= gpus;
                } else {
                    self.status[id.index()] = Status::Pending;
                    let reason = if gpus > view.cluster.total_gpus() {
                        PendingReason::NeverFits
                    } else {
                        PendingReason::LowerPriority
                    };
                    pending.push((id, reason));
                }
            }
        }
        // Where: running jobs keep their GPUs; the others, in queue order, most-free first
        // (counting guarantees the GPUs are there).
        let counts: Vec<(JobId, u32)> = self
            .queues
            .iter()
            .flatten()
            .filter(|id| self.status[id.index()] == Status::Running)
            .map(|id| (*id, view.specs[id.index()].gpus))
            .collect();
        let run = place_counts(view.cluster, &jobs, &counts);
        Ok(Decision {
            run,
            pending,
            ..Decision::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cluster, running, spec_with};
    use arbiter_model::{ActiveJob, NodeId, Placement};

    #[test]
    fn a_job_past_sixteen_gpu_hours_yields_to_a_newcomer() {
        let cluster = cluster(1, 4);
        let specs = vec![spec_with(0, 0, 4, 1e6), spec_with(1, 0, 4, 1e6)];
        let mut policy = PolluxTiresias::new(QUEUE_THRESHOLD_GPU_S).expect("valid");
        // Job 0 alone: it runs.
        let mut jobs = vec![ActiveJob::submitted(JobId(0), 4, SimTime::ZERO, 1e6)];
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::from_ms((60) * 1000),
            )
            .expect("ok");
        assert_eq!(d.run.len(), 1);
        jobs[0] = running(
            jobs[0].clone(),
            Placement::single(NodeId(0), 4),
            SimTime::from_ms((60) * 1000),
        );
        // Job 1 arrives; job 0 has run 3 h 59 min (15.9 GPU-h): it keeps the GPUs.
        jobs.push(ActiveJob::submitted(
            JobId(1),
            4,
            SimTime::from_ms((100) * 1000),
            1e6,
        ));
        let t = SimTime::from_ms((60 + 4 * 3600 - 60) * 1000);
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                t,
            )
            .expect("ok");
        assert_eq!(
            d.run.iter().map(|a| a.job).collect::<Vec<_>>(),
            vec![JobId(0)]
        );
        assert_eq!(d.pending, vec![(JobId(1), PendingReason::LowerPriority)]);
        // A minute later it reaches 16 GPU-h: demoted behind job 1, which takes the node.
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                t + arbiter_model::SimDuration::from_secs(60),
            )
            .expect("ok");
        assert_eq!(
            d.run.iter().map(|a| a.job).collect::<Vec<_>>(),
            vec![JobId(1)]
        );
    }

    #[test]
    fn jobs_that_do_not_fit_are_skipped_and_spread_jobs_take_the_emptiest_nodes() {
        let cluster = cluster(3, 4);
        let specs = vec![
            spec_with(0, 0, 6, 100.0),
            spec_with(1, 0, 8, 100.0),
            spec_with(2, 0, 5, 100.0),
        ];
        let jobs: Vec<_> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, SimTime::ZERO, 100.0))
            .collect();
        let mut policy = PolluxTiresias::new(QUEUE_THRESHOLD_GPU_S).expect("valid");
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::from_ms((60) * 1000),
            )
            .expect("ok");
        // 12 GPUs: job 0 (6) runs on the two emptiest nodes; job 1 (8) does not fit in the 6
        // left and is skipped, not blocking job 2 (5), which takes node 2 and node 1's last GPU.
        assert_eq!(d.run.len(), 2);
        assert_eq!(
            d.run[0].placement.slots.as_slice(),
            &[(NodeId(0), 4), (NodeId(1), 2)]
        );
        assert_eq!(
            d.run[1].placement.slots.as_slice(),
            &[(NodeId(1), 1), (NodeId(2), 4)]
        );
        assert_eq!(d.pending, vec![(JobId(1), PendingReason::LowerPriority)]);
    }
}
