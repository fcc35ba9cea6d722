//! The straightforward port of Muri's `_Blossom_Same` that [`super`] was first written as (test
//! builds only): the oracle the optimized version is compared with on random graphs, and the
//! baseline of its benchmark. Verified identical to Muri's Python on the fixture graphs; keep it
//! as it is.

use std::collections::VecDeque;

use super::{MuriMatchingError, muri_greater};

/// [`super::muri_max_weight_matching`], computed the straightforward way.
pub(super) fn matching(
    vertex_count: usize,
    mut weight: impl FnMut(usize, usize) -> Option<f64>,
) -> Result<Vec<Option<usize>>, MuriMatchingError> {
    let n = vertex_count;
    let mut edge: Vec<Vec<Edge>> = (0..=n)
        .map(|u| (0..=n).map(|v| Edge { u, v, w: 0.0 }).collect())
        .collect();
    let mut edge_count = 0_usize;
    for u in 0..n {
        for v in 0..n {
            if u == v {
                continue;
            }
            if let Some(w) = weight(u, v) {
                if !w.is_finite() {
                    return Err(MuriMatchingError::NonFiniteWeight {
                        from: u,
                        to: v,
                        weight: w,
                    });
                }
                edge_count += 1;
                edge[u + 1][v + 1].w = w;
            }
        }
    }
    if edge_count == 0 {
        return Ok(vec![None; n]);
    }
    let mut blossom = Blossom::new(n, edge);
    while blossom.stage()? {}
    Ok(blossom.mate[1..=n]
        .iter()
        .map(|&m| m.checked_sub(1))
        .collect())
}

/// An entry of Muri's edge matrix: the original endpoints `u`, `v` (real vertices; 0 in the blank
/// entries of a newly numbered blossom) and the weight `w` (0 for none).
#[derive(Clone, Copy, Debug)]
struct Edge {
    u: usize,
    v: usize,
    w: f64,
}

impl Edge {
    /// What Muri puts in the rows and columns of a newly numbered blossom.
    const BLANK: Edge = Edge { u: 0, v: 0, w: 0.0 };
}

/// Muri's `S`: -1, 0, 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// `S = -1`: not in the search forest.
    Unlabelled,
    /// `S = 0`: outer (even) — a root, or reached through a matched edge.
    Outer,
    /// `S = 1`: inner (odd) — reached through a non-matching edge.
    Inner,
}

/// The state of Muri's `_Blossom_Same` while it matches one graph. Vectors are indexed by Muri's
/// numbers: 0 (none), vertices `1..=n`, blossoms `n + 1..=n_x`.
struct Blossom {
    /// Number of vertices (`node_cnt`).
    n: usize,
    /// Highest blossom number handed out so far.
    n_x: usize,
    /// `edge[a][b]`: for vertices the input weight; for blossoms the least-slack edge between them.
    edge: Vec<Vec<Edge>>,
    /// Duals (`lab`): vertex duals doubled, as Muri keeps them.
    lab: Vec<f64>,
    /// `match`: the vertex at the other end of the matched edge, 0 for none.
    mate: Vec<usize>,
    /// `st`: the top-level blossom containing each vertex or blossom; 0 for a dissolved blossom.
    st: Vec<usize>,
    /// `pa`: the vertex through which an inner blossom was reached (stale elsewhere, as in Muri).
    pa: Vec<usize>,
    /// `slack`: the vertex whose edge into this top-level blossom has the least slack, 0 for none.
    slack: Vec<usize>,
    /// `S`.
    side: Vec<Side>,
    /// `flower`: a blossom's sub-blossoms around its cycle, the base first.
    flower: Vec<Vec<usize>>,
    /// `flower_from[b][x]`: the sub-blossom of `b` that contains vertex `x`, 0 if none.
    flower_from: Vec<Vec<usize>>,
    /// `vis`: visit stamps of the lowest-common-ancestor walk.
    vis: Vec<usize>,
    /// `t`: the current stamp.
    stamp: usize,
    /// `q`: the search queue.
    queue: VecDeque<usize>,
}

impl Blossom {
    /// Muri's set-up in `blossom_one_round` once the edge matrix is filled (`n >= 1`).
    fn new(n: usize, edge: Vec<Vec<Edge>>) -> Self {
        // w_max = max(max(w[u][v] for v) for u), both maxima keeping the first of equals (only the
        // sign of a zero could tell, and the diagonal's 0.0 comes first in row 1).
        let first_max = |m: f64, w: f64| if w > m { w } else { m };
        let row_max = |row: &[Edge]| row[2..=n].iter().fold(row[1].w, |m, e| first_max(m, e.w));
        let w_max = edge[2..=n]
            .iter()
            .fold(row_max(&edge[1]), |m, row| first_max(m, row_max(row)));
        Blossom {
            n,
            n_x: n,
            edge,
            lab: vec![w_max; n + 1],
            mate: vec![0; n + 1],
            st: (0..=n).collect(),
            pa: vec![0; n + 1],
            slack: vec![0; n + 1],
            side: vec![Side::Unlabelled; n + 1],
            flower: vec![Vec::new(); n + 1],
            flower_from: (0..=n)
                .map(|u| (0..=n).map(|v| if u == v { u } else { 0 }).collect())
                .collect(),
            vis: vec![0; n + 1],
            stamp: 0,
            queue: VecDeque::new(),
        }
    }

    /// Slack of `e` (`dist`). Muri reads the weight through the endpoints, `edge[e.u][e.v].w`;
    /// that is always `e.w` (entries between vertices never change, blossom entries are whole
    /// copies of them, and the blank ones are `(0, 0, 0.0)` like `edge[0][0]`), so the copy's
    /// own weight is used and the matrix is not read a second time at a random place — this
    /// is the innermost loop of the matching. Debug builds check the equality.
    #[inline]
    fn dist(&self, e: Edge) -> f64 {
        debug_assert_eq!(e.w.to_bits(), self.edge[e.u][e.v].w.to_bits(), "edge {e:?}");
        self.lab[e.u] + self.lab[e.v] - e.w * 2.0
    }

    /// `update_slack`: let `u` be `x`'s least-slack neighbour if its edge is tighter.
    #[inline]
    fn update_slack(&mut self, u: usize, x: usize) {
        if self.slack[x] == 0 || self.dist(self.edge[u][x]) < self.dist(self.edge[self.slack[x]][x])
        {
            self.slack[x] = u;
        }
    }

    /// `set_slack`: recompute `x`'s least-slack neighbour among outer vertices outside `x`.
    fn set_slack(&mut self, x: usize) {
        self.slack[x] = 0;
        for u in 1..=self.n {
            if self.edge[u][x].w > 0.0 && self.st[u] != x && self.side[self.st[u]] == Side::Outer {
                self.update_slack(u, x);
            }
        }
    }

    /// `q_push`: queue the vertices of `x`, breadth first through its nested blossoms.
    fn q_push(&mut self, x: usize) {
        let mut pending = VecDeque::from([x]);
        while let Some(x) = pending.pop_front() {
            if x <= self.n {
                self.queue.push_back(x);
            } else {
                pending.extend(self.flower[x].iter().copied());
            }
        }
    }

    /// `set_st`: make `b` the top-level blossom of `x` and of everything inside it.
    fn set_st(&mut self, x: usize, b: usize) {
        let mut pending = vec![x];
        while let Some(x) = pending.pop() {
            self.st[x] = b;
            // Muri recurses for x >= node_cnt; vertex node_cnt has an empty flower.
            if x >= self.n {
                pending.extend(self.flower[x].iter().copied());
            }
        }
    }

    /// `get_pr`: position of `xr` in `b`'s cycle, made even by reversing the cycle after its base
    /// when it is odd.
    fn get_pr(&mut self, b: usize, xr: usize) -> Result<usize, MuriMatchingError> {
        let flower = &mut self.flower[b];
        let pr = flower
            .iter()
            .position(|&y| y == xr)
            .ok_or(MuriMatchingError::ReferenceFailure)?;
        if pr % 2 == 1 {
            flower[1..].reverse();
            Ok(flower.len() - pr)
        } else {
            Ok(pr)
        }
    }

    /// `set_match`: match `u` along its edge to `v`, re-matching inside blossoms (breadth first,
    /// as Muri's iterative version does).
    fn set_match(&mut self, u: usize, v: usize) -> Result<(), MuriMatchingError> {
        let mut pending = VecDeque::from([(u, v)]);
        while let Some((u, v)) = pending.pop_front() {
            let e = self.edge[u][v];
            self.mate[u] = e.v;
            if u <= self.n {
                continue;
            }
            let xr = self.flower_from[u][e.u];
            let pr = self.get_pr(u, xr)?;
            let flower = &self.flower[u];
            pending.extend((0..pr).map(|i| (flower[i], flower[i ^ 1])));
            pending.push_back((xr, v));
            self.flower[u].rotate_left(pr);
        }
        Ok(())
    }

    /// `augment`: flip the matching along the tree path from `u` (entered from `v`) to its root.
    fn augment(&mut self, mut u: usize, mut v: usize) -> Result<(), MuriMatchingError> {
        // The path climbs two top-level blossoms a step; the bound only guards a broken forest.
        for _ in 0..=self.n_x {
            let xnv = self.st[self.mate[u]];
            self.set_match(u, v)?;
            if xnv == 0 {
                return Ok(());
            }
            self.set_match(xnv, self.st[self.pa[xnv]])?;
            u = self.st[self.pa[xnv]];
            v = xnv;
        }
        Err(MuriMatchingError::ReferenceFailure)
    }

    /// `get_lca`: the first common top-level blossom on the tree paths of `u` and `v` to their
    /// roots, walking both alternately; 0 if they are in different trees.
    fn get_lca(&mut self, mut u: usize, mut v: usize) -> usize {
        self.stamp += 1;
        while u != 0 || v != 0 {
            if u != 0 {
                if self.vis[u] == self.stamp {
                    return u;
                }
                self.vis[u] = self.stamp;
                u = self.st[self.mate[u]];
                if u != 0 {
                    u = self.st[self.pa[u]];
                }
            }
            std::mem::swap(&mut u, &mut v);
        }
        0
    }

    /// `add_blossom`: shrink the odd cycle through `u`, `v` and their common ancestor `lca`.
    fn add_blossom(&mut self, u: usize, lca: usize, v: usize) -> Result<(), MuriMatchingError> {
        let mut b = self.n + 1;
        while b <= self.n_x && self.st[b] != 0 {
            b += 1;
        }
        if b > self.n_x {
            // A new number: every table grows by one, rows and columns blank.
            self.n_x += 1;
            self.flower.push(vec![lca]);
            self.mate.push(self.mate[lca]);
            for row in &mut self.edge {
                row.push(Edge::BLANK);
            }
            self.edge.push(vec![Edge::BLANK; b + 1]);
            self.st.push(b);
            for row in &mut self.flower_from {
                row.push(0);
            }
            self.flower_from.push(vec![0; b + 1]);
            self.side.push(Side::Outer);
            self.slack.push(0);
            self.pa.push(0);
            self.vis.push(0);
            self.lab.push(0.0);
        } else {
            // A reused number keeps its old slack, pa, vis and edge endpoints (as in Muri).
            self.lab[b] = 0.0;
            self.side[b] = Side::Outer;
            self.mate[b] = self.mate[lca];
            self.flower[b] = vec![lca];
        }

        self.trace_to(b, u, lca)?;
        self.flower[b][1..].reverse();
        self.trace_to(b, v, lca)?;

        self.set_st(b, b);
        for x in 1..=self.n_x {
            self.edge[b][x].w = 0.0;
            self.edge[x][b].w = 0.0;
        }
        for x in 1..=self.n {
            self.flower_from[b][x] = 0;
        }
        for i in 0..self.flower[b].len() {
            let xs = self.flower[b][i];
            for x in 1..=self.n_x {
                if !muri_greater(self.edge[b][x].w, 0.0)
                    || self.dist(self.edge[xs][x]) < self.dist(self.edge[b][x])
                {
                    self.edge[b][x] = self.edge[xs][x];
                    self.edge[x][b] = self.edge[x][xs];
                }
            }
            for x in 1..=self.n {
                if self.flower_from[xs][x] != 0 {
                    self.flower_from[b][x] = xs;
                }
            }
        }
        self.set_slack(b);
        Ok(())
    }

    /// One half of `add_blossom`'s cycle: append the pairs on the tree path from `x` up to `lca`
    /// to `b`'s flower, queueing the (inner, now outer) blossoms met.
    fn trace_to(&mut self, b: usize, mut x: usize, lca: usize) -> Result<(), MuriMatchingError> {
        // As in `augment`, the bound only guards a broken forest.
        for _ in 0..=self.n_x {
            if x == lca {
                return Ok(());
            }
            self.flower[b].push(x);
            let y = self.st[self.mate[x]];
            self.flower[b].push(y);
            self.q_push(y);
            x = self.st[self.pa[y]];
        }
        Err(MuriMatchingError::ReferenceFailure)
    }

    /// `expand_blossom`: dissolve the inner blossom `b` whose dual reached 0, labelling the
    /// sub-blossoms on the even path through it.
    fn expand_blossom(&mut self, b: usize) -> Result<(), MuriMatchingError> {
        for i in 0..self.flower[b].len() {
            let c = self.flower[b][i];
            self.set_st(c, c);
        }
        let xr = self.flower_from[b][self.edge[b][self.pa[b]].u];
        let pr = self.get_pr(b, xr)?;
        for i in (0..pr).step_by(2) {
            let xs = self.flower[b][i];
            let xns = self.flower[b][i + 1];
            self.pa[xs] = self.edge[xns][xs].u;
            self.side[xs] = Side::Inner;
            self.side[xns] = Side::Outer;
            self.slack[xs] = 0;
            self.set_slack(xns);
            self.q_push(xns);
        }
        self.side[xr] = Side::Inner;
        self.pa[xr] = self.pa[b];
        for i in pr + 1..self.flower[b].len() {
            let xs = self.flower[b][i];
            self.side[xs] = Side::Unlabelled;
            self.set_slack(xs);
        }
        self.st[b] = 0;
        Ok(())
    }

    /// `on_found_edge`: act on the tight edge `e` from an outer vertex; `true` once augmented.
    fn on_found_edge(&mut self, e: Edge) -> Result<bool, MuriMatchingError> {
        let u = self.st[e.u];
        let v = self.st[e.v];
        match self.side[v] {
            Side::Unlabelled => {
                self.pa[v] = e.u;
                self.side[v] = Side::Inner;
                let nu = self.st[self.mate[v]];
                self.slack[v] = 0;
                self.slack[nu] = 0;
                self.side[nu] = Side::Outer;
                self.q_push(nu);
            }
            Side::Outer => {
                let lca = self.get_lca(u, v);
                if lca == 0 {
                    self.augment(u, v)?;
                    self.augment(v, u)?;
                    return Ok(true);
                }
                self.add_blossom(u, lca, v)?;
            }
            Side::Inner => {}
        }
        Ok(false)
    }

    /// `matching`: one stage; `true` if it augmented the matching, `false` when Muri stops.
    fn stage(&mut self) -> Result<bool, MuriMatchingError> {
        self.side = vec![Side::Unlabelled; self.n_x + 1];
        self.slack = vec![0; self.n_x + 1];
        self.queue.clear();
        for x in 1..=self.n_x {
            if self.st[x] == x && self.mate[x] == 0 {
                self.pa[x] = 0;
                self.side[x] = Side::Outer;
                self.q_push(x);
            }
        }
        if self.queue.is_empty() {
            return Ok(false);
        }
        // Each dual update labels, shrinks, expands or ends something: O(n) per stage in exact
        // arithmetic. The cap only guards against round-off spinning; it is never reached.
        let limit = 64 * (self.n + 1) * (self.n + 1) + 1024;
        for _ in 0..limit {
            if self.scan_queue()? {
                return Ok(true);
            }
            let d = self.dual_step();
            if !self.apply_dual_step(d) {
                return Ok(false);
            }
            self.queue.clear();
            let n_x = self.n_x;
            for x in 1..=n_x {
                let s = self.slack[x];
                if self.st[x] == x && s != 0 && self.st[s] != x {
                    let e = self.edge[s][x];
                    if !muri_greater(self.dist(e), 0.0) && self.on_found_edge(e)? {
                        return Ok(true);
                    }
                }
            }
            let n_x = self.n_x;
            for b in self.n + 1..=n_x {
                if self.st[b] == b && self.side[b] == Side::Inner && !muri_greater(self.lab[b], 0.0)
                {
                    self.expand_blossom(b)?;
                }
            }
        }
        Err(MuriMatchingError::NoProgress { updates: limit })
    }

    /// Drain the queue, scanning each outer vertex's edges; `true` once augmented.
    fn scan_queue(&mut self) -> Result<bool, MuriMatchingError> {
        while let Some(u) = self.queue.pop_front() {
            if self.side[self.st[u]] == Side::Inner {
                continue;
            }
            for v in 1..=self.n {
                if self.edge[u][v].w > 0.0 && self.st[u] != self.st[v] {
                    let e = self.edge[u][v];
                    if !muri_greater(self.dist(e), 0.0) {
                        if self.on_found_edge(e)? {
                            return Ok(true);
                        }
                    } else {
                        self.update_slack(u, self.st[v]);
                    }
                }
            }
        }
        Ok(false)
    }

    /// The dual step `d`: the least of the inner blossoms' halved duals, free blossoms' least
    /// slacks and outer blossoms' halved least slacks (infinite if none), first minimum kept.
    fn dual_step(&self) -> f64 {
        let mut d = f64::INFINITY;
        for b in self.n + 1..=self.n_x {
            if self.st[b] == b && self.side[b] == Side::Inner {
                d = python_min(d, self.lab[b] / 2.0);
            }
        }
        for x in 1..=self.n_x {
            let s = self.slack[x];
            if self.st[x] == x && s != 0 {
                match self.side[x] {
                    Side::Unlabelled => d = python_min(d, self.dist(self.edge[s][x])),
                    Side::Outer => d = python_min(d, self.dist(self.edge[s][x]) / 2.0),
                    Side::Inner => {}
                }
            }
        }
        d
    }

    /// Move the duals by `d`; `false` (Muri's stop, leaving the duals half updated) as soon as an
    /// outer vertex's dual is not [`muri_greater`] than `d`.
    fn apply_dual_step(&mut self, d: f64) -> bool {
        for u in 1..=self.n {
            match self.side[self.st[u]] {
                Side::Outer => {
                    if !muri_greater(self.lab[u], d) {
                        return false;
                    }
                    self.lab[u] -= d;
                }
                Side::Inner => self.lab[u] += d,
                Side::Unlabelled => {}
            }
        }
        for b in self.n + 1..=self.n_x {
            if self.st[b] == b {
                match self.side[b] {
                    Side::Outer => self.lab[b] += d * 2.0,
                    Side::Inner => self.lab[b] -= d * 2.0,
                    Side::Unlabelled => {}
                }
            }
        }
        true
    }
}

/// Python's two-argument `min(a, b)`: `b` only if it is strictly smaller.
fn python_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}
