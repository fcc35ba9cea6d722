//! The state of a job between submission and completion, shared by the simulator and the daemon.

use crate::decision::Placement;
use crate::ids::JobId;
use crate::time::SimTime;
use serde::{Deserialize, Serialize};

/// Whether an active job holds GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RunState {
    /// Waiting for GPUs (never started, preempted, or requeued after a failure).
    Pending,
    /// Holding GPUs.
    Running {
        /// Where.
        placement: Placement,
        /// When this stint started.
        since: SimTime,
        /// Progress per wall-clock second on these GPUs, relative to the job's reference speed
        /// (1.0 for homogeneous clusters; the throughput ratio on heterogeneous ones).
        speed: f64,
    },
}

/// A submitted, unfinished job with its progress. Progress is stored as of `accounted_at` and
/// extrapolated on demand, so an idle scheduling point costs nothing per running job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActiveJob {
    /// The job.
    pub id: JobId,
    /// GPUs in its gang (copied from the spec for cache-friendly policy loops).
    pub gpus: u32,
    /// Submission time (copied from the spec).
    pub submit: SimTime,
    /// Pending or running.
    pub state: RunState,
    /// Work left, in seconds at full speed, as of `accounted_at`.
    pub remaining_s: f64,
    /// Wall-clock seconds the job has held GPUs, as of `accounted_at` (Tiresias' "executed time").
    pub executed_s: f64,
    /// Start-up seconds still to pay before progress resumes, as of `accounted_at`.
    pub startup_left_s: f64,
    /// When progress was last brought up to date.
    pub accounted_at: SimTime,
    /// When the job last became pending (submission, preemption or failure).
    pub pending_since: SimTime,
    /// First time it got GPUs.
    pub first_start: Option<SimTime>,
    /// Times it was stopped to make room for others.
    pub preemptions: u32,
    /// Times it was moved to other GPUs while running.
    pub migrations: u32,
    /// Times it failed and was retried.
    pub failures: u32,
}

impl ActiveJob {
    /// A freshly submitted job with `run_time_s` of work.
    pub fn submitted(id: JobId, gpus: u32, submit: SimTime, run_time_s: f64) -> Self {
        ActiveJob {
            id,
            gpus,
            submit,
            state: RunState::Pending,
            remaining_s: run_time_s,
            executed_s: 0.0,
            startup_left_s: 0.0,
            accounted_at: submit,
            pending_since: submit,
            first_start: None,
            preemptions: 0,
            migrations: 0,
            failures: 0,
        }
    }

    /// Whether the job holds GPUs.
    #[inline]
    pub fn is_running(&self) -> bool {
        matches!(self.state, RunState::Running { .. })
    }

    /// Its placement, if running.
    #[inline]
    pub fn placement(&self) -> Option<&Placement> {
        match &self.state {
            RunState::Running { placement, .. } => Some(placement),
            RunState::Pending => None,
        }
    }

    fn elapsed_s(&self, now: SimTime) -> f64 {
        if self.is_running() {
            now.saturating_since(self.accounted_at).as_secs_f64()
        } else {
            0.0
        }
    }

    /// Current speed: progress per wall second (0 when pending).
    #[inline]
    pub fn speed(&self) -> f64 {
        match self.state {
            RunState::Running { speed, .. } => speed,
            RunState::Pending => 0.0,
        }
    }

    /// Work left at `now` (seconds at reference speed), never negative.
    #[inline]
    pub fn remaining_s_at(&self, now: SimTime) -> f64 {
        let progress = (self.elapsed_s(now) - self.startup_left_s).max(0.0) * self.speed();
        (self.remaining_s - progress).max(0.0)
    }

    /// Wall seconds from `now` until the job would finish if it kept running undisturbed
    /// (start-up still owed plus work left at its current speed). For a pending job: the time it
    /// would need once started at reference speed, excluding a new start-up cost.
    #[inline]
    pub fn time_to_finish_s_at(&self, now: SimTime) -> f64 {
        let startup_owed = (self.startup_left_s - self.elapsed_s(now)).max(0.0);
        let speed = if self.is_running() { self.speed() } else { 1.0 };
        if speed <= 0.0 {
            return f64::INFINITY;
        }
        startup_owed + self.remaining_s_at(now) / speed
    }

    /// Seconds the job has held GPUs, at `now`.
    #[inline]
    pub fn executed_s_at(&self, now: SimTime) -> f64 {
        self.executed_s + self.elapsed_s(now)
    }

    /// GPU-seconds of service attained at `now` (Tiresias' two-dimensional attained service).
    #[inline]
    pub fn attained_gpu_s_at(&self, now: SimTime) -> f64 {
        self.executed_s_at(now) * self.gpus as f64
    }

    /// Brings progress up to `now` (idempotent).
    pub fn account(&mut self, now: SimTime) {
        if self.is_running() {
            let elapsed = self.elapsed_s(now);
            let progress = (elapsed - self.startup_left_s).max(0.0) * self.speed();
            self.startup_left_s = (self.startup_left_s - elapsed).max(0.0);
            self.remaining_s = (self.remaining_s - progress).max(0.0);
            self.executed_s += elapsed;
        }
        self.accounted_at = self.accounted_at.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::NodeId;

    #[test]
    fn progress_waits_for_startup_then_runs_at_full_speed() {
        let mut job = ActiveJob::submitted(JobId(0), 2, SimTime::ZERO, 100.0);
        job.state = RunState::Running {
            placement: Placement::single(NodeId(0), 2),
            since: SimTime::ZERO,
            speed: 1.0,
        };
        job.startup_left_s = 10.0;
        assert_eq!(job.remaining_s_at(SimTime::from_ms(5_000)), 100.0);
        assert_eq!(job.remaining_s_at(SimTime::from_ms(30_000)), 80.0);
        assert_eq!(job.attained_gpu_s_at(SimTime::from_ms(30_000)), 60.0);
        job.account(SimTime::from_ms(30_000));
        assert_eq!(
            (job.remaining_s, job.startup_left_s, job.executed_s),
            (80.0, 0.0, 30.0)
        );
        assert_eq!(job.remaining_s_at(SimTime::from_ms(200_000)), 0.0);
    }

    #[test]
    fn a_slower_gpu_stretches_the_time_to_finish() {
        let mut job = ActiveJob::submitted(JobId(0), 1, SimTime::ZERO, 100.0);
        job.state = RunState::Running {
            placement: Placement::single(NodeId(0), 1),
            since: SimTime::ZERO,
            speed: 0.25,
        };
        assert_eq!(job.time_to_finish_s_at(SimTime::ZERO), 400.0);
        assert_eq!(job.remaining_s_at(SimTime::from_ms(40_000)), 90.0);
    }
}
