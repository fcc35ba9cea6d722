//! How a job's speed depends on where it runs: the shape of its placement (GPUs per node) and,
//! for an elastic job, how many GPUs it holds.
//!
//! Rigid jobs on a homogeneous cluster run at one speed wherever they are placed; the profiles of
//! Pollux (OSDI'21) measure step time by placement, so a 6-GPU job spread over three nodes is
//! slower than on two, and an elastic job (AFS, Optimus, Pollux) runs faster with more GPUs, by
//! less than the ratio. The model is a trait so that the data behind it (measured tables,
//! interpolation) lives with the reader that loaded it; the engine and the policies only ask.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A job's speed by placement shape. Implementations are pure: the same shape always gives the
/// same answer (they may memoise).
pub trait PlacementSpeed: Send + Sync {
    /// Speed on a placement of this shape — GPUs per node, largest first — relative to the job's
    /// reference configuration (its requested GPUs, consolidated), at which its `run_time_s` is
    /// measured: work done per wall second. `None` when the profile has nothing that covers the
    /// shape (a placement the engine refuses, naming the job).
    fn speed(&self, shape: &[u32]) -> Option<f64>;

    /// Training iterations left when `done` of the work (0..=1) is done, counted from the start
    /// of the current epoch — what Optimus's oracle reads (its marginal gain is step-time saving
    /// × remaining iterations). `None` where the profile does not know iterations.
    fn remaining_iterations(&self, done: f64) -> Option<f64>;

    /// Seconds per training iteration with `gpus` GPUs packed onto nodes of `gpus_per_node`, as
    /// Optimus's oracle predicts it (Pollux's artifact: the job's batch split over the GPUs, at
    /// least two accumulation steps on one GPU). `None` where the profile does not know.
    fn predicted_iteration_s(&self, gpus: u32, gpus_per_node: u32) -> Option<f64>;

    /// A short name for messages (`cifar10 @ batch 2048`).
    fn describe(&self) -> String;
}

/// A shared handle to a job's [`PlacementSpeed`]. Compared by identity; not serialised (a job
/// read back from JSON has none, and runs at its reference speed everywhere).
#[derive(Clone)]
pub struct Scaling(pub Arc<dyn PlacementSpeed>);

impl Scaling {
    /// Speed on `shape` (see [`PlacementSpeed::speed`]).
    pub fn speed(&self, shape: &[u32]) -> Option<f64> {
        self.0.speed(shape)
    }

    /// Speed with `gpus` GPUs packed onto as few nodes of `gpus_per_node` as possible (full nodes
    /// first, the rest on one more) — how Optimus and AFS predict a job's speed-up.
    pub fn consolidated_speed(&self, gpus: u32, gpus_per_node: u32) -> Option<f64> {
        if gpus == 0 {
            return Some(0.0);
        }
        self.0.speed(&consolidated_shape(gpus, gpus_per_node))
    }
}

impl fmt::Debug for Scaling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scaling({})", self.0.describe())
    }
}

impl PartialEq for Scaling {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// `gpus` GPUs on full nodes of `gpus_per_node`, the remainder on one more node; largest first.
pub fn consolidated_shape(gpus: u32, gpus_per_node: u32) -> Vec<u32> {
    let per_node = gpus_per_node.max(1);
    let mut shape = vec![per_node; (gpus / per_node) as usize];
    if !gpus.is_multiple_of(per_node) {
        shape.push(gpus % per_node);
    }
    shape
}

/// A job that slows down when spread over more nodes than it needs: each node beyond the
/// fewest its GPUs fit on costs `slowdown_per_extra_node` of its speed (multiplicatively). The
/// Philly study (ATC'19 §3.2) measured distributed jobs training slower the more servers they
/// span; this is the simplest model of that, for traces that carry no per-job profile. Speed is
/// relative to the consolidated placement, so a job placed as it asked runs at its trace speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalitySlowdown {
    /// GPUs per node of the cluster (the fewest nodes a job fits on follows from it).
    pub gpus_per_node: u32,
    /// Share of the speed lost per extra node (0 ≤ x < 1).
    pub slowdown_per_extra_node: f64,
}

impl PlacementSpeed for LocalitySlowdown {
    fn speed(&self, shape: &[u32]) -> Option<f64> {
        let gpus: u32 = shape.iter().sum();
        let fewest = gpus.div_ceil(self.gpus_per_node.max(1)).max(1) as usize;
        let extra = shape
            .iter()
            .filter(|g| **g > 0)
            .count()
            .saturating_sub(fewest);
        Some((1.0 - self.slowdown_per_extra_node).powi(extra as i32))
    }

    fn remaining_iterations(&self, _done: f64) -> Option<f64> {
        None
    }

    fn predicted_iteration_s(&self, _gpus: u32, _gpus_per_node: u32) -> Option<f64> {
        None
    }

    fn describe(&self) -> String {
        format!(
            "{:.0}% slower per extra node",
            self.slowdown_per_extra_node * 100.0
        )
    }
}

/// The GPU counts an elastic job may run with, both ends included. A rigid policy still gives it
/// its requested `gpus`; policies that resize jobs (AFS, Optimus) choose within the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRange {
    /// Fewest GPUs it can run with (at least 1).
    pub min: u32,
    /// Most GPUs it can use.
    pub max: u32,
}

impl GpuRange {
    /// Whether `gpus` is within the range.
    pub fn contains(&self, gpus: u32) -> bool {
        (self.min..=self.max).contains(&gpus)
    }
}

impl fmt::Display for GpuRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consolidated_shapes_fill_nodes_first() {
        assert_eq!(consolidated_shape(1, 4), vec![1]);
        assert_eq!(consolidated_shape(4, 4), vec![4]);
        assert_eq!(consolidated_shape(6, 4), vec![4, 2]);
        assert_eq!(consolidated_shape(12, 4), vec![4, 4, 4]);
        assert_eq!(consolidated_shape(3, 0), vec![1, 1, 1]);
    }

    #[test]
    fn spreading_over_extra_nodes_costs_speed() {
        let model = LocalitySlowdown {
            gpus_per_node: 8,
            slowdown_per_extra_node: 0.2,
        };
        assert_eq!(model.speed(&[8]), Some(1.0));
        assert_eq!(model.speed(&[4, 4]), Some(0.8));
        assert_eq!(model.speed(&[8, 8]), Some(1.0), "16 GPUs need two nodes");
        let speed = model.speed(&[4, 4, 4, 4]).expect("covered");
        assert!((speed - 0.64).abs() < 1e-12);
        assert_eq!(model.speed(&[1, 1, 1, 1, 1, 1, 1, 1]), Some(0.8f64.powi(7)));
    }

    #[test]
    fn ranges_include_both_ends() {
        let r = GpuRange { min: 2, max: 8 };
        assert!(r.contains(2) && r.contains(8) && !r.contains(1) && !r.contains(9));
        assert_eq!(r.to_string(), "2..8");
    }
}
