//! The `[placement]` table (and a trace's own `placement`): where jobs go, and what spreading
//! them over extra nodes costs.

use arbiter_model::{JobSpec, LocalitySlowdown, Scaling};
use arbiter_policy::PlacementStrategy;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Placement settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementSpec {
    /// `consolidated`, `spread`, `relaxed` or `anywhere`.
    pub strategy: String,
    /// For `relaxed`: seconds of waiting after which locality is given up.
    pub relax_after_s: f64,
    /// Preemptive policies keep a continuing job's GPUs (true) or re-place all jobs each time.
    pub keep_placements: bool,
    /// Share of its speed a job without a scaling profile loses per node beyond the fewest its
    /// GPUs fit on ([`LocalitySlowdown`]; 0: placement never changes speed).
    pub slowdown_per_extra_node: f64,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec {
            strategy: "consolidated".into(),
            relax_after_s: 600.0,
            keep_placements: true,
            slowdown_per_extra_node: 0.0,
        }
    }
}

impl PlacementSpec {
    /// The strategy, or what is wrong (relative to the table: `strategy ...`).
    pub fn strategy(&self) -> Result<PlacementStrategy, String> {
        if !(0.0..1.0).contains(&self.slowdown_per_extra_node) {
            return Err(format!(
                "slowdown_per_extra_node {} is not in [0, 1)",
                self.slowdown_per_extra_node
            ));
        }
        if !(self.relax_after_s.is_finite() && self.relax_after_s >= 0.0) {
            return Err(format!(
                "relax_after_s {} is not a number of seconds",
                self.relax_after_s
            ));
        }
        PlacementStrategy::from_name(&self.strategy, self.relax_after_s).ok_or_else(|| {
            format!(
                "strategy `{}` is not one of {}",
                self.strategy,
                PlacementStrategy::NAMES.join(", ")
            )
        })
    }

    /// Gives every job without a scaling profile the locality slowdown (one shared model), on
    /// nodes of `gpus_per_node` GPUs; nothing when the slowdown is 0.
    pub fn bind_slowdown(&self, jobs: &mut [JobSpec], gpus_per_node: u32) {
        if self.slowdown_per_extra_node <= 0.0 {
            return;
        }
        let model = Scaling(Arc::new(LocalitySlowdown {
            gpus_per_node,
            slowdown_per_extra_node: self.slowdown_per_extra_node,
        }));
        for job in jobs.iter_mut().filter(|j| j.scaling.is_none()) {
            job.scaling = Some(model.clone());
        }
    }
}
