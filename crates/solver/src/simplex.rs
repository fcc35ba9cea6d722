//! Small linear programs solved at a vertex: a dense revised primal simplex.
//!
//! Why a simplex of our own beside Clarabel: Gavel's allocation programs are small (a few dozen
//! rows once jobs are grouped into classes) and solved thousands of times per simulation, where
//! the interior point's fixed cost per solve (assembling and ordering the KKT system, ≈ 0.14 ms)
//! dominates. A revised simplex on a dense inverse of the basis costs O(rows²) per pivot and
//! needs no setup, so such a program solves in tens of microseconds. It returns a *vertex* of
//! the optimal face, where the interior point returns a central point of it: the same optimum,
//! another allocation when the optimum is not unique (see `SolveMethod`).
//!
//! It only solves programs of at most [`MAX_ROWS`] rows that are feasible at the origin once
//! bounds are shifted away (every
//! constraint holds with each variable at its lower bound — at its upper bound if it has only
//! that, at zero if it has neither): it then starts from the slack basis and needs no first
//! phase. Gavel's max-min, packing and makespan
//! programs have that form; a program that does not (a lower bound on a level, as the
//! hierarchical policy's frozen tenants) is answered `SolverError::Unsupported`, and callers
//! solve it with the interior point.
//!
//! ```text
//!   maximise c·z   s.t.   A z <= b,  z >= 0,  b >= 0        (the form solved)
//! ```
//!
//! Pricing is Dantzig's largest reduced cost, the ratio test Harris' two passes (the largest
//! pivot among near-ties, for stability); after a run of degenerate pivots it switches to
//! Bland's rule (smallest index entering and leaving), which cannot cycle, until the objective
//! moves again. The inverse is rebuilt from the basis' columns every `REFACTOR_EVERY` pivots,
//! so rounding does not accumulate, and the answer is refined once against the basis' columns
//! before it is read.

use crate::{Direction, LinearProgram, LpSolution, Sense, SolverError};

/// Rows above which a program is not solved here: the dense inverse costs O(rows²) per pivot
/// and O(rows³) per rebuild, so a program of a thousand rows (a program over every job rather
/// than over job classes) takes seconds, where the interior point, sparse, takes milliseconds.
/// Measured (`arbiter bench --suite gavel`, max-min programs over distinct jobs): at 63 rows the
/// simplex takes a quarter of the interior point's time, at 127 rows half, at 191 rows as much,
/// at 255 rows half again as much.
pub const MAX_ROWS: usize = 192;
/// Pivots between two rebuilds of the basis inverse.
const REFACTOR_EVERY: usize = 64;
/// A reduced cost above this improves the objective.
const PRICE_TOLERANCE: f64 = 1e-9;
/// Pivot elements at or below this are not taken.
const PIVOT_TOLERANCE: f64 = 1e-9;
/// Primal infeasibility Harris' first pass allows a basic variable.
const HARRIS_TOLERANCE: f64 = 1e-11;

/// How a variable of the program maps onto the standard form's columns.
#[derive(Clone, Copy, Debug)]
enum Shift {
    /// `x = lower + z`.
    FromLower { lower: f64, column: usize },
    /// `x = upper - z`.
    FromUpper { upper: f64, column: usize },
    /// `x = z⁺ - z⁻`.
    Free { plus: usize, minus: usize },
    /// Fixed at a value (both bounds equal).
    Fixed(f64),
}

/// The program in the form solved: `maximise c·z s.t. A z <= b, z >= 0`, with `b >= 0`.
#[derive(Debug, Default)]
struct Standard {
    /// Per structural column, its non-zeros `(row, value)`.
    columns: Vec<Vec<(usize, f64)>>,
    cost: Vec<f64>,
    rhs: Vec<f64>,
}

impl Standard {
    fn column(&mut self, cost: f64) -> usize {
        self.columns.push(Vec::new());
        self.cost.push(cost);
        self.columns.len() - 1
    }

    /// Per column, the least upper bound its rows imply: a row whose coefficients are all
    /// non-negative bounds each of its columns by `rhs / a` (every column is >= 0). Infinite
    /// where no row does.
    fn implied_upper_bounds(&self) -> Vec<f64> {
        let mut all_non_negative = vec![true; self.rhs.len()];
        for entries in &self.columns {
            for &(r, a) in entries {
                all_non_negative[r] &= a >= 0.0;
            }
        }
        self.columns
            .iter()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|&&(r, a)| a > 0.0 && all_non_negative[r])
                    .map(|&(r, a)| self.rhs[r] / a)
                    .fold(f64::INFINITY, f64::min)
            })
            .collect()
    }

    /// Makes room in each column for the entries `rows` (and one bound row per column at most)
    /// will give it: columns otherwise grow an entry at a time, and a packed program's thousands
    /// of short columns were reallocated three or four times each.
    fn reserve_entries(&mut self, rows: &[crate::Row], shifts: &[Shift], bound_rows: usize) {
        let mut entries = vec![usize::from(bound_rows > 0); self.columns.len()];
        for row in rows {
            let copies = if matches!(row.sense, Sense::Eq) { 2 } else { 1 };
            for &(var, _) in &row.terms {
                match shifts[var.0] {
                    Shift::FromLower { column, .. } | Shift::FromUpper { column, .. } => {
                        entries[column] += copies;
                    }
                    Shift::Free { plus, minus } => {
                        entries[plus] += copies;
                        entries[minus] += copies;
                    }
                    Shift::Fixed(_) => {}
                }
            }
        }
        for (column, n) in self.columns.iter_mut().zip(entries) {
            column.reserve_exact(n);
        }
    }

    /// Adds `Σ terms <= rhs` over standard columns.
    fn row(&mut self, terms: impl IntoIterator<Item = (usize, f64)>, rhs: f64) {
        let r = self.rhs.len();
        for (column, value) in terms {
            if value != 0.0 {
                self.columns[column].push((r, value));
            }
        }
        self.rhs.push(rhs);
    }
}

impl LinearProgram {
    /// Solves the linear relaxation with the dense revised simplex of this module: an optimal
    /// vertex. Fails with [`SolverError::Unsupported`] when a constraint does not hold with
    /// every variable at its lower bound (at its upper bound if it has only that, at zero if
    /// it has neither), which this method needs to start, or when the program has more than
    /// [`MAX_ROWS`] rows once in its standard form.
    pub fn solve_simplex(&self) -> Result<LpSolution, SolverError> {
        let (standard, shifts) = self.standard_form()?;
        if standard.rhs.len() > MAX_ROWS {
            return Err(SolverError::Unsupported(
                "the simplex keeps a dense inverse: programs of more than 192 rows are left to the interior point",
            ));
        }
        let z = Simplex::new(&standard).solve()?;
        let values: Vec<f64> = shifts
            .iter()
            .map(|shift| match *shift {
                Shift::FromLower { lower, column } => lower + z[column],
                Shift::FromUpper { upper, column } => upper - z[column],
                Shift::Free { plus, minus } => z[plus] - z[minus],
                Shift::Fixed(value) => value,
            })
            .collect();
        let objective = self.objective.iter().map(|(v, c)| c * values[v.0]).sum();
        Ok(LpSolution { values, objective })
    }

    /// The program as `maximise c·z s.t. A z <= b, z >= 0, b >= 0`, and how each variable is
    /// read back from `z`.
    fn standard_form(&self) -> Result<(Standard, Vec<Shift>), SolverError> {
        let sign = match self.direction {
            Direction::Maximise => 1.0,
            Direction::Minimise => -1.0,
        };
        let mut objective = vec![0.0; self.bounds.len()];
        for &(var, c) in &self.objective {
            objective[var.0] += sign * c;
        }
        let mut standard = Standard::default();
        let mut upper_rows = Vec::new();
        let shifts: Vec<Shift> = self
            .bounds
            .iter()
            .zip(&objective)
            .map(|(&(lower, upper), &c)| {
                if lower > upper {
                    return Err(SolverError::Infeasible);
                }
                Ok(if lower == upper {
                    Shift::Fixed(lower)
                } else if lower.is_finite() {
                    let column = standard.column(c);
                    if upper.is_finite() {
                        upper_rows.push((column, upper - lower));
                    }
                    Shift::FromLower { lower, column }
                } else if upper.is_finite() {
                    Shift::FromUpper {
                        upper,
                        column: standard.column(-c),
                    }
                } else {
                    Shift::Free {
                        plus: standard.column(c),
                        minus: standard.column(-c),
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        standard.reserve_entries(&self.rows, &shifts, upper_rows.len());
        for row in &self.rows {
            // The row in standard columns, and what the shifts move to its right-hand side.
            let mut terms = Vec::with_capacity(row.terms.len() + 1);
            let mut rhs = row.rhs;
            for &(var, a) in &row.terms {
                match shifts[var.0] {
                    Shift::FromLower { lower, column } => {
                        rhs -= a * lower;
                        terms.push((column, a));
                    }
                    Shift::FromUpper { upper, column } => {
                        rhs -= a * upper;
                        terms.push((column, -a));
                    }
                    Shift::Free { plus, minus } => terms.extend([(plus, a), (minus, -a)]),
                    Shift::Fixed(value) => rhs -= a * value,
                }
            }
            let negated = || terms.iter().map(|&(c, a)| (c, -a));
            match row.sense {
                Sense::Le => standard.row(terms.iter().copied(), at_origin(rhs)?),
                Sense::Ge => standard.row(negated(), at_origin(-rhs)?),
                Sense::Eq => {
                    standard.row(terms.iter().copied(), at_origin(rhs)?);
                    standard.row(negated(), at_origin(-rhs)?);
                }
            }
        }
        // An upper bound a row already implies is left out (as Gavel's solo shares' bound of 1
        // is by each job's time row): every row costs O(rows) in each pivot.
        let implied = standard.implied_upper_bounds();
        for (column, width) in upper_rows {
            if implied[column] > width {
                standard.row([(column, 1.0)], width);
            }
        }
        Ok((standard, shifts))
    }
}

/// A right-hand side the slack basis can start from (rounding's tiny negatives taken as zero).
fn at_origin(rhs: f64) -> Result<f64, SolverError> {
    if rhs >= -1e-12 {
        Ok(rhs.max(0.0))
    } else {
        Err(SolverError::Unsupported(
            "the simplex starts at the origin: every constraint must hold with each variable at its lower bound",
        ))
    }
}

/// The simplex's state: the basis, its dense inverse and the basic variables' values.
struct Simplex<'a> {
    program: &'a Standard,
    /// Rows.
    m: usize,
    /// Structural columns (slack `i` is column `n + i`).
    n: usize,
    /// Per row, the column basic in it.
    basis: Vec<usize>,
    /// Per column, whether it is basic.
    basic: Vec<bool>,
    /// B⁻¹, row-major.
    inverse: Vec<f64>,
    /// Values of the basic variables, per row.
    values: Vec<f64>,
}

impl<'a> Simplex<'a> {
    fn new(program: &'a Standard) -> Self {
        let (m, n) = (program.rhs.len(), program.columns.len());
        let mut inverse = vec![0.0; m * m];
        for i in 0..m {
            inverse[i * m + i] = 1.0;
        }
        let mut basic = vec![false; n + m];
        basic[n..].fill(true);
        Simplex {
            program,
            m,
            n,
            basis: (n..n + m).collect(),
            basic,
            inverse,
            values: program.rhs.clone(),
        }
    }

    fn cost(&self, column: usize) -> f64 {
        self.program.cost.get(column).copied().unwrap_or(0.0)
    }

    /// Pivots to an optimal basis; the structural columns' values.
    fn solve(mut self) -> Result<Vec<f64>, SolverError> {
        let limit = 50 * (self.m + self.n) + 1_000;
        let (mut since_refactor, mut degenerate) = (0, 0);
        let mut duals = vec![0.0; self.m];
        let mut alpha = vec![0.0; self.m];
        for _ in 0..limit {
            // Bland's rule after a run of degenerate pivots: it cannot cycle.
            let bland = degenerate > self.m;
            self.duals_into(&mut duals);
            let Some(entering) = self.entering(&duals, bland) else {
                self.polish();
                let mut z = vec![0.0; self.n];
                for (row, &column) in self.basis.iter().enumerate() {
                    if column < self.n {
                        z[column] = self.values[row].max(0.0);
                    }
                }
                return Ok(z);
            };
            self.column_into(entering, &mut alpha);
            let leaving = self.leaving(&alpha, bland).ok_or(SolverError::Unbounded)?;
            let step = (self.values[leaving] / alpha[leaving]).max(0.0);
            degenerate = if step > 0.0 { 0 } else { degenerate + 1 };
            self.pivot(entering, leaving, &alpha, step);
            since_refactor += 1;
            if since_refactor == REFACTOR_EVERY {
                self.refactor()?;
                since_refactor = 0;
            }
        }
        Err(SolverError::Backend(
            "the simplex reached its iteration limit".into(),
        ))
    }

    /// `y = c_B B⁻¹`.
    fn duals_into(&self, duals: &mut [f64]) {
        duals.fill(0.0);
        for (row, &column) in self.basis.iter().enumerate() {
            let c = self.cost(column);
            if c != 0.0 {
                let inverse_row = &self.inverse[row * self.m..(row + 1) * self.m];
                for (y, b) in duals.iter_mut().zip(inverse_row) {
                    *y += c * b;
                }
            }
        }
    }

    /// The column to enter: the largest reduced cost (Dantzig), or the first positive one
    /// (Bland). None: the basis is optimal.
    fn entering(&self, duals: &[f64], bland: bool) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for column in 0..self.n + self.m {
            if self.basic[column] {
                continue;
            }
            let reduced = match self.program.columns.get(column) {
                Some(entries) => {
                    self.program.cost[column]
                        - entries.iter().map(|&(r, a)| duals[r] * a).sum::<f64>()
                }
                None => -duals[column - self.n],
            };
            if reduced > PRICE_TOLERANCE && best.is_none_or(|(_, b)| reduced > b) {
                best = Some((column, reduced));
                if bland {
                    break;
                }
            }
        }
        best.map(|(column, _)| column)
    }

    /// `B⁻¹ a_q` for column `q`.
    fn column_into(&self, q: usize, alpha: &mut [f64]) {
        let m = self.m;
        match self.program.columns.get(q) {
            Some(entries) => {
                for (i, out) in alpha.iter_mut().enumerate() {
                    let row = &self.inverse[i * m..(i + 1) * m];
                    *out = entries.iter().map(|&(r, a)| row[r] * a).sum();
                }
            }
            None => {
                for (i, out) in alpha.iter_mut().enumerate() {
                    *out = self.inverse[i * m + (q - self.n)];
                }
            }
        }
    }

    /// The row to leave (Harris' two passes; Bland's smallest basic column among ties). None:
    /// nothing bounds the step (unbounded).
    fn leaving(&self, alpha: &[f64], bland: bool) -> Option<usize> {
        let candidates = || (0..self.m).filter(|&i| alpha[i] > PIVOT_TOLERANCE);
        if bland {
            let ratio = |i: usize| self.values[i].max(0.0) / alpha[i];
            let least = candidates().map(ratio).reduce(f64::min)?;
            return candidates()
                .filter(|&i| ratio(i) <= least * (1.0 + 1e-12) + 1e-300)
                .min_by_key(|&i| self.basis[i]);
        }
        let bound = candidates()
            .map(|i| (self.values[i].max(0.0) + HARRIS_TOLERANCE) / alpha[i])
            .reduce(f64::min)?;
        candidates()
            .filter(|&i| self.values[i].max(0.0) / alpha[i] <= bound)
            .max_by(|&a, &b| alpha[a].total_cmp(&alpha[b]).then(b.cmp(&a)))
    }

    /// Column `entering` replaces the basic variable of row `leaving`.
    fn pivot(&mut self, entering: usize, leaving: usize, alpha: &[f64], step: f64) {
        let m = self.m;
        for (i, value) in self.values.iter_mut().enumerate() {
            if i != leaving {
                *value -= step * alpha[i];
            }
        }
        self.values[leaving] = step;
        let pivot = alpha[leaving];
        let (before, rest) = self.inverse.split_at_mut(leaving * m);
        let (pivot_row, after) = rest.split_at_mut(m);
        for b in pivot_row.iter_mut() {
            *b /= pivot;
        }
        let others = before
            .chunks_exact_mut(m)
            .zip(&alpha[..leaving])
            .chain(after.chunks_exact_mut(m).zip(&alpha[leaving + 1..]));
        for (row, &factor) in others {
            if factor != 0.0 {
                for (b, p) in row.iter_mut().zip(pivot_row.iter()) {
                    *b -= factor * p;
                }
            }
        }
        self.basic[self.basis[leaving]] = false;
        self.basic[entering] = true;
        self.basis[leaving] = entering;
    }

    /// Corrects the basic values for the rounding the inverse's updates left: one step of
    /// iterative refinement, `x_B += B⁻¹ (b − B x_B)` — O(rows²), where rebuilding the inverse
    /// would be O(rows³).
    fn polish(&mut self) {
        let m = self.m;
        let mut residual = self.program.rhs.clone();
        for (&column, &value) in self.basis.iter().zip(&self.values) {
            match self.program.columns.get(column) {
                Some(entries) => {
                    for &(r, a) in entries {
                        residual[r] -= a * value;
                    }
                }
                None => residual[column - self.n] -= value,
            }
        }
        for (i, value) in self.values.iter_mut().enumerate() {
            let row = &self.inverse[i * m..(i + 1) * m];
            *value += row.iter().zip(&residual).map(|(b, r)| b * r).sum::<f64>();
        }
    }

    /// Rebuilds B⁻¹ from the basis' columns (Gauss-Jordan with partial pivoting) and the basic
    /// values from it.
    fn refactor(&mut self) -> Result<(), SolverError> {
        let m = self.m;
        let mut basis_matrix = vec![0.0; m * m];
        for (j, &column) in self.basis.iter().enumerate() {
            match self.program.columns.get(column) {
                Some(entries) => {
                    for &(r, a) in entries {
                        basis_matrix[r * m + j] = a;
                    }
                }
                None => basis_matrix[(column - self.n) * m + j] = 1.0,
            }
        }
        self.inverse = invert(basis_matrix, m)
            .ok_or_else(|| SolverError::Backend("the simplex's basis became singular".into()))?;
        for (i, value) in self.values.iter_mut().enumerate() {
            let row = &self.inverse[i * m..(i + 1) * m];
            *value = row.iter().zip(&self.program.rhs).map(|(b, r)| b * r).sum();
        }
        Ok(())
    }
}

/// The inverse of the `m × m` row-major matrix `a`, by Gauss-Jordan elimination with partial
/// pivoting; None if it is singular.
fn invert(mut a: Vec<f64>, m: usize) -> Option<Vec<f64>> {
    let mut inverse = vec![0.0; m * m];
    for i in 0..m {
        inverse[i * m + i] = 1.0;
    }
    for col in 0..m {
        let pivot_row =
            (col..m).max_by(|&x, &y| a[x * m + col].abs().total_cmp(&a[y * m + col].abs()))?;
        let pivot = a[pivot_row * m + col];
        if pivot.abs() < 1e-12 {
            return None;
        }
        if pivot_row != col {
            for k in 0..m {
                a.swap(pivot_row * m + k, col * m + k);
                inverse.swap(pivot_row * m + k, col * m + k);
            }
        }
        for k in 0..m {
            a[col * m + k] /= pivot;
            inverse[col * m + k] /= pivot;
        }
        for row in 0..m {
            let factor = a[row * m + col];
            if row != col && factor != 0.0 {
                for k in 0..m {
                    a[row * m + k] -= factor * a[col * m + k];
                    inverse[row * m + k] -= factor * inverse[col * m + k];
                }
            }
        }
    }
    Some(inverse)
}

#[cfg(test)]
mod tests;
