//! `gittins`: Tiresias-G, the discretized two-dimensional Gittins-index policy (Gu et al., NSDI'19,
//! §4.1), for when job sizes are unknown but their distribution is.
//!
//! The prior is a sample of job sizes in GPU-seconds (Tiresias uses production YARN samples, bundled
//! as `data/tiresias/yarn-gput*.csv`). For a job that has attained `a` GPU-seconds, with service
//! quantum Δ, the Gittins index is
//!
//! ```text
//!   G(a, Δ) = P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]
//! ```
//!
//! — the chance of finishing within the next quantum per unit of expected service spent. Jobs are
//! kept in the same attained-service queues as `las`; queues are served in order and, inside a
//! queue, the higher index goes first (ties: earlier submission), as in Tiresias' simulator
//! (`dlas-gpu-gittins`). Δ is a fixed quantum (Tiresias' default: 3,250 GPU-seconds). A job whose
//! attained service exceeds every sample gets index 0. Preemptive, greedy fit-first placement.
//! The order is re-evaluated at every scheduling point and when a running job crosses a queue
//! limit while others wait.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, schedule_in_order};
use crate::mechanisms::placement::Placing;
use crate::tiresias::las::LasConfig;
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{Decision, SimDuration, SimTime};

/// `gittins`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("gittins", Family::Events, "Tiresias-G: discretized 2D Gittins index from a GPU-time prior (NSDI'19)")
    .aliases(&["tiresias-g"])
    .paper("Tiresias (NSDI'19)")
    .detail("Tiresias-G: the same queues, ordered inside by the Gittins index of a job-size prior (Tiresias' production YARN GPU-time samples, `data/tiresias/yarn-gput*.csv`); preemptive");

/// Tiresias-G's parameters (scenario table `[policy.gittins]`; its queues are `[policy.las]`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GittinsParams {
    /// CSV with a `duration` column of job sizes in GPU-seconds: the prior the index is
    /// computed from (read by the caller into `PolicyConfig::gittins_prior_gpu_s`).
    pub prior: Option<std::path::PathBuf>,
    /// The quantum Δ, GPU-seconds.
    pub delta_gpu_s: f64,
}

impl Default for GittinsParams {
    fn default() -> Self {
        GittinsParams {
            prior: None,
            delta_gpu_s: 3250.0,
        }
    }
}

/// Builds `gittins`: Tiresias-L's queues (the first `queues − 1` limits), its own Δ, and the
/// prior's samples, GPU-seconds (required: an empty prior is refused).
pub fn build(
    las: &LasConfig,
    gittins: &GittinsParams,
    prior_gpu_s: &[f64],
    placing: Placing,
) -> Result<Gittins, PolicyError> {
    let prior = GittinsPrior::new(prior_gpu_s.to_vec())?;
    let limits = las
        .queue_limits_gpu_s
        .iter()
        .copied()
        .take(las.queues.saturating_sub(1))
        .collect();
    Gittins::new(
        prior,
        limits,
        gittins.delta_gpu_s,
        GreedyOptions::fit_first(placing),
    )
}

/// A job-size prior: sorted samples with prefix sums, for O(log n) index evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct GittinsPrior {
    sorted_gpu_s: Vec<f64>,
    prefix_sum: Vec<f64>,
}

impl GittinsPrior {
    /// From samples in GPU-seconds (non-finite and negative samples are rejected).
    pub fn new(mut samples_gpu_s: Vec<f64>) -> Result<Self, PolicyError> {
        if samples_gpu_s.is_empty() {
            return Err(PolicyError::Config(
                "the Gittins prior has no samples".into(),
            ));
        }
        if samples_gpu_s.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return Err(PolicyError::Config(
                "Gittins prior samples must be finite and >= 0".into(),
            ));
        }
        samples_gpu_s.sort_by(f64::total_cmp);
        let mut prefix_sum = Vec::with_capacity(samples_gpu_s.len() + 1);
        prefix_sum.push(0.0);
        let mut acc = 0.0;
        for s in &samples_gpu_s {
            acc += s;
            prefix_sum.push(acc);
        }
        Ok(GittinsPrior {
            sorted_gpu_s: samples_gpu_s,
            prefix_sum,
        })
    }

    /// G(a, Δ); 0 when no sample exceeds `a`.
    pub fn index(&self, attained_gpu_s: f64, delta_gpu_s: f64) -> f64 {
        let s = &self.sorted_gpu_s;
        let alive_from = s.partition_point(|x| *x <= attained_gpu_s);
        let alive = s.len() - alive_from;
        if alive == 0 {
            return 0.0;
        }
        let horizon = attained_gpu_s + delta_gpu_s;
        let done_until = s.partition_point(|x| *x <= horizon);
        let finishing = done_until - alive_from;
        let finishing_service = self.prefix_sum[done_until]
            - self.prefix_sum[alive_from]
            - finishing as f64 * attained_gpu_s;
        let surviving = (s.len() - done_until) as f64;
        let expected_service = (finishing_service + surviving * delta_gpu_s) / alive as f64;
        if expected_service <= 0.0 {
            return f64::MAX;
        }
        (finishing as f64 / alive as f64) / expected_service
    }
}

/// Tiresias-G.
#[derive(Clone, Debug)]
pub struct Gittins {
    prior: GittinsPrior,
    queue_limits_gpu_s: Vec<f64>,
    delta_gpu_s: f64,
    options: GreedyOptions,
}

impl Gittins {
    /// With a prior, queue limits (as for `las`; may be empty for a single queue), the quantum Δ
    /// in GPU-seconds, and placement options.
    pub fn new(
        prior: GittinsPrior,
        queue_limits_gpu_s: Vec<f64>,
        delta_gpu_s: f64,
        options: GreedyOptions,
    ) -> Result<Self, PolicyError> {
        if delta_gpu_s.is_nan() || delta_gpu_s <= 0.0 {
            return Err(PolicyError::Config(
                "the Gittins quantum must be > 0".into(),
            ));
        }
        Ok(Gittins {
            prior,
            queue_limits_gpu_s,
            delta_gpu_s,
            options: GreedyOptions {
                preemptive: true,
                head_of_line_blocking: false,
                ..options
            },
        })
    }

    fn queue_of(&self, attained_gpu_s: f64) -> usize {
        self.queue_limits_gpu_s
            .partition_point(|l| *l <= attained_gpu_s)
    }
}

impl Policy for Gittins {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut decision = schedule_in_order(view, now, self.options, |job| {
            let attained = job.attained_gpu_s_at(now);
            let index = self.prior.index(attained, self.delta_gpu_s);
            (
                self.queue_of(attained),
                std::cmp::Reverse(order_key(index)),
                job.submit,
            )
        });
        // Look again when a running job crosses into the next queue — if some job waits to
        // profit from it.
        let anyone_waiting = view.jobs.iter().any(|j| !j.is_running());
        decision.wake_at = if anyone_waiting {
            view.jobs
                .iter()
                .filter(|j| j.is_running())
                .filter_map(|j| {
                    let attained = j.attained_gpu_s_at(now);
                    let limit = self.queue_limits_gpu_s.get(self.queue_of(attained))?;
                    Some(now + SimDuration::from_secs_f64_ceil((limit - attained) / j.gpus as f64))
                })
                .min()
        } else {
            None
        };
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_matches_hand_computation() {
        // Sizes 10, 20, 100. At a=0, Δ=15: P(finish)=1/3; E[min(S,15)] = (10+15+15)/3.
        let prior = GittinsPrior::new(vec![100.0, 10.0, 20.0]).expect("valid");
        let g = prior.index(0.0, 15.0);
        assert!((g - (1.0 / 3.0) / (40.0 / 3.0)).abs() < 1e-12);
        // At a=10 (the 10-GPU-s job would be done): survivors 20,100; Δ=15: P=1/2, E=(10+15)/2.
        let g = prior.index(10.0, 15.0);
        assert!((g - 0.5 / 12.5).abs() < 1e-12);
        assert_eq!(prior.index(100.0, 15.0), 0.0);
    }

    #[test]
    fn empty_prior_is_a_config_error() {
        assert!(GittinsPrior::new(vec![]).is_err());
    }
}
