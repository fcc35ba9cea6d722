//! Space sharing (Gavel, OSDI'20 §4.1, "space sharing"): two jobs may share the same GPUs, each
//! running slower than alone, and the allocation decides how much time every job spends alone
//! and with each possible partner on each GPU type.
//!
//! Gavel writes the policy over *job combinations* (`max_min_fairness_packed`): a variable per
//! single job and per pair of jobs with the same scale factor, per type. With n jobs that is
//! O(n²) variables (256 jobs × 3 types: ≈ 98,000). Co-location speeds depend only on the two
//! jobs' types, so — as Gavel's own job-type reformulation (`get_allocation_using_job_type_
//! throughputs`) does — we solve over *classes* of interchangeable jobs (same job type, scale
//! factor, weight and throughputs) instead, and split class shares evenly over the class's jobs.
//! The two programs have the same optimum: averaging any optimal job-level solution over the
//! permutations of each class keeps it feasible and leaves every job's throughput, hence the
//! minimum, unchanged.
//!
//! For classes c, d with n_c, n_d jobs, per GPU type k:
//!
//! ```text
//!   s[c][k]     share of time a job of c runs alone on k
//!   q[c][d][k]  (c <= d) job-seconds per second that c jobs spend sharing type-k GPUs with d
//!               jobs; each c job shares with d jobs for p[c][d][k] = q / n_c of its time, each
//!               d job with c jobs for q / n_d — Gavel's "pairs pair up" equality constraint
//!               n_c · p[c][d] = n_d · p[d][c], substituted away
//!
//!   Σ_k s[c][k] + Σ_d Σ_k q[c][d][k] / n_c <= 1                                  (time)
//!   Σ_c n_c sf_c s[c][k] + Σ_{c<d} sf q[c][d][k] + Σ_c ½ sf q[c][c][k] <= G_k    (a shared GPU counts once)
//!   maximise min_c  sf_c / (w_c · iso_c) · (Σ_k T[c][k] s[c][k] + Σ_d Σ_k P[c|d][k] q[c][d][k] / n_c)
//! ```
//!
//! with T the solo speeds, P[c|d][k] the speed of a c job sharing type-k GPUs with a d job (both
//! relative to the job's reference speed), w the priority weight and iso the throughput under
//! the equal share, exactly as `max-min-fairness-het` normalizes — so with no useful pairs the
//! program is `max-min-fairness-het`. A class paired with itself needs two jobs. Only pairs of
//! equal scale factor share (as in Gavel), and a pair where neither job keeps more than half its
//! solo speed is left out: taking turns on the same GPUs does at least as well for both.
//!
//! Back at job level, job i of class c and job j of class d share for
//! `X[i,j][k] = q[c][d][k] / (n_c · n_d)` (`q[c][c][k] / (n_c · (n_c − 1))` within a class) —
//! Gavel's `convert_job_type_allocation` applied to the class solution.

use super::allocation::{AllocJob, Allocation, equal_share, group_by_key, job_class_key};
use crate::mechanisms::colocation::{PairKey, PairSpeeds};
use arbiter_solver::{Direction, LinearProgram, SolveMethod, SolveOptions, SolverError, VarId};
use std::collections::BTreeMap;

/// A job as the packed program sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PackJob {
    /// Solo view (scale factor, weight, per-type speeds).
    pub job: AllocJob,
    /// Its job type for co-location lookups; `None`: it never shares.
    pub pair_key: Option<PairKey>,
}

/// The packed allocation: solo shares per job and shared shares per pair of jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedAllocation {
    /// X[j][k]: share of time job j runs alone on type k (input order).
    pub solo: Allocation,
    /// `((i, j), X[i,j][k] per type)` for i < j, only pairs with a positive share somewhere.
    pub pairs: Vec<((usize, usize), Vec<f64>)>,
}

impl PackedAllocation {
    /// Each job's total share of time on each type (alone plus sharing).
    pub fn time_per_job(&self) -> Allocation {
        let mut total = self.solo.clone();
        for ((i, j), x) in &self.pairs {
            for (k, share) in x.iter().enumerate() {
                total[*i][k] += share;
                total[*j][k] += share;
            }
        }
        total
    }
}

/// Shares below this are solver noise, not an allocation.
const NEGLIGIBLE: f64 = 1e-6;

/// Gavel's `max-min-fairness-packed`, solved over job classes (see the module docs).
pub fn max_min_fairness_packed(
    jobs: &[PackJob],
    pairs: &PairSpeeds,
    gpus_per_type: &[f64],
    method: SolveMethod,
) -> Result<PackedAllocation, SolverError> {
    if jobs.is_empty() {
        return Ok(PackedAllocation::default());
    }
    let m = gpus_per_type.len();
    let isolated = equal_share(
        &jobs.iter().map(|j| j.job.clone()).collect::<Vec<_>>(),
        gpus_per_type,
    );

    // Classes of interchangeable jobs, in order of first appearance.
    let (class_of_job, members) = group_by_key(
        jobs.iter()
            .map(|j| (j.pair_key.clone(), job_class_key(&j.job))),
    );
    let classes = members.len();
    let first = |c: usize| &jobs[members[c][0]];
    let count = |c: usize| members[c].len() as f64;

    let mut lp = LinearProgram::new(Direction::Maximise);
    let t = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
    lp.add_objective(t, 1.0);
    // s[c][k]; None where the class cannot run on k.
    let solo: Vec<Vec<Option<VarId>>> = (0..classes)
        .map(|c| {
            (0..m)
                .map(|k| (first(c).job.throughput[k] > 0.0).then(|| lp.add_var(0.0, 1.0)))
                .collect()
        })
        .collect();
    // q[c][d][k] for c <= d: job-seconds per second that c jobs spend sharing type-k GPUs with d
    // jobs (= n_c · p[c][d][k] = n_d · p[d][c][k], so the pairing constraint holds by
    // construction). Stored with both jobs' speeds.
    let mut shared: BTreeMap<(usize, usize, usize), (VarId, f64, f64)> = BTreeMap::new();
    for c in 0..classes {
        let Some(key_c) = first(c).pair_key.as_ref() else {
            continue;
        };
        for d in c..classes {
            let Some(key_d) = first(d).pair_key.as_ref() else {
                continue;
            };
            if first(c).job.scale_factor != first(d).job.scale_factor || (c == d && count(c) < 2.0)
            {
                continue;
            }
            for k in 0..m {
                let solo = (first(c).job.throughput[k], first(d).job.throughput[k]);
                let Some((mine, theirs)) = pairs.speeds(key_c, key_d, k, solo) else {
                    continue;
                };
                // Sharing for τ is dominated by taking turns for τ on the same GPUs (τ/2 each,
                // same GPU time, half the time budget) unless one of the two runs faster than
                // half its solo speed; dominated pairs are left out. The optimum is unchanged,
                // and the interior-point solution does not spread time onto useless pairs.
                let worth_it = mine > 0.5 * first(c).job.throughput[k]
                    || theirs > 0.5 * first(d).job.throughput[k];
                if mine > 0.0 && theirs > 0.0 && worth_it {
                    shared.insert((c, d, k), (lp.add_var(0.0, f64::INFINITY), mine, theirs));
                }
            }
        }
    }
    // Per class: the pair variables it appears in, with its own speed in each.
    let mut sharing_of: Vec<Vec<(VarId, f64)>> = vec![Vec::new(); classes];
    for (&(c, d, _), &(v, mine, theirs)) in &shared {
        sharing_of[c].push((v, mine));
        if c != d {
            sharing_of[d].push((v, theirs));
        }
    }
    for c in 0..classes {
        let job = &first(c).job;
        let per_job = 1.0 / count(c);
        // Time.
        let mut time: Vec<(VarId, f64)> = solo[c].iter().flatten().map(|&v| (v, 1.0)).collect();
        time.extend(sharing_of[c].iter().map(|&(v, _)| (v, per_job)));
        lp.add_le(time, 1.0);
        // Objective bound: t <= scale · throughput.
        let iso: f64 = (0..m)
            .map(|k| job.throughput[k] * isolated[members[c][0]][k])
            .sum();
        let scale =
            job.scale_factor / (job.weight.max(f64::MIN_POSITIVE) * iso.max(f64::MIN_POSITIVE));
        let mut row = vec![(t, 1.0)];
        row.extend((0..m).filter_map(|k| solo[c][k].map(|v| (v, -job.throughput[k] * scale))));
        row.extend(
            sharing_of[c]
                .iter()
                .map(|&(v, speed)| (v, -speed * per_job * scale)),
        );
        lp.add_le(row, 0.0);
    }
    // Capacity per type: solo GPUs, plus the GPUs of every shared pair once (q job-seconds
    // across two classes are q pair-seconds; within one class, q / 2).
    for (k, &gpus) in gpus_per_type.iter().enumerate() {
        let mut row: Vec<(VarId, f64)> = (0..classes)
            .filter_map(|c| solo[c][k].map(|v| (v, count(c) * first(c).job.scale_factor)))
            .collect();
        row.extend(shared.iter().filter(|((_, _, kk), _)| *kk == k).map(
            |(&(c, d, _), &(v, _, _))| {
                let pairs_per_q = if c == d { 0.5 } else { 1.0 };
                (v, pairs_per_q * first(c).job.scale_factor)
            },
        ));
        lp.add_le(row, gpus);
    }
    let solution = lp.solve_by(method, &SolveOptions::default())?;

    let solo_alloc: Allocation = class_of_job
        .iter()
        .map(|&c| {
            (0..m)
                .map(|k| solo[c][k].map_or(0.0, |v| solution.value(v).clamp(0.0, 1.0)))
                .collect()
        })
        .collect();
    // Class-level pair time → job pairs: q[c][d] spread evenly over the n_c · n_d job pairs
    // (n_c (n_c − 1) / 2 within a class, each pair's time counted by both its jobs).
    let mut pair_alloc: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for (&(c, d, k), &(v, _, _)) in &shared {
        let q = solution.value(v).max(0.0);
        let per_pair = if c == d {
            q / (count(c) * (count(c) - 1.0))
        } else {
            q / (count(c) * count(d))
        };
        if per_pair <= NEGLIGIBLE {
            continue;
        }
        for &i in &members[c] {
            for &j in &members[d] {
                if i == j || (c == d && j < i) {
                    continue;
                }
                pair_alloc
                    .entry((i.min(j), i.max(j)))
                    .or_insert_with(|| vec![0.0; m])[k] += per_pair;
            }
        }
    }
    Ok(PackedAllocation {
        solo: solo_alloc,
        pairs: pair_alloc.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gavel::allocation::max_min_fairness;

    fn job(key: &str, throughput: Vec<f64>) -> PackJob {
        PackJob {
            job: AllocJob {
                scale_factor: 1.0,
                weight: 1.0,
                throughput,
            },
            pair_key: Some((key.to_string(), 1)),
        }
    }

    /// Each job's normalized throughput under a packed allocation.
    fn normalized(
        jobs: &[PackJob],
        pairs: &PairSpeeds,
        gpus: &[f64],
        x: &PackedAllocation,
    ) -> Vec<f64> {
        let plain: Vec<AllocJob> = jobs.iter().map(|j| j.job.clone()).collect();
        let iso = equal_share(&plain, gpus);
        (0..jobs.len())
            .map(|i| {
                let m = gpus.len();
                let mut tput: f64 = (0..m)
                    .map(|k| jobs[i].job.throughput[k] * x.solo[i][k])
                    .sum();
                for ((a, b), share) in &x.pairs {
                    if *a == i || *b == i {
                        let other = if *a == i { *b } else { *a };
                        let key = |j: usize| jobs[j].pair_key.clone().expect("keyed");
                        for (k, x) in share.iter().enumerate() {
                            tput += pairs.get(&key(i), &key(other), k).map_or(0.0, |s| s.0) * x;
                        }
                    }
                }
                tput / (0..m)
                    .map(|k| jobs[i].job.throughput[k] * iso[i][k])
                    .sum::<f64>()
            })
            .collect()
    }

    #[test]
    fn complementary_jobs_share_a_gpu_and_both_gain() {
        // Two jobs, one GPU. Alone each gets half the time (normalized throughput 1). Sharing,
        // each runs at 0.8 of its solo speed all the time: 1.6 — better for both.
        let jobs = vec![job("A", vec![1.0]), job("B", vec![1.0])];
        let mut pairs = PairSpeeds::default();
        pairs.insert(("A".into(), 1), ("B".into(), 1), vec![(0.8, 0.8)]);
        let x = max_min_fairness_packed(&jobs, &pairs, &[1.0], SolveMethod::InteriorPoint)
            .expect("solves");
        assert_eq!(x.pairs.len(), 1);
        assert!((x.pairs[0].1[0] - 1.0).abs() < 1e-4, "{x:?}");
        for v in normalized(&jobs, &pairs, &[1.0], &x) {
            assert!((v - 1.6).abs() < 1e-3, "{v}");
        }
    }

    #[test]
    fn harmful_sharing_is_not_used_and_the_result_is_max_min_het() {
        // Sharing at 0.3 each is worse than taking turns: the packed program falls back to the
        // heterogeneity-aware max-min allocation.
        let jobs = vec![
            job("A", vec![1.0, 0.4]),
            job("B", vec![1.0, 0.9]),
            job("C", vec![1.0, 0.2]),
        ];
        let mut pairs = PairSpeeds::default();
        for (a, b) in [("A", "B"), ("A", "C"), ("B", "C")] {
            pairs.insert((a.into(), 1), (b.into(), 1), vec![(0.3, 0.3), (0.1, 0.1)]);
        }
        let gpus = [1.0, 1.0];
        let x = max_min_fairness_packed(&jobs, &pairs, &gpus, SolveMethod::InteriorPoint)
            .expect("solves");
        let het = max_min_fairness(
            &jobs.iter().map(|j| j.job.clone()).collect::<Vec<_>>(),
            &gpus,
            true,
        )
        .expect("solves");
        let packed_min = normalized(&jobs, &pairs, &gpus, &x)
            .into_iter()
            .fold(f64::INFINITY, f64::min);
        let plain = PackedAllocation {
            solo: het,
            pairs: Vec::new(),
        };
        let het_min = normalized(&jobs, &pairs, &gpus, &plain)
            .into_iter()
            .fold(f64::INFINITY, f64::min);
        assert!(
            (packed_min - het_min).abs() < 1e-4,
            "packed {packed_min} vs het {het_min}"
        );
        assert!(
            x.pairs.iter().all(|(_, s)| s.iter().all(|v| *v < 1e-3)),
            "{x:?}"
        );
    }

    #[test]
    fn packed_allocations_are_feasible_and_classes_split_evenly() {
        // Six jobs of two types on 2 GPUs of one type: shares per job <= 1; GPUs counted once
        // per shared pair; jobs of one class get the same shares.
        let jobs: Vec<PackJob> = (0..6)
            .map(|i| job(if i % 2 == 0 { "A" } else { "B" }, vec![1.0]))
            .collect();
        let mut pairs = PairSpeeds::default();
        pairs.insert(("A".into(), 1), ("B".into(), 1), vec![(0.7, 0.9)]);
        pairs.insert(("A".into(), 1), ("A".into(), 1), vec![(0.55, 0.55)]);
        let x = max_min_fairness_packed(&jobs, &pairs, &[2.0], SolveMethod::InteriorPoint)
            .expect("solves");
        let per_job = x.time_per_job();
        for row in &per_job {
            assert!(row.iter().sum::<f64>() <= 1.0 + 1e-6, "{row:?}");
        }
        let gpus_used: f64 = x.solo.iter().map(|r| r[0]).sum::<f64>()
            + x.pairs.iter().map(|(_, s)| s[0]).sum::<f64>();
        assert!(gpus_used <= 2.0 + 1e-6, "{gpus_used}");
        let v = normalized(&jobs, &pairs, &[2.0], &x);
        assert!(
            (v[0] - v[2]).abs() < 1e-6 && (v[1] - v[3]).abs() < 1e-6,
            "{v:?}"
        );
        // Sharing helps here: better than the 1.0 of taking turns.
        assert!(v.iter().all(|x| *x > 1.0 + 1e-3), "{v:?}");
    }
}
