//! `qssf`: Helios' quasi-shortest-service-first (Hu et al., SC'21, §5).
//!
//! Jobs are ordered by *predicted* GPU time (predicted duration × GPUs), smallest first,
//! non-preemptive, fit-first. The prediction is learned online from finished jobs only (no
//! oracle): the mean duration of the most recent finished jobs that share the most specific
//! available key, trying in turn (tenant, user, job name, GPUs), (tenant, user, GPUs),
//! (tenant, GPUs), (tenant) and finally all jobs. Before anything has finished, every job is
//! predicted equal and the order falls back to submission time.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, schedule_in_order};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{ActiveJob, Decision, JobSpec, SimTime};
use std::collections::{BTreeMap, VecDeque};

/// `qssf`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("qssf", Family::Events, "Helios QSSF: shortest predicted GPU time first, learned from history (SC'21)")
    .paper("Helios (SC'21)")
    .detail("quasi-shortest-service-first: order by *predicted* GPU time, learned online from finished jobs of the same (tenant, user, job name, GPUs), falling back to coarser keys; no oracle; non-preemptive");

/// Helios QSSF's parameters (scenario table `[policy.qssf]`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QssfParams {
    /// Recent jobs kept per history key.
    pub history: usize,
}

impl Default for QssfParams {
    fn default() -> Self {
        QssfParams {
            history: DEFAULT_HISTORY,
        }
    }
}

/// Builds `qssf`.
pub fn build(qssf: &QssfParams, placing: Placing) -> Result<Qssf, PolicyError> {
    Ok(Qssf::new(GreedyOptions::fit_first(placing), qssf.history))
}

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
    /// History key → dense id; ids index `history`.
    key_ids: BTreeMap<Vec<String>, u32>,
    history: Vec<Recent>,
    /// Per job id: its five key ids, most specific first (interned once, on first sight).
    job_keys: Vec<Option<[u32; 5]>>,
}

impl Qssf {
    /// With placement options and the number of recent jobs per key.
    pub fn new(options: GreedyOptions, window: usize) -> Self {
        Qssf {
            options: GreedyOptions {
                preemptive: false,
                head_of_line_blocking: false,
                ..options
            },
            window: window.max(1),
            key_ids: BTreeMap::new(),
            history: Vec::new(),
            job_keys: Vec::new(),
        }
    }

    fn keys(spec: &JobSpec) -> [Vec<String>; 5] {
        let user = spec.user.clone().unwrap_or_default();
        let name = spec.name.clone().unwrap_or_default();
        let gpus = spec.gpus.to_string();
        let t = spec.tenant.to_string();
        [
            vec!["tun".into(), t.clone(), user.clone(), name, gpus.clone()],
            vec!["tu".into(), t.clone(), user, gpus.clone()],
            vec!["tg".into(), t.clone(), gpus],
            vec!["t".into(), t],
            vec!["all".into()],
        ]
    }

    fn key_ids_of(&mut self, spec: &JobSpec) -> [u32; 5] {
        let i = spec.id.index();
        if i >= self.job_keys.len() {
            self.job_keys.resize(i + 1, None);
        }
        if let Some(ids) = self.job_keys[i] {
            return ids;
        }
        let ids = Self::keys(spec).map(|key| {
            let next = self.key_ids.len() as u32;
            let id = *self.key_ids.entry(key).or_insert(next);
            if id as usize >= self.history.len() {
                self.history.push(Recent::default());
            }
            id
        });
        self.job_keys[i] = Some(ids);
        ids
    }

    fn predict_from(&self, ids: &[u32; 5]) -> Option<f64> {
        ids.iter()
            .find_map(|&id| self.history.get(id as usize).and_then(Recent::mean))
    }

    /// Predicted duration in seconds, or `None` with no relevant history at all.
    pub fn predict_duration_s(&mut self, spec: &JobSpec) -> Option<f64> {
        let ids = self.key_ids_of(spec);
        self.predict_from(&ids)
    }
}

impl Policy for Qssf {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        for job in view.jobs.iter().filter(|j| !j.is_running()) {
            self.key_ids_of(view.spec(job));
        }
        let this = &*self;
        Ok(schedule_in_order(view, now, self.options, |job| {
            let predicted_s = this.job_keys[job.id.index()]
                .and_then(|ids| this.predict_from(&ids))
                .unwrap_or(0.0);
            (order_key(predicted_s * job.gpus as f64), job.submit)
        }))
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        let duration = job.executed_s;
        let window = self.window;
        for id in self.key_ids_of(spec) {
            self.history[id as usize].push(duration, window);
        }
        if let Some(slot) = self.job_keys.get_mut(spec.id.index()) {
            *slot = None;
        }
    }
}
