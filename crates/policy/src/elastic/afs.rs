//! `afs`: AFS-L, the elastic-sharing rule of Hwang et al., "Elastic Resource Sharing for
//! Distributed Deep Learning" (NSDI'21), as the authors' simulator runs it (`alg_c` /
//! `alg_c_concept`, the algorithm their plots label LRR-L):
//!
//! GPUs are handed out one at a time. For each GPU the jobs that can still grow are scanned in
//! submission order, king-of-the-hill: the current candidate meets the next job; of the two, `l`
//! is the one with less remaining time at its tentative count (no GPUs: infinitely long) and `h`
//! the other; when `l` has no GPU yet, the one finishing sooner on one GPU wins; otherwise `l`
//! wins if its relative throughput gain from one more GPU beats `h`'s measured against `h`'s
//! throughput *with* it,
//!
//! ```text
//! (T_l(n_l + 1) − T_l(n_l)) / T_l(n_l)  >  (T_h(n_h + 1) − T_h(n_h)) / T_h(n_h + 1)
//! ```
//!
//! and `h` wins otherwise. The winner gets the GPU. (A job without GPUs has a gain of 1 on the
//! right, so in effect every job gets a first GPU, shortest on one GPU first, before any gets
//! a second.) Throughput `T_j(n)` is the job's speed with `n` GPUs packed onto as few nodes as
//! possible (its profile: [`arbiter_model::Scaling::consolidated_speed`]; linear without one),
//! remaining time is remaining work ÷ `T`.
//!
//! The authors' simulator re-decides at arrivals and completions; Pollux's scenario calls every
//! policy once a minute. Placement as [`crate::mechanisms::elastic::place_counts`], smallest counts first; a changed count is a
//! restart (the engine charges its restart overhead). A rigid job (no elastic range) goes from
//! zero straight to its gang size and no further.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::elastic::{gpu_bounds, place_counts};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobId, PendingReason, SimTime};
use std::collections::BTreeMap;

/// `afs`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("afs", Family::OtherRounds, "AFS-L: GPUs one at a time, to the shorter job unless the longer one's relative throughput gain is larger; elastic jobs resized (Hwang et al., NSDI'21)").elastic()
    .paper("AFS (NSDI'21, Hwang et al.)")
    .detail("AFS-L: GPUs handed out one at a time; of two jobs the shorter-remaining one gets the next GPU unless the longer one's relative throughput gain is larger, `(T_l(n+1)−T_l(n))/T_l(n) > (T_h(n+1)−T_h(n))/T_h(n+1)` (king-of-the-hill scan in submission order, as the authors' simulator); every job gets a first GPU, shortest first, before any gets a second; elastic jobs resized within their range (restart cost), rigid ones get their gang or nothing");

/// Builds `afs` (no parameters; it places as its authors' simulator does).
pub fn build(_: Placing) -> Result<Afs, PolicyError> {
    Ok(Afs::default())
}

/// AFS-L.
#[derive(Clone, Debug, Default)]
pub struct Afs {
    /// Per job id: its throughput by GPU count (index = count), as far as computed. Profiles
    /// are pure, so this only saves asking again.
    speeds: BTreeMap<JobId, Vec<f64>>,
}

impl Policy for Afs {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut jobs: Vec<&ActiveJob> = view.jobs.iter().collect();
        jobs.sort_by_key(|j| j.id);
        let active: std::collections::BTreeSet<JobId> = jobs.iter().map(|j| j.id).collect();
        self.speeds.retain(|id, _| active.contains(id));
        let total = view.cluster.total_gpus();
        let per_node = view.cluster.max_gpus_per_node();
        // Per job: (least, most, remaining work); its throughput by count is cached in `speeds`.
        let mut info = Vec::with_capacity(jobs.len());
        for j in &jobs {
            let spec = view.spec(j);
            let (least, most) = gpu_bounds(spec);
            let most = most.min(total);
            let speeds = self.speeds.entry(j.id).or_default();
            while speeds.len() <= most as usize {
                let n = speeds.len() as u32;
                let t = match &spec.scaling {
                    Some(s) => s.consolidated_speed(n, per_node).unwrap_or(0.0),
                    None => f64::from(n) / f64::from(spec.gpus.max(1)),
                };
                speeds.push(t);
            }
            info.push((least, most, j.remaining_s_at(now)));
        }
        let curves: Vec<&[f64]> = jobs
            .iter()
            .map(|j| self.speeds.get(&j.id).map_or(&[][..], Vec::as_slice))
            .collect();
        let throughput = |k: usize, n: u32| curves[k].get(n as usize).copied().unwrap_or(0.0);
        // Remaining time at count n (no GPUs, or a count that does not run: infinite).
        let rem = |k: usize, n: u32| {
            let t = throughput(k, n);
            if n == 0 || t <= 0.0 {
                f64::INFINITY
            } else {
                info[k].2 / t
            }
        };
        // The count after one more step: from zero to the least count, then by one.
        let next = |k: usize, n: u32| if n == 0 { info[k].0 } else { n + 1 };
        let mut count = vec![0u32; jobs.len()];
        let mut left = total;
        let mut growing: Vec<usize> = (0..jobs.len())
            .filter(|&k| info[k].0 <= info[k].1 && info[k].1 > 0)
            .collect();
        while left > 0 {
            growing.retain(|&k| count[k] < info[k].1 && next(k, count[k]) - count[k] <= left);
            let Some((&first, rest)) = growing.split_first() else {
                break;
            };
            let mut c = first;
            for &m in rest {
                let (l, h) = if rem(m, count[m]) < rem(c, count[c]) {
                    (m, c)
                } else {
                    (c, m)
                };
                c = if count[l] == 0 {
                    if rem(l, next(l, 0)) < rem(h, next(h, count[h])) {
                        l
                    } else {
                        h
                    }
                } else {
                    let (nl, nh) = (count[l], count[h]);
                    let gain_l =
                        (throughput(l, next(l, nl)) - throughput(l, nl)) / throughput(l, nl);
                    let after_h = throughput(h, next(h, nh));
                    let gain_h = if after_h > 0.0 {
                        (after_h - throughput(h, nh)) / after_h
                    } else {
                        0.0
                    };
                    if gain_l > gain_h { l } else { h }
                };
            }
            let step = next(c, count[c]) - count[c];
            count[c] += step;
            left -= step;
        }
        let mut counts: Vec<_> = (0..jobs.len())
            .filter(|&k| count[k] > 0)
            .map(|k| (jobs[k].id, count[k]))
            .collect();
        counts.sort_by_key(|(_, gpus)| *gpus);
        let run = place_counts(view.cluster, &jobs, &counts);
        let pending = (0..jobs.len())
            .filter(|&k| count[k] == 0)
            .map(|k| (jobs[k].id, PendingReason::InsufficientGpus))
            .collect();
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
    use crate::test_support::{cluster, spec_with};
    use arbiter_model::{GpuRange, PlacementSpeed, Scaling};
    use std::sync::Arc;

    /// Throughput by count from a table (index = GPUs), relative to one GPU.
    struct Curve(Vec<f64>);
    impl PlacementSpeed for Curve {
        fn speed(&self, shape: &[u32]) -> Option<f64> {
            self.0.get(shape.iter().sum::<u32>() as usize).copied()
        }
        fn remaining_iterations(&self, _done: f64) -> Option<f64> {
            None
        }
        fn predicted_iteration_s(&self, _gpus: u32, _per_node: u32) -> Option<f64> {
            None
        }
        fn describe(&self) -> String {
            "curve".into()
        }
    }

    fn elastic(id: u32, work_s: f64, curve: Vec<f64>) -> arbiter_model::JobSpec {
        let mut s = spec_with(id, 0, 1, work_s);
        s.elastic = Some(GpuRange {
            min: 1,
            max: curve.len() as u32 - 1,
        });
        s.scaling = Some(Scaling(Arc::new(Curve(curve))));
        s
    }

    fn counts(specs: &[arbiter_model::JobSpec], gpus: u32) -> Vec<u32> {
        let cluster = cluster(1, gpus);
        let jobs: Vec<_> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, SimTime::ZERO, s.run_time_s))
            .collect();
        let d = Afs::default()
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs,
                    current: None,
                },
                SimTime::ZERO,
            )
            .expect("ok");
        specs
            .iter()
            .map(|s| {
                d.run
                    .iter()
                    .find(|a| a.job == s.id)
                    .map_or(0, |a| a.placement.gpus())
            })
            .collect()
    }

    #[test]
    fn the_shorter_job_gets_the_gpu_when_its_relative_gain_is_larger() {
        // Short job l scales perfectly (gain 1→2: 100%); long job h barely (1→2: 10%, i.e.
        // 0.1/1.1 = 9% on the right). Third GPU: l at 2 → 3 gains 50% > h's 9%: l again.
        let specs = [
            elastic(0, 100.0, vec![0.0, 1.0, 2.0, 3.0]),
            elastic(1, 1000.0, vec![0.0, 1.0, 1.1, 1.15]),
        ];
        assert_eq!(counts(&specs, 4), vec![3, 1]);
    }

    #[test]
    fn the_longer_job_gets_the_gpu_when_the_shorter_one_gains_less() {
        // l barely scales (1→2: 5%), h scales perfectly (1→2: 1/2 = 50% on the right): h.
        let specs = [
            elastic(0, 100.0, vec![0.0, 1.0, 1.05, 1.06]),
            elastic(1, 1000.0, vec![0.0, 1.0, 2.0, 3.0]),
        ];
        assert_eq!(counts(&specs, 3), vec![1, 2]);
    }

    #[test]
    fn every_job_gets_a_first_gpu_shortest_first_before_any_gets_a_second() {
        let specs = [
            elastic(0, 300.0, vec![0.0, 1.0, 2.0]),
            elastic(1, 100.0, vec![0.0, 1.0, 2.0]),
            elastic(2, 200.0, vec![0.0, 1.0, 2.0]),
        ];
        assert_eq!(counts(&specs, 2), vec![0, 1, 1]);
        assert_eq!(counts(&specs, 3), vec![1, 1, 1]);
    }

    #[test]
    fn counts_stay_within_the_elastic_range_and_rigid_jobs_get_their_gang_or_nothing() {
        let mut rigid = spec_with(1, 0, 3, 50.0);
        rigid.elastic = None;
        let specs = [elastic(0, 1000.0, vec![0.0, 1.0, 2.0]), rigid];
        // 8 GPUs: the elastic job stops at its max of 2; the rigid one gets its 3.
        assert_eq!(counts(&specs, 8), vec![2, 3]);
        // 2 GPUs: the rigid job cannot fit beside anything.
        assert_eq!(counts(&specs, 2), vec![2, 0]);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::test_support::{cluster, spec_with};
    use arbiter_model::{GpuRange, PlacementSpeed, Scaling};
    use proptest::prelude::*;
    use std::sync::Arc;

    /// Concave speed-up: T(n) = n^exponent (0 < exponent ≤ 1).
    struct Power(f64);
    impl PlacementSpeed for Power {
        fn speed(&self, shape: &[u32]) -> Option<f64> {
            Some(f64::from(shape.iter().sum::<u32>()).powf(self.0))
        }
        fn remaining_iterations(&self, _done: f64) -> Option<f64> {
            None
        }
        fn predicted_iteration_s(&self, _gpus: u32, _per_node: u32) -> Option<f64> {
            None
        }
        fn describe(&self) -> String {
            format!("n^{}", self.0)
        }
    }

    proptest! {
        /// Counts stay within each job's range (or zero), placements fit the cluster, and no
        /// GPU is left idle while a job could still grow into it.
        #[test]
        fn counts_respect_ranges_and_leave_no_usable_gpu_idle(
            nodes in 1u32..5,
            jobs in prop::collection::vec((1u32..4, 0u32..6, 1.0f64..1e4, 0.3f64..1.0, any::<bool>()), 1..12),
        ) {
            let cluster = cluster(nodes, 4);
            let specs: Vec<_> = jobs.iter().enumerate().map(|(i, &(least, extra, work, exponent, elastic))| {
                let mut s = spec_with(i as u32, 0, least, work);
                if elastic {
                    s.elastic = Some(GpuRange { min: least, max: least + extra });
                    s.scaling = Some(Scaling(Arc::new(Power(exponent))));
                }
                s
            }).collect();
            let active: Vec<_> = specs.iter().map(|s| ActiveJob::submitted(s.id, s.gpus, SimTime::ZERO, s.run_time_s)).collect();
            let d = Afs::default().schedule(&SchedulerView { cluster: &cluster, jobs: &active, specs: &specs, current: None }, SimTime::ZERO).expect("decides");
            let mut used = vec![0u32; nodes as usize];
            let mut count = vec![0u32; specs.len()];
            for a in &d.run {
                count[a.job.index()] = a.placement.gpus();
                for &(node, g) in &a.placement.slots {
                    used[node.index()] += g;
                }
            }
            prop_assert!(used.iter().all(|u| *u <= 4), "over-allocated: {used:?}");
            let free = 4 * nodes - used.iter().sum::<u32>();
            for (s, &n) in specs.iter().zip(&count) {
                let (least, most) = gpu_bounds(s);
                prop_assert!(n == 0 || (least..=most).contains(&n), "{} got {n}, range {least}..{most}", s.id);
                // Could it have used a free GPU? Growing by one (or starting at its least).
                let step = if n == 0 { least } else { 1 };
                prop_assert!(n == most || step > free, "{} at {n} of {least}..{most} with {free} GPUs free", s.id);
            }
        }
    }
}
