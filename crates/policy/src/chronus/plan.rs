//! Chronus' lease plan as an integer program: which deadline option each job gets and the leases
//! it holds, so that every promise is kept and the value of the options kept is the largest the
//! per-lease GPU capacity allows (the artifact's `MIPSolver.job_selection`, with promises made
//! explicit instead of forcing every row to be placed).
//!
//! Variables: `S[j,o]` (job `j` keeps option `o`) and `X[j,t]` (job `j` holds lease `t`), binary.
//! Constraints: `Σ_o S[j,o] ≤ 1`; `Σ_t X[j,t] = leases_j × Σ_o S[j,o]`; `X[j,t] ≤ Σ_{o ends at or
//! after t} S[j,o]` (a lease after the chosen option's deadline is useless); `Σ_j gpus_j X[j,t] ≤
//! free_t`. Objective, lexicographic through its weights: promises kept (an option worth at least
//! the promised value), then value, then — a tie-break smaller than any value difference — leases
//! held as late as possible (the near leases stay spare for jobs without a guarantee, the artifact's
//! "defer" sign, and early leases stay free for tight newcomers).

use arbiter_solver::{Direction, LinearProgram, MipOptions, SolverError, VarId};
use std::collections::{BTreeMap, BTreeSet};

/// One deadline option of a job in a plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanOption {
    /// The last lease (absolute index) that ends by the deadline.
    pub last_lease: u64,
    /// Its value (the first option of a job is worth 1).
    pub value: f64,
}

/// One job of a plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanJob {
    /// GPUs it holds in each of its leases.
    pub gpus: u32,
    /// Leases it still needs.
    pub leases: u64,
    /// Its deadline options.
    pub options: Vec<PlanOption>,
    /// The value it was promised: an option worth at least this must be kept. `None`: a
    /// candidate the plan may leave out.
    pub promised: Option<f64>,
    /// Where it stands now (option index, leases): the warm start.
    pub current: Option<(usize, BTreeSet<u64>)>,
}

/// A plan to make: the jobs, from lease `first` on, in `capacity` GPUs less what others hold.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeaseProblem {
    /// The first lease the plan may use.
    pub first: u64,
    /// GPUs of the cluster.
    pub capacity: u32,
    /// GPUs held per lease by reservations outside the plan.
    pub taken: BTreeMap<u64, u32>,
    /// The jobs to plan.
    pub jobs: Vec<PlanJob>,
}

/// What a plan gives one job.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Assignment {
    /// The option kept (index into the job's options).
    pub option: usize,
    /// The leases held.
    pub leases: BTreeSet<u64>,
}

/// A solved plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LeasePlan {
    /// Per job, in the problem's order: what it keeps (`None`: left out).
    pub jobs: Vec<Option<Assignment>>,
    /// Whether the solver proved it optimal (false: a limit stopped it at a feasible plan).
    pub optimal: bool,
}

/// Promises kept, then value: how plans compare.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub(crate) struct Score {
    /// Jobs keeping an option worth their promise.
    pub promises_kept: usize,
    /// Total value of the options kept.
    pub value: f64,
}

impl LeaseProblem {
    /// GPUs free in `lease` for the plan.
    pub fn free(&self, lease: u64) -> u32 {
        self.capacity
            .saturating_sub(self.taken.get(&lease).copied().unwrap_or(0))
    }

    /// The leases job `j` could use at all (in the window of its latest option, with room for it
    /// alone).
    fn usable(&self, job: &PlanJob) -> Vec<u64> {
        let last = job.options.iter().map(|o| o.last_lease).max().unwrap_or(0);
        if last < self.first {
            return Vec::new();
        }
        (self.first..=last)
            .filter(|&t| self.free(t) >= job.gpus)
            .collect()
    }

    /// Binary variables the program has.
    pub fn binaries(&self) -> usize {
        self.jobs
            .iter()
            .map(|j| j.options.len() + self.usable(j).len())
            .sum()
    }

    /// How `plan` scores, or `None` if it breaks a constraint.
    pub fn score(&self, plan: &[Option<Assignment>]) -> Option<Score> {
        if plan.len() != self.jobs.len() {
            return None;
        }
        let mut used: BTreeMap<u64, u32> = BTreeMap::new();
        let mut score = Score {
            promises_kept: 0,
            value: 0.0,
        };
        for (job, a) in self.jobs.iter().zip(plan) {
            let Some(a) = a else { continue };
            let option = job.options.get(a.option)?;
            let fits = a.leases.len() as u64 == job.leases
                && a.leases
                    .iter()
                    .all(|&t| t >= self.first && t <= option.last_lease);
            if !fits {
                return None;
            }
            for &t in &a.leases {
                *used.entry(t).or_insert(0) += job.gpus;
            }
            score.value += option.value;
            if job.promised.is_some_and(|p| option.value >= p) {
                score.promises_kept += 1;
            }
        }
        used.iter()
            .all(|(&t, &g)| g <= self.free(t))
            .then_some(score)
    }

    /// The best plan within `limits` (never worse than the jobs' current standing, given as the
    /// warm start when it is feasible).
    pub fn solve(&self, limits: &MipOptions) -> Result<LeasePlan, SolverError> {
        let values: Vec<f64> = self
            .jobs
            .iter()
            .flat_map(|j| j.options.iter().map(|o| o.value))
            .collect();
        let total_value: f64 = values.iter().map(|v| v.abs()).sum();
        // A kept promise outweighs all value; the tie-break is under half the smallest value
        // step (between two options, or an option and leaving the job out).
        let promise_weight = total_value + 1.0;
        let mut steps: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
        steps.sort_by(f64::total_cmp);
        let smallest_step = steps
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|d| *d > 1e-9)
            .chain(steps.first().copied())
            .fold(1.0, f64::min);
        let horizon = self
            .jobs
            .iter()
            .flat_map(|j| j.options.iter().map(|o| o.last_lease))
            .max()
            .unwrap_or(self.first);
        let span = (horizon.saturating_sub(self.first) + 1) as f64;
        let lease_gpus: f64 = self
            .jobs
            .iter()
            .map(|j| j.leases as f64 * f64::from(j.gpus))
            .sum();
        let lateness_weight = 0.5 * smallest_step / (span * lease_gpus).max(1.0);

        let mut lp = LinearProgram::new(Direction::Maximise);
        // Per job: its option variables S, and (lease, X) pairs.
        type JobVars = (Vec<VarId>, Vec<(u64, VarId)>);
        let mut vars: Vec<JobVars> = Vec::with_capacity(self.jobs.len());
        let mut per_lease: BTreeMap<u64, Vec<(VarId, f64)>> = BTreeMap::new();
        let mut start = Vec::new();
        for job in &self.jobs {
            let s: Vec<VarId> = job.options.iter().map(|_| lp.add_binary_var()).collect();
            for (&v, o) in s.iter().zip(&job.options) {
                let kept = job.promised.is_some_and(|p| o.value >= p);
                lp.add_objective(v, o.value + if kept { promise_weight } else { 0.0 });
            }
            lp.add_le(s.iter().map(|&v| (v, 1.0)).collect(), 1.0);
            let x: Vec<(u64, VarId)> = self
                .usable(job)
                .into_iter()
                .map(|t| (t, lp.add_binary_var()))
                .collect();
            for &(t, v) in &x {
                lp.add_objective(
                    v,
                    lateness_weight * f64::from(job.gpus) * (t - self.first) as f64,
                );
                per_lease
                    .entry(t)
                    .or_default()
                    .push((v, f64::from(job.gpus)));
                // Only an option whose window reaches t lets the job hold it.
                let open: Vec<(VarId, f64)> = s
                    .iter()
                    .zip(&job.options)
                    .filter(|(_, o)| o.last_lease >= t)
                    .map(|(&v, _)| (v, -1.0))
                    .collect();
                if open.len() < s.len() {
                    lp.add_le(std::iter::once((v, 1.0)).chain(open).collect(), 0.0);
                }
            }
            let count = x
                .iter()
                .map(|&(_, v)| (v, 1.0))
                .chain(s.iter().map(|&v| (v, -(job.leases as f64))))
                .collect();
            lp.add_eq(count, 0.0);
            // The warm start: where the job stands, if that is a whole plan for it.
            let current = job.current.as_ref().filter(|(o, leases)| {
                job.options.get(*o).is_some_and(|opt| {
                    leases.len() as u64 == job.leases
                        && leases.iter().all(|t| {
                            *t >= self.first
                                && *t <= opt.last_lease
                                && x.iter().any(|(u, _)| u == t)
                        })
                })
            });
            start.extend(s.iter().enumerate().map(|(i, _)| {
                if current.is_some_and(|(o, _)| *o == i) {
                    1.0
                } else {
                    0.0
                }
            }));
            start.extend(x.iter().map(|(t, _)| {
                if current.is_some_and(|(_, l)| l.contains(t)) {
                    1.0
                } else {
                    0.0
                }
            }));
            vars.push((s, x));
        }
        for (t, terms) in per_lease {
            lp.add_le(terms, f64::from(self.free(t)));
        }
        // Variables were added job by job, S then X, as `start` lists their values.
        debug_assert_eq!(start.len(), lp.var_count());
        let options = MipOptions {
            warm_start: Some(start),
            ..limits.clone()
        };
        let solution = lp.solve_integer(&options)?;
        let jobs = vars
            .iter()
            .map(|(s, x)| {
                let option = s.iter().position(|&v| solution.value(v) > 0.5)?;
                let leases = x
                    .iter()
                    .filter(|(_, v)| solution.value(*v) > 0.5)
                    .map(|(t, _)| *t)
                    .collect();
                Some(Assignment { option, leases })
            })
            .collect();
        Ok(LeasePlan {
            jobs,
            optimal: solution.optimal,
        })
    }
}

#[cfg(test)]
pub(crate) mod brute_force {
    //! Every plan of a tiny problem, for checking the integer program.
    use super::*;

    /// The best score over all plans.
    pub fn best(problem: &LeaseProblem) -> Score {
        let mut plan = Vec::with_capacity(problem.jobs.len());
        let mut best = Score {
            promises_kept: 0,
            value: 0.0,
        };
        walk(problem, &mut plan, &mut best);
        best
    }

    fn walk(problem: &LeaseProblem, plan: &mut Vec<Option<Assignment>>, best: &mut Score) {
        let Some(job) = problem.jobs.get(plan.len()) else {
            if let Some(s) = problem.score(plan)
                && (s.promises_kept, s.value) > (best.promises_kept, best.value + 1e-9)
            {
                *best = s;
            }
            return;
        };
        plan.push(None);
        walk(problem, plan, best);
        plan.pop();
        for (option, o) in job.options.iter().enumerate() {
            let window: Vec<u64> = (problem.first..=o.last_lease).collect();
            for leases in subsets(&window, job.leases as usize) {
                plan.push(Some(Assignment { option, leases }));
                walk(problem, plan, best);
                plan.pop();
            }
        }
    }

    fn subsets(items: &[u64], k: usize) -> Vec<BTreeSet<u64>> {
        if k == 0 {
            return vec![BTreeSet::new()];
        }
        let Some((&first, rest)) = items.split_first() else {
            return Vec::new();
        };
        let mut with: Vec<BTreeSet<u64>> = subsets(rest, k - 1);
        for s in &mut with {
            s.insert(first);
        }
        with.extend(subsets(rest, k));
        with
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strict(gpus: u32, leases: u64, last_lease: u64, promised: bool) -> PlanJob {
        PlanJob {
            gpus,
            leases,
            options: vec![PlanOption {
                last_lease,
                value: 1.0,
            }],
            promised: promised.then_some(1.0),
            current: None,
        }
    }

    #[test]
    fn re_planning_makes_room_the_greedy_admission_cannot_find() {
        // 4 GPUs, leases 0..=1. Promised: A (2 GPUs, 1 lease by lease 1) currently in lease 0,
        // B (2 GPUs, 1 lease by 1) in lease 1. A 4-GPU candidate needing one lease by lease 1 finds
        // 2 free GPUs in each lease — no room without moving anybody — but A and B can share one.
        let mut a = strict(2, 1, 1, true);
        a.current = Some((0, BTreeSet::from([0])));
        let mut b = strict(2, 1, 1, true);
        b.current = Some((0, BTreeSet::from([1])));
        let problem = LeaseProblem {
            first: 0,
            capacity: 4,
            taken: BTreeMap::new(),
            jobs: vec![a, b, strict(4, 1, 1, false)],
        };
        let plan = problem.solve(&MipOptions::default()).expect("solvable");
        assert!(plan.optimal);
        let score = problem.score(&plan.jobs).expect("feasible");
        assert_eq!(
            score,
            Score {
                promises_kept: 2,
                value: 3.0
            }
        );
        // The tie-break: A and B share the later lease, the candidate takes the earlier one.
        assert_eq!(
            plan.jobs[0].as_ref().map(|a| a.leases.clone()),
            Some(BTreeSet::from([1]))
        );
        assert_eq!(
            plan.jobs[2].as_ref().map(|a| a.leases.clone()),
            Some(BTreeSet::from([0]))
        );
    }

    #[test]
    fn a_promise_outweighs_any_value_and_a_soft_job_keeps_its_best_option() {
        // 2 GPUs, one lease. Promised A (2 GPUs) vs two 1-GPU candidates worth 1 each: A stays.
        let problem = LeaseProblem {
            first: 3,
            capacity: 2,
            taken: BTreeMap::new(),
            jobs: vec![
                strict(2, 1, 3, true),
                strict(1, 1, 3, false),
                strict(1, 1, 3, false),
            ],
        };
        let plan = problem.solve(&MipOptions::default()).expect("solvable");
        assert_eq!(
            problem.score(&plan.jobs),
            Some(Score {
                promises_kept: 1,
                value: 1.0
            })
        );
        // A soft job with options by lease 0 (1.0) and by lease 1 (0.5), 1 GPU free in lease 0:
        // the candidate of lease 0 is worth more there than the soft job's first option over its
        // second, so the soft job moves to its later option.
        let soft = PlanJob {
            gpus: 1,
            leases: 1,
            options: vec![
                PlanOption {
                    last_lease: 0,
                    value: 1.0,
                },
                PlanOption {
                    last_lease: 1,
                    value: 0.5,
                },
            ],
            promised: None,
            current: None,
        };
        let problem = LeaseProblem {
            first: 0,
            capacity: 1,
            taken: BTreeMap::new(),
            jobs: vec![soft, strict(1, 1, 0, false)],
        };
        let plan = problem.solve(&MipOptions::default()).expect("solvable");
        assert_eq!(
            problem.score(&plan.jobs),
            Some(Score {
                promises_kept: 0,
                value: 1.5
            })
        );
        assert_eq!(plan.jobs[0].as_ref().map(|a| a.option), Some(1));
    }

    #[test]
    fn a_node_limit_returns_the_current_plan_or_better() {
        let mut a = strict(1, 2, 5, true);
        a.current = Some((0, BTreeSet::from([0, 1])));
        let problem = LeaseProblem {
            first: 0,
            capacity: 1,
            taken: BTreeMap::new(),
            jobs: vec![a, strict(1, 3, 4, false)],
        };
        let plan = problem
            .solve(&MipOptions {
                node_limit: Some(0),
                ..MipOptions::default()
            })
            .expect("the warm start");
        assert!(
            problem
                .score(&plan.jobs)
                .is_some_and(|s| s.promises_kept == 1)
        );
    }

    fn tiny_problem() -> impl Strategy<Value = LeaseProblem> {
        let job = (
            1u32..=3,
            1u64..=2,
            0u64..=3,
            proptest::option::of(1u64..=2),
            any::<bool>(),
        );
        (
            1u32..=3,
            0u64..=1,
            proptest::collection::vec(job, 1..=3),
            proptest::collection::vec(0u32..=2, 4),
        )
            .prop_map(|(capacity, first, jobs, taken)| {
                let jobs = jobs
                    .into_iter()
                    .map(|(gpus, leases, last, later, promised)| {
                        let mut options = vec![PlanOption {
                            last_lease: first + last,
                            value: 1.0,
                        }];
                        if let Some(extra) = later {
                            options.push(PlanOption {
                                last_lease: first + last + extra,
                                value: 0.5,
                            });
                        }
                        PlanJob {
                            gpus,
                            leases,
                            options,
                            promised: promised.then_some(1.0),
                            current: None,
                        }
                    })
                    .collect();
                let taken = taken
                    .into_iter()
                    .enumerate()
                    .map(|(i, g)| (first + i as u64, g))
                    .collect();
                LeaseProblem {
                    first,
                    capacity,
                    taken,
                    jobs,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// The integer program finds the best plan there is: as many promises kept and as much
        /// value as the brute force over every plan.
        #[test]
        fn the_integer_program_matches_brute_force(problem in tiny_problem()) {
            let plan = problem.solve(&MipOptions::default()).expect("always feasible (everybody may be left out)");
            prop_assert!(plan.optimal);
            let score = problem.score(&plan.jobs);
            prop_assert!(score.is_some(), "infeasible plan {:?}", plan);
            let score = score.unwrap_or(Score { promises_kept: 0, value: 0.0 });
            let best = brute_force::best(&problem);
            prop_assert_eq!(score.promises_kept, best.promises_kept);
            prop_assert!((score.value - best.value).abs() < 1e-6, "{:?} vs brute force {:?}", score, best);
        }
    }
}
