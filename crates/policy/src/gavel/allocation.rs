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

use arbiter_solver::{Direction, LinearProgram, SolveMethod, SolveOptions, SolverError, VarId};

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
    jobs.iter()
        .map(|_| row.iter().map(|x| x * scale).collect())
        .collect()
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
pub fn max_min_fairness(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
) -> Result<Allocation, SolverError> {
    solve_max_min(
        jobs,
        gpus_per_type,
        aware,
        &mut MaxMinMemo::default(),
        true,
        SolveMethod::InteriorPoint,
    )
}

/// Max-min fairness programs already solved, by their exact input: the job classes in order with
/// their sizes, the job count (it sets the equal-share baseline), the GPUs per type and the form.
/// Gavel recomputes the allocation whenever the job set changes, and with the agnostic form
/// (every job of one size is one class) the same program recurs: about 9 in 10 of the Figure-8
/// point's recomputations. The solver is deterministic, so a remembered answer is the answer.
#[derive(Clone, Debug, Default)]
pub struct MaxMinMemo {
    solved: std::collections::BTreeMap<MemoKey, Vec<Vec<f64>>>,
}

/// The form (aware), the method (simplex), the GPUs per type, the job count and the classes.
type MemoKey = (
    bool,
    bool,
    Vec<u64>,
    usize,
    Vec<((u64, u64, Vec<u64>), usize)>,
);

impl MaxMinMemo {
    /// Programs remembered at most; the memo starts afresh when full (a bound on memory, not a
    /// cache policy: which answers are remembered never changes an answer).
    pub const CAPACITY: usize = 4096;
}

/// Gavel's allocation step for LAS: [`max_min_fairness`], answering from `memo` when the same
/// program was solved before. The heterogeneity-aware programs are solved without iterative
/// refinement: on every reproduction (Figure 8, seeds 0-2) their answers are identical and they
/// solve a quarter faster. (The agnostic ones are degenerate — every class has the same
/// throughput pattern — and their central point moves without it, by 0.04% of JCT; the same
/// programs inside `hierarchical` move more: both keep it.) `method`: the interior point (the
/// reproductions' central point) or the simplex (a vertex of the same optimum, faster).
pub fn max_min_fairness_memo(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
    memo: &mut MaxMinMemo,
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    solve_max_min(jobs, gpus_per_type, aware, memo, !aware, method)
}

fn solve_max_min(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
    memo: &mut MaxMinMemo,
    refine: bool,
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    // Jobs with the same scale factor, weight and throughputs are interchangeable: the program is
    // solved over classes of them (X per class, capacity weighted by class size), which has the
    // same optimum — averaging an optimal solution over each class keeps it feasible and every
    // job's value — and is far smaller when many jobs share a job type (2,048 jobs of Gavel's 26
    // types: 26 rows instead of 2,048).
    let keys: Vec<(u64, u64, Vec<u64>)> = jobs
        .iter()
        .map(|job| {
            job_class_key(&AllocJob {
                throughput: throughput_row(job, aware),
                ..job.clone()
            })
        })
        .collect();
    let (class_of_job, members) = group_by_key(keys.iter());
    let key: MemoKey = (
        aware,
        method == SolveMethod::Simplex,
        gpus_per_type.iter().map(|g| g.to_bits()).collect(),
        jobs.len(),
        members
            .iter()
            .map(|class| (keys[class[0]].clone(), class.len()))
            .collect(),
    );
    let per_class = match memo.solved.get(&key) {
        Some(per_class) => per_class.clone(),
        None => {
            let per_class =
                max_min_fairness_classes(jobs, gpus_per_type, aware, &members, refine, method)?;
            if memo.solved.len() >= MaxMinMemo::CAPACITY {
                memo.solved.clear();
            }
            memo.solved.insert(key, per_class.clone());
            per_class
        }
    };
    Ok(class_of_job.iter().map(|&c| per_class[c].clone()).collect())
}

/// The max-min program over job classes (`members`: each class's jobs, first one standing for
/// it); X per class. `refine`: the interior point's iterative refinement.
fn max_min_fairness_classes(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
    members: &[Vec<usize>],
    refine: bool,
    method: SolveMethod,
) -> Result<Vec<Vec<f64>>, SolverError> {
    let (lp, x) = max_min_program(jobs, gpus_per_type, aware, members);
    let options = SolveOptions {
        iterative_refinement: refine,
        ..SolveOptions::default()
    };
    let solution = lp.solve_by(method, &options)?;
    Ok(read_allocation(&solution, &x))
}

/// The max-min program over job classes (`maximise t`, its objective) and X's variables per
/// class.
fn max_min_program(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
    members: &[Vec<usize>],
) -> (LinearProgram, Vec<Vec<VarId>>) {
    let m = gpus_per_type.len();
    let isolated = equal_share(jobs, gpus_per_type);
    let mut lp = LinearProgram::new(Direction::Maximise);
    let x: Vec<Vec<VarId>> = members
        .iter()
        .map(|class| {
            let job = &jobs[class[0]];
            (0..m)
                .map(|k| {
                    lp.add_var(
                        0.0,
                        if job.throughput[k] > 0.0 {
                            f64::INFINITY
                        } else {
                            0.0
                        },
                    )
                })
                .collect()
        })
        .collect();
    for row in &x {
        lp.add_le(row.iter().map(|v| (*v, 1.0)).collect(), 1.0);
    }
    for (k, &gpus) in gpus_per_type.iter().enumerate() {
        let row = members
            .iter()
            .zip(&x)
            .map(|(class, vars)| (vars[k], class.len() as f64 * jobs[class[0]].scale_factor));
        lp.add_le(row.collect(), gpus);
    }
    let t = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
    lp.add_objective(t, 1.0);
    for (c, class) in members.iter().enumerate() {
        let (j, job) = (class[0], &jobs[class[0]]);
        let tput = |k: usize| {
            if aware {
                job.throughput[k]
            } else if job.throughput[k] > 0.0 {
                1.0
            } else {
                0.0
            }
        };
        let isolated_tput: f64 = if aware {
            (0..m).map(|k| tput(k) * isolated[j][k]).sum()
        } else {
            1.0
        };
        let scale = job.scale_factor
            / (job.weight.max(f64::MIN_POSITIVE) * isolated_tput.max(f64::MIN_POSITIVE));
        // t - Σ_k c_jk X_jk <= 0
        let mut row = vec![(t, 1.0)];
        row.extend((0..m).map(|k| (x[c][k], -tput(k) * scale)));
        lp.add_le(row, 0.0);
    }
    (lp, x)
}

/// What makes two jobs interchangeable in an allocation program: scale factor, weight and
/// throughputs, compared exactly.
pub(crate) fn job_class_key(job: &AllocJob) -> (u64, u64, Vec<u64>) {
    (
        job.scale_factor.to_bits(),
        job.weight.to_bits(),
        job.throughput.iter().map(|t| t.to_bits()).collect(),
    )
}

/// Groups items by key: each item's class, and each class's members, classes in order of first
/// appearance.
pub(crate) fn group_by_key<K: Ord>(keys: impl Iterator<Item = K>) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut class_of_key = std::collections::BTreeMap::new();
    let mut class_of_item = Vec::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (i, key) in keys.enumerate() {
        let c = *class_of_key.entry(key).or_insert_with(|| {
            members.push(Vec::new());
            members.len() - 1
        });
        members[c].push(i);
        class_of_item.push(c);
    }
    (class_of_item, members)
}

/// Progress state of a job, for objectives that look at remaining work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobProgress {
    /// Work left, seconds at reference (V100) speed — Gavel's steps left ÷ V100 throughput.
    pub remaining_s: f64,
    /// Seconds since the job arrived.
    pub since_arrival_s: f64,
}

fn throughput_row(job: &AllocJob, aware: bool) -> Vec<f64> {
    job.throughput
        .iter()
        .map(|&t| {
            if aware {
                t
            } else if t > 0.0 {
                1.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Minimum makespan (Gavel's `min_total_duration`): the smallest M such that every job can
/// finish its remaining work within M at its effective throughput. With s = 1 / M this is an LP:
///
/// ```text
///   maximise s   s.t.   Σ_k T[j][k] X[j][k] >= R_j · s   for every job j
/// ```
///
/// (R_j: remaining work at reference speed), plus the base constraints. Gavel bisects on M to a
/// 5% gap; the LP gives the exact optimum. The agnostic form sets every T[j][k] = 1.
pub fn min_makespan(
    jobs: &[AllocJob],
    progress: &[JobProgress],
    gpus_per_type: &[f64],
    aware: bool,
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let m = gpus_per_type.len();
    // Scale remaining work to at most 1 so s stays well conditioned.
    let max_remaining = progress
        .iter()
        .map(|p| p.remaining_s)
        .fold(0.0, f64::max)
        .max(1e-9);
    let mut lp = LinearProgram::new(Direction::Maximise);
    let x = base_variables(&mut lp, jobs, gpus_per_type);
    let speed = lp.add_var(0.0, f64::INFINITY);
    lp.add_objective(speed, 1.0);
    for (j, job) in jobs.iter().enumerate() {
        let t = throughput_row(job, aware);
        let mut row = vec![(speed, progress[j].remaining_s / max_remaining)];
        row.extend((0..m).map(|k| (x[j][k], -t[k])));
        lp.add_le(row, 0.0);
    }
    let solution = lp.solve_by(method, &SolveOptions::default())?;
    Ok(read_allocation(&solution, &x))
}

/// Finish-time fairness (Themis, NSDI'20, as Gavel formulates it): minimise the largest ratio of
/// a job's expected finish time under X to that under its isolated (equal) share,
///
/// ```text
///   ρ_j(X) = (t_j + R_j / Σ_k T[j][k] X[j][k]) / (t_j + R_j / isolated_j)
/// ```
///
/// (t_j: time since arrival, R_j: remaining work). ρ_j <= ρ is linear in X for a fixed ρ
/// (Σ_k T X >= R_j / (ρ D_j − t_j), D_j the denominator), so the minimal ρ is found by bisection
/// over feasibility LPs (to 0.1%), and X is the solution at that ρ. The agnostic form sets
/// every T[j][k] = 1.
///
/// With the simplex (`method`), each feasibility program is asked as the largest fraction
/// `s <= 1` of every job's needed throughput that can be given at once (`Σ_k T X >= needed · s`,
/// which holds at the origin, as the simplex needs): ρ is feasible when s reaches 1.
pub fn finish_time_fairness(
    jobs: &[AllocJob],
    progress: &[JobProgress],
    gpus_per_type: &[f64],
    aware: bool,
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let m = gpus_per_type.len();
    let isolated = equal_share(jobs, gpus_per_type);
    let rows: Vec<Vec<f64>> = jobs.iter().map(|j| throughput_row(j, aware)).collect();
    let denominators: Vec<f64> = (0..jobs.len())
        .map(|j| {
            let iso: f64 = (0..m)
                .map(|k| rows[j][k] * isolated[j][k])
                .sum::<f64>()
                .max(1e-12);
            progress[j].since_arrival_s + progress[j].remaining_s / iso
        })
        .collect();
    // Whether ρ is feasible, and X there; `by_simplex`: in the simplex's form.
    let attempt = |rho: f64, by_simplex: bool| -> Result<Option<Allocation>, SolverError> {
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = base_variables(&mut lp, jobs, gpus_per_type);
        // The fraction of every job's need met (the simplex's form); 1 for the interior point.
        let met = by_simplex.then(|| lp.add_var(0.0, 1.0));
        if let Some(met) = met {
            lp.add_objective(met, 1.0);
        }
        for j in 0..jobs.len() {
            if progress[j].remaining_s <= 0.0 {
                continue; // nothing left to do: any share keeps ρ_j at its current value
            }
            let slack = rho * denominators[j] - progress[j].since_arrival_s;
            if slack <= 0.0 {
                return Ok(None);
            }
            let needed = progress[j].remaining_s / slack;
            let mut row: Vec<(VarId, f64)> = (0..m).map(|k| (x[j][k], rows[j][k])).collect();
            match met {
                Some(met) => {
                    row.push((met, -needed));
                    lp.add_ge(row, 0.0);
                }
                None => lp.add_ge(row, needed),
            }
        }
        let solved = match met {
            Some(met) => lp
                .solve_simplex()
                .map(|solution| (solution.value(met) >= 1.0 - 1e-9).then_some(solution)),
            None => lp.solve().map(Some),
        };
        match solved {
            Ok(Some(solution)) => Ok(Some(read_allocation(&solution, &x))),
            Ok(None) | Err(SolverError::Infeasible) => Ok(None),
            Err(e) => Err(e),
        }
    };
    // A program too large for the simplex is the interior point's; every ρ asks one of the
    // same size, so once refused the simplex's form is not built again.
    let refused = std::cell::Cell::new(method == SolveMethod::InteriorPoint);
    let feasible_at = |rho: f64| {
        if !refused.get() {
            match attempt(rho, true) {
                Err(SolverError::Unsupported(_)) => refused.set(true),
                other => return other,
            }
        }
        attempt(rho, false)
    };
    let mut hi = 1.0;
    let mut best = loop {
        if let Some(x) = feasible_at(hi)? {
            break x;
        }
        hi *= 2.0;
        if hi > 1e9 {
            return Err(SolverError::Infeasible);
        }
    };
    let mut lo = 0.0;
    while hi - lo > 1e-3 * hi {
        let mid = (lo + hi) / 2.0;
        match feasible_at(mid)? {
            Some(x) => {
                best = x;
                hi = mid;
            }
            None => lo = mid,
        }
    }
    Ok(best)
}

/// Maximum total throughput (Gavel's `ThroughputSumWithPerf`): maximise Σ_j Σ_k T[j][k] X[j][k]
/// over the base constraints, with T in absolute steps per second (so `AllocJob::throughput`
/// must be absolute here, as Gavel's is).
pub fn max_throughput(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let mut lp = LinearProgram::new(Direction::Maximise);
    let x = base_variables(&mut lp, jobs, gpus_per_type);
    for (j, job) in jobs.iter().enumerate() {
        for (k, &t) in job.throughput.iter().enumerate() {
            lp.add_objective(x[j][k], t);
        }
    }
    let solution = lp.solve_by(method, &SolveOptions::default())?;
    Ok(read_allocation(&solution, &x))
}

/// How a tenant's share is divided among its jobs in [`hierarchical`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InnerPolicy {
    /// Max-min fairness among the tenant's jobs.
    #[default]
    Fairness,
    /// Arrival order: each job takes as much of its fastest types as it can use before the next
    /// job gets anything.
    Fifo,
}

/// Fractional FIFO inside a share: jobs in the given (arrival) order fill the capacity of
/// their fastest types first (the first listed type when `aware` is false), up to a total share
/// of 1 each.
pub fn fifo_fractional(jobs: &[AllocJob], capacity: &[f64], aware: bool) -> Allocation {
    let m = capacity.len();
    let mut free = capacity.to_vec();
    let mut x = vec![vec![0.0; m]; jobs.len()];
    for (j, job) in jobs.iter().enumerate() {
        let mut types: Vec<usize> = (0..m).filter(|&k| job.throughput[k] > 0.0).collect();
        if aware {
            types.sort_by(|a, b| {
                job.throughput[*b]
                    .total_cmp(&job.throughput[*a])
                    .then(a.cmp(b))
            });
        }
        let mut left: f64 = 1.0;
        for k in types {
            if left <= 1e-12 {
                break;
            }
            let share = left.min(free[k] / job.scale_factor.max(1e-12));
            if share > 1e-12 {
                x[j][k] = share;
                free[k] -= share * job.scale_factor;
                left -= share;
            }
        }
    }
    x
}

/// Hierarchical max-min fairness: first across tenants, by water-filling, then among each
/// tenant's jobs.
///
/// Top level (Gavel's `MaxMinFairnessMultiEntityPolicyWithPerf`): a tenant's value is
/// `(1 / w_e) · Σ_{j ∈ e} sf_j · Σ_k T[j][k] X[j][k] / isolated_j` (isolated as in
/// [`max_min_fairness`]). Gavel's single-pass policy maximises the smallest value once, which can
/// leave GPUs idle when a tenant cannot use its share; we water-fill instead, as Gavel's
/// water-filling policy does: maximise the smallest value, freeze the tenants that cannot get
/// more (checked with one LP per tenant), and repeat for the rest.
///
/// Bottom level: each tenant's jobs share what the top level gave the tenant — per type,
/// Σ_{j ∈ e} sf_j · X[j][k] GPUs (Gavel sums X without sf; the two agree for single-GPU jobs) —
/// by [`max_min_fairness`] with equal job weights, or in arrival order ([`fifo_fractional`];
/// `jobs` must then be in arrival order).
pub fn hierarchical(
    jobs: &[AllocJob],
    tenant_of: &[usize],
    tenant_weights: &[f64],
    gpus_per_type: &[f64],
    aware: bool,
    inner: InnerPolicy,
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let m = gpus_per_type.len();
    let isolated = equal_share(jobs, gpus_per_type);
    let members: Vec<Vec<usize>> = (0..tenant_weights.len())
        .map(|e| (0..jobs.len()).filter(|&j| tenant_of[j] == e).collect())
        .collect();
    // Each tenant's value as linear terms over X (variable index = j * m + k).
    let value_terms: Vec<Vec<(usize, f64)>> = (0..tenant_weights.len())
        .map(|e| {
            let mut terms = Vec::new();
            for &j in &members[e] {
                let tput = throughput_row(&jobs[j], aware);
                let iso: f64 = if aware {
                    (0..m)
                        .map(|k| tput[k] * isolated[j][k])
                        .sum::<f64>()
                        .max(1e-12)
                } else {
                    1.0
                };
                let scale = jobs[j].scale_factor / (tenant_weights[e].max(f64::MIN_POSITIVE) * iso);
                terms.extend((0..m).map(|k| (j * m + k, tput[k] * scale)));
            }
            terms
        })
        .collect();
    let active: Vec<usize> = (0..tenant_weights.len())
        .filter(|&e| !members[e].is_empty())
        .collect();
    let mut frozen: Vec<Option<f64>> = vec![None; tenant_weights.len()];
    // Builds the program: base constraints, frozen tenants at their level, the others at >= `floor`
    // (or >= t when `floor` is None, maximising t); `objective_tenant` maximises one tenant.
    let solve = |frozen: &[Option<f64>],
                 floor: Option<f64>,
                 objective_tenant: Option<usize>|
     -> Result<(Allocation, f64), SolverError> {
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = base_variables(&mut lp, jobs, gpus_per_type);
        let var = |i: usize| x[i / m][i % m];
        let t = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
        for &e in &active {
            let terms: Vec<_> = value_terms[e].iter().map(|&(i, c)| (var(i), c)).collect();
            match (frozen[e], floor) {
                (Some(level), _) => lp.add_ge(terms, level * (1.0 - 1e-6)),
                (None, Some(level)) => lp.add_ge(terms, level * (1.0 - 1e-6)),
                (None, None) => {
                    let mut row = vec![(t, 1.0)];
                    row.extend(terms.into_iter().map(|(v, c)| (v, -c)));
                    lp.add_le(row, 0.0);
                }
            }
        }
        match objective_tenant {
            Some(e) => value_terms[e]
                .iter()
                .for_each(|&(i, c)| lp.add_objective(var(i), c)),
            None if floor.is_none() => lp.add_objective(t, 1.0),
            None => {}
        }
        // (Programs with frozen levels do not hold at the origin: the interior point solves
        // them whichever method is asked.)
        let solution = lp.solve_by(method, &SolveOptions::default())?;
        let value = match objective_tenant {
            Some(e) => value_terms[e]
                .iter()
                .map(|&(i, c)| c * solution.value(var(i)))
                .sum(),
            None => solution.value(t),
        };
        Ok((read_allocation(&solution, &x), value))
    };
    while active.iter().any(|&e| frozen[e].is_none()) {
        let (_, level) = solve(&frozen, None, None)?;
        let mut newly = Vec::new();
        for &e in active.iter().filter(|&&e| frozen[e].is_none()) {
            let (_, best) = solve(&frozen, Some(level), Some(e))?;
            if best <= level * (1.0 + 1e-4) + 1e-9 {
                newly.push(e);
            }
        }
        if newly.is_empty() {
            // Numerical safety: nobody can be shown to be a bottleneck; stop here.
            newly = active
                .iter()
                .copied()
                .filter(|&e| frozen[e].is_none())
                .collect();
        }
        for e in newly {
            frozen[e] = Some(level);
        }
    }
    let (top, _) = solve(&frozen, Some(0.0), None)?;
    let mut result = vec![vec![0.0; m]; jobs.len()];
    for e in active {
        let share: Vec<f64> = (0..m)
            .map(|k| {
                members[e]
                    .iter()
                    .map(|&j| jobs[j].scale_factor * top[j][k])
                    .sum()
            })
            .collect();
        let tenant_jobs: Vec<AllocJob> = members[e]
            .iter()
            .map(|&j| AllocJob {
                weight: 1.0,
                ..jobs[j].clone()
            })
            .collect();
        let x = match inner {
            InnerPolicy::Fairness => solve_max_min(
                &tenant_jobs,
                &share,
                aware,
                &mut MaxMinMemo::default(),
                true,
                method,
            )?,
            InnerPolicy::Fifo => fifo_fractional(&tenant_jobs, &share, aware),
        };
        for (row, &j) in x.into_iter().zip(&members[e]) {
            result[j] = row;
        }
    }
    Ok(result)
}

/// Minimum cost with SLOs (Gavel's `ThroughputNormalizedByCostSum_PerfSLOs`): maximise the
/// throughput bought per dollar, Σ_j Σ_k T[j][k] / cost_k · X[j][k] (T absolute, as Gavel's), under
/// the base constraints and, for every job with an SLO, enough throughput to finish its
/// remaining work by the deadline: Σ_k T'[j][k] X[j][k] >= R_j / time_left_j (T' relative, R in
/// reference seconds). When the SLOs cannot all be met, they are dropped, as Gavel does.
pub fn min_cost(
    jobs: &[AllocJob],
    progress: &[JobProgress],
    time_left_s: &[Option<f64>],
    relative: &[Vec<f64>],
    cost_per_type: &[f64],
    gpus_per_type: &[f64],
    method: SolveMethod,
) -> Result<Allocation, SolverError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let m = gpus_per_type.len();
    let build = |with_slos: bool| -> Result<Allocation, SolverError> {
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = base_variables(&mut lp, jobs, gpus_per_type);
        for (j, job) in jobs.iter().enumerate() {
            for k in 0..m {
                lp.add_objective(x[j][k], job.throughput[k] / cost_per_type[k].max(1e-9));
            }
            if let (true, Some(left)) = (with_slos, time_left_s[j]) {
                let needed = progress[j].remaining_s / left.max(1e-3);
                lp.add_ge((0..m).map(|k| (x[j][k], relative[j][k])).collect(), needed);
            }
        }
        Ok(read_allocation(
            &lp.solve_by(method, &SolveOptions::default())?,
            &x,
        ))
    };
    match build(true) {
        Err(SolverError::Infeasible) => build(false),
        other => other,
    }
}

/// FIFO as an allocation (Gavel's `FIFOPolicy`): jobs in arrival order each take a whole share
/// (X = 1) of one type with room for their GPUs — the fastest such type for the
/// heterogeneity-aware form, the first in `type_order` otherwise — until the job at the head no
/// longer fits anywhere (no job passes it).
pub fn fifo(
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
    aware: bool,
    type_order: &[usize],
) -> Allocation {
    let mut free: Vec<f64> = gpus_per_type.to_vec();
    let mut x = vec![vec![0.0; gpus_per_type.len()]; jobs.len()];
    for (j, job) in jobs.iter().enumerate() {
        let candidates = type_order
            .iter()
            .copied()
            .filter(|&k| job.throughput[k] > 0.0 && free[k] >= job.scale_factor);
        let chosen = if aware {
            candidates.fold(None, |best: Option<usize>, k| match best {
                Some(b) if job.throughput[b] >= job.throughput[k] => Some(b),
                _ => Some(k),
            })
        } else {
            candidates.into_iter().next()
        };
        let Some(k) = chosen else { break };
        x[j][k] = 1.0;
        free[k] -= job.scale_factor;
    }
    x
}

/// Adds X (jobs × types) with the base constraints; returns the variable ids.
fn base_variables(
    lp: &mut LinearProgram,
    jobs: &[AllocJob],
    gpus_per_type: &[f64],
) -> Vec<Vec<VarId>> {
    let m = gpus_per_type.len();
    let x: Vec<Vec<VarId>> = jobs
        .iter()
        // Upper bounds of 1 are implied by the row constraint (Gavel states none); a type where
        // the job cannot run is fixed at 0.
        .map(|job| {
            (0..m)
                .map(|k| {
                    lp.add_var(
                        0.0,
                        if job.throughput[k] > 0.0 {
                            f64::INFINITY
                        } else {
                            0.0
                        },
                    )
                })
                .collect()
        })
        .collect();
    for row in &x {
        lp.add_le(row.iter().map(|v| (*v, 1.0)).collect(), 1.0);
    }
    for (k, &gpus) in gpus_per_type.iter().enumerate() {
        lp.add_le(
            jobs.iter()
                .zip(&x)
                .map(|(job, row)| (row[k], job.scale_factor))
                .collect(),
            gpus,
        );
    }
    x
}

fn read_allocation(solution: &arbiter_solver::LpSolution, x: &[Vec<VarId>]) -> Allocation {
    x.iter()
        .map(|row| {
            row.iter()
                .map(|v| solution.value(*v).clamp(0.0, 1.0))
                .collect()
        })
        .collect()
}

/// Effective throughput of each job under `allocation`: Σ_k T[j][k] X[j][k].
pub fn effective_throughputs(jobs: &[AllocJob], allocation: &Allocation) -> Vec<f64> {
    jobs.iter()
        .zip(allocation)
        .map(|(job, row)| job.throughput.iter().zip(row).map(|(t, x)| t * x).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH_METHODS: [SolveMethod; 2] = [SolveMethod::InteriorPoint, SolveMethod::Simplex];

    /// Jobs that have just arrived, with this much work left each.
    fn fresh(remaining_s: &[f64]) -> Vec<JobProgress> {
        remaining_s
            .iter()
            .map(|&remaining_s| JobProgress {
                remaining_s,
                since_arrival_s: 0.0,
            })
            .collect()
    }

    fn job(throughput: Vec<f64>) -> AllocJob {
        AllocJob {
            scale_factor: 1.0,
            weight: 1.0,
            throughput,
        }
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
    fn the_memo_answers_a_recurring_program_as_a_fresh_solve_does() {
        let jobs = vec![
            job(vec![1.0, 0.5]),
            job(vec![1.0, 0.5]),
            job(vec![1.0, 0.2]),
            job(vec![1.0, 0.0]),
        ];
        let gpus = [2.0, 3.0];
        for aware in [false, true] {
            let mut memo = MaxMinMemo::default();
            let first =
                max_min_fairness_memo(&jobs, &gpus, aware, &mut memo, SolveMethod::InteriorPoint)
                    .expect("solves");
            assert_eq!(memo.solved.len(), 1);
            let again =
                max_min_fairness_memo(&jobs, &gpus, aware, &mut memo, SolveMethod::InteriorPoint)
                    .expect("answers");
            assert_eq!(
                memo.solved.len(),
                1,
                "the second call is answered from the memo"
            );
            assert_eq!(first, again);
            assert_feasible(&jobs, &gpus, &first);
            // A program that differs only in a class's size, or in the order classes appear,
            // is another program.
            let fewer = max_min_fairness_memo(
                &jobs[1..],
                &gpus,
                aware,
                &mut memo,
                SolveMethod::InteriorPoint,
            )
            .expect("solves");
            let reordered: Vec<AllocJob> = jobs.iter().rev().cloned().collect();
            max_min_fairness_memo(
                &reordered,
                &gpus,
                aware,
                &mut memo,
                SolveMethod::InteriorPoint,
            )
            .expect("solves");
            assert_eq!(memo.solved.len(), 3);
            assert_eq!(fewer.len(), 3);
            // Agnostic programs are solved exactly as max_min_fairness solves them.
            if !aware {
                assert_eq!(
                    first,
                    max_min_fairness(&jobs, &gpus, aware).expect("solves")
                );
            }
        }
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
    fn min_makespan_finishes_everything_together_when_it_can() {
        for method in BOTH_METHODS {
            // Two jobs, one GPU: remaining 100 s and 300 s. Shares 1/4 and 3/4 finish both at 400 s.
            let jobs = vec![job(vec![1.0]), job(vec![1.0])];
            let progress = fresh(&[100.0, 300.0]);
            let x = min_makespan(&jobs, &progress, &[1.0], true, method).expect("solves");
            assert!(
                (x[0][0] - 0.25).abs() < 1e-3 && (x[1][0] - 0.75).abs() < 1e-3,
                "{x:?}"
            );
        }
    }

    #[test]
    fn heterogeneity_aware_min_makespan_uses_the_fast_gpus_where_they_help_most() {
        for method in BOTH_METHODS {
            // V100 + K80. Job 0 is 10x faster on the V100, job 1 equally fast on both; equal work.
            // Het-aware: job 0 on the V100, job 1 on the K80 — both finish at R. Agnostic ignores it.
            let jobs = vec![job(vec![1.0, 0.1]), job(vec![1.0, 1.0])];
            let progress = [JobProgress {
                remaining_s: 100.0,
                since_arrival_s: 0.0,
            }; 2];
            let x = min_makespan(&jobs, &progress, &[1.0, 1.0], true, method).expect("solves");
            let eff = effective_throughputs(&jobs, &x);
            assert!(eff[0] > 0.99 && eff[1] > 0.99, "{x:?}");
        }
    }

    #[test]
    fn finish_time_fairness_evens_out_rho() {
        for method in BOTH_METHODS {
            // One GPU, two fresh jobs with remaining 100 s and 300 s: isolated share is 1/2 each,
            // isolated finish 200 s and 600 s. Any split gives ρ0 = 100/(200 x0), ρ1 = 300/(600 x1);
            // min max ρ at x0 = x1 = 1/2 (ρ = 1).
            let jobs = vec![job(vec![1.0]), job(vec![1.0])];
            let progress = fresh(&[100.0, 300.0]);
            let x = finish_time_fairness(&jobs, &progress, &[1.0], true, method).expect("solves");
            assert!(
                (x[0][0] - 0.5).abs() < 0.01 && (x[1][0] - 0.5).abs() < 0.01,
                "{x:?}"
            );
            // On a heterogeneous instance with spare capacity the optimum beats the equal split
            // (ρ = 1 by definition) on the worst ρ.
            let jobs = vec![
                job(vec![1.0, 0.2]),
                job(vec![1.0, 0.9]),
                job(vec![1.0, 0.5]),
            ];
            let progress = [
                JobProgress {
                    remaining_s: 500.0,
                    since_arrival_s: 1000.0,
                },
                JobProgress {
                    remaining_s: 3000.0,
                    since_arrival_s: 0.0,
                },
                JobProgress {
                    remaining_s: 800.0,
                    since_arrival_s: 200.0,
                },
            ];
            // Two GPUs of each type for three jobs: the equal share leaves capacity unused.
            let gpus = [2.0, 2.0];
            let x = finish_time_fairness(&jobs, &progress, &gpus, true, method).expect("solves");
            assert_feasible(&jobs, &gpus, &x);
            let equal = equal_share(&jobs, &gpus);
            let worst = |alloc: &Allocation| -> f64 {
                let eff = effective_throughputs(&jobs, alloc);
                let iso = effective_throughputs(&jobs, &equal);
                (0..3)
                    .map(|j| {
                        let p = progress[j];
                        (p.since_arrival_s + p.remaining_s / eff[j])
                            / (p.since_arrival_s + p.remaining_s / iso[j])
                    })
                    .fold(0.0, f64::max)
            };
            assert!(
                worst(&x) < worst(&equal) - 0.01,
                "{} vs {}",
                worst(&x),
                worst(&equal)
            );
        }
    }

    #[test]
    fn max_throughput_sends_each_job_where_it_is_fastest_in_absolute_terms() {
        for method in BOTH_METHODS {
            // Job 0 does 10 steps/s on the V100 and 1 on the K80; job 1 does 5 and 4.
            // Total is maximised by job 0 on the V100 (10) and job 1 on the K80 (4) = 14.
            let jobs = vec![job(vec![10.0, 1.0]), job(vec![5.0, 4.0])];
            let x = max_throughput(&jobs, &[1.0, 1.0], method).expect("solves");
            let total: f64 = effective_throughputs(&jobs, &x).iter().sum();
            assert!((total - 14.0).abs() < 1e-4, "{x:?}");
        }
    }

    #[test]
    fn min_cost_buys_the_cheapest_throughput_but_meets_slos() {
        for method in BOTH_METHODS {
            // V100 costs 0.74, K80 0.135 per hour; job 0 is 4x faster on the V100 (per dollar the
            // K80 is cheaper: 1/0.135 > 4/0.74). Without an SLO it runs on the K80.
            let jobs = vec![job(vec![4.0, 1.0])];
            let relative = vec![vec![1.0, 0.25]];
            let progress = [JobProgress {
                remaining_s: 1000.0,
                since_arrival_s: 0.0,
            }];
            let costs = [0.74, 0.135];
            let x = min_cost(
                &jobs,
                &progress,
                &[None],
                &relative,
                &costs,
                &[1.0, 1.0],
                method,
            )
            .expect("solves");
            assert!(x[0][1] > 0.99 && x[0][0] < 0.01, "{x:?}");
            // With 1,000 s of V100 work due in 1,500 s it needs speed >= 0.67: mostly the V100.
            let x = min_cost(
                &jobs,
                &progress,
                &[Some(1500.0)],
                &relative,
                &costs,
                &[1.0, 1.0],
                method,
            )
            .expect("solves");
            let speed = x[0][0] + 0.25 * x[0][1];
            assert!(speed >= 0.666, "{x:?}");
            // An impossible SLO is dropped rather than failing.
            let x = min_cost(
                &jobs,
                &progress,
                &[Some(10.0)],
                &relative,
                &costs,
                &[1.0, 1.0],
                method,
            )
            .expect("solves");
            assert!(x[0][1] > 0.99, "{x:?}");
        }
    }

    #[test]
    fn hierarchical_splits_by_tenant_weight_first() {
        for method in BOTH_METHODS {
            // One GPU type with 4 GPUs. Tenant 0 (weight 3) has one job, tenant 1 (weight 1) three.
            // Across tenants, shares go 3:1 — but a single job can use at most one GPU, so tenant 0
            // gets 1 GPU and tenant 1 the rest; inside tenant 1 the three jobs split evenly.
            let jobs = vec![
                job(vec![1.0]),
                job(vec![1.0]),
                job(vec![1.0]),
                job(vec![1.0]),
            ];
            // Tenant 0 has job 0, tenant 1 the other three.
            let split = |weights: &[f64], gpus: &[f64], inner| {
                hierarchical(&jobs, &[0, 1, 1, 1], weights, gpus, true, inner, method)
                    .expect("solves")
            };
            let x = split(&[3.0, 1.0], &[4.0], InnerPolicy::Fairness);
            assert_feasible(&jobs, &[4.0], &x);
            assert!((x[0][0] - 1.0).abs() < 1e-3, "{x:?}");
            for j in 1..4 {
                assert!((x[j][0] - 1.0).abs() < 1e-3, "{x:?}");
            }
            // Scarce GPUs: 2 GPUs, weights 3:1 → tenant 0's single job gets 1.0 (its cap), and the
            // other three share the remaining GPU equally (1/3 each) although tenant 1 has 3 jobs.
            let x = split(&[3.0, 1.0], &[2.0], InnerPolicy::Fairness);
            assert!((x[0][0] - 1.0).abs() < 1e-3, "{x:?}");
            for j in 1..4 {
                assert!((x[j][0] - 1.0 / 3.0).abs() < 1e-3, "{x:?}");
            }
            // Equal weights, 1 GPU: each tenant gets half; tenant 1's three jobs a sixth each.
            let x = split(&[1.0, 1.0], &[1.0], InnerPolicy::Fairness);
            assert!((x[0][0] - 0.5).abs() < 1e-3, "{x:?}");
            for j in 1..4 {
                assert!((x[j][0] - 1.0 / 6.0).abs() < 1e-3, "{x:?}");
            }
            // FIFO inside: tenant 1's half goes to its first job.
            let x = split(&[1.0, 1.0], &[1.0], InnerPolicy::Fifo);
            assert!(
                (x[1][0] - 0.5).abs() < 1e-3 && x[2][0] < 1e-6 && x[3][0] < 1e-6,
                "{x:?}"
            );
        }
    }

    #[test]
    fn fractional_fifo_fills_fastest_types_in_order() {
        // Capacity: 1.5 V100 (type 0), 1 K80. Job 0 takes a whole V100, job 1 the remaining half
        // V100 and half a K80, job 2 the other half K80.
        let jobs = vec![
            job(vec![1.0, 0.5]),
            job(vec![1.0, 0.5]),
            job(vec![1.0, 0.5]),
        ];
        let x = fifo_fractional(&jobs, &[1.5, 1.0], true);
        assert_eq!(x, vec![vec![1.0, 0.0], vec![0.5, 0.5], vec![0.0, 0.5]]);
    }

    #[test]
    fn fifo_fills_in_arrival_order_and_blocks_at_the_head() {
        let jobs = vec![
            job(vec![1.0, 0.3]),
            job(vec![1.0, 0.5]),
            job(vec![1.0, 0.9]),
        ];
        // One V100, one K80, three jobs: the third waits. Aware: job 0 takes the V100 (fastest).
        let x = fifo(&jobs, &[1.0, 1.0], true, &[1, 0]);
        assert_eq!(x, vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.0, 0.0]]);
        // Agnostic: first type in the given order.
        let x = fifo(&jobs, &[1.0, 1.0], false, &[1, 0]);
        assert_eq!(x, vec![vec![0.0, 1.0], vec![1.0, 0.0], vec![0.0, 0.0]]);
    }

    #[test]
    fn weights_and_scale_factors_shift_the_shares() {
        let mut heavy = job(vec![1.0]);
        heavy.weight = 3.0;
        let jobs = vec![heavy, job(vec![1.0])];
        let x = max_min_fairness(&jobs, &[1.0], true).expect("solves");
        // Normalized throughput / weight equalised: x0 / 3 == x1, x0 + x1 = 1.
        assert!(
            (x[0][0] - 0.75).abs() < 1e-3 && (x[1][0] - 0.25).abs() < 1e-3,
            "{x:?}"
        );
    }

    /// Random max-min programs: 1–24 jobs (some alike, so classes form) over 1–4 GPU types,
    /// each job able to run on at least one type, 1–8 GPUs, weights 1–4, 1–40 GPUs per type.
    fn random_programs() -> impl proptest::strategy::Strategy<Value = (Vec<AllocJob>, Vec<f64>)> {
        use proptest::prelude::*;
        (1usize..5).prop_flat_map(|types| {
            let job = (
                proptest::collection::vec(prop_oneof![Just(0.0), 0.05f64..1.5], types),
                prop_oneof![Just(1.0), Just(2.0), Just(4.0), Just(8.0)],
                prop_oneof![Just(1.0), 1.0f64..4.0],
            )
                .prop_map(|(mut throughput, scale_factor, weight)| {
                    if throughput.iter().all(|&t| t == 0.0) {
                        throughput[0] = 1.0;
                    }
                    AllocJob {
                        scale_factor,
                        weight,
                        throughput,
                    }
                });
            (
                proptest::collection::vec(job, 1..8),
                proptest::collection::vec(0usize..8, 1..24),
                proptest::collection::vec(prop_oneof![Just(1.0), 2.0f64..40.0], types),
            )
                .prop_map(|(kinds, picks, gpus)| {
                    let jobs = picks
                        .iter()
                        .map(|&p| kinds[p % kinds.len()].clone())
                        .collect();
                    (jobs, gpus)
                })
        })
    }

    /// The classes `solve_max_min` forms.
    fn classes(jobs: &[AllocJob], aware: bool) -> Vec<Vec<usize>> {
        let keys = jobs.iter().map(|job| {
            job_class_key(&AllocJob {
                throughput: throughput_row(job, aware),
                ..job.clone()
            })
        });
        group_by_key(keys).1
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// The simplex reaches the interior point's optimum: the same program solved three ways,
        /// the simplex's objective equal to microlp's (another simplex) within 1e-9 relative and
        /// to Clarabel's within 1e-8 (Clarabel's own accuracy at its tolerance of 1e-10 is
        /// ≈ 1e-9: its point lies just inside); the simplex's allocation, read back per job
        /// through the policy's path, feasible and giving every job at least that level.
        #[test]
        fn the_simplex_reaches_the_interior_points_optimum(
            (jobs, gpus) in random_programs(),
            aware in proptest::prelude::any::<bool>(),
        ) {
            let members = classes(&jobs, aware);
            let (lp, _) = max_min_program(&jobs, &gpus, aware, &members);
            let simplex = lp.solve_simplex().expect("startable");
            let microlp = lp
                .solve_integer(&arbiter_solver::MipOptions::default())
                .expect("microlp solves it");
            let tight = SolveOptions { tolerance: 1e-10, ..SolveOptions::default() };
            let clarabel = lp.solve_with(&tight).expect("Clarabel solves it");
            let scale = simplex.objective.abs().max(1e-12);
            proptest::prop_assert!(
                (simplex.objective - microlp.objective).abs() <= 1e-9 * scale,
                "simplex {} microlp {}", simplex.objective, microlp.objective
            );
            proptest::prop_assert!(
                (simplex.objective - clarabel.objective).abs() <= 1e-8 * scale,
                "simplex {} Clarabel {}", simplex.objective, clarabel.objective
            );
            let x = max_min_fairness_memo(
                &jobs, &gpus, aware, &mut MaxMinMemo::default(), SolveMethod::Simplex,
            ).expect("solves");
            assert_feasible(&jobs, &gpus, &x);
            let isolated = equal_share(&jobs, &gpus);
            for (j, job) in jobs.iter().enumerate() {
                let t = throughput_row(job, aware);
                let iso: f64 = if aware {
                    t.iter().zip(&isolated[j]).map(|(a, b)| a * b).sum()
                } else {
                    1.0
                };
                let value = job.scale_factor / (job.weight * iso)
                    * t.iter().zip(&x[j]).map(|(a, b)| a * b).sum::<f64>();
                proptest::prop_assert!(
                    value >= simplex.objective * (1.0 - 1e-9) - 1e-12,
                    "job {j} gets {value} below the level {}", simplex.objective
                );
            }
        }

        /// Where the optimum is unique — one GPU type whose GPUs run out before any job's time
        /// budget, so every job sits exactly at the level — both methods choose the same
        /// allocation.
        #[test]
        fn where_the_optimum_is_unique_both_choose_the_same_allocation(
            sizes in proptest::collection::vec(
                (1u32..4, 0.2f64..1.0, 1.0f64..3.0), 1..12),
            fraction in 0.05f64..0.9,
        ) {
            let jobs: Vec<AllocJob> = sizes
                .iter()
                .map(|&(gpus, speed, weight)| AllocJob {
                    scale_factor: f64::from(gpus),
                    weight,
                    throughput: vec![speed],
                })
                .collect();
            let demand: f64 = jobs.iter().map(|j| j.scale_factor).sum();
            let gpus = [demand * fraction];
            // Unique when the GPUs run out before any job's time budget: each job's value per
            // unit of time is c_j, the GPUs allow the level G / Σ sf_j / c_j, and no c_j is below
            // it (else that job's budget binds first and the others' shares are free).
            let isolated = equal_share(&jobs, &gpus);
            let per_time: Vec<f64> = jobs
                .iter()
                .zip(&isolated)
                .map(|(j, e)| j.scale_factor / (j.weight * j.throughput[0] * e[0]) * j.throughput[0])
                .collect();
            let level = gpus[0]
                / jobs.iter().zip(&per_time).map(|(j, c)| j.scale_factor / c).sum::<f64>();
            proptest::prop_assume!(per_time.iter().all(|&c| c > level * 1.01));
            let by_simplex = max_min_fairness_memo(
                &jobs, &gpus, true, &mut MaxMinMemo::default(), SolveMethod::Simplex,
            ).expect("solves");
            let interior = max_min_fairness(&jobs, &gpus, true).expect("solves");
            for (a, b) in by_simplex.iter().zip(&interior) {
                proptest::prop_assert!((a[0] - b[0]).abs() < 1e-6, "{by_simplex:?} vs {interior:?}");
            }
        }
    }
}
