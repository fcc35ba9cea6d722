//! The one place Arbiter talks to a linear-programming solver.
//!
//! Policies build a [`LinearProgram`] from plain numbers — variables with bounds, linear
//! constraints, a linear objective — and get back a [`LpSolution`] or a [`SolverError`]. The
//! backend (good_lp with the pure-Rust interior-point solver Clarabel, chosen by measurement: see
//! `CONVENTIONS.md`) is an implementation detail behind this seam, so another backend can be
//! swapped in behind a cargo feature without touching a policy.
//!
//! A program with integer variables is solved by [`LinearProgram::solve_integer`] (branch and
//! bound in the pure-Rust `microlp`, see [`mip`]); [`LinearProgram::solve`] solves its linear
//! relaxation.
//!
//! An interior-point solver returns a point in the *relative interior* of the optimal face when
//! the optimum is not unique (it does not pick a vertex). Policies that rely on that — Gavel's
//! max-min fairness leaves non-bottleneck jobs free — say so where they do.
#![deny(missing_docs)]

use good_lp::{
    Expression, ProblemVariables, ResolutionError, Solution, SolverModel, Variable, clarabel,
    variable,
};
use thiserror::Error;

/// A variable of a [`LinearProgram`], by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarId(pub usize);

/// Whether to minimise or maximise the objective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Minimise.
    Minimise,
    /// Maximise.
    Maximise,
}

/// Why a program could not be solved. Callers keep their previous allocation and count the
/// failure; the next recomputation tries again.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SolverError {
    /// No point satisfies the constraints.
    #[error("the linear program is infeasible")]
    Infeasible,
    /// The objective is unbounded.
    #[error("the linear program is unbounded")]
    Unbounded,
    /// The backend failed (numerical trouble, iteration limit).
    #[error("the solver failed: {0}")]
    Backend(String),
    /// An integer program's node or time limit was reached before any feasible point was found
    /// (give a warm start to always have one).
    #[error("the solver reached its limit before finding a feasible point")]
    NoIncumbent,
    /// The method cannot solve a program of this form ([`LinearProgram::solve_simplex`] needs
    /// every constraint to hold at the origin); another method can.
    #[error("the program's form is not supported by this method: {0}")]
    Unsupported(&'static str),
}

/// Which method solves a linear program ([`LinearProgram::solve_by`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SolveMethod {
    /// Clarabel's interior point: where the optimum is not unique, a point near the centre of
    /// the optimal face (what Gavel's ECOS returns, which its reproductions depend on).
    #[default]
    InteriorPoint,
    /// The dense revised simplex of [`simplex`]: an optimal vertex, tens of microseconds for a
    /// program of a few dozen rows. Programs it cannot start or that are too large for a dense
    /// method (see [`SolverError::Unsupported`]), and any it fails on numerically, are solved
    /// by the interior point.
    Simplex,
}

/// A solved program.
#[derive(Clone, Debug, PartialEq)]
pub struct LpSolution {
    /// Value of every variable, by [`VarId`].
    pub values: Vec<f64>,
    /// Objective value.
    pub objective: f64,
}

impl LpSolution {
    /// Value of one variable.
    pub fn value(&self, var: VarId) -> f64 {
        self.values.get(var.0).copied().unwrap_or(0.0)
    }
}

/// How hard to try.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolveOptions {
    /// Feasibility and optimality-gap tolerance.
    pub tolerance: f64,
    /// Give up after this many seconds (reported as a backend error; callers keep their
    /// previous answer).
    pub time_limit_s: Option<f64>,
    /// Clarabel's iterative refinement of each linear-system solve (on by default). Off, a
    /// small program solves about a quarter faster; whether the answer stays the same depends on
    /// the program and must be measured by the caller.
    pub iterative_refinement: bool,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            tolerance: 1e-7,
            time_limit_s: None,
            iterative_refinement: true,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Sense {
    Le,
    Ge,
    Eq,
}

/// A linear program assembled from numbers.
#[derive(Clone, Debug)]
pub struct LinearProgram {
    direction: Direction,
    bounds: Vec<(f64, f64)>,
    /// Whether each variable must take an integer value ([`LinearProgram::solve_integer`]).
    integer: Vec<bool>,
    objective: Vec<(VarId, f64)>,
    rows: Vec<Row>,
}

/// One constraint: terms, sense, right-hand side.
#[derive(Clone, Debug)]
struct Row {
    terms: Vec<(VarId, f64)>,
    sense: Sense,
    rhs: f64,
}

impl LinearProgram {
    /// An empty program.
    pub fn new(direction: Direction) -> Self {
        LinearProgram {
            direction,
            bounds: Vec::new(),
            integer: Vec::new(),
            objective: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Adds a variable with bounds `lower <= x <= upper` (use infinities for none).
    pub fn add_var(&mut self, lower: f64, upper: f64) -> VarId {
        self.bounds.push((lower, upper));
        self.integer.push(false);
        VarId(self.bounds.len() - 1)
    }

    /// Adds a variable that must be 0 or 1 in [`LinearProgram::solve_integer`] (and lies in
    /// `[0, 1]` in the relaxation [`LinearProgram::solve`] solves).
    pub fn add_binary_var(&mut self) -> VarId {
        self.bounds.push((0.0, 1.0));
        self.integer.push(true);
        VarId(self.bounds.len() - 1)
    }

    /// Adds a variable that must be a whole number in `lower..=upper` in
    /// [`LinearProgram::solve_integer`] (and lies in `[lower, upper]` in the relaxation).
    pub fn add_integer_var(&mut self, lower: i32, upper: i32) -> VarId {
        self.bounds.push((f64::from(lower), f64::from(upper)));
        self.integer.push(true);
        VarId(self.bounds.len() - 1)
    }

    /// Whether any variable must be integral.
    pub fn has_integer_vars(&self) -> bool {
        self.integer.iter().any(|&i| i)
    }

    /// Number of variables.
    pub fn var_count(&self) -> usize {
        self.bounds.len()
    }

    /// Number of constraints (bounds excluded).
    pub fn constraint_count(&self) -> usize {
        self.rows.len()
    }

    /// Adds `coefficient × var` to the objective.
    pub fn add_objective(&mut self, var: VarId, coefficient: f64) {
        self.objective.push((var, coefficient));
    }

    /// `Σ terms <= rhs`.
    pub fn add_le(&mut self, terms: Vec<(VarId, f64)>, rhs: f64) {
        self.rows.push(Row {
            terms,
            sense: Sense::Le,
            rhs,
        });
    }

    /// `Σ terms >= rhs`.
    pub fn add_ge(&mut self, terms: Vec<(VarId, f64)>, rhs: f64) {
        self.rows.push(Row {
            terms,
            sense: Sense::Ge,
            rhs,
        });
    }

    /// `Σ terms == rhs`.
    pub fn add_eq(&mut self, terms: Vec<(VarId, f64)>, rhs: f64) {
        self.rows.push(Row {
            terms,
            sense: Sense::Eq,
            rhs,
        });
    }

    /// Solves with Clarabel at default accuracy (relative gap and feasibility 1e-7), with no time
    /// limit. Integer markers are ignored: this is the linear relaxation.
    pub fn solve(&self) -> Result<LpSolution, SolverError> {
        self.solve_with(&SolveOptions::default())
    }

    /// Solves by `method`; `options` apply to the interior point (the simplex has no settings).
    /// A program the simplex cannot start is solved by the interior point.
    pub fn solve_by(
        &self,
        method: SolveMethod,
        options: &SolveOptions,
    ) -> Result<LpSolution, SolverError> {
        match method {
            SolveMethod::InteriorPoint => self.solve_with(options),
            // (A numerical failure of the simplex — a singular basis, its iteration limit — is
            // also answered by the interior point rather than failing the recomputation.)
            SolveMethod::Simplex => match self.solve_simplex() {
                Err(SolverError::Unsupported(_) | SolverError::Backend(_)) => {
                    self.solve_with(options)
                }
                other => other,
            },
        }
    }

    /// Solves with Clarabel and the given options.
    pub fn solve_with(&self, options: &SolveOptions) -> Result<LpSolution, SolverError> {
        let mut problem = ProblemVariables::new();
        let vars: Vec<Variable> = self
            .bounds
            .iter()
            .map(|&(lo, hi)| {
                let mut v = variable();
                if lo.is_finite() {
                    v = v.min(lo);
                }
                if hi.is_finite() {
                    v = v.max(hi);
                }
                problem.add(v)
            })
            .collect();
        let expression = |terms: &[(VarId, f64)]| -> Expression {
            let mut e = Expression::with_capacity(terms.len());
            for &(var, c) in terms {
                e.add_mul(c, vars[var.0]);
            }
            e
        };
        let objective = expression(&self.objective);
        let unsolved = match self.direction {
            Direction::Maximise => problem.maximise(objective),
            Direction::Minimise => problem.minimise(objective),
        };
        let mut model = unsolved.using(clarabel);
        model
            .settings()
            .tol_feas(options.tolerance)
            .tol_gap_abs(options.tolerance)
            .tol_gap_rel(options.tolerance)
            .time_limit(options.time_limit_s.unwrap_or(f64::INFINITY))
            .iterative_refinement_enable(options.iterative_refinement);
        for row in &self.rows {
            let lhs = expression(&row.terms);
            let constraint = match row.sense {
                Sense::Le => lhs.leq(row.rhs),
                Sense::Ge => lhs.geq(row.rhs),
                Sense::Eq => lhs.eq(row.rhs),
            };
            model.add_constraint(constraint);
        }
        let solution = model.solve().map_err(|e| match e {
            ResolutionError::Infeasible => SolverError::Infeasible,
            ResolutionError::Unbounded => SolverError::Unbounded,
            other => SolverError::Backend(other.to_string()),
        })?;
        let values: Vec<f64> = vars.iter().map(|v| solution.value(*v)).collect();
        let objective = self.objective.iter().map(|(v, c)| c * values[v.0]).sum();
        Ok(LpSolution { values, objective })
    }
}

pub mod mip;
pub mod simplex;
pub use mip::{MipOptions, MipSolution};

#[cfg(test)]
mod tests {
    use super::*;

    /// max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3; optimum x=3, y=1, objective 11.
    pub(crate) fn small_lp() -> (LinearProgram, VarId, VarId) {
        let mut lp = LinearProgram::new(Direction::Maximise);
        let x = lp.add_var(0.0, 3.0);
        let y = lp.add_var(0.0, f64::INFINITY);
        lp.add_objective(x, 3.0);
        lp.add_objective(y, 2.0);
        lp.add_le(vec![(x, 1.0), (y, 1.0)], 4.0);
        lp.add_le(vec![(x, 1.0), (y, 3.0)], 6.0);
        (lp, x, y)
    }

    #[test]
    fn solves_a_small_lp() {
        let (lp, x, y) = small_lp();
        let s = lp.solve().expect("solvable");
        assert!((s.objective - 11.0).abs() < 1e-6, "{s:?}");
        assert!((s.value(x) - 3.0).abs() < 1e-6 && (s.value(y) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn infeasible_programs_are_errors() {
        let mut lp = LinearProgram::new(Direction::Minimise);
        let x = lp.add_var(0.0, 1.0);
        lp.add_objective(x, 1.0);
        lp.add_ge(vec![(x, 1.0)], 2.0);
        assert!(lp.solve().is_err());
    }
}
