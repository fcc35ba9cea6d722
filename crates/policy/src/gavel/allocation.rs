//! Gavel's allocation policies (Narayanan et al., OSDI'20, §3–4): linear programs over the
//! allocation matrix X[j][k] — the share of time job j should spend on GPU type k.
//!
//! Every formulation shares Gavel's base constraints (`scheduler/policies/policy.py`):
//!
//! ```text
//!   X[j][k] >= 0                         (shares are non-negative)
//!   Σ_k X[j][k] <= 1                     (a job runs at most all of the time)
//!   Σ_j sf_j · X[j][k] <= G_k            (a type's GPUs are not over-subscribed; sf = GPUs of job j)
//! ```
//!
//! and reads throughputs as T[j][k], a job's speed on type k relative to its V100 speed (Gavel uses
//! steps/s; every objective here normalizes per job, so the per-job scale cancels).

use arbiter_solver::{Direction, LinearProgram, SolverError, VarId};

/// One job as the allocation LPs see it.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocJob {
    /// GPUs it needs (Gavel's scale factor).
    pub scale_factor: f64,
    /// Priority weight w_j (≥ 1 gives more).
    pub weight: f64,
    /// Throughput on each GPU type, T[j][k] (0: cannot run there).
    pub throughput: Vec<f64>,
}

/// An allocation: X[j][k] per job (same order as the input) and type.
pub type Allocation = Vec<Vec<f64>>;

/// Gavel's "isolated" baseline for job j: an equal share of every type — X[j][k] = G_k / n for n
/// jobs, scaled down so that the row sums to at most 1 — as the shared Gavel notes describe the
/// normalisation of max-min fairness. Deterministic and solver-independent.
pub fn equal_share(jobs: &[AllocJob], gpus_per_type: &[f64]) -> Allocation {
    let n = jobs.len().max(1) as f64;
    let row: Vec<f64> = gpus_per_type.iter().map(|g| g / n).collect();
    let sum: f64 = row.iter().sum();
    let scale = if sum > 1.0 { 1.0 / sum } else { 1.0 };
    jobs.iter().map(|_| row.iter().map(|x| x * scale).collect()).collect()
}

/// Max-min fairness (Gavel's `max_min_fairness` / `max_min_fairness_perf`, Tiresias' LAS in the
/// heterogeneous setting):
///
/// ```text
///   maximise  min_j  (1 / w_j) · sf_j · Σ_k T[j][k] X[j][k] / isolated_j
/// ```
///
/// where `isolated_j = Σ_k T[j][k] · E[j][k]` is the job's throughput under the equal share E.
/// The heterogeneity-agnostic form (`aware = false`) sets every T[j][k] = 1 and isolated_j = 1,
/// so only time shares count. Solved as an LP with an auxiliary variable t:
/// `maximise t` s.t. `t <= c_j · X[j]` for every job, plus the base constraints.
///
/// Jobs off the bottleneck are not pushed to their best value: the interior-point solver returns
/// a central point of the optimal face, as Gavel's ECOS/cvxpy setup does.
pub fn max_min_fairness(jobs: &[AllocJob], gpus_per_type: &[f64], aware: bool) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let m = gpus_per_type.len();
    let isolated = equal_share(jobs, gpus_per_type);
    let mut lp = LinearProgram::new(Direction::Maximise);
    let x = base_variables(&mut lp, jobs, gpus_per_type);
    let t = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
    lp.add_objective(t, 1.0);
    for (j, job) in jobs.iter().enumerate() {
        let tput = |k: usize| if aware { job.throughput[k] } else if job.throughput[k] > 0.0 { 1.0 } else { 0.0 };
        let isolated_tput: f64 = if aware { (0..m).map(|k| tput(k) * isolated[j][k]).sum() } else { 1.0 };
        let scale = job.scale_factor / (job.weight.max(f64::MIN_POSITIVE) * isolated_tput.max(f64::MIN_POSITIVE));
        // t - Σ_k c_jk X_jk <= 0
        let mut row = vec![(t, 1.0)];
        row.extend((0..m).map(|k| (x[j][k], -tput(k) * scale)));
        lp.add_le(row, 0.0);
    }
    let solution = lp.solve()?;
    Ok(read_allocation(&solution, &x))
}

/// Adds X (jobs × types) with the base constraints; returns the variable ids.
fn base_variables(lp: &mut LinearProgram, jobs: &[AllocJob], gpus_per_type: &[f64]) -> Vec<Vec<VarId>> {
    let m = gpus_per_type.len();
    let x: Vec<Vec<VarId>> = jobs
        .iter()
        // Upper bounds of 1 are implied by the row constraint (Gavel states none); a type where
        // the job cannot run is fixed at 0.
        .map(|job| (0..m).map(|k| lp.add_var(0.0, if job.throughput[k] > 0.0 { f64::INFINITY } else { 0.0 })).collect())
        .collect();
    for row in &x {
        lp.add_le(row.iter().map(|v| (*v, 1.0)).collect(), 1.0);
    }
    for (k, &gpus) in gpus_per_type.iter().enumerate() {
        lp.add_le(jobs.iter().zip(&x).map(|(job, row)| (row[k], job.scale_factor)).collect(), gpus);
    }
    x
}

fn read_allocation(solution: &arbiter_solver::LpSolution, x: &[Vec<VarId>]) -> Allocation {
    x.iter().map(|row| row.iter().map(|v| solution.value(*v).clamp(0.0, 1.0)).collect()).collect()
}

/// Effective throughput of each job under `allocation`: Σ_k T[j][k] X[j][k].
pub fn effective_throughputs(jobs: &[AllocJob], allocation: &Allocation) -> Vec<f64> {
    jobs.iter().zip(allocation).map(|(job, row)| job.throughput.iter().zip(row).map(|(t, x)| t * x).sum()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(throughput: Vec<f64>) -> AllocJob {
        AllocJob { scale_factor: 1.0, weight: 1.0, throughput }
    }

    /// Every allocation respects the base constraints.
    fn assert_feasible(jobs: &[AllocJob], gpus: &[f64], x: &Allocation) {
        for row in x {
            assert!(row.iter().all(|v| *v >= -1e-7));
            assert!(row.iter().sum::<f64>() <= 1.0 + 1e-6, "{row:?}");
        }
        for (k, g) in gpus.iter().enumerate() {
            let used: f64 = jobs.iter().zip(x).map(|(j, r)| j.scale_factor * r[k]).sum();
            assert!(used <= g + 1e-6, "type {k}: {used} > {g}");
        }
    }

    #[test]
    fn gavel_golden_case_heterogeneity_aware() {
        // Gavel's own policy test: job 0 {V100 2.0, P100 1.0, K80 0.5}, job 1 {3.0, 2.0, 1.0};
        // cluster {V100 1, P100 2, K80 3}; effective throughputs 1.4194 and 2.5806. (Types are
        // ordered V100, P100, K80 here.) Compare objectives, not X.
        let jobs = vec![job(vec![2.0, 1.0, 0.5]), job(vec![3.0, 2.0, 1.0])];
        let gpus = [1.0, 2.0, 3.0];
        let x = max_min_fairness(&jobs, &gpus, true).expect("solves");
        assert_feasible(&jobs, &gpus, &x);
        let eff = effective_throughputs(&jobs, &x);
        assert!((eff[0] - 1.4194).abs() < 2e-3, "{eff:?}");
        assert!((eff[1] - 2.5806).abs() < 2e-3, "{eff:?}");
    }

    #[test]
    fn agnostic_form_gives_equal_time_regardless_of_speed() {
        // Two jobs, one GPU of each of two types: both get a total share of 1 in the agnostic
        // form; the split between types is not driven by throughput.
        let jobs = vec![job(vec![8.8, 1.0]), job(vec![1.0, 1.0])];
        let gpus = [1.0, 1.0];
        let x = max_min_fairness(&jobs, &gpus, false).expect("solves");
        assert_feasible(&jobs, &gpus, &x);
        for row in &x {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-4, "{row:?}");
        }
    }

    #[test]
    fn heterogeneity_aware_form_puts_the_cyclegan_on_the_v100() {
        // One V100 (type 0), one K80 (type 1). A CycleGAN-like job is 8.8x faster on the V100;
        // the other job runs a little faster on the K80 (as some recommendation models do).
        // Max-min fairness over normalized throughput must give the V100 to the CycleGAN and the
        // K80 to the other job. The other job is the bottleneck (its best is all of the K80);
        // the CycleGAN then gets only V100 time, at least the 0.61 it needs to stay above it.
        let jobs = vec![job(vec![1.0, 1.0 / 8.8]), job(vec![1.0, 1.2])];
        let gpus = [1.0, 1.0];
        let x = max_min_fairness(&jobs, &gpus, true).expect("solves");
        assert_feasible(&jobs, &gpus, &x);
        assert!(x[0][0] > 0.6 && x[0][1] < 0.01, "{x:?}");
        assert!(x[1][1] > 0.99 && x[1][0] < 0.01, "{x:?}");
        // The agnostic form sees equal throughputs and has no reason to prefer this split.
        let agnostic = max_min_fairness(&jobs, &gpus, false).expect("solves");
        assert!(agnostic[0][0] < 0.9, "{agnostic:?}");
    }

    #[test]
    fn weights_and_scale_factors_shift_the_shares() {
        let mut heavy = job(vec![1.0]);
        heavy.weight = 3.0;
        let jobs = vec![heavy, job(vec![1.0])];
        let x = max_min_fairness(&jobs, &[1.0], true).expect("solves");
        // Normalized throughput / weight equalised: x0 / 3 == x1, x0 + x1 = 1.
        assert!((x[0][0] - 0.75).abs() < 1e-3 && (x[1][0] - 0.25).abs() < 1e-3, "{x:?}");
    }
}
