//! Tests of the matching: networkx's own answers on 519 graphs, brute force on small ones.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The networkx answers; see `fixtures/matching/gen.py`.
const CASES: &str = include_str!("../fixtures/matching/cases.json");

use super::fixture_json::{parse, Json};

struct Case {
    name: String,
    n: usize,
    edges: Vec<(usize, usize, f64)>,
    /// networkx 3.2 and later.
    pairs: Vec<(usize, usize)>,
    /// networkx 3.1 and earlier, where it differs.
    pairs_before_3_2: Option<Vec<(usize, usize)>>,
}

impl Case {
    fn expected(&self, version: NetworkxVersion) -> &[(usize, usize)] {
        match (version, &self.pairs_before_3_2) {
            (NetworkxVersion::UpTo3_1, Some(old)) => old,
            _ => &self.pairs,
        }
    }
}

fn pair_list(json: &Json) -> Vec<(usize, usize)> {
    json.items().iter().map(|p| (p.items()[0].index(), p.items()[1].index())).collect()
}

/// The cases and the networkx versions that answered them.
fn load_cases() -> ([String; 2], Vec<Case>) {
    let doc = parse(CASES);
    let versions = [doc.get("networkx").str().to_string(), doc.get("networkx_before_3_2").str().to_string()];
    let cases = doc
        .get("cases")
        .items()
        .iter()
        .map(|c| Case {
            name: c.get("name").str().to_string(),
            n: c.get("n").index(),
            edges: c
                .get("edges")
                .items()
                .iter()
                .map(|e| (e.items()[0].index(), e.items()[1].index(), e.items()[2].num()))
                .collect(),
            pairs: pair_list(c.get("pairs")),
            pairs_before_3_2: match c {
                Json::Obj(fields) => {
                    fields.iter().find(|(k, _)| k == "pairs_before_3_2").map(|(_, v)| pair_list(v))
                }
                _ => None,
            },
        })
        .collect();
    (versions, cases)
}

fn run_with_stats(
    n: usize,
    edges: &[(usize, usize, f64)],
    version: NetworkxVersion,
) -> (Vec<Option<usize>>, Stats) {
    let graph = Graph::new(n, edges).expect("valid graph");
    let mut m = Matcher::new(&graph, version);
    m.run();
    (m.mates(), m.stats)
}

/// Sorted pairs of a mate vector, checking that it is a matching of the graph.
fn pairs_of(mate: &[Option<usize>], edges: &[(usize, usize, f64)]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (v, m) in mate.iter().enumerate() {
        if let Some(w) = *m {
            assert_eq!(mate[w], Some(v), "mate is not symmetric at {v}");
            assert!(edges.iter().any(|&(a, b, _)| (a, b) == (v, w) || (a, b) == (w, v)), "{v}-{w} is not an edge");
            assert_ne!(v, w, "self-loop matched");
            if v < w {
                pairs.push((v, w));
            }
        }
    }
    pairs
}

/// The weight networkx's graph gives each pair: the last weight listed for it.
fn weight_of(edges: &[(usize, usize, f64)], pairs: &[(usize, usize)]) -> f64 {
    pairs
        .iter()
        .map(|&(v, w)| {
            edges.iter().rev().find(|&&(a, b, _)| (a, b) == (v, w) || (a, b) == (w, v)).map_or(0.0, |e| e.2)
        })
        .sum()
}

/// Runs every fixture case as networkx `version` would; returns the failures and the totals.
fn check_fixture(version: NetworkxVersion, label: &str, cases: &[Case]) -> (Vec<String>, Stats) {
    let mut total = Stats::default();
    let mut failures = Vec::new();
    for case in cases {
        let (mate, stats) = run_with_stats(case.n, &case.edges, version);
        assert_eq!(mate.len(), case.n);
        let got = pairs_of(&mate, &case.edges);
        let want = case.expected(version);
        if got != want {
            failures.push(format!(
                "{}: networkx {label} {:?} (weight {}), ours {:?} (weight {})",
                case.name,
                want,
                weight_of(&case.edges, want),
                got,
                weight_of(&case.edges, &got)
            ));
        }
        total.augmentations += stats.augmentations;
        total.blossoms += stats.blossoms;
        total.t_expansions += stats.t_expansions;
        total.end_expansions += stats.end_expansions;
        for k in 0..4 {
            total.deltas[k] += stats.deltas[k];
        }
    }
    (failures, total)
}

#[test]
fn matching_equals_networkx_on_fixture() {
    let ([current, old], cases) = load_cases();
    assert!(cases.len() >= 500, "fixture has only {} cases", cases.len());
    let versions_differ = cases.iter().filter(|c| c.pairs_before_3_2.is_some()).count();
    assert!(versions_differ >= 30, "only {versions_differ} cases tell networkx 3.1 from 3.2");
    let (mut failures, total) = check_fixture(NetworkxVersion::Since3_2, &current, &cases);
    let (old_failures, old_total) = check_fixture(NetworkxVersion::UpTo3_1, &old, &cases);
    failures.extend(old_failures);
    assert!(
        failures.is_empty(),
        "{} mismatches in {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // The fixture must drive every kind of step, or agreement would prove little.
    println!("{} cases, {versions_differ} where versions differ", cases.len());
    println!("networkx {current}: {total:?}\nnetworkx {old}: {old_total:?}");
    for t in [total, old_total] {
        assert!(t.blossoms > 300 && t.t_expansions > 50 && t.end_expansions > 50, "{t:?}");
        assert!(t.deltas.iter().all(|&d| d > 50), "{t:?}");
    }
}

/// Best weight over all matchings, by brute force.
fn brute_force(n: usize, adj: &[Vec<(usize, f64)>], used: &mut [bool], from: usize) -> f64 {
    let Some(v) = (from..n).find(|&v| !used[v]) else { return 0.0 };
    used[v] = true;
    let mut best = brute_force(n, adj, used, v + 1);
    for &(w, wt) in &adj[v] {
        if !used[w] {
            used[w] = true;
            best = best.max(wt + brute_force(n, adj, used, v + 1));
            used[w] = false;
        }
    }
    used[v] = false;
    best
}

#[test]
fn matching_has_maximum_weight_by_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6d61_7463_6869_6e67);
    for round in 0..1500 {
        let n = rng.random_range(0..=10);
        let density = [0.2, 0.4, 0.7, 1.0][round % 4];
        let mut edges = Vec::new();
        for u in 0..n {
            for v in u + 1..n {
                if rng.random_bool(density) {
                    let w = match round % 3 {
                        0 => rng.random_range(-1..=3) as f64,
                        1 => (rng.random_range(1..=8) as f64) * 0.25,
                        _ => rng.random::<f64>() * 10.0,
                    };
                    edges.push(if rng.random_bool(0.5) { (u, v, w) } else { (v, u, w) });
                }
            }
        }
        let mate = max_weight_matching(n, &edges);
        let got = weight_of(&edges, &pairs_of(&mate, &edges));
        let mut adj = vec![Vec::new(); n];
        for &(u, v, w) in &edges {
            let (a, b) = (u.min(v), u.max(v));
            adj[a].push((b, w));
        }
        let best = brute_force(n, &adj, &mut vec![false; n], 0);
        assert!(got >= best - 1e-9 * best.abs().max(1.0), "round {round}: {got} < {best} for {edges:?}");
    }
}

#[test]
fn matching_of_degenerate_graphs() {
    assert_eq!(max_weight_matching(0, &[]), Vec::<Option<usize>>::new());
    assert_eq!(max_weight_matching(3, &[]), vec![None; 3]);
    assert_eq!(max_weight_matching(2, &[(0, 0, 5.0), (1, 1, 5.0)]), vec![None; 2]);
    assert_eq!(max_weight_matching(2, &[(0, 1, -1.0)]), vec![None; 2]);
    // A repeated pair keeps its last weight.
    assert_eq!(max_weight_matching(3, &[(0, 1, 5.0), (1, 2, 2.0), (1, 0, 1.0)]), vec![None, Some(2), Some(1)]);
}

#[test]
fn matching_rejects_malformed_graphs() {
    assert_eq!(
        try_max_weight_matching(2, &[(0, 1, 1.0), (1, 2, 1.0)], NetworkxVersion::default()),
        Err(MatchingError::VertexOutOfRange { edge: 1, vertex: 2, vertex_count: 2 })
    );
    assert!(matches!(
        try_max_weight_matching(2, &[(0, 1, f64::NAN)], NetworkxVersion::UpTo3_1),
        Err(MatchingError::NonFiniteWeight { edge: 0, .. })
    ));
    assert!(try_max_weight_matching(2, &[(0, 0, f64::INFINITY)], NetworkxVersion::default()).is_err());
}

#[test]
fn matching_of_a_long_odd_cycle() {
    // One big blossom of ties; every vertex but one is matched.
    let n = 501;
    let edges: Vec<_> = (0..n).map(|i| (i, (i + 1) % n, 1.0)).collect();
    let mate = max_weight_matching(n, &edges);
    assert_eq!(mate.iter().filter(|m| m.is_some()).count(), n - 1);
}
