//! Tests of [`super::muri_max_weight_matching`]: Muri's own answers on the fixture graphs, the
//! straightforward port ([`super::oracle`]) on random graphs, and a benchmark.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Muri's own answers; see `fixtures/muri_gen.py`.
const CASES: &str = include_str!("fixtures/muri_cases.json");

use super::super::fixture_json::{Json, parse};

/// One graph and Muri's answer on it.
struct Case {
    family: String,
    /// `w[u][v]`: the weight Muri stored for `u -> v`.
    w: Vec<Vec<Option<f64>>>,
    /// Muri's raw mate array, 0-based.
    mate: Vec<Option<usize>>,
    blossoms: i64,
    expands: i64,
    tol: i64,
    /// Altered versions of Muri's code that answer this case differently (see the generator).
    tells: Vec<String>,
}

fn parse_cases(text: &str) -> Vec<Case> {
    let root = parse(text);
    root.get("cases")
        .items()
        .iter()
        .map(|case| {
            let n = usize::try_from(case.get("n").int()).expect("n");
            let values: Vec<f64> = case.get("values").items().iter().map(Json::num).collect();
            let flat = case.get("w").items();
            assert_eq!(flat.len(), n * n, "fixture: w is n*n");
            let w = (0..n)
                .map(|u| {
                    (0..n)
                        .map(|v| {
                            usize::try_from(flat[u * n + v].int())
                                .ok()
                                .map(|i| values[i])
                        })
                        .collect()
                })
                .collect();
            let mate = case
                .get("mate")
                .items()
                .iter()
                .map(|m| usize::try_from(m.int()).ok())
                .collect();
            Case {
                family: case.get("family").str().to_owned(),
                w,
                mate,
                blossoms: case.get("blossoms").int(),
                expands: case.get("expands").int(),
                tol: case.get("tol").int(),
                tells: case.find("tells").map_or_else(Vec::new, |t| {
                    t.items().iter().map(|s| s.str().to_owned()).collect()
                }),
            }
        })
        .collect()
}

fn run(w: &[Vec<Option<f64>>]) -> Result<Vec<Option<usize>>, MuriMatchingError> {
    muri_max_weight_matching(w.len(), |u, v| w[u][v])
}

/// Runs every case, returning a description of each disagreement with Muri.
fn disagreements(cases: &[Case]) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        match run(&case.w) {
            Ok(mate) if mate == case.mate => {}
            got => bad.push(format!(
                "case {i} ({}, n = {}): Muri {:?}, port {got:?}",
                case.family,
                case.w.len(),
                case.mate
            )),
        }
    }
    bad
}

#[test]
fn muri_matching_equals_muri_on_fixture() {
    let cases = parse_cases(CASES);
    assert!(cases.len() >= 300, "fixture has only {} cases", cases.len());
    // The fixture must exercise what decides among tied matchings.
    let count = |f: &dyn Fn(&Case) -> bool| cases.iter().filter(|c| f(c)).count();
    assert!(count(&|c| c.blossoms > 0) >= 100);
    assert!(count(&|c| c.expands > 0) >= 10);
    assert!(count(&|c| c.tol > 0) >= 5);
    // Cases on which Muri without its tolerance, with a depth-first blossom queue, or with a
    // C++-style live bound on the post-update loop would pick another matching.
    for (variant, least) in [("exact", 30), ("dfs", 1), ("live", 12)] {
        assert!(
            count(&|c| c.tells.iter().any(|t| t == variant)) >= least,
            "{variant}"
        );
    }
    assert!(count(&|c| (0..c.w.len()).any(|u| (0..u).any(|v| c.w[u][v] != c.w[v][u]))) >= 100);
    let bad = disagreements(&cases);
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

/// A larger case set made by `muri_gen.py --count N --seed S > FILE`, run with
/// `MURI_CASES=FILE cargo test -p arbiter-policy muri -- --ignored`.
#[test]
#[ignore = "needs MURI_CASES, a fixture file generated with Muri's code"]
fn muri_matching_equals_muri_on_external_cases() {
    let Ok(path) = std::env::var("MURI_CASES") else {
        panic!("set MURI_CASES to a file written by muri_gen.py");
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cases = parse_cases(&text);
    let bad = disagreements(&cases);
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
    eprintln!("{} cases agree with Muri", cases.len());
}

/// Best weight over all matchings, by brute force (`w[u][v]` for `u < v`).
fn brute_force(w: &[Vec<Option<f64>>], used: &mut [bool], from: usize) -> f64 {
    let n = w.len();
    let Some(u) = (from..n).find(|&u| !used[u]) else {
        return 0.0;
    };
    used[u] = true;
    let mut best = brute_force(w, used, u + 1);
    for v in u + 1..n {
        if let (false, Some(x)) = (used[v], w[u][v]) {
            used[v] = true;
            best = best.max(x + brute_force(w, used, u + 1));
            used[v] = false;
        }
    }
    used[u] = false;
    best
}

/// Random weights like Muri's used ratios: few values, near-equal ones, last-ulp asymmetry.
fn random_graph(rng: &mut ChaCha8Rng, n: usize, round: usize) -> Vec<Vec<Option<f64>>> {
    let pool = [0.25, 0.5, 0.75, 1.0, 1.0 / 3.0, 2.0 / 3.0, 0.3, 0.6, 0.9];
    let near = [0.0, 3e-6, -8e-6, 1.5e-5];
    let density = [0.3, 0.6, 1.0][round % 3];
    let mut w = vec![vec![None; n]; n];
    for (u, v) in (0..n).flat_map(|u| (u + 1..n).map(move |v| (u, v))) {
        if !rng.random_bool(density) {
            continue;
        }
        let base = pool[rng.random_range(0..pool.len())];
        let x: f64 = match round % 4 {
            0 => base,
            1 => base * (1.0 + near[rng.random_range(0..near.len())]),
            2 => rng.random_range(0.05..1.0),
            _ => [0.3, 0.6 * (1.0 - 6e-6), 0.6][rng.random_range(0..3)],
        };
        let ulps: i64 = rng.random_range(-2..=2);
        let y = f64::from_bits(x.to_bits().wrapping_add_signed(ulps));
        w[u][v] = Some(x);
        w[v][u] = Some(y);
    }
    w
}

#[test]
fn muri_matching_is_maximum_within_tolerance() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6d75_7269);
    for round in 0..1200 {
        let n = rng.random_range(0..=11);
        let w = random_graph(&mut rng, n, round);
        let mate = run(&w).unwrap_or_else(|e| panic!("round {round}: {e} on {w:?}"));
        let mut got = 0.0;
        for (u, m) in mate.iter().enumerate() {
            if let Some(v) = *m {
                assert_eq!(mate[v], Some(u), "round {round}: not a matching {mate:?}");
                assert!(w[u][v].is_some(), "round {round}: {u}-{v} is no edge");
                if u < v {
                    got += w[u][v].unwrap_or(0.0);
                }
            }
        }
        let best = brute_force(&w, &mut vec![false; n], 0);
        let w_max = w.iter().flatten().flatten().fold(0.0_f64, |a, &b| a.max(b));
        let slack = n as f64 * REL_TOL * w_max + 1e-12;
        assert!(
            got >= best - slack,
            "round {round}: {got} < {best} - {slack} for {w:?}"
        );
    }
}

#[test]
fn muri_matching_of_degenerate_graphs() {
    let none = |_: usize, _: usize| None;
    assert_eq!(muri_max_weight_matching(0, none), Ok(vec![]));
    assert_eq!(muri_max_weight_matching(1, none), Ok(vec![None]));
    assert_eq!(muri_max_weight_matching(3, none), Ok(vec![None; 3]));
    assert_eq!(
        muri_max_weight_matching(2, |_, _| Some(0.5)),
        Ok(vec![Some(1), Some(0)])
    );
    // Non-positive weights are stored but never used as edges.
    assert_eq!(
        muri_max_weight_matching(2, |_, _| Some(0.0)),
        Ok(vec![None; 2])
    );
    assert_eq!(
        muri_max_weight_matching(2, |_, _| Some(-1.0)),
        Ok(vec![None; 2])
    );
    // A weight in one direction only is an edge for the scan from that side.
    assert_eq!(
        muri_max_weight_matching(2, |u, _| (u == 0).then_some(0.5)),
        Ok(vec![Some(1), Some(0)])
    );
}

#[test]
fn muri_matching_asks_each_ordered_pair_once_in_muri_order() {
    let mut asked = Vec::new();
    let _ = muri_max_weight_matching(3, |u, v| {
        asked.push((u, v));
        None
    });
    assert_eq!(asked, vec![(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]);
}

#[test]
fn muri_matching_rejects_non_finite_weights() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let got =
            muri_max_weight_matching(3, |u, v| Some(if (u, v) == (2, 1) { bad } else { 0.5 }));
        assert!(
            matches!(got, Err(MuriMatchingError::NonFiniteWeight { from: 2, to: 1, weight }) if weight.to_bits() == bad.to_bits()),
            "{got:?}"
        );
    }
}

#[test]
fn muri_greater_is_pythons_my_cmp() {
    assert!(muri_greater(1.0, 0.0));
    assert!(!muri_greater(0.0, 0.0));
    assert!(!muri_greater(-0.0, 0.0));
    assert!(!muri_greater(0.0, 1.0));
    assert!(muri_greater(1e-300, 0.0), "nothing non-zero is close to 0");
    assert!(!muri_greater(1.0 + 9e-6, 1.0), "within rel 1e-5");
    assert!(!muri_greater(1.0, 1.0 - 9e-6), "relative to the larger");
    assert!(muri_greater(1.0 + 1.1e-5, 1.0));
    assert!(!muri_greater(f64::INFINITY, f64::INFINITY));
    assert!(muri_greater(f64::INFINITY, 1e308));
    assert!(!muri_greater(1.0, f64::INFINITY));
    assert!(!muri_greater(f64::NAN, 0.0));
    assert!(!muri_greater(0.0, f64::NAN));
    // The boundary, as CPython computes it: diff <= rel * max(|a|, |b|).
    let a = 0.6;
    let b = a * (1.0 - REL_TOL);
    assert_eq!(muri_greater(a, b), (a - b).abs() > (REL_TOL * a).abs());
}

/// Weights like Muri's on one GPU class: every vertex (a job, or a group of jobs) has one of a
/// few shapes and a size; the weight of a pair is a table entry for the two shapes (so many
/// weights are equal), sometimes a last-ulp apart in the two directions, near-equal across
/// shapes in some graphs, and missing where the two sizes together exceed the packing limit.
fn muri_like_graph(rng: &mut ChaCha8Rng, n: usize) -> Vec<Vec<Option<f64>>> {
    const SHAPES: usize = 6;
    let mode = rng.random_range(0..4);
    let mut table = [[0.0_f64; SHAPES]; SHAPES];
    for x in table.iter_mut().flatten() {
        *x = match mode {
            // Two decimals: many equal weights across shape pairs.
            0 => f64::from(rng.random_range(20_u32..60)) / 100.0,
            // A handful of values, some within Muri's tolerance of each other.
            1 => [0.3, 0.45, 0.45 * (1.0 + 4e-6), 0.5, 0.55][rng.random_range(0..5)],
            _ => rng.random_range(0.2..0.6),
        };
    }
    // Mostly symmetric, like a used ratio computed for either order.
    for (a, b) in (0..SHAPES).flat_map(|a| (0..a).map(move |b| (a, b))) {
        if rng.random_bool(0.7) {
            let ulps: i64 = rng.random_range(-1..=1);
            table[a][b] = f64::from_bits(table[b][a].to_bits().wrapping_add_signed(ulps));
        }
    }
    let pairs = rng.random_range(0.0..0.4);
    let shape: Vec<usize> = (0..n).map(|_| rng.random_range(0..SHAPES)).collect();
    let size: Vec<usize> = (0..n)
        .map(|_| if rng.random_bool(pairs) { 2 } else { 1 })
        .collect();
    (0..n)
        .map(|u| {
            (0..n)
                .map(|v| (u != v && size[u] + size[v] <= 3).then(|| table[shape[u]][shape[v]]))
                .collect()
        })
        .collect()
}

/// The optimized matching against the straightforward port, on random graphs full of ties.
#[test]
fn muri_matching_equals_straightforward_port_on_random_graphs() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6f72_6163);
    let release = !cfg!(debug_assertions);
    for round in 0..if release { 6000 } else { 1500 } {
        let n = match round % 5 {
            0 | 1 => rng.random_range(0..=12),
            2 | 3 => rng.random_range(0..=40),
            _ => rng.random_range(0..=if release { 120 } else { 70 }),
        };
        let w = if round % 2 == 0 {
            muri_like_graph(&mut rng, n)
        } else {
            random_graph(&mut rng, n, round / 2)
        };
        let want = oracle::matching(n, |u, v| w[u][v]);
        assert_eq!(run(&w), want, "round {round}, n = {n}: {w:?}");
    }
}

/// With blossom columns too short to start with (they grow, which never happens otherwise), on
/// graphs full of blossoms: still the straightforward port's answer.
#[test]
fn muri_matching_equals_straightforward_port_with_growing_columns() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x636f_6c73);
    let grown_before = super::blossom::GROWN.with(std::cell::Cell::get);
    for round in 0..300 {
        let n = rng.random_range(3..=40);
        let w = if round % 2 == 0 {
            muri_like_graph(&mut rng, n)
        } else {
            random_graph(&mut rng, n, round / 2)
        };
        let want = oracle::matching(n, |u, v| w[u][v]);
        assert_eq!(
            super::matching(n, |u, v| w[u][v], Some(0)),
            want,
            "round {round}, n = {n}: {w:?}"
        );
    }
    let grown = super::blossom::GROWN.with(std::cell::Cell::get) - grown_before;
    assert!(grown >= 50, "the columns grew in only {grown} graphs");
}

/// Thread CPU time in nanoseconds (Linux), or wall time elsewhere.
fn cpu_ns() -> u128 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|t| t.parse().ok()))
        .unwrap_or_else(|| {
            std::time::SystemTime::UNIX_EPOCH
                .elapsed()
                .map_or(0, |d| d.as_nanos())
        })
}

/// Benchmark on Muri-like dense graphs, n from 2 to 256: the optimized matching against the
/// straightforward port (which it must equal). `cargo test --release -p arbiter-policy
/// muri_matching_bench_synthetic -- --ignored --nocapture`; `MURI_BENCH=fast` (or `oracle`)
/// times one side only, `MURI_BENCH_SCALE` multiplies the number of graphs.
#[test]
#[ignore = "a benchmark; run in release with --nocapture"]
fn muri_matching_bench_synthetic() {
    let which = std::env::var("MURI_BENCH").unwrap_or_default();
    let scale: usize = std::env::var("MURI_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut rng = ChaCha8Rng::seed_from_u64(0x6265_6e63);
    let sizes = [2, 5, 8, 13, 20, 31, 48, 64, 96, 128, 192, 256];
    let mut graphs = Vec::new();
    for &n in &sizes {
        // About the same n³ for every size, at least 8 graphs each.
        let count = (scale * 8 * 256 * 256 * 256 / (n * n * n)).clamp(8 * scale, 4000 * scale);
        for _ in 0..count {
            graphs.push(muri_like_graph(&mut rng, n));
        }
    }
    let mut total = [0_u128; 2];
    let mut line = String::new();
    for &n in &sizes {
        let set: Vec<_> = graphs.iter().filter(|w| w.len() == n).collect();
        let mut took = [0_u128; 2];
        let mut answers: [Vec<_>; 2] = [Vec::new(), Vec::new()];
        for (side, name) in ["oracle", "fast"].into_iter().enumerate() {
            if !which.is_empty() && which != name {
                continue;
            }
            let start = cpu_ns();
            for w in &set {
                let got = if side == 0 {
                    oracle::matching(w.len(), |u, v| w[u][v])
                } else {
                    run(w)
                };
                answers[side].push(got);
            }
            took[side] = cpu_ns() - start;
            total[side] += took[side];
        }
        if which.is_empty() {
            assert_eq!(answers[0], answers[1], "n = {n}");
        }
        let per = |t: u128| t as f64 / (set.len() * n * n * n) as f64;
        line += &format!(
            "n = {n:3} ({:4} graphs): oracle {:8.1} ms ({:.2} ns/n³), fast {:8.1} ms ({:.2} ns/n³), speed-up {:.2}\n",
            set.len(),
            took[0] as f64 / 1e6,
            per(took[0]),
            took[1] as f64 / 1e6,
            per(took[1]),
            took[0] as f64 / took[1].max(1) as f64,
        );
    }
    eprintln!(
        "{line}total: oracle {:.1} ms, fast {:.1} ms, speed-up {:.2}",
        total[0] as f64 / 1e6,
        total[1] as f64 / 1e6,
        total[0] as f64 / total[1].max(1) as f64
    );
}

/// Reads graphs recorded from a simulation: per call, `n` as a little-endian `u32`, then the
/// `n·(n-1)` weights in the order [`muri_max_weight_matching`] asks for them, as little-endian
/// `f64`, NaN for `None`.
fn read_recorded_graphs(bytes: &[u8]) -> Vec<Vec<Vec<Option<f64>>>> {
    let mut graphs = Vec::new();
    let mut rest = bytes;
    while let Some((n, tail)) = rest.split_first_chunk::<4>() {
        let n = u32::from_le_bytes(*n) as usize;
        rest = tail;
        let mut w = vec![vec![None; n]; n];
        for (u, row) in w.iter_mut().enumerate() {
            for (v, x) in row.iter_mut().enumerate() {
                if u != v {
                    let (y, tail) = rest.split_first_chunk::<8>().expect("truncated graph file");
                    rest = tail;
                    let y = f64::from_le_bytes(*y);
                    *x = (!y.is_nan()).then_some(y);
                }
            }
        }
        graphs.push(w);
    }
    graphs
}

/// Benchmark on graphs recorded from a simulation (`MURI_GRAPHS=FILE`, see
/// [`read_recorded_graphs`]): the optimized matching against the straightforward port, which
/// it must equal. `MURI_BENCH=fast` (or `oracle`) times one side only. To record, wrap the
/// `weight` closure that `crate::muri` passes to [`muri_max_weight_matching`] so that it also
/// appends `n` and the answers to a file (Muri-S on Muri's trace4: 34,963 graphs, 962 MB).
#[test]
#[ignore = "a benchmark; needs MURI_GRAPHS, run in release with --nocapture"]
fn muri_matching_bench_recorded() {
    let Ok(path) = std::env::var("MURI_GRAPHS") else {
        panic!("set MURI_GRAPHS to a file of recorded graphs");
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let graphs = read_recorded_graphs(&bytes);
    let which = std::env::var("MURI_BENCH").unwrap_or_default();
    let mut took = [0_u128; 2];
    let mut answers: [Vec<_>; 2] = [Vec::new(), Vec::new()];
    for (side, name) in ["oracle", "fast"].into_iter().enumerate() {
        if !which.is_empty() && which != name {
            continue;
        }
        let start = cpu_ns();
        for w in &graphs {
            let got = if side == 0 {
                oracle::matching(w.len(), |u, v| w[u][v])
            } else {
                run(w)
            };
            answers[side].push(got);
        }
        took[side] = cpu_ns() - start;
    }
    if which.is_empty() {
        for (i, (a, b)) in answers[0].iter().zip(&answers[1]).enumerate() {
            assert_eq!(a, b, "graph {i} (n = {})", graphs[i].len());
        }
    }
    let cube: usize = graphs.iter().map(|w| w.len().pow(3)).sum();
    eprintln!(
        "{} graphs, Σn³ = {cube}: oracle {:.1} ms ({:.2} ns/n³), fast {:.1} ms ({:.2} ns/n³), speed-up {:.2}",
        graphs.len(),
        took[0] as f64 / 1e6,
        took[0] as f64 / cube as f64,
        took[1] as f64 / 1e6,
        took[1] as f64 / cube as f64,
        took[0] as f64 / took[1].max(1) as f64
    );
}
