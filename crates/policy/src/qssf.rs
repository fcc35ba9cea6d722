//! `qssf`: Helios' quasi-shortest-service-first (Hu et al., SC'21, §5).
//!
//! Jobs are ordered by *predicted* GPU time (predicted duration × GPUs), smallest first,
//! non-preemptive, fit-first. The prediction is learned online from finished jobs only (no
//! oracle): the mean duration of the most recent finished jobs that share the most specific
//! available key, trying in turn (tenant, user, job name, GPUs), (tenant, user, GPUs),
//! (tenant, GPUs), (tenant) and finally all jobs. Before anything has finished, every job is
//! predicted equal and the order falls back to submission time.

use crate::greedy::{GreedyOptions, schedule_in_order};
use crate::{order_key, Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobSpec, SimTime};
use std::collections::{BTreeMap, VecDeque};

/// How many recent durations each history key keeps.
pub const DEFAULT_HISTORY: usize = 16;

#[derive(Clone, Debug, Default)]
struct Recent {
    durations_s: VecDeque<f64>,
    sum_s: f64,
}

impl Recent {
    fn push(&mut self, duration_s: f64, window: usize) {
        self.durations_s.push_back(duration_s);
        self.sum_s += duration_s;
        while self.durations_s.len() > window {
            if let Some(old) = self.durations_s.pop_front() {
                self.sum_s -= old;
            }
        }
    }
    fn mean(&self) -> Option<f64> {
        (!self.durations_s.is_empty()).then(|| self.sum_s / self.durations_s.len() as f64)
    }
}

/// Helios' QSSF with an online duration predictor.
#[derive(Clone, Debug)]
pub struct Qssf {
    options: GreedyOptions,
    window: usize,
    history: BTreeMap<Vec<String>, Recent>,
    /// Prediction per job id, refreshed when history changes.
    predicted_gpu_s: Vec<f64>,
    generation: u64,
    predicted_at_generation: Vec<u64>,
}

impl Qssf {
    /// With placement options and the number of recent jobs per key.
    pub fn new(options: GreedyOptions, window: usize) -> Self {
        Qssf {
            options: GreedyOptions { preemptive: false, head_of_line_blocking: false, ..options },
            window: window.max(1),
            history: BTreeMap::new(),
            predicted_gpu_s: Vec::new(),
            generation: 1,
            predicted_at_generation: Vec::new(),
        }
    }

    fn keys(spec: &JobSpec) -> [Vec<String>; 5] {
        let user = spec.user.clone().unwrap_or_default();
        let name = spec.name.clone().unwrap_or_default();
        let gpus = spec.gpus.to_string();
        let t = spec.tenant.clone();
        [
            vec!["tun".into(), t.clone(), user.clone(), name, gpus.clone()],
            vec!["tu".into(), t.clone(), user, gpus.clone()],
            vec!["tg".into(), t.clone(), gpus],
            vec!["t".into(), t],
            vec!["all".into()],
        ]
    }

    /// Predicted duration in seconds, or `None` with no history at all.
    pub fn predict_duration_s(&self, spec: &JobSpec) -> Option<f64> {
        Self::keys(spec).iter().find_map(|k| self.history.get(k).and_then(Recent::mean))
    }
}

impl Policy for Qssf {
    fn name(&self) -> &'static str {
        "qssf"
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, PolicyError> {
        for job in view.jobs.iter().filter(|j| !j.is_running()) {
            let i = job.id.index();
            if i >= self.predicted_gpu_s.len() {
                self.predicted_gpu_s.resize(i + 1, 0.0);
                self.predicted_at_generation.resize(i + 1, 0);
            }
            if self.predicted_at_generation[i] != self.generation {
                let spec = view.spec(job);
                self.predicted_gpu_s[i] = self.predict_duration_s(spec).unwrap_or(0.0) * spec.gpus as f64;
                self.predicted_at_generation[i] = self.generation;
            }
        }
        let predicted = &self.predicted_gpu_s;
        Ok(schedule_in_order(view, now, self.options, |job| {
            (order_key(predicted.get(job.id.index()).copied().unwrap_or(0.0)), job.submit)
        }))
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        let duration = job.executed_s;
        for key in Self::keys(spec) {
            self.history.entry(key).or_default().push(duration, self.window);
        }
        self.generation += 1;
    }
}
