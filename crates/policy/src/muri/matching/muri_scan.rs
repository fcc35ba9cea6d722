//! The scan of an outer vertex's edges, the innermost loop of Muri's matching.

use std::hint::select_unpredictable;

use super::MuriMatchingError;
use super::blossom::{Blossom, Edge, Side, not_positive, slack_of};

/// Vertices a block of [`Blossom::scan_run`] handles.
const LANES: usize = 8;

impl Blossom {
    /// Drain the queue, scanning each outer vertex's edges; `true` once augmented.
    pub(super) fn scan_queue(&mut self) -> Result<bool, MuriMatchingError> {
        while let Some(u) = self.queue.pop_front() {
            if self.side[self.st[u]] == Side::Inner {
                continue;
            }
            if self.scan_vertex(u)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Scan the edges of the outer vertex `u` in order; `true` once augmented.
    ///
    /// For `v` with `w(u, v) > 0` in another top-level blossom: a tight edge (`dist` not
    /// [`muri_greater`](super::muri_greater) than 0, which for a float is `!(dist > 0.0)`) is
    /// acted on (`on_found_edge`), otherwise `update_slack(u, st[v])`. [`Blossom::scan_run`] does
    /// the latter up to the next tight edge that matters.
    fn scan_vertex(&mut self, u: usize) -> Result<bool, MuriMatchingError> {
        let n = self.n;
        let mut v = 1;
        loop {
            self.scan_stamp += 1;
            v = self.scan_run(u, v);
            if v > n {
                return Ok(false);
            }
            let e = Edge::new(u, v, self.w[u * self.stride + v]);
            if self.on_found_edge(e)? {
                return Ok(true);
            }
            v += 1;
        }
    }

    /// The part of `u`'s scan from `v = from` up to the next tight edge out of the inner
    /// blossoms, whose `v` it returns (`n + 1` if none): `update_slack(u, st[v])` for every other
    /// `v` with `w(u, v) > 0` outside `u`'s blossom, in order.
    ///
    /// A tight edge into an inner blossom changes nothing: Muri's `on_found_edge` ignores it, and
    /// it updates no slack. Nothing but the updates changes the state on the way, so for a
    /// blossom `x` only the first of them can change anything: the next ones compare the same
    /// `dist(edge[u][x])` with a least slack that is either it or not greater. They are skipped
    /// (`scan_seen[x]` holds the stamp of the run that made the first). The vertices' updates are
    /// independent of each other and of the blossoms', so they run first, the blossoms' after.
    fn scan_run(&mut self, u: usize, from: usize) -> usize {
        let n = self.n;
        let stride = self.stride;
        // Blocks of LANES vertices: first whether one is tight; if none, their updates without
        // branches (vectorized), noting the blossoms of the others; if one is, the block a vertex
        // at a time, as the last, partial block. Then the blossoms' updates.
        let mut in_blossoms = std::mem::take(&mut self.scan_buffer);
        in_blossoms.resize(stride + LANES, 0);
        let mut count = 0; // in_blossoms[..count]: st[v] of the v in blossoms, in order
        let (su, lab_u) = (self.st[u], self.lab[u]);
        let su_f = su as f64;
        let row = &self.w[u * stride..(u + 1) * stride];
        let lab = &self.lab[..stride];
        let top = &self.top[..stride];
        let st = &self.st[..stride];
        let side = &self.side[..];
        let slack = &mut self.slack[..stride];
        let slack_dist = &mut self.slack_dist[..stride];
        let mut v0 = from;
        let mut stop = n + 1;
        while v0 < stride {
            if v0 + LANES <= stride {
                let block = v0..v0 + LANES;
                let w = row[block.clone()].try_into().expect("a block");
                let l = lab[block.clone()].try_into().expect("a block");
                let t = top[block.clone()].try_into().expect("a block");
                let s = (&mut slack[block.clone()]).try_into().expect("a block");
                let sd = (&mut slack_dist[block.clone()])
                    .try_into()
                    .expect("a block");
                let blossom = scan_block(w, l, t, (v0 as f64, su_f, lab_u, u), s, sd);
                if let Some(blossom) = blossom {
                    if blossom.iter().fold(0, |a, &b| a | b) != 0 {
                        for (&x, b) in st[block].iter().zip(blossom) {
                            in_blossoms[count] = x;
                            count += usize::from(b != 0);
                        }
                    }
                    v0 += LANES;
                    continue;
                }
            }
            // A vertex at a time. A tight edge into an inner blossom changes nothing (Muri's
            // `on_found_edge` does nothing with it, and no slack is updated).
            let end = (v0 + LANES).min(stride);
            for v in v0..end {
                let (w, x) = (row[v], st[v]);
                let d = lab_u + lab[v] - w * 2.0;
                if w > 0.0 && x != su {
                    if not_positive(d) {
                        if side[x] != Side::Inner {
                            stop = v;
                            break;
                        }
                    } else if x != v {
                        in_blossoms[count] = x;
                        count += 1;
                    } else if d < slack_dist[v] {
                        slack[v] = u;
                        slack_dist[v] = d;
                    }
                }
            }
            if stop <= n {
                break;
            }
            v0 = end;
        }
        let stamp = self.scan_stamp;
        for &x in &in_blossoms[..count] {
            if self.scan_seen[x] != stamp {
                self.scan_seen[x] = stamp;
                let d = slack_of(&self.lab, self.bcol[(x - n - 1) * self.cap + u]);
                if d < self.slack_dist(x) {
                    self.slack[x] = u;
                    self.slack_dist[x] = d;
                }
            }
        }
        self.scan_buffer = in_blossoms;
        stop
    }
}

/// One block of [`Blossom::scan_run`] (vertices `v0..v0 + LANES`, `top` their `st` as floats, `u`
/// the vertex scanned and `su` its `st`): `None` if an edge is tight, else the vertex updates
/// done and the lanes in blossoms (non-zero) returned. Written for the compiler to vectorize.
#[inline(always)]
fn scan_block(
    w: &[f64; LANES],
    lab: &[f64; LANES],
    top: &[f64; LANES],
    (v0, su, lab_u, u): (f64, f64, f64, usize),
    slack: &mut [usize; LANES],
    slack_dist: &mut [f64; LANES],
) -> Option<[u64; LANES]> {
    let mut d = [0.0; LANES];
    let mut tight = 0_u64;
    for i in 0..LANES {
        d[i] = lab_u + lab[i] - w[i] * 2.0;
        let outside = (w[i] > 0.0) & (top[i] != su);
        tight |= u64::from(outside & not_positive(d[i]));
    }
    if tight != 0 {
        return None;
    }
    let mut blossom = [0; LANES];
    for i in 0..LANES {
        let outside = (w[i] > 0.0) & (top[i] != su);
        let vertex = top[i] == v0 + i as f64;
        let better = outside & vertex & (d[i] < slack_dist[i]);
        slack[i] = select_unpredictable(better, u, slack[i]);
        slack_dist[i] = select_unpredictable(better, d[i], slack_dist[i]);
        blossom[i] = u64::from(outside & !vertex);
    }
    Some(blossom)
}
