//! Integer programs: branch and bound in `microlp` (pure Rust, simplex relaxations).
//!
//! Why microlp and not good_lp's wrapper of it: the wrapper offers a wall-clock time limit only,
//! and a simulation must decide the same way on a fast and a slow machine. microlp itself also
//! takes a *node* limit — deterministic — and a warm start, so a caller that already holds a
//! feasible answer (Chronus' current reservations) never gets a worse one back. HiGHS or CBC would
//! solve larger programs, but need cmake or a system library the two-command README cannot
//! assume (`CONVENTIONS.md`); callers keep their programs small instead (Chronus' artifact caps
//! its program at 400 rows for the same reason).

use crate::{Direction, LinearProgram, Sense, SolverError};
use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOptions, SolveOutcome};
use std::time::Duration;

/// How hard to try on an integer program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MipOptions {
    /// Stop after this many branch-and-bound nodes (deterministic; the simulator's limit).
    pub node_limit: Option<u64>,
    /// Stop after this many seconds of wall clock (the daemon's limit; not deterministic).
    pub time_limit_s: Option<f64>,
    /// A starting point, one value per variable (ignored when infeasible): the answer can only
    /// be as good or better.
    pub warm_start: Option<Vec<f64>>,
}

/// A solved integer program.
#[derive(Clone, Debug, PartialEq)]
pub struct MipSolution {
    /// Value of every variable, by [`crate::VarId`] (integer variables rounded).
    pub values: Vec<f64>,
    /// Objective value at `values`.
    pub objective: f64,
    /// Whether optimality was proven (false: a limit stopped the search at a feasible point).
    pub optimal: bool,
    /// Branch-and-bound nodes solved.
    pub nodes: u64,
}

impl MipSolution {
    /// Value of one variable.
    pub fn value(&self, var: crate::VarId) -> f64 {
        self.values.get(var.0).copied().unwrap_or(0.0)
    }
}

impl LinearProgram {
    /// Solves with the integrality of [`LinearProgram::add_binary_var`]'s variables, by branch and
    /// bound, within `options`' limits.
    pub fn solve_integer(&self, options: &MipOptions) -> Result<MipSolution, SolverError> {
        let direction = match self.direction {
            Direction::Maximise => OptimizationDirection::Maximize,
            Direction::Minimise => OptimizationDirection::Minimize,
        };
        let mut problem = Problem::new(direction);
        let mut objective = vec![0.0; self.bounds.len()];
        for &(var, c) in &self.objective {
            if let Some(o) = objective.get_mut(var.0) {
                *o += c;
            }
        }
        let vars: Vec<microlp::Variable> = self
            .bounds
            .iter()
            .zip(&self.integer)
            .zip(&objective)
            .map(|((&(lo, hi), &integer), &c)| {
                if integer && lo == 0.0 && hi == 1.0 {
                    problem.add_binary_var(c)
                } else if integer {
                    // (Bounds of an integer variable come from `add_integer_var`'s i32s.)
                    problem.add_integer_var(c, (lo as i32, hi as i32))
                } else {
                    problem.add_var(c, (lo, hi))
                }
            })
            .collect();
        for row in &self.rows {
            let terms: Vec<(microlp::Variable, f64)> =
                row.terms.iter().map(|&(v, c)| (vars[v.0], c)).collect();
            let op = match row.sense {
                Sense::Le => ComparisonOp::Le,
                Sense::Ge => ComparisonOp::Ge,
                Sense::Eq => ComparisonOp::Eq,
            };
            problem.add_constraint(terms.as_slice(), op, row.rhs);
        }
        let mut solve_options = SolveOptions::default();
        solve_options.node_limit = options.node_limit;
        solve_options.time_limit = options
            .time_limit_s
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        solve_options.warm_start = options
            .warm_start
            .as_ref()
            .map(|start| vars.iter().zip(start).map(|(&v, &x)| (v, x)).collect());
        let outcome = problem.solve_with(solve_options).map_err(|e| match e {
            microlp::Error::Infeasible => SolverError::Infeasible,
            microlp::Error::Unbounded => SolverError::Unbounded,
            other => SolverError::Backend(other.to_string()),
        })?;
        let nodes = outcome.stats().nodes_solved;
        let optimal = outcome.is_optimal();
        let solution = match outcome {
            SolveOutcome::Solution(solution) => solution,
            SolveOutcome::Interrupted(_) => return Err(SolverError::NoIncumbent),
        };
        let values: Vec<f64> = vars
            .iter()
            .zip(&self.integer)
            .map(|(&v, &integer)| {
                let x = solution.var_value_raw(v);
                if integer { x.round() } else { x }
            })
            .collect();
        let objective = self.objective.iter().map(|(v, c)| c * values[v.0]).sum();
        Ok(MipSolution {
            values,
            objective,
            optimal,
            nodes,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Direction, LinearProgram, MipOptions, SolverError};

    /// A knapsack whose relaxation is fractional: items (value, weight) (6, 4), (5, 3), (4, 3)
    /// in capacity 6: the integer optimum takes the two 3s (9), the relaxation 5 + ¾ × 6 = 9.5.
    fn knapsack() -> LinearProgram {
        let mut lp = LinearProgram::new(Direction::Maximise);
        let items = [(6.0, 4.0), (5.0, 3.0), (4.0, 3.0)];
        let vars: Vec<_> = items.iter().map(|_| lp.add_binary_var()).collect();
        for (&v, &(value, _)) in vars.iter().zip(&items) {
            lp.add_objective(v, value);
        }
        lp.add_le(
            vars.iter()
                .zip(&items)
                .map(|(&v, &(_, w))| (v, w))
                .collect(),
            6.0,
        );
        lp
    }

    #[test]
    fn branch_and_bound_finds_the_integer_optimum() {
        let lp = knapsack();
        let s = lp.solve_integer(&MipOptions::default()).expect("solvable");
        assert!(s.optimal);
        assert!((s.objective - 9.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.values, vec![0.0, 1.0, 1.0]);
        let relaxed = lp.solve().expect("relaxation");
        assert!(
            relaxed.objective > 9.4,
            "the relaxation is fractional: {relaxed:?}"
        );
    }

    #[test]
    fn a_warm_start_is_kept_when_the_node_limit_stops_the_search() {
        let lp = knapsack();
        let options = MipOptions {
            node_limit: Some(0),
            warm_start: Some(vec![1.0, 0.0, 0.0]),
            ..MipOptions::default()
        };
        let s = lp
            .solve_integer(&options)
            .expect("the warm start is feasible");
        assert!(
            s.objective >= 6.0 - 1e-9,
            "never worse than the start: {s:?}"
        );
    }

    #[test]
    fn integer_variables_take_whole_values_within_their_bounds() {
        // max x + y s.t. 2x + 2y <= 7, x in 0..=2, y in 0..=5: the relaxation reaches 3.5, the
        // integers 3 (x capped at 2).
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = lp.add_integer_var(0, 2);
        let y = lp.add_integer_var(0, 5);
        lp.add_objective(x, 1.0);
        lp.add_objective(y, 1.001);
        lp.add_le(vec![(x, 2.0), (y, 2.0)], 7.0);
        let s = lp.solve_integer(&MipOptions::default()).expect("solvable");
        assert!(s.optimal);
        assert_eq!(s.values, vec![0.0, 3.0], "{s:?}");
        assert!(lp.solve().expect("relaxation").objective > 3.5);
    }

    #[test]
    fn infeasible_integer_programs_are_errors() {
        // x + y = 1 with both binary and x + y >= 1.5 on the integers: infeasible.
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = lp.add_binary_var();
        let y = lp.add_binary_var();
        lp.add_eq(vec![(x, 2.0), (y, 2.0)], 3.0);
        assert_eq!(
            lp.solve_integer(&MipOptions::default()),
            Err(SolverError::Infeasible)
        );
    }
}
