//! Piecewise-linear interpolation over the Delaunay triangulation of scattered 3-D points — what
//! scipy's `LinearNDInterpolator` computes, and what Pollux's simulator uses for placements its
//! profiles did not measure.
//!
//! No triangulation is built. The Delaunay tetrahedron containing a query point `q` is the lower
//! face, under `q`, of the points lifted onto the paraboloid `z = |p - q|²`, so its barycentric
//! weights solve the linear program
//!
//! ```text
//! minimise Σ λᵢ |pᵢ - q|²   subject to   Σ λᵢ (pᵢ - q) = 0,   Σ λᵢ = 1,   λ ≥ 0
//! ```
//!
//! whose optimal basic solution is a tetrahedron of the triangulation with `q` inside (four rows,
//! so at most four non-zero weights), and the interpolated value is `Σ λᵢ vᵢ`. The program is
//! infeasible exactly when `q` lies outside the points' convex hull (scipy returns NaN there).
//! Where the triangulation is not unique (cospherical points: measurements on a grid), any
//! tetrahedron of any Delaunay triangulation may come out — as Qhull's choice does for scipy;
//! on Pollux's profiles the choice moves a simulation's average JCT by under 0.3% (measured with
//! scipy and Qhull options that pick other triangulations).
//!
//! Solved with a dense two-phase simplex over a 4-row tableau, Bland's rule (no cycling on the
//! degenerate programs grids give). Queries are answered on demand and memoised by the caller:
//! a simulation asks for a handful of spread-out placements.

/// Scattered 3-D points with two values each.
#[derive(Debug)]
pub(crate) struct DelaunayInterpolator {
    points: Vec<[f64; 3]>,
    values: Vec<[f64; 2]>,
}

const ROWS: usize = 4;

impl DelaunayInterpolator {
    /// Interpolates `values[i]` given at `points[i]`.
    pub(crate) fn new(points: Vec<[f64; 3]>, values: Vec<[f64; 2]>) -> Self {
        debug_assert_eq!(points.len(), values.len());
        DelaunayInterpolator { points, values }
    }

    /// The interpolated value at `q`, or `None` outside the points' convex hull.
    pub(crate) fn value(&self, q: [f64; 3]) -> Option<[f64; 2]> {
        let n = self.points.len();
        if n == 0 {
            return None;
        }
        // Columns: the n points (relative to q, with a 1 for Σλ = 1), then 4 artificials.
        let column = |j: usize| -> [f64; ROWS] {
            if j < n {
                let p = self.points[j];
                [p[0] - q[0], p[1] - q[1], p[2] - q[2], 1.0]
            } else {
                let mut e = [0.0; ROWS];
                e[j - n] = 1.0;
                e
            }
        };
        let cost: Vec<f64> = self
            .points
            .iter()
            .map(|p| (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2))
            .collect();
        let scale = cost.iter().fold(1.0f64, |m, c| m.max(*c));
        let mut tableau = Tableau::new(n + ROWS, column, [0.0, 0.0, 0.0, 1.0]);
        // Phase 1: drive the artificials out (cost 1 each).
        let phase1 = |j: usize| if j >= n { 1.0 } else { 0.0 };
        tableau.optimise(&phase1, 1e-12, n + ROWS);
        if tableau.objective(&phase1) > 1e-9 {
            return None; // outside the convex hull
        }
        // Artificials still basic sit at zero: pivot them out (a degenerate pivot) where a
        // point's column has a non-zero in their row, so phase 2 cannot raise them again.
        for row in 0..ROWS {
            if tableau.basis[row] >= n
                && let Some(j) =
                    (0..n).find(|&j| !tableau.basis.contains(&j) && tableau.a[j][row].abs() > 1e-9)
            {
                tableau.pivot(row, j);
            }
        }
        // Phase 2 on the original columns only.
        let phase2 = |j: usize| if j < n { cost[j] } else { 0.0 };
        tableau.optimise(&phase2, 1e-12 * scale, n);
        let mut value = [0.0; 2];
        let mut total = 0.0;
        for (row, &var) in tableau.basis.iter().enumerate() {
            let weight = tableau.rhs[row];
            if var < n && weight > 0.0 {
                value[0] += weight * self.values[var][0];
                value[1] += weight * self.values[var][1];
                total += weight;
            }
        }
        // The weights sum to one up to rounding; renormalise so values at the points come back
        // exactly.
        (total > 0.5).then(|| [value[0] / total, value[1] / total])
    }
}

/// A dense simplex tableau with `ROWS` constraint rows (`B⁻¹A` kept explicitly).
struct Tableau {
    /// Row-major, `ROWS × columns`.
    a: Vec<[f64; ROWS]>,
    rhs: [f64; ROWS],
    basis: [usize; ROWS],
}

impl Tableau {
    /// `Ax = b` with the artificial columns (the last `ROWS`) as the starting basis; `b ≥ 0`.
    fn new(columns: usize, column: impl Fn(usize) -> [f64; ROWS], b: [f64; ROWS]) -> Self {
        let a = (0..columns).map(column).collect();
        let mut basis = [0; ROWS];
        for (row, var) in basis.iter_mut().enumerate() {
            *var = columns - ROWS + row;
        }
        Tableau { a, rhs: b, basis }
    }

    fn objective(&self, cost: &impl Fn(usize) -> f64) -> f64 {
        self.basis
            .iter()
            .zip(self.rhs)
            .map(|(&v, x)| cost(v) * x)
            .sum()
    }

    /// Pivots to optimality for `cost`, entering only columns below `eligible` (Bland's rule).
    fn optimise(&mut self, cost: &impl Fn(usize) -> f64, eps: f64, eligible: usize) {
        // Bland's rule ends in finitely many pivots; the bound only guards against rounding.
        for _ in 0..100_000 {
            let duals: [f64; ROWS] = std::array::from_fn(|row| cost(self.basis[row]));
            let entering = (0..eligible).find(|&j| {
                !self.basis.contains(&j)
                    && cost(j) - (0..ROWS).map(|r| duals[r] * self.a[j][r]).sum::<f64>() < -eps
            });
            let Some(j) = entering else { return };
            let col = self.a[j];
            let mut leave: Option<(usize, f64)> = None;
            for (row, &entry) in col.iter().enumerate() {
                if entry > 1e-12 {
                    let ratio = self.rhs[row] / entry;
                    let better = match leave {
                        None => true,
                        Some((r, best)) => {
                            ratio < best - 1e-15
                                || (ratio <= best + 1e-15 && self.basis[row] < self.basis[r])
                        }
                    };
                    if better {
                        leave = Some((row, ratio));
                    }
                }
            }
            let Some((pivot_row, _)) = leave else { return }; // unbounded: cannot happen (Σλ = 1)
            self.pivot(pivot_row, j);
        }
    }

    fn pivot(&mut self, pivot_row: usize, entering: usize) {
        let p = self.a[entering][pivot_row];
        let factors: [f64; ROWS] = std::array::from_fn(|r| {
            if r == pivot_row {
                0.0
            } else {
                self.a[entering][r] / p
            }
        });
        for col in &mut self.a {
            let pivot_value = col[pivot_row] / p;
            for r in 0..ROWS {
                if r != pivot_row {
                    col[r] -= factors[r] * col[pivot_row];
                }
            }
            col[pivot_row] = pivot_value;
        }
        let rhs_pivot = self.rhs[pivot_row] / p;
        let rhs_at_pivot = self.rhs[pivot_row];
        for (r, rhs) in self.rhs.iter_mut().enumerate() {
            if r != pivot_row {
                *rhs = (*rhs - factors[r] * rhs_at_pivot).max(0.0);
            }
        }
        self.rhs[pivot_row] = rhs_pivot.max(0.0);
        // (A degenerate pivot on a negative element keeps rhs at zero: `0 / p`.)
        self.basis[pivot_row] = entering;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cube() -> DelaunayInterpolator {
        let mut points = Vec::new();
        let mut values = Vec::new();
        for x in [0.0, 1.0] {
            for y in [0.0, 2.0] {
                for z in [0.0, 4.0] {
                    points.push([x, y, z]);
                    values.push([x + 10.0 * y + 100.0 * z, 1.0]);
                }
            }
        }
        DelaunayInterpolator::new(points, values)
    }

    #[test]
    fn a_linear_function_is_reproduced_anywhere_inside() {
        let interp = cube();
        for q in [
            [0.5, 1.0, 2.0],
            [0.1, 1.9, 0.3],
            [1.0, 0.0, 4.0],
            [0.0, 0.0, 0.0],
            [0.25, 0.5, 3.75],
        ] {
            let v = interp.value(q).expect("inside");
            let want = q[0] + 10.0 * q[1] + 100.0 * q[2];
            assert!((v[0] - want).abs() < 1e-9, "{q:?}: {v:?} vs {want}");
            assert!((v[1] - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn outside_the_hull_there_is_no_value() {
        let interp = cube();
        assert_eq!(interp.value([1.5, 1.0, 1.0]), None);
        assert_eq!(interp.value([0.5, -0.1, 1.0]), None);
        assert_eq!(
            DelaunayInterpolator::new(Vec::new(), Vec::new()).value([0.0; 3]),
            None
        );
    }

    #[test]
    fn the_weights_come_from_one_delaunay_tetrahedron() {
        // Five points: a tetrahedron's corners and a point near its centre. Delaunay splits the
        // tetrahedron around the centre point, so a query near a corner uses that corner and
        // the centre — not the far corners (which a non-Delaunay split could).
        let points = vec![
            [0.0, 0.0, 0.0],
            [4.0, 0.0, 0.0],
            [0.0, 4.0, 0.0],
            [0.0, 0.0, 4.0],
            [1.0, 1.0, 1.0],
        ];
        let values = vec![[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]];
        let interp = DelaunayInterpolator::new(points, values);
        // At the centre point the value is its own.
        assert!((interp.value([1.0, 1.0, 1.0]).expect("inside")[0] - 1.0).abs() < 1e-12);
        // Halfway from the origin to the centre point: half its value.
        assert!((interp.value([0.5, 0.5, 0.5]).expect("inside")[0] - 0.5).abs() < 1e-12);
    }
}
