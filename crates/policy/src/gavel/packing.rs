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
//! equal scale factor share (as in Gavel), and pairs some optimum does without are left out
//! ([`PairColumns`]): under the interior point, those where neither job keeps more than half its
//! solo speed; under the simplex, every dominated pair (the two jobs' fractions of their solo
//! speeds adding up to at most 1). The program's value is the same either way (a property test
//! solves random programs with every pair and with each rule).
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

/// Which pairs of job classes become columns of the packed program. Every rule leaves out only
/// pairs that some optimum does without, so the program's value (the common level) is the same
/// under each; where the optimum is not unique, which optimum the solver returns can differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PairColumns {
    /// Every pair measured with both speeds positive: the program as Gavel writes it.
    #[cfg_attr(not(test), allow(dead_code))]
    All,
    /// Pairs where one of the two jobs keeps more than half its solo speed: sharing for τ when
    /// neither does is beaten by taking turns for τ/2 each on the same GPUs. The interior point's
    /// rule, left as it was when the published comparisons were reproduced (its central optimum
    /// depends on the columns there are).
    OneAboveHalf,
    /// Pairs the two jobs' fractions of their solo speeds add up to more than 1 on: otherwise
    /// running each alone for its fraction of the shared time does as well for both, in no more
    /// time and on no more GPUs (`dominated`). The simplex's rule: it prices every column at
    /// every pivot, and a vertex has no reason to prefer a dominated column.
    Undominated,
}

impl PairColumns {
    fn for_method(method: SolveMethod) -> Self {
        match method {
            SolveMethod::InteriorPoint => PairColumns::OneAboveHalf,
            SolveMethod::Simplex => PairColumns::Undominated,
        }
    }

    /// Whether a pair of classes with these speeds sharing (`mine`, `theirs`) and alone
    /// (`solo`) becomes a column; `same_class`: both jobs are of one class, where the program
    /// gives both `mine`.
    fn keep(self, (mine, theirs): (f64, f64), solo: (f64, f64), same_class: bool) -> bool {
        if mine <= 0.0 || theirs <= 0.0 {
            return false;
        }
        match self {
            PairColumns::All => true,
            PairColumns::OneAboveHalf => mine > 0.5 * solo.0 || theirs > 0.5 * solo.1,
            PairColumns::Undominated => {
                let theirs_fraction = if same_class {
                    mine / solo.0
                } else {
                    theirs / solo.1
                };
                !dominated(mine / solo.0, theirs_fraction)
            }
        }
    }
}

/// Whether sharing GPUs at these fractions of each job's solo speed is dominated by running the
/// two alone: replace τ of sharing by `a·τ` of the first job alone and `b·τ` of the second. Each
/// job's throughput is the same (its fraction of its solo speed for its fraction of the time),
/// each uses no more of its time budget (`a, b ≤ 1`), and the GPUs are busy `(a + b)·τ`, no more
/// than the shared `τ` when `a + b ≤ 1` (within one class the program counts a shared GPU as
/// half of each job's time: `2a ≤ 1`, the same condition). So any solution using the pair maps
/// onto one that does not with every job's normalized throughput unchanged, and the max-min
/// value cannot change when the column is left out.
fn dominated(a: f64, b: f64) -> bool {
    a + b <= 1.0
}

/// Gavel's `max-min-fairness-packed`, solved over job classes (see the module docs).
pub fn max_min_fairness_packed(
    jobs: &[PackJob],
    pairs: &PairSpeeds,
    gpus_per_type: &[f64],
    method: SolveMethod,
) -> Result<PackedAllocation, SolverError> {
    let columns = PairColumns::for_method(method);
    solve_packed(jobs, pairs, gpus_per_type, method, columns).map(|(x, _)| x)
}

/// The packed program with the pair columns `columns` keeps: the allocation and the common level
/// it reaches (the program's value).
fn solve_packed(
    jobs: &[PackJob],
    pairs: &PairSpeeds,
    gpus_per_type: &[f64],
    method: SolveMethod,
    columns: PairColumns,
) -> Result<(PackedAllocation, f64), SolverError> {
    if jobs.is_empty() {
        return Ok((PackedAllocation::default(), 0.0));
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
            let pair = pairs.pair(key_c, key_d);
            for k in 0..m {
                let solo = (first(c).job.throughput[k], first(d).job.throughput[k]);
                let Some(speeds) = pair.speeds(k, solo) else {
                    continue;
                };
                if columns.keep(speeds, solo, c == d) {
                    let (mine, theirs) = speeds;
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
    let packed = PackedAllocation {
        solo: solo_alloc,
        pairs: pair_alloc.into_iter().collect(),
    };
    Ok((packed, solution.value(t)))
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

    /// Random packed programs: 2–10 jobs of 1–5 job types (scale factor 1 or 2, weight 1 or 2,
    /// some types unable to run on some GPU types) over 1–3 GPU types of 2–8 GPUs, and a table
    /// of pair speeds between 0 and 1.2 of each job's solo speed — sharing that helps, that is
    /// dominated, and that is not measured on some types. Every type has room for every job (Gavel
    /// leaves jobs too large for the cluster out of the program).
    fn random_packed_programs()
    -> impl proptest::strategy::Strategy<Value = (Vec<PackJob>, PairSpeeds, Vec<f64>)> {
        use proptest::prelude::*;
        (1usize..4, 1usize..6).prop_flat_map(|(types, kinds)| {
            let kind = (
                proptest::collection::vec(prop_oneof![Just(0.0), 0.1f64..1.5], types),
                prop_oneof![Just(1.0), Just(2.0)],
                prop_oneof![Just(1.0), Just(2.0)],
            );
            let fraction = prop_oneof![Just(None), (0.0f64..1.2).prop_map(Some)];
            (
                proptest::collection::vec(kind, kinds),
                proptest::collection::vec(0usize..kinds, 2..11),
                proptest::collection::vec((fraction.clone(), fraction), kinds * kinds * types),
                proptest::collection::vec(2u32..9, types),
            )
                .prop_map(move |(kinds_of, picks, fractions, gpus)| {
                    let key = |p: usize| (format!("type-{p}"), kinds_of[p].1 as u32);
                    let jobs = picks
                        .iter()
                        .map(|&p| {
                            let (throughput, scale_factor, weight) = kinds_of[p].clone();
                            let mut throughput = throughput;
                            if throughput.iter().all(|&t| t == 0.0) {
                                throughput[0] = 1.0;
                            }
                            PackJob {
                                job: AllocJob {
                                    scale_factor,
                                    weight,
                                    throughput,
                                },
                                pair_key: Some(key(p)),
                            }
                        })
                        .collect::<Vec<_>>();
                    let mut pairs = PairSpeeds::default();
                    for p in 0..kinds_of.len() {
                        for q in p..kinds_of.len() {
                            let per_type = (0..types)
                                .map(|k| {
                                    let (a, b) = fractions[(p * kinds_of.len() + q) * types + k];
                                    let speed = |f: Option<f64>, of: usize| {
                                        f.map_or(0.0, |f| f * kinds_of[of].0[k])
                                    };
                                    // Within one job type both jobs run alike.
                                    let b = if p == q { a } else { b };
                                    (speed(a, p), speed(b, q))
                                })
                                .collect();
                            pairs.insert(key(p), key(q), per_type);
                        }
                    }
                    let gpus = gpus.into_iter().map(f64::from).collect();
                    (jobs, pairs, gpus)
                })
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Leaving pair columns out is exact: with every measured pair a column, with the
        /// interior point's rule and with the simplex's (dominated pairs out), the program's
        /// value is the same — within 1e-9 relative solved by the simplex, within Clarabel's
        /// accuracy by the interior point — and each allocation gives every job that level.
        #[test]
        fn pruned_pairs_leave_the_optimum_unchanged(
            (jobs, pairs, gpus) in random_packed_programs(),
        ) {
            let level = |method, columns| {
                let (x, level) = solve_packed(&jobs, &pairs, &gpus, method, columns)
                    .expect("solves");
                // The program's level weighs each job's normalized throughput by its scale
                // factor over its weight.
                let least = normalized(&jobs, &pairs, &gpus, &x)
                    .into_iter()
                    .zip(&jobs)
                    .map(|(v, j)| v * j.job.scale_factor / j.job.weight)
                    .fold(f64::INFINITY, f64::min);
                (level, least)
            };
            let (all, all_least) = level(SolveMethod::Simplex, PairColumns::All);
            proptest::prop_assert!(all_least >= all * (1.0 - 1e-7), "{all_least} < {all}");
            for columns in [PairColumns::OneAboveHalf, PairColumns::Undominated] {
                let (pruned, least) = level(SolveMethod::Simplex, columns);
                proptest::prop_assert!(
                    (pruned - all).abs() <= 1e-9 * all.abs().max(1e-12),
                    "{columns:?}: {pruned} against {all} with every pair"
                );
                proptest::prop_assert!(least >= pruned * (1.0 - 1e-7), "{least} < {pruned}");
                let (interior, _) = level(SolveMethod::InteriorPoint, columns);
                proptest::prop_assert!(
                    (interior - all).abs() <= 1e-5 * all.abs().max(1e-12),
                    "{columns:?}: interior point {interior} against {all}"
                );
            }
        }
    }
}
