//! Maximum-weight matching in general graphs: Edmonds' blossom algorithm in its primal-dual form
//! (Galil 1986, as implemented by van Rantwijk's `mwmatching.py` and networkx), returning **the
//! same matching as networkx** — including which one, when several have the maximum weight.
//!
//! Pairing jobs by a maximum-weight matching, a reproduction that is to agree with a Python
//! reference calling networkx cannot settle for "a" maximum matching: ties are common (weights
//! are often small integers or equal ratios) and every tie is broken by the order in which the
//! algorithm happens to visit vertices, edges and blossoms. This module follows networkx's
//! `max_weight_matching(G, maxcardinality=False)` step for step:
//!
//! * vertices are visited in node order and neighbours in adjacency order (see
//!   [`max_weight_matching`] for how the arguments map onto a networkx graph);
//! * newly labelled S-vertices go onto a LIFO stack, in networkx's leaf order for blossoms;
//! * the dual step takes the first strict minimum, checking δ1 (vertex duals), δ2 (S-to-free edges,
//!   by vertex), δ3 (S-to-S edges: top-level vertices, then blossoms by age) and δ4 (T-blossom
//!   duals, by age) in that order;
//! * least-slack edge bookkeeping, blossom construction, expansion and augmentation keep networkx's
//!   orientation of every edge, since the orientation decides which endpoint is scanned next;
//! * slacks and duals are computed with the same floating-point operations in the same order
//!   (`u + v - 2w`, halves as `/ 2.0`), so float rounding agrees bit for bit.
//!
//! Versions: networkx's code for this has not changed since 1.11 except in one place that matters
//! for ties. networkx 3.2 (2023) rewrote `Blossom.leaves()` without recursion, which changed the
//! order in which a blossom lists its vertices, and that order feeds the scan stack; on roughly
//! one to three random tied graphs in a hundred, 3.1 and 3.2 return different (equally heavy)
//! matchings. Both orders are available ([`NetworkxVersion`]); the default is the current one.
//! Tested against networkx 3.6.1 and 3.1 (`fixtures/matching/gen.py`). (Under Python 3.5 and
//! older, dictionaries had no insertion order and networkx's own answer depended on hashing.)
//!
//! Only `maxcardinality=False` is implemented.
//!
//! Complexity: O(n³) time for n vertices (O(n) stages, each O(n²) including the edge scans, as
//! m ≤ n²), O(n + m) memory.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use thiserror::Error;
pub mod muri;

/// Which networkx release's choice among equally heavy matchings to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NetworkxVersion {
    /// networkx 3.2 (October 2023) and later: `Blossom.leaves()` walks an explicit stack.
    #[default]
    Since3_2,
    /// networkx 3.1 and earlier (the same code back to 1.11): recursive `Blossom.leaves()`.
    UpTo3_1,
}

/// A graph that [`try_max_weight_matching`] refuses.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum MatchingError {
    /// An edge names a vertex that does not exist.
    #[error("edge {edge} joins vertex {vertex}, but the graph has only {vertex_count} vertices")]
    VertexOutOfRange {
        /// Position of the edge in the input.
        edge: usize,
        /// The offending endpoint.
        vertex: usize,
        /// The number of vertices the graph was given.
        vertex_count: usize,
    },
    /// An edge weight is NaN or infinite.
    #[error("edge {edge} has weight {weight}, which is not a finite number")]
    NonFiniteWeight {
        /// Position of the edge in the input.
        edge: usize,
        /// The offending weight.
        weight: f64,
    },
}

/// A maximum-weight matching of the graph with vertices `0..vertex_count` and the weighted
/// `edges`, as networkx computes it; returns the mate of each vertex (`None`: unmatched).
///
/// The answer is exactly networkx's (3.2 or later; [`try_max_weight_matching`] also does 3.1 and
/// earlier) for the graph built as
///
/// ```python
/// G = nx.Graph()
/// G.add_nodes_from(range(vertex_count))      # node order 0, 1, 2, ...
/// G.add_weighted_edges_from(edges)           # same edges, same order
/// nx.max_weight_matching(G, maxcardinality=False, weight="weight")
/// ```
///
/// which means: a vertex's neighbours are visited in the order in which they first appear with
/// it in `edges` (either orientation); a repeated pair keeps its first position and its last
/// weight; self-loops are ignored. Edges of weight ≤ 0 are allowed (like networkx, the algorithm
/// may still match zero-weight edges; it never matches negative ones). Integer weights given as
/// `f64` give networkx's answer for Python `int` weights as well, as long as they are below 2⁵⁰ in
/// magnitude (every intermediate value is then an exactly representable integer or half-integer).
///
/// Not a maximum-*cardinality* matching: an unmatched vertex may have unmatched neighbours.
/// O(n³) time; see the module notes.
///
/// # Panics
///
/// If an endpoint is not below `vertex_count` or a weight is not finite; use
/// [`try_max_weight_matching`] to get an error instead.
///
/// # Example
///
/// ```
/// use arbiter_policy::matching::max_weight_matching;
///
/// // networkx's docstring example, renumbered from 0.
/// let edges = [(0, 1, 6.0), (0, 2, 2.0), (1, 2, 1.0), (1, 3, 7.0), (2, 4, 9.0), (3, 4, 3.0)];
/// let mate = max_weight_matching(5, &edges);
/// assert_eq!(mate, vec![None, Some(3), Some(4), Some(1), Some(2)]);
/// ```
pub fn max_weight_matching(vertex_count: usize, edges: &[(usize, usize, f64)]) -> Vec<Option<usize>> {
    match try_max_weight_matching(vertex_count, edges, NetworkxVersion::default()) {
        Ok(mate) => mate,
        Err(err) => panic!("max_weight_matching: {err}"),
    }
}

/// [`max_weight_matching`] as networkx `version` computes it, reporting a malformed graph (an
/// endpoint not below `vertex_count`, a weight that is NaN or infinite, self-loops included) as
/// an error instead of panicking.
pub fn try_max_weight_matching(
    vertex_count: usize,
    edges: &[(usize, usize, f64)],
    version: NetworkxVersion,
) -> Result<Vec<Option<usize>>, MatchingError> {
    let graph = Graph::new(vertex_count, edges)?;
    let mut matcher = Matcher::new(&graph, version);
    matcher.run();
    Ok(matcher.mates())
}

/// The graph in networkx's shape: distinct undirected edges, adjacency in insertion order.
struct Graph {
    /// `adj[v]`: `(neighbour, edge index)` in the order networkx's adjacency dict holds them.
    adj: Vec<Vec<(usize, usize)>>,
    /// Weight of each distinct edge (the last one given for a repeated pair).
    weight: Vec<f64>,
}

impl Graph {
    fn new(vertex_count: usize, edges: &[(usize, usize, f64)]) -> Result<Graph, MatchingError> {
        let mut adj = vec![Vec::new(); vertex_count];
        let mut weight = Vec::with_capacity(edges.len());
        let mut index: HashMap<(usize, usize), usize> = HashMap::with_capacity(edges.len());
        for (pos, &(u, v, w)) in edges.iter().enumerate() {
            for vertex in [u, v] {
                if vertex >= vertex_count {
                    return Err(MatchingError::VertexOutOfRange { edge: pos, vertex, vertex_count });
                }
            }
            if !w.is_finite() {
                return Err(MatchingError::NonFiniteWeight { edge: pos, weight: w });
            }
            if u == v {
                // networkx keeps loops in the graph but never looks at them when matching.
                continue;
            }
            match index.entry((u.min(v), u.max(v))) {
                // Updating an existing edge only replaces its data, not its place in either list.
                Entry::Occupied(slot) => weight[*slot.get()] = w,
                Entry::Vacant(slot) => {
                    let id = weight.len();
                    slot.insert(id);
                    weight.push(w);
                    adj[u].push((v, id));
                    adj[v].push((u, id));
                }
            }
        }
        Ok(Graph { adj, weight })
    }
}

/// An edge with a direction: the algorithm cares which endpoint comes first (it is the one that
/// gets scanned, or the side a label came from), so edges are passed around oriented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Arc {
    from: usize,
    to: usize,
    edge: usize,
}

impl Arc {
    fn reversed(self) -> Arc {
        Arc { from: self.to, to: self.from, edge: self.edge }
    }
}

/// Labels of top-level blossoms (and reachability marks of vertices inside T-blossoms).
const FREE: u8 = 0;
const S: u8 = 1;
const T: u8 = 2;
/// Added to an S label while [`Matcher::scan_blossom`] walks back from both ends of an edge.
const BREADCRUMB: u8 = 4;

/// Counters of what the algorithm did, so the tests can show that the fixtures exercise every
/// kind of step.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    augmentations: usize,
    blossoms: usize,
    /// Dual steps by type δ1..δ4 (index 0..3).
    deltas: [usize; 4],
    /// T-blossoms expanded during a stage (δ4).
    t_expansions: usize,
    /// Zero-dual S-blossoms expanded at the end of a stage, nested ones included.
    end_expansions: usize,
}

/// The state of one run. Nodes `0..n` are the vertices (each also its own trivial blossom);
/// nodes `n..2n` are slots for non-trivial blossoms, which never number more than n/2 at once.
/// Per-node arrays stand in for networkx's dictionaries keyed by vertex or blossom object.
struct Matcher<'g> {
    g: &'g Graph,
    n: usize,
    version: NetworkxVersion,
    /// `mate[v]`: the matched edge, oriented from `v`.
    mate: Vec<Option<Arc>>,
    /// Label of a top-level blossom; for a vertex inside a T-blossom, `T` once it is reachable
    /// from outside. Breadcrumbs are added transiently.
    label: Vec<u8>,
    /// The edge through which a labelled blossom (or reached vertex) got its label, oriented
    /// towards it; `None` for S-blossoms whose base is single.
    label_edge: Vec<Option<Arc>>,
    /// Top-level blossom of each vertex.
    in_blossom: Vec<usize>,
    /// Immediate parent of a (sub-)blossom.
    parent: Vec<Option<usize>>,
    /// Base vertex of each blossom.
    base: Vec<usize>,
    /// Sub-blossoms of a blossom, starting with the one holding the base and going round.
    children: Vec<Vec<usize>>,
    /// `links[b][i]` joins a vertex of `children[b][i]` to one of `children[b][i + 1]` (cyclic).
    links: Vec<Vec<Arc>>,
    /// For a top-level S-blossom: its least-slack edges to other S-blossoms, one per blossom, or
    /// `None` until computed.
    best_edges: Vec<Option<Vec<Arc>>>,
    /// For a free vertex: least-slack edge from an S-vertex; for a top-level S-blossom:
    /// least-slack edge to another S-blossom.
    best_edge: Vec<Option<Arc>>,
    /// Twice the vertex duals.
    dual: Vec<f64>,
    /// Blossom dual variables z(b); a dual step moves them by the same amount as the doubled
    /// vertex duals.
    blossom_dual: Vec<f64>,
    /// Edges known to have zero slack during the current stage.
    allowed: Vec<bool>,
    /// S-vertices waiting to be scanned; popped from the end.
    stack: Vec<usize>,
    /// Live non-trivial blossoms in the order they were created: networkx iterates its blossom
    /// dictionaries in insertion order, and that order breaks ties in δ3, δ4 and the expansions.
    live: Vec<usize>,
    /// Whether a blossom slot is in use.
    alive: Vec<bool>,
    /// Blossom slots not in use.
    spare: Vec<usize>,
    #[cfg(test)]
    stats: Stats,
}

impl<'g> Matcher<'g> {
    fn new(g: &'g Graph, version: NetworkxVersion) -> Matcher<'g> {
        let n = g.adj.len();
        // Initial vertex duals: the largest weight (0 when none is positive), self-loops aside.
        let max_weight = g.weight.iter().fold(0.0_f64, |acc, &w| if w > acc { w } else { acc });
        Matcher {
            g,
            n,
            version,
            mate: vec![None; n],
            label: vec![FREE; 2 * n],
            label_edge: vec![None; 2 * n],
            in_blossom: (0..n).collect(),
            parent: vec![None; 2 * n],
            base: (0..2 * n).map(|b| if b < n { b } else { 0 }).collect(),
            children: vec![Vec::new(); 2 * n],
            links: vec![Vec::new(); 2 * n],
            best_edges: vec![None; 2 * n],
            best_edge: vec![None; 2 * n],
            dual: vec![max_weight; n],
            blossom_dual: vec![0.0; 2 * n],
            allowed: vec![false; g.weight.len()],
            stack: Vec::new(),
            live: Vec::new(),
            alive: vec![false; 2 * n],
            spare: (n..2 * n).rev().collect(),
            #[cfg(test)]
            stats: Stats::default(),
        }
    }

    fn mates(&self) -> Vec<Option<usize>> {
        self.mate.iter().map(|m| m.map(|arc| arc.to)).collect()
    }

    fn is_blossom(&self, node: usize) -> bool {
        node >= self.n
    }

    /// Twice the slack of an edge (meaningless for an edge inside a blossom).
    fn slack(&self, arc: Arc) -> f64 {
        self.dual[arc.from] + self.dual[arc.to] - 2.0 * self.g.weight[arc.edge]
    }

    /// The vertices of a blossom in networkx's order. Since 3.2: depth first from a stack seeded
    /// with the children, popping from the end, so the last child's vertices come first. Up to
    /// 3.1: depth first in child order (pushing children reversed gives that order).
    fn leaves(&self, b: usize) -> Vec<usize> {
        if !self.is_blossom(b) {
            return vec![b];
        }
        let reversed = self.version == NetworkxVersion::UpTo3_1;
        let push = |pending: &mut Vec<usize>, children: &[usize]| {
            if reversed {
                pending.extend(children.iter().rev());
            } else {
                pending.extend_from_slice(children);
            }
        };
        let mut out = Vec::new();
        let mut pending = Vec::new();
        push(&mut pending, &self.children[b]);
        while let Some(node) = pending.pop() {
            if self.is_blossom(node) {
                push(&mut pending, &self.children[node]);
            } else {
                out.push(node);
            }
        }
        out
    }

    /// Index of a child in its blossom's cyclic lists; `j` may be negative (counting from the
    /// end), as the walks round a blossom go either way from a start index.
    fn cyclic(&self, b: usize, j: isize) -> usize {
        let len = self.children[b].len() as isize;
        j.rem_euclid(len) as usize
    }

    /// `links[b][j]` when walking forward, the reversed `links[b][j - 1]` when walking backward:
    /// in both cases the edge leaving position `j` in the walking direction.
    fn step_link(&self, b: usize, j: isize, forward: bool) -> Arc {
        if forward { self.links[b][self.cyclic(b, j)] } else { self.links[b][self.cyclic(b, j - 1)].reversed() }
    }

    fn position(&self, b: usize, child: usize) -> usize {
        self.children[b].iter().position(|&c| c == child).unwrap_or(0)
    }

    fn run(&mut self) {
        if self.n == 0 {
            return;
        }
        // Each stage looks for one augmenting path; it ends without one only at the optimum.
        loop {
            self.label.fill(FREE);
            self.label_edge.fill(None);
            self.best_edge.fill(None);
            for &b in &self.live {
                self.best_edges[b] = None;
            }
            // Without labels, zero slack found earlier is no longer guaranteed to stay zero.
            self.allowed.fill(false);
            self.stack.clear();
            for v in 0..self.n {
                if self.mate[v].is_none() && self.label[self.in_blossom[v]] == FREE {
                    self.assign_label(v, S, None);
                }
            }
            let augmented = self.stage();
            if !augmented {
                return;
            }
            // Blossoms whose dual dropped to zero are no longer needed: dissolve them (and, within
            // them, nested ones at zero), oldest first.
            for b in self.live.clone() {
                if self.alive[b] && self.parent[b].is_none() && self.label[b] == S && self.blossom_dual[b] == 0.0 {
                    self.expand_blossom(b, true);
                }
            }
        }
    }

    /// Grows the alternating forest and adjusts duals until an augmenting path is found and used
    /// (true) or the duals show the matching is optimal (false).
    fn stage(&mut self) -> bool {
        let g = self.g;
        loop {
            while let Some(v) = self.stack.pop() {
                for &(w, edge) in &g.adj[v] {
                    // Blossoms change as the scan goes on, so look them up for every edge.
                    let bv = self.in_blossom[v];
                    let bw = self.in_blossom[w];
                    if bv == bw {
                        continue;
                    }
                    let arc = Arc { from: v, to: w, edge };
                    let mut slack = 0.0;
                    if !self.allowed[edge] {
                        slack = self.slack(arc);
                        if slack <= 0.0 {
                            self.allowed[edge] = true;
                        }
                    }
                    if self.allowed[edge] {
                        if self.label[bw] == FREE {
                            // w is free: it becomes T and its mate S.
                            self.assign_label(w, T, Some(arc));
                        } else if self.label[bw] == S {
                            // Two S-blossoms meet: either a new blossom or an augmenting path.
                            match self.scan_blossom(v, w) {
                                Some(base) => self.add_blossom(base, arc),
                                None => {
                                    self.augment_matching(arc);
                                    return true;
                                }
                            }
                        } else if self.label[w] == FREE {
                            // w sits in a T-blossom: remember that it is reachable, and how, for
                            // when that blossom is expanded.
                            self.label[w] = T;
                            self.label_edge[w] = Some(arc);
                        }
                    } else if self.label[bw] == S {
                        if self.best_edge[bv].is_none_or(|best| slack < self.slack(best)) {
                            self.best_edge[bv] = Some(arc);
                        }
                    } else if self.label[w] == FREE && self.best_edge[w].is_none_or(|best| slack < self.slack(best)) {
                        self.best_edge[w] = Some(arc);
                    }
                }
            }
            if !self.dual_step() {
                return false;
            }
        }
    }

    /// Computes the largest dual change that keeps every slack non-negative, applies it and acts
    /// on whatever limited it. Returns false when the vertex duals ran out (δ1): optimum.
    fn dual_step(&mut self) -> bool {
        enum Limit {
            VertexDual,
            ToFree(Arc),
            BetweenS(Arc),
            TBlossom(usize),
        }
        // δ1: the smallest vertex dual (first one wins on ties, as Python's `min`).
        let mut delta = self.dual[0];
        for &d in &self.dual[1..] {
            if d < delta {
                delta = d;
            }
        }
        let mut limit = Limit::VertexDual;
        // δ2: least slack from an S-vertex to a free vertex, by vertex.
        for v in 0..self.n {
            if self.label[self.in_blossom[v]] == FREE
                && let Some(best) = self.best_edge[v]
            {
                let d = self.slack(best);
                if d < delta {
                    delta = d;
                    limit = Limit::ToFree(best);
                }
            }
        }
        // δ3: half the least slack between two S-blossoms; trivial ones first, then by age.
        for b in (0..self.n).chain(self.live.iter().copied()) {
            if self.parent[b].is_none()
                && self.label[b] == S
                && let Some(best) = self.best_edge[b]
            {
                let d = self.slack(best) / 2.0;
                if d < delta {
                    delta = d;
                    limit = Limit::BetweenS(best);
                }
            }
        }
        // δ4: the smallest dual of a top-level T-blossom, by age.
        for &b in &self.live {
            if self.parent[b].is_none() && self.label[b] == T && self.blossom_dual[b] < delta {
                delta = self.blossom_dual[b];
                limit = Limit::TBlossom(b);
            }
        }
        #[cfg(test)]
        {
            let kind = match limit {
                Limit::VertexDual => 0,
                Limit::ToFree(_) => 1,
                Limit::BetweenS(_) => 2,
                Limit::TBlossom(_) => 3,
            };
            self.stats.deltas[kind] += 1;
        }

        for v in 0..self.n {
            match self.label[self.in_blossom[v]] {
                S => self.dual[v] -= delta,
                T => self.dual[v] += delta,
                _ => {}
            }
        }
        for &b in &self.live {
            if self.parent[b].is_none() {
                match self.label[b] {
                    S => self.blossom_dual[b] += delta,
                    T => self.blossom_dual[b] -= delta,
                    _ => {}
                }
            }
        }

        match limit {
            Limit::VertexDual => false,
            Limit::ToFree(arc) | Limit::BetweenS(arc) => {
                // The edge now has zero slack: rescan its S end (for an edge between S-blossoms,
                // the end networkx happened to store first).
                self.allowed[arc.edge] = true;
                self.stack.push(arc.from);
                true
            }
            Limit::TBlossom(b) => {
                self.expand_blossom(b, false);
                true
            }
        }
    }

    /// Labels the top-level blossom of `w` (reached through `via`, oriented towards `w`) with `t`;
    /// a T label passes S on to the mate of the blossom's base.
    fn assign_label(&mut self, mut w: usize, mut t: u8, mut via: Option<Arc>) {
        loop {
            let b = self.in_blossom[w];
            self.label[w] = t;
            self.label[b] = t;
            self.label_edge[w] = via;
            self.label_edge[b] = via;
            self.best_edge[w] = None;
            self.best_edge[b] = None;
            if t == S {
                // A new S-blossom: all its vertices are to be scanned.
                let vertices = self.leaves(b);
                self.stack.extend(vertices);
                return;
            }
            let base = self.base[b];
            let Some(matched) = self.mate[base] else { return };
            w = matched.to;
            t = S;
            via = Some(matched);
        }
    }

    /// Walks back from the S-vertices `v` and `w` towards the roots of their trees, alternating
    /// between the two paths. Returns the base of the first blossom both paths reach (a new
    /// blossom closes there), or `None` when they end at different roots (an augmenting path).
    fn scan_blossom(&mut self, v: usize, w: usize) -> Option<usize> {
        let mut path = Vec::new();
        let mut found = None;
        let mut here = Some(v);
        let mut other = Some(w);
        while let Some(vertex) = here {
            let b = self.in_blossom[vertex];
            if self.label[b] & BREADCRUMB != 0 {
                found = Some(self.base[b]);
                break;
            }
            path.push(b);
            self.label[b] = S | BREADCRUMB;
            // One step back is two edges: to the T-blossom holding the base's mate, then to the
            // S-vertex that labelled it.
            here = self.label_edge[b].and_then(|to_b| {
                let t_blossom = self.in_blossom[to_b.from];
                self.label_edge[t_blossom].map(|to_t| to_t.from)
            });
            if other.is_some() {
                std::mem::swap(&mut here, &mut other);
            }
        }
        for b in path {
            self.label[b] = S;
        }
        found
    }

    /// Closes a new S-blossom with the given base through the edge `arc` between two S-vertices.
    fn add_blossom(&mut self, base: usize, arc: Arc) {
        let bb = self.in_blossom[base];
        let mut bv = self.in_blossom[arc.from];
        let mut bw = self.in_blossom[arc.to];
        let Some(b) = self.spare.pop() else { return };
        #[cfg(test)]
        {
            self.stats.blossoms += 1;
        }
        self.alive[b] = true;
        self.live.push(b);
        self.base[b] = base;
        self.parent[b] = None;
        self.parent[bb] = Some(b);

        // The cycle, starting at the base: back from v's side (reversed afterwards), then from w's.
        let mut children = Vec::new();
        let mut links = vec![arc];
        while bv != bb {
            self.parent[bv] = Some(b);
            children.push(bv);
            let Some(to_bv) = self.label_edge[bv] else { break };
            links.push(to_bv);
            bv = self.in_blossom[to_bv.from];
        }
        children.push(bb);
        children.reverse();
        links.reverse();
        while bw != bb {
            self.parent[bw] = Some(b);
            children.push(bw);
            let Some(to_bw) = self.label_edge[bw] else { break };
            links.push(to_bw.reversed());
            bw = self.in_blossom[to_bw.from];
        }
        self.label[b] = S;
        self.label_edge[b] = self.label_edge[bb];
        self.blossom_dual[b] = 0.0;
        self.children[b] = children;
        self.links[b] = links;

        // Former T-vertices are S now and must be scanned.
        for v in self.leaves(b) {
            if self.label[self.in_blossom[v]] == T {
                self.stack.push(v);
            }
            self.in_blossom[v] = b;
        }

        // Least-slack edges to every other S-blossom, from the children's lists where they have
        // them, otherwise from their vertices' edges. Kept in first-seen order of the neighbouring
        // blossom, with the orientation the edge was found in.
        let mut best_to: HashMap<usize, usize> = HashMap::new();
        let mut best_list: Vec<Arc> = Vec::new();
        for i in 0..self.children[b].len() {
            let child = self.children[b][i];
            let candidates: Vec<Arc> = match self.best_edges[child].take() {
                Some(list) if self.is_blossom(child) => list,
                _ => self
                    .leaves(child)
                    .into_iter()
                    .flat_map(|v| self.g.adj[v].iter().map(move |&(w, edge)| Arc { from: v, to: w, edge }))
                    .collect(),
            };
            for k in candidates {
                let j = if self.in_blossom[k.to] == b { k.from } else { k.to };
                let bj = self.in_blossom[j];
                if bj == b || self.label[bj] != S {
                    continue;
                }
                match best_to.entry(bj) {
                    Entry::Vacant(slot) => {
                        slot.insert(best_list.len());
                        best_list.push(k);
                    }
                    Entry::Occupied(slot) => {
                        let at = *slot.get();
                        if self.slack(k) < self.slack(best_list[at]) {
                            best_list[at] = k;
                        }
                    }
                }
            }
            self.best_edge[child] = None;
        }
        let mut best: Option<Arc> = None;
        for &k in &best_list {
            if best.is_none_or(|cur| self.slack(k) < self.slack(cur)) {
                best = Some(k);
            }
        }
        self.best_edges[b] = Some(best_list);
        self.best_edge[b] = best;
    }

    /// Dissolves the top-level blossom `b` into its children. During a stage (`end_of_stage`
    /// false) `b` is a T-blossom whose dual reached zero, and its children are relabelled so the
    /// alternating tree stays valid; at the end of a stage nested children with zero dual are
    /// dissolved too.
    fn expand_blossom(&mut self, b: usize, end_of_stage: bool) {
        #[cfg(test)]
        {
            if end_of_stage {
                self.stats.end_expansions += 1;
            } else {
                self.stats.t_expansions += 1;
            }
        }
        // Explicit stack of (blossom, next child) so that deep nesting cannot overflow the call
        // stack; the order of the work is that of the recursive definition.
        let mut work: Vec<(usize, usize)> = vec![(b, 0)];
        while let Some(&(cur, next)) = work.last() {
            if next < self.children[cur].len() {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                let child = self.children[cur][next];
                self.parent[child] = None;
                if !self.is_blossom(child) {
                    self.in_blossom[child] = child;
                } else if end_of_stage && self.blossom_dual[child] == 0.0 {
                    #[cfg(test)]
                    {
                        self.stats.end_expansions += 1;
                    }
                    work.push((child, 0));
                } else {
                    for v in self.leaves(child) {
                        self.in_blossom[v] = child;
                    }
                }
            } else {
                work.pop();
                if !end_of_stage && self.label[cur] == T {
                    self.relabel_expanded(cur);
                }
                self.free_blossom(cur);
            }
        }
    }

    /// After the T-blossom `b` was dissolved mid-stage: the children on the even-length side from
    /// the entry child to the base form the new path through the tree (alternately T and S);
    /// the children on the other side become T only if an S-vertex outside already reaches them.
    fn relabel_expanded(&mut self, b: usize) {
        let Some(entry_arc) = self.label_edge[b] else { return };
        let entry = self.in_blossom[entry_arc.to];
        let len = self.children[b].len() as isize;
        let mut j = self.position(b, entry) as isize;
        // Go the way that reaches the base over an even number of steps.
        let forward = j & 1 == 1;
        if forward {
            j -= len;
        }
        let step = if forward { 1 } else { -1 };
        let mut arc = entry_arc;
        while j != 0 {
            // The child reached by `arc` becomes T (its mate's side, S).
            let next = self.step_link(b, j, forward);
            self.label[arc.to] = FREE;
            self.label[next.to] = FREE;
            self.assign_label(arc.to, T, Some(arc));
            self.allowed[next.edge] = true;
            j += step;
            arc = self.step_link(b, j, forward);
            self.allowed[arc.edge] = true;
            j += step;
        }
        // The base child becomes T without passing S on: its mate is outside and already S.
        let base_child = self.children[b][self.cyclic(b, j)];
        self.label[arc.to] = T;
        self.label[base_child] = T;
        self.label_edge[arc.to] = Some(arc);
        self.label_edge[base_child] = Some(arc);
        self.best_edge[base_child] = None;
        j += step;
        while self.children[b][self.cyclic(b, j)] != entry {
            let child = self.children[b][self.cyclic(b, j)];
            j += step;
            if self.label[child] == S {
                // Labelled S through a neighbour while the path above was relabelled.
                continue;
            }
            let reached = if self.is_blossom(child) {
                self.leaves(child).into_iter().find(|&v| self.label[v] != FREE)
            } else {
                Some(child).filter(|&v| self.label[v] != FREE)
            };
            let Some(v) = reached else { continue };
            self.label[v] = FREE;
            if let Some(matched) = self.mate[self.base[child]] {
                self.label[matched.to] = FREE;
            }
            let via = self.label_edge[v].map(|to_v| Arc { from: to_v.from, to: v, edge: to_v.edge });
            self.assign_label(v, T, via);
        }
    }

    fn free_blossom(&mut self, b: usize) {
        self.label[b] = FREE;
        self.label_edge[b] = None;
        self.best_edge[b] = None;
        self.best_edges[b] = None;
        self.parent[b] = None;
        self.children[b].clear();
        self.links[b].clear();
        self.blossom_dual[b] = 0.0;
        self.alive[b] = false;
        self.live.retain(|&x| x != b);
        self.spare.push(b);
    }

    /// Swaps matched and unmatched edges on the even-length path round blossom `b` from vertex
    /// `v` to the base, making `v` the new base; nested blossoms on the path are handled the same
    /// way. Each blossom's update touches only its own vertices and lists, so a work list visits
    /// them in any order with the result of the recursive definition.
    fn augment_blossom(&mut self, b: usize, v: usize) {
        let mut work = vec![(b, v)];
        while let Some((b, v)) = work.pop() {
            // The child of b that holds v.
            let mut t = v;
            while let Some(p) = self.parent[t] {
                if p == b {
                    break;
                }
                t = p;
            }
            if self.is_blossom(t) {
                work.push((t, v));
            }
            let i = self.position(b, t);
            let mut j = i as isize;
            let forward = j & 1 == 1;
            if forward {
                j -= self.children[b].len() as isize;
            }
            let step = if forward { 1 } else { -1 };
            while j != 0 {
                j += step;
                let first = self.children[b][self.cyclic(b, j)];
                let link = self.step_link(b, j, forward);
                if self.is_blossom(first) {
                    work.push((first, link.from));
                }
                j += step;
                let second = self.children[b][self.cyclic(b, j)];
                if self.is_blossom(second) {
                    work.push((second, link.to));
                }
                self.mate[link.from] = Some(link);
                self.mate[link.to] = Some(link.reversed());
            }
            self.children[b].rotate_left(i);
            self.links[b].rotate_left(i);
            // The child now first gets v as its base (trivially so if it is v itself).
            self.base[b] = v;
        }
    }

    /// Flips the augmenting path through the S-vertices at both ends of `arc`, each side back to
    /// its single root.
    fn augment_matching(&mut self, arc: Arc) {
        #[cfg(test)]
        {
            self.stats.augmentations += 1;
        }
        for start in [arc, arc.reversed()] {
            // `link.from` is an S-vertex to be matched to `link.to`.
            let mut link = start;
            loop {
                let bs = self.in_blossom[link.from];
                if self.is_blossom(bs) {
                    self.augment_blossom(bs, link.from);
                }
                self.mate[link.from] = Some(link);
                let Some(to_bs) = self.label_edge[bs] else { break };
                let bt = self.in_blossom[to_bs.from];
                let Some(to_bt) = self.label_edge[bt] else { break };
                if self.is_blossom(bt) {
                    self.augment_blossom(bt, to_bt.to);
                }
                self.mate[to_bt.to] = Some(to_bt.reversed());
                link = to_bt;
            }
        }
    }
}

#[cfg(test)]
mod fixture_json;
#[cfg(test)]
mod tests;
