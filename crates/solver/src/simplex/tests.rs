use crate::{Direction, LinearProgram, MipOptions, SolverError, VarId};
use proptest::prelude::*;

/// The largest violation of a constraint or bound by `values`.
fn violation(lp: &LinearProgram, values: &[f64]) -> f64 {
    let mut worst: f64 = 0.0;
    for (&(lower, upper), &v) in lp.bounds.iter().zip(values) {
        worst = worst.max(lower - v).max(v - upper);
    }
    for row in &lp.rows {
        let lhs: f64 = row.terms.iter().map(|&(var, a)| a * values[var.0]).sum();
        let excess = match row.sense {
            crate::Sense::Le => lhs - row.rhs,
            crate::Sense::Ge => row.rhs - lhs,
            crate::Sense::Eq => (lhs - row.rhs).abs(),
        };
        worst = worst.max(excess);
    }
    worst
}

/// A program the simplex refuses, as `solve_by` hands it to the interior point.
fn left_to_the_interior_point(lp: &LinearProgram) -> crate::LpSolution {
    assert!(matches!(
        lp.solve_simplex(),
        Err(SolverError::Unsupported(_))
    ));
    lp.solve_by(crate::SolveMethod::Simplex, &crate::SolveOptions::default())
        .expect("the interior point solves it")
}

#[test]
fn solves_a_small_lp_at_its_vertex() {
    let (lp, x, y) = crate::tests::small_lp();
    let s = lp.solve_simplex().expect("solvable");
    assert!((s.objective - 11.0).abs() < 1e-12, "{s:?}");
    assert!((s.value(x) - 3.0).abs() < 1e-12 && (s.value(y) - 1.0).abs() < 1e-12);
}

#[test]
fn minimises_with_free_shifted_and_fixed_variables() {
    // min x - y + 2w s.t. x - y >= -5 (x free, y in [1, 4], w fixed at 0.5), x >= -2 as a row:
    // x = -2, y = 3 → x - y = -5; objective -2 - 3 + 1 = -4.
    let mut lp = LinearProgram::new(Direction::Minimise);
    let x = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
    let y = lp.add_var(1.0, 4.0);
    let w = lp.add_var(0.5, 0.5);
    lp.add_objective(x, 1.0);
    lp.add_objective(y, -1.0);
    lp.add_objective(w, 2.0);
    lp.add_ge(vec![(x, 1.0), (y, -1.0)], -5.0);
    lp.add_ge(vec![(x, 1.0)], -2.0);
    let s = lp.solve_simplex().expect("solvable");
    assert!((s.objective + 4.0).abs() < 1e-12, "{s:?}");
    assert!((s.value(x) + 2.0).abs() < 1e-12 && (s.value(y) - 3.0).abs() < 1e-12);
    assert_eq!(s.value(w), 0.5);
    // An upper bound alone (x <= 2, unbounded below) starts at its bound; an equality that
    // holds there is kept.
    let mut lp = LinearProgram::new(Direction::Minimise);
    let x = lp.add_var(f64::NEG_INFINITY, 2.0);
    let y = lp.add_var(0.0, f64::INFINITY);
    lp.add_objective(y, 1.0);
    lp.add_objective(x, 1.0);
    lp.add_eq(vec![(x, 1.0), (y, 1.0)], 2.0);
    let s = lp.solve_simplex().expect("solvable");
    assert!((s.objective - 2.0).abs() < 1e-12, "{s:?}");
}

#[test]
fn reports_unbounded_infeasible_bounds_and_programs_it_cannot_start() {
    let mut lp = LinearProgram::new(Direction::Maximise);
    let x = lp.add_var(0.0, f64::INFINITY);
    let y = lp.add_var(0.0, f64::INFINITY);
    lp.add_objective(x, 1.0);
    lp.add_le(vec![(x, 1.0), (y, -1.0)], 1.0);
    assert_eq!(lp.solve_simplex(), Err(SolverError::Unbounded));

    let mut lp = LinearProgram::new(Direction::Maximise);
    lp.add_var(2.0, 1.0);
    assert_eq!(lp.solve_simplex(), Err(SolverError::Infeasible));

    // x >= 1 does not hold at the origin: not startable here, solved by the interior point.
    let mut lp = LinearProgram::new(Direction::Minimise);
    let x = lp.add_var(0.0, 5.0);
    lp.add_objective(x, 1.0);
    lp.add_ge(vec![(x, 1.0)], 1.0);
    let s = left_to_the_interior_point(&lp);
    assert!((s.value(x) - 1.0).abs() < 1e-6, "{s:?}");
}

#[test]
fn a_degenerate_max_min_program_terminates_at_its_optimum() {
    // 40 identical jobs sharing 3 GPUs, every level row degenerate at the start: t = 3/40.
    let mut lp = LinearProgram::new(Direction::Maximise);
    let t = lp.add_var(f64::NEG_INFINITY, f64::INFINITY);
    lp.add_objective(t, 1.0);
    let x: Vec<VarId> = (0..40).map(|_| lp.add_var(0.0, f64::INFINITY)).collect();
    for &xj in &x {
        lp.add_le(vec![(t, 1.0), (xj, -1.0)], 0.0);
        lp.add_le(vec![(xj, 1.0)], 1.0);
    }
    lp.add_le(x.iter().map(|&v| (v, 1.0)).collect(), 3.0);
    let s = lp.solve_simplex().expect("solvable");
    assert!((s.objective - 3.0 / 40.0).abs() < 1e-14, "{s:?}");
    assert!(violation(&lp, &s.values) < 1e-12);
}

/// A random program the simplex can start: `Σ a x <= b` rows with `b >= 0` (and `>=` rows with
/// `b <= 0`), variables in `[0, u]`, `[l <= 0, u]` or free, boxed by a row so it is bounded.
fn startable_program() -> impl Strategy<Value = LinearProgram> {
    let var = prop_oneof![
        (0.1f64..10.0).prop_map(|u| (0.0, u)),
        Just((0.0, f64::INFINITY)),
        ((-3.0f64..0.0), (0.5f64..4.0)).prop_map(|(l, u)| (l, u)),
        Just((f64::NEG_INFINITY, f64::INFINITY)),
    ];
    (1usize..12, 1usize..16, any::<bool>()).prop_flat_map(move |(vars, rows, maximise)| {
        (
            proptest::collection::vec(var.clone(), vars),
            proptest::collection::vec(-5.0f64..5.0, vars),
            proptest::collection::vec(
                (
                    proptest::collection::vec(prop_oneof![Just(0.0), -4.0f64..4.0], vars),
                    0.0f64..20.0,
                    any::<bool>(),
                ),
                rows,
            ),
        )
            .prop_map(move |(bounds, objective, rows)| {
                let direction = if maximise {
                    Direction::Maximise
                } else {
                    Direction::Minimise
                };
                let mut lp = LinearProgram::new(direction);
                let vars: Vec<VarId> = bounds.iter().map(|&(l, u)| lp.add_var(l, u)).collect();
                for (&v, &c) in vars.iter().zip(&objective) {
                    lp.add_objective(v, c);
                }
                // Every constraint holds at the origin; the variables' lower bounds are <= 0,
                // so a row's right-hand side is widened by what they can take from it.
                let slack_at_lower = |terms: &[(VarId, f64)]| -> f64 {
                    terms
                        .iter()
                        .map(|&(v, a)| {
                            let lower = bounds[v.0].0;
                            if lower.is_finite() {
                                (a * lower).max(0.0)
                            } else {
                                0.0
                            }
                        })
                        .sum()
                };
                for (coefficients, rhs, ge) in rows {
                    let terms: Vec<(VarId, f64)> = vars.iter().copied().zip(coefficients).collect();
                    let rhs = rhs + slack_at_lower(&terms);
                    if ge {
                        lp.add_ge(terms.iter().map(|&(v, a)| (v, -a)).collect(), -rhs);
                    } else {
                        lp.add_le(terms, rhs);
                    }
                }
                // A box keeps it bounded: |x| <= 50 for every variable.
                for &v in &vars {
                    lp.add_le(vec![(v, 1.0)], 50.0);
                    lp.add_ge(vec![(v, 1.0)], -50.0);
                }
                lp
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The simplex's optimum is feasible and equals microlp's (an exact simplex) to 1e-9
    /// relative, and Clarabel's to its own accuracy.
    #[test]
    fn agrees_with_the_other_solvers(lp in startable_program()) {
        let simplex = lp.solve_simplex().expect("startable and bounded");
        prop_assert!(violation(&lp, &simplex.values) < 1e-9, "{simplex:?}");
        let exact = lp.solve_integer(&MipOptions::default()).expect("microlp solves it");
        let scale = simplex.objective.abs().max(exact.objective.abs()).max(1.0);
        prop_assert!((simplex.objective - exact.objective).abs() <= 1e-9 * scale,
            "simplex {} microlp {}", simplex.objective, exact.objective);
        let interior = lp.solve().expect("Clarabel solves it");
        prop_assert!((simplex.objective - interior.objective).abs() <= 1e-5 * scale,
            "simplex {} Clarabel {}", simplex.objective, interior.objective);
    }
}

#[test]
fn a_program_too_large_for_the_dense_inverse_goes_to_the_interior_point() {
    // max Σ x s.t. x_i <= 1 as rows: MAX_ROWS + 1 rows.
    let mut lp = LinearProgram::new(Direction::Maximise);
    let xs: Vec<VarId> = (0..=super::MAX_ROWS)
        .map(|_| lp.add_var(0.0, f64::INFINITY))
        .collect();
    for &x in &xs {
        lp.add_objective(x, 1.0);
        lp.add_le(vec![(x, 1.0)], 1.0);
    }
    let s = left_to_the_interior_point(&lp);
    assert!(
        (s.objective - xs.len() as f64).abs() < 1e-4,
        "{}",
        s.objective
    );
    // One row fewer is the simplex's.
    lp.rows.pop();
    lp.bounds.pop();
    lp.integer.pop();
    lp.objective.pop();
    let s = lp.solve_simplex().expect("small enough");
    assert_eq!(s.objective, super::MAX_ROWS as f64);
}
