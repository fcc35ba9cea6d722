//! Themis (Mahajan et al., NSDI'20), two ways.
//!
//! Themis schedules for *finish-time fairness*: a job's ρ is its finish time when sharing the
//! cluster over its finish time when running alone on its own `1/N` share of it,
//!
//! ```text
//!   ρ = T_shared / T_independent                                   (Themis §3, eq. 1)
//! ```
//!
//! and a scheduler is fair when every ρ ≤ 1. The two policies here differ in what they are for:
//!
//! - [`muri`] — `themis-muri`: Themis exactly as Muri's simulator (SIGCOMM'22, `themis_sim_jobs`)
//!   runs it, which is how Muri's published Themis numbers were produced: a Gavel-style
//!   finish-time-fairness allocation `min max_j ρ_j(x)` recomputed at every arrival and
//!   completion, jobs ranked by allocation over time received, consolidated placement re-planned
//!   from an empty cluster. Its quirks (a GPU fraction used as a throughput, iterations divided by
//!   fractions) are kept on purpose.
//! - [`lease`] — `themis`: the paper's own mechanism: GPUs are granted in leases; when leases
//!   expire (or GPUs free up) the free GPUs are offered to the `1 − f` fraction of jobs with the
//!   worst ρ, which bid in a partial-allocation auction ([`auction`]); leftovers go to the other
//!   jobs, work-conserving.
//!
//! [`finish_time_fairness`] computes a finished job's ρ for reports, with the same definition of
//! `T_independent` as `themis` uses.

pub mod auction;
pub mod lease;
pub mod muri;

use crate::PolicyError;

/// Themis' knobs (scenario table `[policy.themis]`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThemisConfig {
    /// Fairness knob `f`: each auction offers GPUs to the `1 − f` fraction of jobs with the worst
    /// finish-time fairness.
    pub fairness_knob: f64,
    /// Lease length, seconds.
    pub lease_s: f64,
}

impl Default for ThemisConfig {
    fn default() -> Self {
        ThemisConfig {
            fairness_knob: 0.8,
            lease_s: 600.0,
        }
    }
}

impl ThemisConfig {
    /// Checks the knobs: `0 ≤ f < 1` and a positive, finite lease.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(self.fairness_knob.is_finite() && (0.0..1.0).contains(&self.fairness_knob)) {
            return Err(PolicyError::Config(format!(
                "themis fairness knob f must be in [0, 1), got {}",
                self.fairness_knob
            )));
        }
        if !(self.lease_s.is_finite() && self.lease_s > 0.0) {
            return Err(PolicyError::Config(format!(
                "themis lease must be > 0 seconds, got {}",
                self.lease_s
            )));
        }
        Ok(())
    }
}

/// The rate at which a job of `gpus` GPUs progresses on its fair share — `1/N` of a cluster of
/// `cluster_gpus` GPUs shared by `contending_jobs` jobs — relative to running on all of its
/// GPUs: `min(1, cluster_gpus / (N · gpus))` (a gang that needs more than its share time-slices
/// it). A job with no GPUs, or no cluster, gets 0.
pub fn fair_share_rate(gpus: u32, cluster_gpus: u32, contending_jobs: usize) -> f64 {
    if gpus == 0 || cluster_gpus == 0 {
        return 0.0;
    }
    let n = contending_jobs.max(1) as f64;
    (cluster_gpus as f64 / (n * gpus as f64)).min(1.0)
}

/// `T_independent`, seconds: the job's whole work (`run_time_s` at full speed on its gang) done
/// at its fair-share rate ([`fair_share_rate`]). Infinite when that rate is 0.
pub fn independent_time_s(
    run_time_s: f64,
    gpus: u32,
    cluster_gpus: u32,
    contending_jobs: usize,
) -> f64 {
    let rate = fair_share_rate(gpus, cluster_gpus, contending_jobs);
    if rate > 0.0 {
        run_time_s / rate
    } else {
        f64::INFINITY
    }
}

/// Finish-time fairness of a finished job (Themis eq. 1): `ρ = JCT / T_independent`, with
/// `T_independent` from [`independent_time_s`] — the job's work `run_time_s` done alone on `1/N`
/// of the cluster, `N = contending_jobs` (for instance the mean number of active jobs over the
/// job's lifetime; at least 1). `ρ ≤ 1`: the job did at least as well as on its own share.
/// Returns `None` for inputs that define no ratio (non-finite or negative times, no work, no
/// GPUs, an empty cluster).
pub fn finish_time_fairness(
    jct_s: f64,
    run_time_s: f64,
    gpus: u32,
    cluster_gpus: u32,
    contending_jobs: usize,
) -> Option<f64> {
    if !(jct_s.is_finite() && jct_s >= 0.0 && run_time_s.is_finite() && run_time_s > 0.0) {
        return None;
    }
    let independent = independent_time_s(run_time_s, gpus, cluster_gpus, contending_jobs);
    (independent.is_finite() && independent > 0.0).then(|| jct_s / independent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_time_fairness_is_jct_over_time_alone_on_a_fair_share() {
        // 64 GPUs, 16 jobs: a 4-GPU job's share is exactly its gang: T_id = its work.
        assert_eq!(finish_time_fairness(150.0, 100.0, 4, 64, 16), Some(1.5));
        // 32 jobs: the share is 2 GPUs, half of the 4-GPU gang: rate 1/2, T_id twice the work.
        assert_eq!(independent_time_s(100.0, 4, 64, 32), 200.0);
        assert_eq!(finish_time_fairness(150.0, 100.0, 4, 64, 32), Some(0.75));
        // Fewer jobs than the share needs: the gang runs at full speed, never faster.
        assert_eq!(finish_time_fairness(100.0, 100.0, 1, 64, 2), Some(1.0));
        // No contenders counts as one.
        assert_eq!(fair_share_rate(8, 64, 0), 1.0);
        assert_eq!(finish_time_fairness(f64::NAN, 100.0, 1, 64, 2), None);
        assert_eq!(finish_time_fairness(10.0, 0.0, 1, 64, 2), None);
        assert_eq!(finish_time_fairness(10.0, 5.0, 0, 64, 2), None);
    }

    #[test]
    fn the_fairness_knob_must_leave_someone_to_bid() {
        assert!(ThemisConfig::default().validate().is_ok());
        assert!(
            ThemisConfig {
                fairness_knob: 1.0,
                lease_s: 600.0
            }
            .validate()
            .is_err()
        );
        assert!(
            ThemisConfig {
                fairness_knob: -0.1,
                lease_s: 600.0
            }
            .validate()
            .is_err()
        );
        assert!(
            ThemisConfig {
                fairness_knob: 0.0,
                lease_s: 0.0
            }
            .validate()
            .is_err()
        );
        assert!(
            ThemisConfig {
                fairness_knob: 0.5,
                lease_s: f64::INFINITY
            }
            .validate()
            .is_err()
        );
        let placing = crate::Placing {
            strategy: crate::PlacementStrategy::Consolidated,
            keep_placements: true,
        };
        assert!(
            lease::build(
                &ThemisConfig {
                    fairness_knob: 2.0,
                    lease_s: 1.0
                },
                placing
            )
            .is_err()
        );
        assert_eq!(
            crate::Policy::name(&muri::build(placing).expect("builds")),
            "themis-muri"
        );
    }
}
