//! Muri's interleaved iteration time (SIGCOMM'22, §4; `calc_iteration_time` in its simulator):
//! how long one round of a group of up to four jobs takes when they share GPUs and each uses a
//! different resource at a time.
//!
//! Each job's iteration has three stages — storage I/O, CPU, GPU (the `resource_time_0..2`
//! columns of Muri's traces). The group runs as a four-slot pipeline: in a slot one job uses the
//! GPU, the next the CPU, and the one after reads storage, which spans two slots. The pipeline
//! is simulated for two rounds (eight slots); once a round takes as long as the one before (to
//! 0.1%), that is the group's iteration time, else the second round's length is. Over the
//! orders of the group's jobs the best (or worst) is taken; for two jobs a plain alternation is
//! also tried. The result is multiplied by the slowdown Muri measured for 2, 3 and 4 interleaved
//! jobs. Every member of a group advances one iteration per group iteration.

/// One job's stage times in one iteration, seconds (the job spec's).
pub use arbiter_model::IterationStages as Stages;

/// Which order of the group's jobs the pipeline uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobOrder {
    /// The fastest order (Muri).
    Best,
    /// The slowest (Muri's "worst ordering" ablation).
    Worst,
    /// The order given.
    AsGiven,
}

/// Muri's measured slowdowns of 2, 3 and 4 interleaved jobs over its model, relative to the
/// 1.015 per iteration every job's time already carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupFactors(pub [f64; 3]);

impl GroupFactors {
    /// Muri's (`itertime_overhead_list` in its `jobs.py`).
    pub const MURI: GroupFactors = GroupFactors([1.33 / 1.015, 1.5 / 1.015, 1.37 / 1.015]);
    /// Muri's simulator for its "without Blossom" ablation (`multi-resource-gpu-unaware`),
    /// which sets four jobs' slowdown to 1.3.
    pub const MURI_WITHOUT_BLOSSOM: GroupFactors =
        GroupFactors([1.33 / 1.015, 1.5 / 1.015, 1.3 / 1.015]);

    /// The slowdown of `jobs` interleaved jobs (1 for a job alone).
    pub fn of(&self, jobs: usize) -> f64 {
        match jobs {
            2..=4 => self.0[jobs - 2],
            _ => 1.0,
        }
    }
}

/// Muri's measured slowdown of `jobs` interleaved jobs over its model ([`GroupFactors::MURI`]).
pub fn group_factor(jobs: usize) -> f64 {
    GroupFactors::MURI.of(jobs)
}

/// `math.isclose(a, b, rel_tol)` with no absolute tolerance.
fn is_close(a: f64, b: f64, rel_tol: f64) -> bool {
    a == b || (a - b).abs() <= rel_tol * a.abs().max(b.abs())
}

/// One order's pipeline: the length of a steady round.
fn pipeline(order: &[Stages]) -> f64 {
    let n = order.len();
    let mut finish = [0.0f64; 9];
    let mut steady = 0.0;
    for i in 0..8 {
        if (i + 1) % 4 < n {
            finish[i + 1] = finish[i + 1].max(finish[i] + order[(i + 1) % 4].gpu_s);
        }
        if (i + 2) % 4 < n {
            finish[i + 1] = finish[i + 1].max(finish[i] + order[(i + 2) % 4].cpu_s);
        }
        if i > 0 && (i + 3) % 4 < n {
            finish[i + 1] = finish[i + 1].max(finish[i - 1] + order[(i + 3) % 4].io_s);
        }
        if i >= 4
            && is_close(
                finish[i + 1] - finish[i - 3],
                finish[i] - finish[i - 4],
                1e-3,
            )
        {
            steady = finish[i + 1] - finish[i - 3];
            break;
        }
    }
    // No steady round found (or a degenerate zero one): the second round's length, as far as
    // the pipeline got.
    if steady > 0.0 {
        steady
    } else {
        finish[8] - finish[4]
    }
}

/// The next order in lexicographic order of positions (Python's `itertools.permutations` over
/// distinct items); `false` after the last.
fn next_permutation(p: &mut [usize]) -> bool {
    let Some(i) = (1..p.len()).rev().find(|&i| p[i - 1] < p[i]) else {
        return false;
    };
    let j = (i..p.len()).rev().find(|&j| p[j] > p[i - 1]).unwrap_or(i);
    p.swap(i - 1, j);
    p[i..].reverse();
    true
}

/// The interleaved iteration time of a group, seconds, with Muri's group factor; a job alone
/// takes its own `solo_iteration_s`. Groups have 1 to 4 jobs (more are not interleaved by the
/// pipeline: only the first four stages' slots exist).
pub fn iteration_time_s(jobs: &[Stages], solo_iteration_s: f64, order: JobOrder) -> f64 {
    iteration_time_with_s(jobs, solo_iteration_s, order, GroupFactors::MURI)
}

/// [`iteration_time_s`] with other group slowdowns.
pub fn iteration_time_with_s(
    jobs: &[Stages],
    solo_iteration_s: f64,
    order: JobOrder,
    factors: GroupFactors,
) -> f64 {
    if jobs.len() <= 1 {
        return solo_iteration_s;
    }
    let better = |candidate: f64, best: f64| match order {
        JobOrder::Worst => candidate > best,
        _ => candidate < best,
    };
    let mut best = match order {
        JobOrder::Worst => 0.0,
        _ => f64::INFINITY,
    };
    if order == JobOrder::AsGiven {
        best = pipeline(jobs);
    } else {
        let mut positions: Vec<usize> = (0..jobs.len()).collect();
        let mut ordered = jobs.to_vec();
        loop {
            for (slot, &p) in positions.iter().enumerate() {
                ordered[slot] = jobs[p];
            }
            let t = pipeline(&ordered);
            if better(t, best) {
                best = t;
            }
            if !next_permutation(&mut positions) {
                break;
            }
        }
        if let [a, b] = jobs {
            // Two jobs may also simply alternate: one's I/O while the other computes.
            let alternating = a.io_s.max(b.cpu_s + b.gpu_s) + b.io_s.max(a.cpu_s + a.gpu_s);
            if better(alternating, best) {
                best = alternating;
            }
        }
    }
    best * factors.of(jobs.len())
}

/// Muri's edge weight between two groups that could merge: the resources the merged group's
/// jobs use per iteration over what four resources offer in its interleaved iteration time
/// (`calc_used_ratio`: the denominator counts four resources although three are modelled).
pub fn used_ratio(
    jobs: &[Stages],
    solo_iteration_s: f64,
    order: JobOrder,
    factors: GroupFactors,
) -> f64 {
    let used: f64 = jobs.iter().map(Stages::total_s).sum();
    used / (iteration_time_with_s(jobs, solo_iteration_s, order, factors) * 4.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(io_s: f64, cpu_s: f64, gpu_s: f64) -> Stages {
        Stages { io_s, cpu_s, gpu_s }
    }

    #[test]
    fn permutations_come_in_itertools_order() {
        let mut p = vec![0, 1, 2];
        let mut seen = vec![p.clone()];
        while next_permutation(&mut p) {
            seen.push(p.clone());
        }
        assert_eq!(
            seen,
            [
                [0, 1, 2],
                [0, 2, 1],
                [1, 0, 2],
                [1, 2, 0],
                [2, 0, 1],
                [2, 1, 0]
            ]
        );
    }

    #[test]
    fn a_job_alone_takes_its_own_time() {
        assert_eq!(
            iteration_time_s(&[s(1.0, 2.0, 3.0)], 6.09, JobOrder::Best),
            6.09
        );
        assert_eq!(group_factor(1), 1.0);
    }

    #[test]
    fn two_gpu_bound_jobs_take_turns_on_the_gpu() {
        // By hand: two jobs of 1 s of GPU and nothing else. Slot i+1 ends when the GPU stage of
        // job (i+1)%4 does, if that job exists: slots 1, 4, 5, 8 (job 1, job 0, job 1, job 0)
        // add 1 s each; the others (jobs 2 and 3 do not exist) add nothing. Finish times:
        // [0, 1, 1, 1, 1, 2, 2, 2, 2]... slot 4 is job 0 (4 % 4 = 0): finish[4] = 2, finish[5]
        // = 3, finish[8] = 4. The first check (i = 4): round 1..5 = 3 - 1 = 2 vs 0..4 = 2:
        // steady at 2 s — each job's 1 s, one after the other. The plain alternation gives
        // max(0, 0 + 1) + max(0, 0 + 1) = 2 too. Times the factor for two jobs.
        let t = iteration_time_s(&[s(0.0, 0.0, 1.0), s(0.0, 0.0, 1.0)], 1.0, JobOrder::Best);
        assert!((t - 2.0 * 1.33 / 1.015).abs() < 1e-12, "{t}");
    }

    #[test]
    fn complementary_jobs_overlap_and_the_alternation_can_win() {
        // By hand: A is all I/O (2 s), B all GPU (2 s). Alternating, A's I/O runs while B
        // computes: max(2, 0 + 2) + max(0, 0 + 0) = 2 s for both, half of running them in
        // turn (4 s). No pipeline order does better than 2 s, so the group takes 2 s × 1.33/1.015.
        let t = iteration_time_s(&[s(2.0, 0.0, 0.0), s(0.0, 0.0, 2.0)], 2.0, JobOrder::Best);
        assert!((t - 2.0 * 1.33 / 1.015).abs() < 1e-12, "{t}");
        let worst = iteration_time_s(&[s(2.0, 0.0, 0.0), s(0.0, 0.0, 2.0)], 2.0, JobOrder::Worst);
        assert!(worst >= t);
    }

    /// Values from Muri's own `calc_iteration_time` (its simulator's `matching.py`, Python 3.11)
    /// on stage times shaped like its traces' (seconds): the pipeline, the orders and the
    /// factors must agree to the last bits.
    #[test]
    fn three_and_four_jobs_match_muris_calculation() {
        let a = s(0.012, 0.034, 0.101);
        let b = s(0.050, 0.020, 0.040);
        let c = s(0.005, 0.090, 0.030);
        let d = s(0.030, 0.010, 0.200);
        for (jobs, order, expected) in [
            (vec![a, b], JobOrder::Best, MURI_AB_BEST),
            (vec![a, b, c], JobOrder::Best, MURI_ABC_BEST),
            (vec![a, b, c], JobOrder::Worst, MURI_ABC_WORST),
            (vec![a, b, c, d], JobOrder::Best, MURI_ABCD_BEST),
            (vec![a, b, c, d], JobOrder::AsGiven, MURI_ABCD_GIVEN),
        ] {
            let t = iteration_time_s(&jobs, 0.0, order);
            assert!(
                (t - expected).abs() <= 1e-12 * expected,
                "{order:?} {} jobs: {t} vs Muri's {expected}",
                jobs.len()
            );
        }
    }

    const MURI_AB_BEST: f64 = 0.20048275862068968;
    const MURI_ABC_BEST: f64 = 0.28226600985221684;
    const MURI_ABC_WORST: f64 = 0.3916256157635469;
    const MURI_ABCD_BEST: f64 = 0.5007586206896552;
    const MURI_ABCD_GIVEN: f64 = 0.5682463054187193;
}
