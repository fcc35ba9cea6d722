//! A maximum-weight matching over job *shapes*, for traces too large for Muri's own O(n³)
//! blossom (`policy.muri.matching = "fast"`).
//!
//! Muri weighs a pair of groups by how well their jobs interleave, which depends only on the
//! members' stage and iteration times — their shapes. A class of a few thousand groups holds a
//! few dozen shapes, so the matching is a *b-matching* over shapes: how many pairs `x(a, b)` of
//! each pair of shapes (`a == b` included), each shape used at most as many times as it has
//! groups, of greatest total weight. That is a small integer program (one variable per pair of
//! shapes that interleave, one row per shape), solved exactly by branch and bound from the
//! greedy answer (heaviest pairs of shapes first); where it has more than [`MAX_EXACT_PAIRS`]
//! variables or the node limit stops the search, the best answer found stands (never worse than
//! the greedy one). Then the groups are paired: for each pair of shapes, heaviest first, the
//! lowest-numbered free groups of either shape (the best-ranked jobs interleave first).
//!
//! What differs from Muri's matching ([`super::muri`]), by design:
//! * among equally heavy matchings it picks another (Muri's tie rule is the order of its
//!   blossom's search, which only the O(n³) search itself reproduces);
//! * a pair's weight is the heavier of its two directions (Muri reads the direction in which
//!   the pair is stored; the two differ in the last bits only);
//! * which groups of two shapes pair up is decided by rank, not by the search.
//!
//! Its deviation from the exact matching on Muri's eight traces is measured in
//! `docs/performance.md` ("Muri at scale").

use arbiter_solver::{Direction, LinearProgram, MipOptions};

/// Most pairs of shapes (the integer program's variables) solved by branch and bound; above,
/// the greedy answer stands.
pub const MAX_EXACT_PAIRS: usize = 400;

/// Branch-and-bound nodes per matching: a deterministic limit (a simulation decides alike on a
/// fast and a slow machine).
const NODE_LIMIT: u64 = 200;

/// A pair of shapes that interleave.
#[derive(Clone, Copy, Debug)]
struct ShapePair {
    a: usize,
    b: usize,
    weight: f64,
    /// Most pairs of these shapes the groups allow.
    most: usize,
}

/// A maximum-weight matching of vertices `0..shape_of.len()` whose edge weights depend only on
/// their shapes: `shape_of[u]` (`None`: `u` has no edge), `shapes` shapes, `weight(a, b)` the
/// weight of a vertex of shape `a` followed by one of shape `b` (`None` or not positive: no
/// edge). Returns each vertex's mate.
pub fn match_by_shape(
    shape_of: &[Option<usize>],
    shapes: usize,
    weight: impl Fn(usize, usize) -> Option<f64>,
) -> Vec<Option<usize>> {
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); shapes];
    for (u, shape) in shape_of.iter().enumerate() {
        if let Some(list) = shape.and_then(|s| members.get_mut(s)) {
            list.push(u);
        }
    }
    let pairs = shape_pairs(&members, &weight);
    let greedy = greedy_counts(&pairs, &members);
    let counts = if pairs.len() > 1 && pairs.len() <= MAX_EXACT_PAIRS {
        exact_counts(&pairs, &members, &greedy).unwrap_or(greedy)
    } else {
        greedy
    };
    let mut next = vec![0usize; shapes];
    let mut mate = vec![None; shape_of.len()];
    for (pair, &count) in pairs.iter().zip(&counts) {
        for _ in 0..count {
            let u = members[pair.a][next[pair.a]];
            next[pair.a] += 1;
            let v = members[pair.b][next[pair.b]];
            next[pair.b] += 1;
            mate[u] = Some(v);
            mate[v] = Some(u);
        }
    }
    mate
}

/// The pairs of shapes that interleave, heaviest first (ties by shape numbers).
fn shape_pairs(
    members: &[Vec<usize>],
    weight: &impl Fn(usize, usize) -> Option<f64>,
) -> Vec<ShapePair> {
    let mut pairs = Vec::new();
    for a in (0..members.len()).filter(|&a| !members[a].is_empty()) {
        for b in (a..members.len()).filter(|&b| !members[b].is_empty()) {
            let heavier = [weight(a, b), weight(b, a)]
                .into_iter()
                .flatten()
                .filter(|w| w.is_finite() && *w > 0.0)
                .reduce(f64::max);
            let most = if a == b {
                members[a].len() / 2
            } else {
                members[a].len().min(members[b].len())
            };
            if let Some(weight) = heavier
                && most > 0
            {
                pairs.push(ShapePair { a, b, weight, most });
            }
        }
    }
    pairs.sort_by(|p, q| {
        q.weight
            .total_cmp(&p.weight)
            .then((p.a, p.b).cmp(&(q.a, q.b)))
    });
    pairs
}

/// Heaviest pairs of shapes first, each as many times as the groups left allow.
fn greedy_counts(pairs: &[ShapePair], members: &[Vec<usize>]) -> Vec<usize> {
    let mut left: Vec<usize> = members.iter().map(Vec::len).collect();
    pairs
        .iter()
        .map(|p| {
            let count = if p.a == p.b {
                left[p.a] / 2
            } else {
                left[p.a].min(left[p.b])
            };
            left[p.a] -= count;
            left[p.b] -= count;
            count
        })
        .collect()
}

/// The integer program's answer, if it is feasible and at least as heavy as `start`.
fn exact_counts(
    pairs: &[ShapePair],
    members: &[Vec<usize>],
    start: &[usize],
) -> Option<Vec<usize>> {
    let mut program = LinearProgram::new(Direction::Maximise);
    let vars: Vec<_> = pairs
        .iter()
        .map(|p| program.add_integer_var(0, i32::try_from(p.most).unwrap_or(i32::MAX)))
        .collect();
    for (p, &x) in pairs.iter().zip(&vars) {
        program.add_objective(x, p.weight);
    }
    for (shape, list) in members.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        let terms: Vec<_> = pairs
            .iter()
            .zip(&vars)
            .filter(|(p, _)| p.a == shape || p.b == shape)
            .map(|(p, &x)| (x, if p.a == p.b { 2.0 } else { 1.0 }))
            .collect();
        if !terms.is_empty() {
            program.add_le(terms, list.len() as f64);
        }
    }
    let options = MipOptions {
        node_limit: Some(NODE_LIMIT),
        warm_start: Some(start.iter().map(|&c| c as f64).collect()),
        ..MipOptions::default()
    };
    let solution = program.solve_integer(&options).ok()?;
    let counts: Vec<usize> = solution
        .values
        .iter()
        .map(|&x| if x > 0.0 { x.round() as usize } else { 0 })
        .collect();
    let total =
        |c: &[usize]| -> f64 { pairs.iter().zip(c).map(|(p, &n)| p.weight * n as f64).sum() };
    (feasible(pairs, members, &counts) && total(&counts) >= total(start)).then_some(counts)
}

/// Whether `counts` uses no shape more often than it has groups.
fn feasible(pairs: &[ShapePair], members: &[Vec<usize>], counts: &[usize]) -> bool {
    let mut used = vec![0usize; members.len()];
    for (p, &n) in pairs.iter().zip(counts) {
        used[p.a] += n;
        used[p.b] += n;
    }
    counts.len() == pairs.len() && used.iter().zip(members).all(|(&u, m)| u <= m.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::muri::matching::muri::muri_max_weight_matching;
    use proptest::prelude::*;

    /// The matched weight (each pair once, in its heavier direction).
    fn weight_of(mate: &[Option<usize>], w: &dyn Fn(usize, usize) -> Option<f64>) -> f64 {
        let mut total = 0.0;
        for (u, m) in mate.iter().enumerate() {
            if let Some(v) = *m
                && u < v
            {
                total += w(u, v).into_iter().chain(w(v, u)).fold(0.0, f64::max);
            }
        }
        total
    }

    /// Whether `mate` is a matching on the edges of `w`.
    fn is_matching(mate: &[Option<usize>], w: &dyn Fn(usize, usize) -> Option<f64>) -> bool {
        mate.iter().enumerate().all(|(u, m)| match *m {
            None => true,
            Some(v) => {
                v != u
                    && mate.get(v) == Some(&Some(u))
                    && (w(u, v).is_some_and(|x| x > 0.0) || w(v, u).is_some_and(|x| x > 0.0))
            }
        })
    }

    #[test]
    fn greedy_alone_would_leave_two_groups_unmatched_that_the_exact_answer_pairs() {
        // Shapes 0..4, one group each: 0-1 weighs 1.0; 0-2 and 1-3 weigh 0.9 each; 2-3 no edge.
        // Greedy takes 0-1 (1.0) and strands 2 and 3; the optimum is 0-2 + 1-3 (1.8).
        let w = |a: usize, b: usize| match (a.min(b), a.max(b)) {
            (0, 1) => Some(1.0),
            (0, 2) | (1, 3) => Some(0.9),
            _ => None,
        };
        let mate = match_by_shape(&[Some(0), Some(1), Some(2), Some(3)], 4, w);
        assert_eq!(mate, vec![Some(2), Some(3), Some(0), Some(1)]);
    }

    #[test]
    fn groups_of_one_shape_pair_among_themselves_lowest_numbers_first() {
        let mate = match_by_shape(&[Some(0), None, Some(0), Some(0)], 1, |_, _| Some(0.5));
        assert_eq!(mate, vec![Some(2), None, Some(0), None]);
    }

    proptest! {
        /// On random classes of up to 40 groups of up to 5 shapes, the answer is a matching on
        /// the graph's edges, and as heavy as Muri's exact blossom's (which stops within a
        /// relative 1e-5 of the optimum, so it may be lighter, never heavier beyond that).
        #[test]
        fn as_heavy_as_the_exact_matching(
            shapes in 1usize..=5,
            raw in prop::collection::vec(0usize..6, 2..40),
            weights in prop::collection::vec(prop::option::weighted(0.8, 0.05f64..1.0), 25),
        ) {
            let shape_of: Vec<Option<usize>> =
                raw.iter().map(|&s| (s < shapes).then_some(s)).collect();
            let by_shapes = |a: usize, b: usize| weights[a.min(b) * 5 + a.max(b)];
            let by_vertex = |u: usize, v: usize| {
                by_shapes(shape_of[u]?, shape_of[v]?)
            };
            let mate = match_by_shape(&shape_of, shapes, by_shapes);
            prop_assert!(is_matching(&mate, &by_vertex));
            let exact = muri_max_weight_matching(shape_of.len(), by_vertex).expect("matching");
            let (fast, best) = (weight_of(&mate, &by_vertex), weight_of(&exact, &by_vertex));
            prop_assert!(
                fast >= best * (1.0 - 1e-5 * shape_of.len() as f64) - 1e-9,
                "fast {fast} below the exact {best}"
            );
        }
    }
}
