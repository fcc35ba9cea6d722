//! The state of Muri's `_Blossom_Same` and all of its steps but the scan of an outer vertex
//! ([`super::scan`]); see [`super`] for what is kept of Muri's code and what changed.

use std::collections::VecDeque;
use std::hint::select_unpredictable;

use super::{Buffers, MuriMatchingError, muri_greater};

#[cfg(test)]
thread_local! {
    /// How many times [`Blossom::grow_columns`] ran on this thread.
    pub(super) static GROWN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// An entry of Muri's edge matrix: the original endpoints `u`, `v` (real vertices; 0 in the blank
/// entries of a newly numbered blossom) and the weight `w` (0 for none).
#[derive(Clone, Copy, Debug)]
pub(super) struct Edge {
    pub(super) u: u32,
    pub(super) v: u32,
    pub(super) w: f64,
}

impl Edge {
    /// What Muri puts in the rows and columns of a newly numbered blossom.
    pub(super) const BLANK: Edge = Edge { u: 0, v: 0, w: 0.0 };

    /// The entry between two vertices (Muri's `edge[u][v]` for `u, v <= n`).
    #[inline]
    pub(super) fn new(u: usize, v: usize, w: f64) -> Self {
        // Vertex numbers fit: the weight matrix alone has (n + 1)² entries.
        Edge {
            u: u as u32,
            v: v as u32,
            w,
        }
    }
}

/// Muri's `dist`: the slack `lab[u] + lab[v] - 2·w` of `e`, in Muri's order of operations.
///
/// Muri reads the weight through the endpoints, `edge[e.u][e.v].w`; that is always `e.w`
/// (entries between vertices never change, blossom entries are whole copies of them, and the
/// blank ones are `(0, 0, 0.0)` like `edge[0][0]`), so the entry's own weight is used
/// ([`Blossom::dist`] checks the equality in debug builds). The endpoints are vertices or 0, so
/// only the vertex duals (and `lab[0]`, which never changes) enter.
#[inline]
pub(super) fn slack_of(lab: &[f64], e: Edge) -> f64 {
    lab[e.u as usize] + lab[e.v as usize] - e.w * 2.0
}

/// Muri's `S`: -1, 0, 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// `S = -1`: not in the search forest.
    Unlabelled,
    /// `S = 0`: outer (even) — a root, or reached through a matched edge.
    Outer,
    /// `S = 1`: inner (odd) — reached through a non-matching edge.
    Inner,
}

/// The state of Muri's `_Blossom_Same` while it matches one graph. Vectors are indexed by Muri's
/// numbers: 0 (none), vertices `1..=n`, blossoms `n + 1..=n_x`.
///
/// Muri's edge matrix `edge[a][c]` is kept in three parts, each entry once: between vertices
/// (`a, c <= n`) the weights `w` (the endpoints are `a` and `c`; these entries never change), in
/// a blossom's column (`c > n`) `bcol`, and in a blossom's row at a vertex column (`a > n`,
/// `c <= n`) `brow`. Every loop over a row or a column of the matrix reads consecutive memory.
///
/// `slack_dist[x]` is `dist(edge[slack[x]][x])` whenever `slack[x] != 0` (the very value Muri
/// recomputes at each comparison: it is recomputed with the same operations whenever a dual
/// changes, and set with the slack otherwise).
pub(super) struct Blossom {
    /// Number of vertices (`node_cnt`).
    pub(super) n: usize,
    /// `n + 1`: the row length of `w`, `wt`, `brow` and `flower_from`.
    pub(super) stride: usize,
    /// Highest blossom number handed out so far.
    pub(super) n_x: usize,
    /// `w[a * stride + c]`: the weight of `edge[a][c]` for `a, c <= n` (0 in row and column 0).
    pub(super) w: Vec<f64>,
    /// `wt[c * stride + a]`: the same, transposed (a vertex's column read in order).
    pub(super) wt: Vec<f64>,
    /// `brow[(b - n - 1) * stride + c]`: `edge[b][c]` for blossom `b`, vertex (or 0) `c`.
    pub(super) brow: Vec<Edge>,
    /// `bcol[(b - n - 1) * cap + a]`: `edge[a][b]` for blossom `b`, any `a <= n_x`.
    pub(super) bcol: Vec<Edge>,
    /// The column length of `bcol`: more than the highest blossom number (which stays below
    /// `1.5 n`: the blossoms in use are nested, each with at least three parts).
    pub(super) cap: usize,
    /// Duals (`lab`): vertex duals doubled, as Muri keeps them.
    pub(super) lab: Vec<f64>,
    /// `match`: the vertex at the other end of the matched edge, 0 for none.
    pub(super) mate: Vec<usize>,
    /// `st`: the top-level blossom containing each vertex or blossom; 0 for a dissolved blossom.
    pub(super) st: Vec<usize>,
    /// `top[v] = st[v]` for a vertex `v`, as a float (exact: it is below 2⁵³), for vectorized
    /// comparisons with the other floats of a scan.
    pub(super) top: Vec<f64>,
    /// `pa`: the vertex through which an inner blossom was reached (stale elsewhere, as in Muri).
    pub(super) pa: Vec<usize>,
    /// `slack`: the vertex whose edge into this top-level blossom has the least slack, 0 for none.
    pub(super) slack: Vec<usize>,
    /// `dist(edge[slack[x]][x])` where `slack[x] != 0`.
    pub(super) slack_dist: Vec<f64>,
    /// `S`.
    pub(super) side: Vec<Side>,
    /// `flower`: a blossom's sub-blossoms around its cycle, the base first.
    pub(super) flower: Vec<Vec<usize>>,
    /// `flower_from[b][x]` for blossom `b` and vertex `x`: `flower_from[(b - n - 1) * stride + x]`,
    /// the sub-blossom of `b` that contains `x`, 0 if none (a vertex's row is itself at itself).
    pub(super) flower_from: Vec<usize>,
    /// `vis`: visit stamps of the lowest-common-ancestor walk.
    pub(super) vis: Vec<usize>,
    /// `t`: the current stamp.
    pub(super) stamp: usize,
    /// `q`: the search queue.
    pub(super) queue: VecDeque<usize>,
    /// Scratch space of `q_push` and `set_st`.
    pub(super) pending: VecDeque<usize>,
    /// The stamp of the current [`Blossom::scan_run`].
    pub(super) scan_stamp: usize,
    /// `scan_seen[x]`: the stamp of the last run that updated blossom `x`'s slack.
    pub(super) scan_seen: Vec<usize>,
    /// Scratch space of [`Blossom::scan_run`]: the `v` in blossoms met.
    pub(super) scan_buffer: Vec<usize>,
    /// Scratch space of [`Blossom::merge_row`]: the slacks of the new blossom's row.
    pub(super) merge_dist: Vec<f64>,
}

impl Blossom {
    /// Muri's set-up in `blossom_one_round` once the edge matrix is filled (`n >= 1`), with
    /// blossom columns of length `cap` to start with.
    pub(super) fn new(n: usize, buffers: Buffers, cap: usize) -> Self {
        let Buffers {
            w,
            mut wt,
            mut brow,
            mut bcol,
            mut flower_from,
        } = buffers;
        let stride = n + 1;
        // w_max = max(max(w[u][v] for v) for u), both maxima keeping the first of equals (only the
        // sign of a zero could tell, and the diagonal's 0.0 comes first in row 1).
        let first_max = |m: f64, x: f64| if x > m { x } else { m };
        let row_max = |u: usize| {
            let row = &w[u * stride..(u + 1) * stride];
            row[2..=n].iter().fold(row[1], |m, &x| first_max(m, x))
        };
        let w_max = (2..=n).fold(row_max(1), |m, u| first_max(m, row_max(u)));
        wt.clear();
        wt.resize(stride * stride, 0.0);
        brow.clear();
        bcol.clear();
        flower_from.clear();
        for (a, row) in w.chunks_exact(stride).enumerate() {
            for (c, &x) in row.iter().enumerate() {
                wt[c * stride + a] = x;
            }
        }
        Blossom {
            n,
            stride,
            n_x: n,
            w,
            wt,
            brow,
            bcol,
            cap: cap.max(stride),
            lab: vec![w_max; n + 1],
            mate: vec![0; n + 1],
            st: (0..=n).collect(),
            top: (0..=n).map(|v| v as f64).collect(),
            pa: vec![0; n + 1],
            slack: vec![0; n + 1],
            slack_dist: vec![f64::INFINITY; n + 1],
            side: vec![Side::Unlabelled; n + 1],
            flower: vec![Vec::new(); n + 1],
            flower_from,
            vis: vec![0; n + 1],
            stamp: 0,
            queue: VecDeque::new(),
            pending: VecDeque::new(),
            scan_stamp: 0,
            scan_seen: vec![0; n + 1],
            scan_buffer: Vec::new(),
            merge_dist: vec![0.0; n + 1],
        }
    }

    /// Lengthen `bcol`'s columns (never needed while the blossoms in use are nested properly).
    #[cold]
    fn grow_columns(&mut self) {
        #[cfg(test)]
        GROWN.with(|g| g.set(g.get() + 1));
        let cap = self.cap * 2;
        let mut bcol = vec![Edge::BLANK; self.bcol.len() / self.cap * cap];
        for (new, old) in bcol
            .chunks_exact_mut(cap)
            .zip(self.bcol.chunks_exact(self.cap))
        {
            new[..self.cap].copy_from_slice(old);
        }
        self.bcol = bcol;
        self.cap = cap;
    }

    /// The buffers, for the next matching.
    pub(super) fn into_buffers(self) -> Buffers {
        Buffers {
            w: self.w,
            wt: self.wt,
            brow: self.brow,
            bcol: self.bcol,
            flower_from: self.flower_from,
        }
    }

    /// Muri's `edge[a][c]`.
    #[inline]
    fn edge(&self, a: usize, c: usize) -> Edge {
        let n = self.n;
        if c > n {
            self.bcol[(c - n - 1) * self.cap + a]
        } else if a > n {
            self.brow[(a - n - 1) * self.stride + c]
        } else {
            Edge::new(a, c, self.w[a * self.stride + c])
        }
    }

    /// Muri's `flower_from[b][x]` for a vertex `x`.
    #[inline]
    fn flower_from(&self, b: usize, x: usize) -> usize {
        debug_assert!(x <= self.n);
        if b > self.n {
            self.flower_from[(b - self.n - 1) * self.stride + x]
        } else if b == x {
            b
        } else {
            0
        }
    }

    /// Slack of `e` (`dist`), see [`slack_of`].
    #[inline]
    pub(super) fn dist(&self, e: Edge) -> f64 {
        debug_assert_eq!(
            e.w.to_bits(),
            self.edge(e.u as usize, e.v as usize).w.to_bits(),
            "edge {e:?}"
        );
        slack_of(&self.lab, e)
    }

    /// `dist(edge[slack[x]][x])`, from the cache: infinite where `slack[x] == 0`, so that
    /// `update_slack`'s test `slack[x] == 0 || d < dist(edge[slack[x]][x])` is `d < slack_dist(x)`
    /// (every slack is finite: so are the weights and the duals).
    #[inline]
    pub(super) fn slack_dist(&self, x: usize) -> f64 {
        if cfg!(debug_assertions) {
            let want = match self.slack[x] {
                0 => f64::INFINITY,
                s => self.dist(self.edge(s, x)),
            };
            assert_eq!(
                self.slack_dist[x].to_bits(),
                want.to_bits(),
                "stale slack distance of {x}"
            );
        }
        self.slack_dist[x]
    }

    /// `slack[x] = 0`.
    #[inline]
    fn clear_slack(&mut self, x: usize) {
        self.slack[x] = 0;
        self.slack_dist[x] = f64::INFINITY;
    }

    /// Recompute every cached slack distance after the duals moved.
    fn refresh_slack_dists(&mut self) {
        for x in 1..=self.n_x {
            let s = self.slack[x];
            if s != 0 {
                self.slack_dist[x] = slack_of(&self.lab, self.edge(s, x));
            }
        }
    }

    /// `set_slack`: recompute `x`'s least-slack neighbour among outer vertices outside `x`
    /// (the first of the least, as `update_slack` in index order keeps it).
    fn set_slack(&mut self, x: usize) {
        let n = self.n;
        let stride = self.stride;
        let lab = &self.lab[..];
        let st = &self.st[..stride];
        let side = &self.side[..];
        // edge[u][x] for u = 1..=n, read down x's column; the first least slack is kept.
        let (mut best, mut best_dist) = (0, f64::INFINITY);
        if x > n {
            let column = &self.bcol[(x - n - 1) * self.cap..][..stride];
            for (u, e) in column.iter().enumerate().skip(1) {
                let d = slack_of(lab, *e);
                if e.w > 0.0 && st[u] != x && side[st[u]] == Side::Outer && d < best_dist {
                    (best, best_dist) = (u, d);
                }
            }
        } else {
            let column = &self.wt[x * stride..(x + 1) * stride];
            let lab_x = lab[x];
            for (u, &w) in column.iter().enumerate().skip(1) {
                let d = lab[u] + lab_x - w * 2.0;
                if w > 0.0 && st[u] != x && side[st[u]] == Side::Outer && d < best_dist {
                    (best, best_dist) = (u, d);
                }
            }
        }
        self.slack[x] = best;
        self.slack_dist[x] = best_dist;
        let _ = self.slack_dist(x); // the debug check
    }

    /// `q_push`: queue the vertices of `x`, breadth first through its nested blossoms.
    fn q_push(&mut self, x: usize) {
        if x <= self.n {
            self.queue.push_back(x);
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        pending.push_back(x);
        while let Some(x) = pending.pop_front() {
            if x <= self.n {
                self.queue.push_back(x);
            } else {
                pending.extend(self.flower[x].iter().copied());
            }
        }
        self.pending = pending;
    }

    /// `set_st`: make `b` the top-level blossom of `x` and of everything inside it.
    fn set_st(&mut self, x: usize, b: usize) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        pending.push_back(x);
        while let Some(x) = pending.pop_back() {
            self.st[x] = b;
            if x <= self.n {
                self.top[x] = b as f64;
            }
            // Muri recurses for x >= node_cnt; vertex node_cnt has an empty flower.
            if x >= self.n {
                pending.extend(self.flower[x].iter().copied());
            }
        }
        self.pending = pending;
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
            let e = self.edge(u, v);
            self.mate[u] = e.v as usize;
            if u <= self.n {
                continue;
            }
            let xr = self.flower_from(u, e.u as usize);
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
        let n = self.n;
        let mut b = n + 1;
        while b <= self.n_x && self.st[b] != 0 {
            b += 1;
        }
        if b > self.n_x {
            // A new number: every table grows by one, rows and columns blank.
            self.n_x += 1;
            self.flower.push(vec![lca]);
            self.mate.push(self.mate[lca]);
            if b == self.cap {
                self.grow_columns();
            }
            for c in n + 1..b {
                self.bcol[(c - n - 1) * self.cap + b] = Edge::BLANK;
            }
            self.bcol.resize((b - n) * self.cap, Edge::BLANK);
            self.brow.resize(self.brow.len() + self.stride, Edge::BLANK);
            self.st.push(b);
            self.flower_from
                .resize(self.flower_from.len() + self.stride, 0);
            self.side.push(Side::Outer);
            self.slack.push(0);
            self.slack_dist.push(f64::INFINITY);
            self.scan_seen.push(0);
            self.pa.push(0);
            self.vis.push(0);
            self.lab.push(0.0);
        } else {
            // A reused number keeps its old slack, pa, vis and edge endpoints (as in Muri).
            self.lab[b] = 0.0;
            self.side[b] = Side::Outer;
            self.mate[b] = self.mate[lca];
            self.flower[b].clear();
            self.flower[b].push(lca);
        }

        self.trace_to(b, u, lca)?;
        self.flower[b][1..].reverse();
        self.trace_to(b, v, lca)?;

        self.set_st(b, b);
        let row_b = (b - n - 1) * self.stride;
        // edge[b][x].w = 0 and edge[x][b].w = 0 for x = 1..=n_x (in any order: all write 0); the
        // vertex columns are overwritten by the first merge anyway, so only the blossom columns.
        for x in n + 1..=self.n_x {
            self.bcol[(x - n - 1) * self.cap + b].w = 0.0;
            self.bcol[(b - n - 1) * self.cap + x].w = 0.0;
        }
        self.flower_from[row_b + 1..row_b + self.stride].fill(0);
        let flower = std::mem::take(&mut self.flower[b]);
        for (i, &xs) in flower.iter().enumerate() {
            self.merge_row(b, xs, i == 0);
            // flower_from[b][x] = xs where flower_from[xs][x] != 0.
            if xs > n {
                let (from_b, from_xs) =
                    rows_mut(&mut self.flower_from, self.stride, b - n - 1, xs - n - 1);
                for (to, &from) in from_b.iter_mut().zip(from_xs).skip(1) {
                    *to = select_unpredictable(from != 0, xs, *to);
                }
            } else {
                // A vertex's flower_from row is itself at itself.
                self.flower_from[row_b + xs] = xs;
            }
        }
        self.flower[b] = flower;
        self.set_slack(b);
        Ok(())
    }

    /// One pass of `add_blossom`'s merge: for every `x` in order, take `xs`'s entries
    /// (`edge[b][x] = edge[xs][x]`, then `edge[x][b] = edge[x][xs]`) where `b` has no edge to `x`
    /// yet or `xs`'s is tighter.
    fn merge_row(&mut self, b: usize, xs: usize, first: bool) {
        let n = self.n;
        let stride = self.stride;
        let row_b = (b - n - 1) * stride;
        // Vertex columns: the entries written (edge[b][x], edge[x][b] for x <= n) are read at that
        // x only, so this part can run on its own, over consecutive memory. The first pass takes
        // every entry (their weights were set to 0); merge_dist[x] is the slack of edge[b][x]
        // from then on (Muri recomputes it, with the same duals: the same value).
        let lab = &self.lab[..stride];
        let merge_dist = &mut self.merge_dist[..stride];
        if xs > n {
            let (row_b, row_xs) = rows_mut(&mut self.brow, stride, b - n - 1, xs - n - 1);
            let (col_b, col_xs) = rows_mut(&mut self.bcol, self.cap, b - n - 1, xs - n - 1);
            let (col_b, col_xs) = (&mut col_b[..stride], &col_xs[..stride]);
            for x in 1..stride {
                let cand = row_xs[x];
                let d = slack_of(lab, cand);
                if first || not_positive(row_b[x].w) || d < merge_dist[x] {
                    row_b[x] = cand;
                    col_b[x] = col_xs[x];
                    merge_dist[x] = d;
                }
            }
        } else {
            let row_b = &mut self.brow[row_b..row_b + stride];
            let col_b = &mut self.bcol[(b - n - 1) * self.cap..][..stride];
            let row_xs = &self.w[xs * stride..(xs + 1) * stride];
            let col_xs = &self.wt[xs * stride..(xs + 1) * stride];
            let lab_xs = lab[xs];
            for x in 1..stride {
                let w = row_xs[x];
                let d = lab_xs + lab[x] - w * 2.0;
                if first || not_positive(row_b[x].w) || d < merge_dist[x] {
                    row_b[x] = Edge::new(xs, x, w);
                    col_b[x] = Edge::new(x, xs, col_xs[x]);
                    merge_dist[x] = d;
                }
            }
        }
        // Blossom columns: entries may be read after being written in this pass (x == b, x == xs),
        // so in Muri's order, entry by entry: edge[b][x] and edge[xs][x] are in x's column,
        // edge[x][b] in b's, edge[x][xs] in xs's column or x's row.
        let cap = self.cap;
        let column_b = (b - n - 1) * cap;
        for x in n + 1..=self.n_x {
            let column_x = (x - n - 1) * cap;
            let cur = self.bcol[column_x + b];
            let cand = self.bcol[column_x + xs];
            if not_positive(cur.w) || self.dist(cand) < self.dist(cur) {
                self.bcol[column_x + b] = cand;
                self.bcol[column_b + x] = if xs > n {
                    self.bcol[(xs - n - 1) * cap + x]
                } else {
                    self.brow[(x - n - 1) * stride + xs]
                };
            }
        }
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
        let xr = self.flower_from(b, self.edge(b, self.pa[b]).u as usize);
        let pr = self.get_pr(b, xr)?;
        for i in (0..pr).step_by(2) {
            let xs = self.flower[b][i];
            let xns = self.flower[b][i + 1];
            self.pa[xs] = self.edge(xns, xs).u as usize;
            self.side[xs] = Side::Inner;
            self.side[xns] = Side::Outer;
            self.clear_slack(xs);
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
    pub(super) fn on_found_edge(&mut self, e: Edge) -> Result<bool, MuriMatchingError> {
        let u = self.st[e.u as usize];
        let v = self.st[e.v as usize];
        match self.side[v] {
            Side::Unlabelled => {
                self.pa[v] = e.u as usize;
                self.side[v] = Side::Inner;
                let nu = self.st[self.mate[v]];
                self.clear_slack(v);
                self.clear_slack(nu);
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
    pub(super) fn stage(&mut self) -> Result<bool, MuriMatchingError> {
        self.side.fill(Side::Unlabelled);
        self.slack.fill(0);
        self.slack_dist.fill(f64::INFINITY);
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
            self.refresh_slack_dists();
            self.queue.clear();
            let n_x = self.n_x;
            for x in 1..=n_x {
                let s = self.slack[x];
                // The slack is tight when dist is not muri_greater than 0, i.e. not > 0.
                if self.st[x] == x && s != 0 && self.st[s] != x && not_positive(self.slack_dist(x))
                {
                    let e = self.edge(s, x);
                    if self.on_found_edge(e)? {
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
            if self.st[x] == x && self.slack[x] != 0 {
                match self.side[x] {
                    Side::Unlabelled => d = python_min(d, self.slack_dist(x)),
                    Side::Outer => d = python_min(d, self.slack_dist(x) / 2.0),
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

/// Rows `i` (mutable) and `j != i` of the matrix `v` with rows of `stride` entries.
fn rows_mut<T>(v: &mut [T], stride: usize, i: usize, j: usize) -> (&mut [T], &[T]) {
    debug_assert_ne!(i, j);
    if j < i {
        let (low, high) = v.split_at_mut(i * stride);
        (&mut high[..stride], &low[j * stride..(j + 1) * stride])
    } else {
        let (low, high) = v.split_at_mut(j * stride);
        (&mut low[i * stride..(i + 1) * stride], &high[..stride])
    }
}

/// `!(x > 0.0)`, true for NaN too: Muri's "not [`muri_greater`] than 0" (nothing non-zero is
/// close to 0), its test for a tight edge and for an entry that is no edge.
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)]
pub(super) fn not_positive(x: f64) -> bool {
    !(x > 0.0)
}

/// Python's two-argument `min(a, b)`: `b` only if it is strictly smaller.
fn python_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}
