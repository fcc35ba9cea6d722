//! How a job's speed depends on the CPU cores and memory given with its GPUs (Synergy, OSDI'22):
//! a throughput matrix over CPU levels × memory levels, per GPU.

use serde::{Deserialize, Serialize};
use std::fmt;

/// CPU cores and memory given with each GPU of an assignment. Memory is in the unit the
/// cluster's nodes declare (`Node::memory_gib`; Synergy's profiles use GB).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostShare {
    /// CPU cores per GPU.
    pub cpus_per_gpu: f64,
    /// Memory per GPU.
    pub memory_per_gpu: f64,
}

impl HostShare {
    /// Whether both amounts are finite and non-negative.
    pub fn is_valid(&self) -> bool {
        self.cpus_per_gpu.is_finite()
            && self.cpus_per_gpu >= 0.0
            && self.memory_per_gpu.is_finite()
            && self.memory_per_gpu >= 0.0
    }
}

impl fmt::Display for HostShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} CPUs + {} memory per GPU",
            self.cpus_per_gpu, self.memory_per_gpu
        )
    }
}

/// Why a sensitivity profile is malformed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("invalid resource sensitivity: {0}")]
pub struct SensitivityError(String);

/// A job's per-GPU throughput as a function of CPU cores and memory per GPU, sampled on a grid
/// (Synergy's `tput` matrix: rows are CPU levels, columns memory levels, in any unit — only
/// ratios matter), plus the vector the job would ideally get.
///
/// Between grid points the throughput is interpolated bilinearly (linear in CPU between the two
/// surrounding CPU levels, linear in memory between the two surrounding memory levels); outside
/// the grid it is clamped to the nearest edge — more resources than the largest level do not
/// help, fewer than the smallest hurt no further.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceSensitivity {
    cpu_levels: Vec<f64>,
    memory_levels: Vec<f64>,
    /// `throughput[i][j]` at `cpu_levels[i]`, `memory_levels[j]`.
    throughput: Vec<Vec<f64>>,
    /// The vector the job aims for (Synergy's `cpus`, `mem`).
    pub ideal: HostShare,
}

impl ResourceSensitivity {
    /// A profile from its grid. Levels must be strictly increasing and positive, the matrix
    /// `cpu_levels × memory_levels` with non-negative entries.
    pub fn new(
        cpu_levels: Vec<f64>,
        memory_levels: Vec<f64>,
        throughput: Vec<Vec<f64>>,
        ideal: HostShare,
    ) -> Result<Self, SensitivityError> {
        let increasing = |v: &[f64]| {
            !v.is_empty()
                && v[0] > 0.0
                && v.windows(2).all(|w| w[0] < w[1])
                && v.iter().all(|x| x.is_finite())
        };
        if !increasing(&cpu_levels) || !increasing(&memory_levels) {
            return Err(SensitivityError(
                "levels must be positive and strictly increasing".into(),
            ));
        }
        if throughput.len() != cpu_levels.len()
            || throughput
                .iter()
                .any(|row| row.len() != memory_levels.len())
        {
            return Err(SensitivityError(format!(
                "throughput matrix must be {} x {} (CPU levels x memory levels)",
                cpu_levels.len(),
                memory_levels.len()
            )));
        }
        if throughput
            .iter()
            .flatten()
            .any(|t| !t.is_finite() || *t < 0.0)
        {
            return Err(SensitivityError(
                "throughputs must be finite and >= 0".into(),
            ));
        }
        if !ideal.is_valid() {
            return Err(SensitivityError(format!(
                "ideal vector {ideal} is not valid"
            )));
        }
        Ok(ResourceSensitivity {
            cpu_levels,
            memory_levels,
            throughput,
            ideal,
        })
    }

    /// A job that does not care: throughput 1 whatever it gets.
    pub fn insensitive(ideal: HostShare) -> Self {
        ResourceSensitivity {
            cpu_levels: vec![1.0],
            memory_levels: vec![1.0],
            throughput: vec![vec![1.0]],
            ideal,
        }
    }

    /// CPU levels of the grid.
    pub fn cpu_levels(&self) -> &[f64] {
        &self.cpu_levels
    }

    /// Memory levels of the grid.
    pub fn memory_levels(&self) -> &[f64] {
        &self.memory_levels
    }

    /// Throughput at grid point (`cpu` index, `memory` index).
    pub fn at_grid(&self, cpu: usize, memory: usize) -> f64 {
        self.throughput
            .get(cpu)
            .and_then(|row| row.get(memory))
            .copied()
            .unwrap_or(0.0)
    }

    /// Per-GPU throughput with `share` (interpolated, see the type's docs).
    pub fn throughput(&self, share: HostShare) -> f64 {
        let (i0, i1, wi) = bracket(&self.cpu_levels, share.cpus_per_gpu);
        let (j0, j1, wj) = bracket(&self.memory_levels, share.memory_per_gpu);
        let t = |i: usize, j: usize| self.throughput[i][j];
        let low = t(i0, j0) * (1.0 - wj) + t(i0, j1) * wj;
        let high = t(i1, j0) * (1.0 - wj) + t(i1, j1) * wj;
        low * (1.0 - wi) + high * wi
    }

    /// Speed with `share` relative to the speed with `reference` (the GPU-proportional share the
    /// job's run time is measured at). 1 when the reference throughput is 0.
    pub fn speedup(&self, share: HostShare, reference: HostShare) -> f64 {
        let base = self.throughput(reference);
        if base > 0.0 {
            self.throughput(share) / base
        } else {
            1.0
        }
    }
}

/// The two grid indices around `x` and the weight of the upper one (clamped at the edges).
fn bracket(levels: &[f64], x: f64) -> (usize, usize, f64) {
    let last = levels.len() - 1;
    if x <= levels[0] {
        return (0, 0, 0.0);
    }
    if x >= levels[last] {
        return (last, last, 0.0);
    }
    let hi = levels.partition_point(|l| *l <= x).min(last);
    let lo = hi - 1;
    (lo, hi, (x - levels[lo]) / (levels[hi] - levels[lo]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> ResourceSensitivity {
        // CPU 1, 3, 6 × memory 10, 20.
        ResourceSensitivity::new(
            vec![1.0, 3.0, 6.0],
            vec![10.0, 20.0],
            vec![vec![0.5, 0.5], vec![1.0, 1.5], vec![2.0, 3.0]],
            HostShare {
                cpus_per_gpu: 6.0,
                memory_per_gpu: 20.0,
            },
        )
        .expect("valid")
    }

    fn share(cpus: f64, mem: f64) -> HostShare {
        HostShare {
            cpus_per_gpu: cpus,
            memory_per_gpu: mem,
        }
    }

    #[test]
    fn grid_points_are_exact_and_between_them_it_is_bilinear() {
        let p = profile();
        assert_eq!(p.throughput(share(3.0, 20.0)), 1.5);
        assert_eq!(p.throughput(share(6.0, 10.0)), 2.0);
        // Halfway between CPU 3 and 6 at memory 10: (1.0 + 2.0) / 2.
        assert!((p.throughput(share(4.5, 10.0)) - 1.5).abs() < 1e-12);
        // Centre of the (3..6) × (10..20) cell: mean of its four corners.
        assert!((p.throughput(share(4.5, 15.0)) - (1.0 + 1.5 + 2.0 + 3.0) / 4.0).abs() < 1e-12);
    }

    #[test]
    fn outside_the_grid_it_is_clamped() {
        let p = profile();
        assert_eq!(p.throughput(share(24.0, 500.0)), 3.0);
        assert_eq!(p.throughput(share(0.5, 1.0)), 0.5);
        assert!((p.speedup(share(6.0, 20.0), share(3.0, 10.0)) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn malformed_profiles_are_refused() {
        let ideal = share(1.0, 1.0);
        assert!(
            ResourceSensitivity::new(vec![3.0, 1.0], vec![1.0], vec![vec![1.0], vec![1.0]], ideal)
                .is_err()
        );
        assert!(
            ResourceSensitivity::new(vec![1.0], vec![1.0, 2.0], vec![vec![1.0]], ideal).is_err()
        );
        assert!(ResourceSensitivity::new(vec![1.0], vec![1.0], vec![vec![-1.0]], ideal).is_err());
    }
}
