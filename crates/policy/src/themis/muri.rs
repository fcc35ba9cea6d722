//! `themis-muri`: Themis as Muri's simulator runs it (`themis_sim_jobs`, Muri's
//! `simulator/run_sim.py:1799-2032`; see `docs/muri-reference.md` §5), which produced Muri's
//! published Themis numbers. It is Gavel's finish-time-fairness policy recomputed at every event
//! and turned into an order, not the paper's auction (that is [`crate::themis::lease`]).
//!
//! At every scheduling point (arrivals and completions), with `n` runnable jobs (pending and
//! running) on a cluster of `C` GPUs (Muri: 64):
//!
//! 1. **Isolated share.** `f_j = min(ceil(C/n) / g_j, 1)`. Muri's `get_isolated_throughputs`
//!    computes throughputs but returns this *allocation*, so the "isolated throughput" is a GPU
//!    fraction (kept).
//! 2. **Cumulative isolated time.** For a job seen at an earlier point,
//!    `C_j += (R_prev − R_j) / f_prev` — iterations done since, over the previous fraction (an
//!    iteration count, not seconds; kept). `R_j` is the remaining iteration count: remaining work
//!    over the job's iteration time (`JobSpec::iteration_s`, 1.015-scaled like the work; a job
//!    without one counts one-second iterations).
//! 3. **Allocation.** `x = argmin max_j ρ_j(x)` over `0 ≤ x ≤ 1`, `Σ g_j x_j ≤ C`, with
//!    `ρ_j(x) = (t − submit_j + R_j / (tput_j · x_j)) / (C_j + R_j / f_j)` and
//!    `tput_j = 1 / iteration time` (Muri's `job['tput']`), so `R_j / tput_j` is the job's
//!    remaining work in seconds. See [`min_max_allocation`] for how the solution is chosen where
//!    it is not unique.
//! 4. **Ranking.** `sort_val = x_j · 1e9` for a job that never ran, else `x_j / executed_j`
//!    (seconds held GPUs); `deficit = should_j − executed_j`, *then* `should_j += x_j · (t −
//!    previous event)` (the new allocation is credited for the past interval); stable sort by
//!    `(sort_val, deficit, x_j)`, largest first, on Muri's list order (the previous point's
//!    final order, arrivals appended in arrival order).
//! 5. **Placement.** A consolidated (`yarn`) dry run in rank order from an empty cluster picks
//!    the jobs that run; the list is then stably sorted by GPU count, largest first, and the
//!    picked jobs are placed for real in that order from an empty cluster (one that no longer
//!    fits waits). That order is the next point's list order.
//!
//! State kept between points (documented per [`crate::Policy::schedule`]'s contract): the list,
//! each job's `C_j`, previous `R_j` and `f_j`, `should_j`, and the time of the previous event
//! (completions are seen through [`crate::Policy::job_finished`], so a completion that empties
//! the cluster counts as an event, as in Muri).

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Assignment, Decision, JobId, JobSpec, PendingReason, SimTime};
use std::cmp::Ordering;

/// `themis-muri`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("themis-muri", Family::Events, "Themis as Muri's simulator runs it: finish-time-fairness allocation at every event, ranked by share over service (SIGCOMM'22)").fairness_columns()
    .paper("Muri (SIGCOMM'22) artifact")
    .detail("Themis as Muri's simulator runs it (`themis_sim_jobs`): at every arrival/completion, Gavel's finish-time-fairness allocation min max ρ (Muri's quirks kept: a GPU fraction as \"isolated throughput\", iterations over fractions), solved exactly by bisection; where the optimum is not unique, the analytic centre of the optimal face (ECOS' own choice is not reproducible); ranked by allocation over time received, then deficit; consolidated. Within 5% of Muri's numbers on trace2/3/4, not on trace1 (+15%) nor the batch `_pr` traces (+58% to +173%: the solver's choice orders the never-run jobs; today's cvxpy+ECOS is itself 21% off on trace3_pr)");

/// Builds `themis-muri` (it has no knobs: Muri's simulator has none; it places consolidated, as
/// that simulator does).
pub fn build(_: Placing) -> Result<ThemisMuri, PolicyError> {
    Ok(ThemisMuri::new())
}

/// One job in the min-max problem: `ρ(x) = (since_arrival_s + work_s / x) / isolated`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FtfTerm {
    /// Time since the job arrived, seconds (`t − submit`).
    pub since_arrival_s: f64,
    /// Remaining work at the full allocation `x = 1`, seconds (`R / tput`).
    pub work_s: f64,
    /// The denominator (`T_independent`; for Muri's model `C_j + R_j / f_j`). Positive.
    pub isolated: f64,
    /// GPUs of the job's gang (its weight in the capacity constraint).
    pub gpus: u32,
}

impl FtfTerm {
    /// `ρ` at allocation `x` (infinite at `x = 0` for a job with work left).
    pub fn rho(&self, x: f64) -> f64 {
        (self.since_arrival_s + self.work_s / x) / self.isolated
    }

    /// Whether the term defines a ratio: finite, non-negative times and a positive denominator
    /// (a job without work left may have none).
    fn is_valid(&self) -> bool {
        let finite = self.since_arrival_s.is_finite()
            && self.work_s.is_finite()
            && self.isolated.is_finite();
        finite
            && self.since_arrival_s >= 0.0
            && self.work_s >= 0.0
            && (self.isolated > 0.0 || self.work_s == 0.0)
    }

    /// The least allocation that keeps `ρ ≤ tau`, at most 1 (0 for a job without work left).
    fn floor_at(&self, tau: f64) -> f64 {
        if self.work_s <= 0.0 {
            return 0.0;
        }
        let room = tau * self.isolated - self.since_arrival_s;
        if room <= self.work_s {
            1.0
        } else {
            self.work_s / room
        }
    }
}

/// The solution of `min max_j ρ_j(x)` s.t. `0 ≤ x ≤ 1`, `Σ g_j x_j ≤ capacity`.
#[derive(Clone, Debug, PartialEq)]
pub struct MinMaxAllocation {
    /// Allocation per term, in the terms' order.
    pub x: Vec<f64>,
    /// The optimal `max_j ρ_j`.
    pub rho: f64,
    /// Whether the capacity constraint decides the optimum (then every job with work left ends
    /// at `ρ = rho` and `x` is unique); otherwise one job at `x = 1` does.
    pub capacity_bound: bool,
}

/// Solves Muri's min-max finish-time-fairness problem exactly, without a solver.
///
/// `ρ_j` falls as `x_j` grows, so `max_j ρ_j ≤ τ` holds exactly when every `x_j` is at least
/// its floor `l_j(τ) = work_j / (τ · isolated_j − since_arrival_j)` (at most 1), and the optimum
/// `τ*` is the larger of `τ_1 = max_j ρ_j(1)` and the `τ` at which the floors fill the capacity
/// (found by bisection to the last bit). Two cases:
///
/// - **Capacity-bound** (`Σ g_j l_j(τ_1) > capacity`): the optimum is unique, `x = l(τ*)`, every
///   job at `ρ = τ*`.
/// - **Otherwise** `τ* = τ_1`: the job(s) defining `τ_1` sit at `x = 1` and every other job may
///   take any `x_j ∈ [l_j, 1]` within the spare capacity — the optimum is a whole face, and Muri's
///   ranking depends on which point of it the solver returns. Muri's cvxpy/ECOS run returns an
///   interior-point iterate; its exact position depends on ECOS' internals (initial point,
///   equilibration, step rules; cvxpy versions already differ: Muri's published trace3 average
///   JCT is 397,059 s, a rerun with cvxpy 1.9 + ECOS 2.0.14 gives 411,777 s). We return the
///   **analytic centre of the optimal face** of the very conic program cvxpy gives ECOS — the
///   point the central path of every interior-point method converges to, so the solver-neutral
///   reading of "what an interior-point solver returns". That program has, per job, `x ≥ 0`,
///   `x ≤ 1`, the epigraph row `τ ≥ (a + R s)/d` and the cone `tput · x · s ≥ 1` of `inv_pos`,
///   plus `Σ g x ≤ C`; eliminating `s` (its centre is closed-form) leaves
///   `max Σ_j [2 ln(x_j − l_j) + ln(1 − x_j)] + ln(C − Σ_j g_j x_j)`, whose optimality condition
///   `2/(x_j − l_j) − 1/(1 − x_j) = λ g_j`, `λ = 1/(C − Σ g x)` is solved per job in closed form
///   and for `λ` by bisection. (Muri's simulator run with this choice instead of ECOS gives
///   411,069 s on trace3, within 0.2% of the ECOS rerun; 1,045,592 s on trace4, published
///   994,971.) ECOS does *not* stop at this centre: it converges in 8–18 iterations and leaves
///   the jobs off the bottleneck wherever its iterates were when the gap closed (random small
///   instances: up to 0.13 apart in `x`; Clarabel and SCS land elsewhere again). Where hundreds
///   of never-run jobs are ranked by `x` alone — the batch traces (`_pr`) — that position
///   decides the order: trace3_pr gives 4,109,735 s with the centre, 1,813,087 s with cvxpy 1.9
///   + ECOS 2.0.14, 1,502,768 s published.
///
/// Returns `None` when a term is malformed (non-finite, or no positive denominator) or the
/// capacity is not positive; Muri then falls back to `x = 1` for every job.
pub fn min_max_allocation(terms: &[FtfTerm], capacity: f64) -> Option<MinMaxAllocation> {
    if !(capacity.is_finite() && capacity > 0.0) || terms.iter().any(|t| !t.is_valid()) {
        return None;
    }
    let tau_1 = terms
        .iter()
        .filter(|t| t.work_s > 0.0)
        .map(|t| t.rho(1.0))
        .fold(f64::NEG_INFINITY, f64::max);
    let demand_at =
        |tau: f64| -> f64 { terms.iter().map(|t| t.gpus as f64 * t.floor_at(tau)).sum() };
    if tau_1.is_finite() && demand_at(tau_1) > capacity {
        // Capacity-bound: the least τ whose floors fit.
        let (mut lo, mut hi) = (tau_1, tau_1.max(f64::MIN_POSITIVE) * 2.0);
        while demand_at(hi) > capacity {
            lo = hi;
            hi *= 2.0;
            if !hi.is_finite() {
                return None;
            }
        }
        // The answer is the least double `hi` whose floors fit. The floating-point demand is
        // monotone in τ (each floor is, and rounding preserves order), so that double is the
        // same whatever points probe the bracket: false-position steps shrink it to a few ulps
        // in a handful of evaluations of the O(jobs) demand, and bisection finishes it to
        // adjacent doubles (bisection alone took ~55 evaluations).
        (lo, hi) = false_position(lo, hi, |tau| demand_at(tau) - capacity, |v| v <= 0.0);
        loop {
            let mid = lo + (hi - lo) / 2.0;
            if mid <= lo || mid >= hi {
                break;
            }
            if demand_at(mid) > capacity {
                lo = mid
            } else {
                hi = mid
            }
        }
        let x = terms.iter().map(|t| t.floor_at(hi)).collect();
        return Some(MinMaxAllocation {
            x,
            rho: hi,
            capacity_bound: true,
        });
    }
    // The bottleneck job(s) at 1; the others at the analytic centre of what is left.
    let floors: Vec<f64> = terms.iter().map(|t| t.floor_at(tau_1)).collect();
    let fixed: Vec<bool> = terms
        .iter()
        .zip(&floors)
        .map(|(t, l)| t.work_s > 0.0 && *l >= 1.0 - 1e-9)
        .collect();
    let budget = capacity
        - terms
            .iter()
            .zip(&fixed)
            .filter(|(_, f)| **f)
            .map(|(t, _)| t.gpus as f64)
            .sum::<f64>();
    let gpus: Vec<f64> = terms.iter().map(|t| t.gpus as f64).collect();
    let x = analytic_centre(&floors, &gpus, &fixed, budget);
    let rho = if tau_1.is_finite() {
        tau_1
    } else {
        terms
            .iter()
            .map(|t| t.since_arrival_s / t.isolated)
            .filter(|r| r.is_finite())
            .fold(0.0, f64::max)
    };
    Some(MinMaxAllocation {
        x,
        rho,
        capacity_bound: false,
    })
}

/// Narrows a bracket `[lo, hi]` of the sign change of a monotone `f` — `past(f(hi))` holds and
/// `past(f(lo))` does not — by false-position steps with the Illinois modification, to within a
/// relative 1e-13, keeping that invariant (a step that would leave the bracket bisects instead).
/// Callers finish by bisection to adjacent doubles.
fn false_position(
    mut lo: f64,
    mut hi: f64,
    f: impl Fn(f64) -> f64,
    past: impl Fn(f64) -> bool,
) -> (f64, f64) {
    let (mut f_lo, mut f_hi) = (f(lo), f(hi));
    let mut last_side = 0_i8;
    for _ in 0..60 {
        if hi - lo <= hi.abs() * 1e-13 {
            break;
        }
        let mut t = (lo * f_hi - hi * f_lo) / (f_hi - f_lo);
        if !(t > lo && t < hi) {
            t = lo + (hi - lo) / 2.0;
        }
        let v = f(t);
        if past(v) {
            (hi, f_hi) = (t, v);
            if last_side == -1 {
                f_lo /= 2.0;
            }
            last_side = -1;
        } else {
            (lo, f_lo) = (t, v);
            if last_side == 1 {
                f_hi /= 2.0;
            }
            last_side = 1;
        }
    }
    (lo, hi)
}

/// The per-job optimum of `2 ln(x − l) + ln(1 − x) − μ x` on `(l, 1)`: the smaller root of
/// `μ x² − (μ(1 + l) + 3) x + (2 + l + μ l) = 0`, written without cancellation.
fn centre_share(mu: f64, l: f64) -> f64 {
    let b = mu * (1.0 + l) + 3.0;
    let c = 2.0 + l + mu * l;
    let q = mu * (1.0 - l) - 1.0;
    (2.0 * c / (b + (q * q + 8.0).sqrt())).clamp(l, 1.0)
}

/// Maximises `Σ_free [2 ln(x_j − l_j) + ln(1 − x_j)] + ln(budget − Σ_free g_j x_j)`; fixed jobs
/// get 1. Falls back to the floors when they leave no room.
fn analytic_centre(floors: &[f64], gpus: &[f64], fixed: &[bool], budget: f64) -> Vec<f64> {
    let free = || (0..floors.len()).filter(|&j| !fixed[j]);
    let shares = |lambda: f64| -> Vec<f64> {
        (0..floors.len())
            .map(|j| {
                if fixed[j] {
                    1.0
                } else {
                    centre_share(lambda * gpus[j], floors[j])
                }
            })
            .collect()
    };
    let room_at_floors = budget - free().map(|j| gpus[j] * floors[j]).sum::<f64>();
    if room_at_floors.is_nan() || room_at_floors <= 0.0 {
        return (0..floors.len())
            .map(|j| if fixed[j] { 1.0 } else { floors[j] })
            .collect();
    }
    // g(λ) = λ · (budget − Σ g x(λ)) − 1 is negative below the root and positive above it.
    let g = |lambda: f64| -> f64 {
        let used: f64 = free()
            .map(|j| gpus[j] * centre_share(lambda * gpus[j], floors[j]))
            .sum();
        lambda * (budget - used) - 1.0
    };
    let (mut lo, mut hi) = (0.5, 1.0);
    while g(hi) < 0.0 {
        lo = hi;
        hi *= 2.0;
        if hi > 1e200 {
            return (0..floors.len())
                .map(|j| if fixed[j] { 1.0 } else { floors[j] })
                .collect();
        }
    }
    while g(lo) >= 0.0 {
        hi = lo;
        lo /= 2.0;
        if lo < 1e-200 {
            return shares(0.0);
        }
    }
    // As for τ above; `g` is monotone up to rounding, so the λ found may differ from
    // bisection's alone in its last bits.
    (lo, hi) = false_position(lo, hi, g, |v| v >= 0.0);
    loop {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if g(mid) < 0.0 { lo = mid } else { hi = mid }
    }
    shares(hi)
}

/// Per-job state kept between scheduling points.
#[derive(Clone, Copy, Debug, Default)]
struct JobState {
    /// In the list.
    listed: bool,
    /// Seen before (its state below is its own): a job that left the view (the daemon leaves
    /// out a run that is still stopping) and comes back keeps it.
    known: bool,
    /// `C_j`, iterations over fractions.
    cumulative_isolated: f64,
    /// Remaining iterations and isolated fraction at the previous point.
    previous: Option<(f64, f64)>,
    /// Allocation × time credited so far (Muri's `time_should_received`).
    time_should_received: f64,
}

/// Muri's `themis`. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct ThemisMuri {
    /// The runnable jobs in Muri's list order.
    list: Vec<JobId>,
    /// By job id.
    state: Vec<JobState>,
    /// The latest event seen and the one before it.
    latest_event: SimTime,
    previous_event: SimTime,
    /// Scratch: per job id, its index in the view (`u32::MAX`: none).
    position: Vec<u32>,
}

/// Muri's ranking key `(sort_val, deficit, allocation)` of a job with allocation `x`, `executed_s`
/// seconds on GPUs so far and `should_s` allocation-seconds credited before this point.
fn ranking_key(x: f64, executed_s: f64, should_s: f64) -> (f64, f64, f64) {
    let sort_val = if executed_s == 0.0 {
        x * 1e9
    } else {
        x / executed_s
    };
    (sort_val, should_s - executed_s, x)
}

/// Indices of `keys` by key, largest first, compared like Python's tuples of floats; equal keys
/// keep their order (Python's `sort(reverse=True)` is stable).
fn rank_order(keys: &[(f64, f64, f64)]) -> Vec<usize> {
    let cmp = |x: f64, y: f64| x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&keys[a], &keys[b]);
        cmp(b.0, a.0)
            .then_with(|| cmp(b.1, a.1))
            .then_with(|| cmp(b.2, a.2))
    });
    order
}

impl ThemisMuri {
    /// A fresh policy.
    pub fn new() -> Self {
        ThemisMuri::default()
    }

    fn observe(&mut self, now: SimTime) {
        if now > self.latest_event {
            self.previous_event = self.latest_event;
            self.latest_event = now;
        }
    }

    /// Remaining iterations and seconds per iteration.
    fn remaining_iterations(job: &ActiveJob, spec: &JobSpec, now: SimTime) -> (f64, f64) {
        let iteration_s = spec
            .iteration_s
            .filter(|s| s.is_finite() && *s > 0.0)
            .unwrap_or(1.0);
        (job.remaining_s_at(now) / iteration_s, iteration_s)
    }
}

impl Policy for ThemisMuri {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.observe(now);
        let since_previous_s = now.saturating_since(self.previous_event).as_secs_f64();
        let n_ids = view
            .jobs
            .iter()
            .map(|j| j.id.index() + 1)
            .max()
            .unwrap_or(0);
        if self.state.len() < n_ids {
            self.state.resize(n_ids, JobState::default());
            self.position.resize(n_ids, u32::MAX);
        }
        for (i, job) in view.jobs.iter().enumerate() {
            self.position[job.id.index()] = i as u32;
        }
        // The list: finished jobs out, arrivals appended in arrival order.
        let position = &self.position;
        let state = &mut self.state;
        self.list.retain(|id| {
            let here = position.get(id.index()).is_some_and(|p| *p != u32::MAX);
            if !here {
                state[id.index()].listed = false;
            }
            here
        });
        let mut arrivals: Vec<&ActiveJob> = view
            .jobs
            .iter()
            .filter(|j| !self.state[j.id.index()].listed)
            .collect();
        arrivals.sort_by_key(|j| (j.submit, j.id));
        for job in arrivals {
            let state = &mut self.state[job.id.index()];
            if !state.known {
                *state = JobState {
                    known: true,
                    ..JobState::default()
                };
            }
            state.listed = true;
            self.list.push(job.id);
        }
        let jobs: Vec<&ActiveJob> = self
            .list
            .iter()
            .map(|id| &view.jobs[self.position[id.index()] as usize])
            .collect();
        let n = jobs.len();
        if n == 0 {
            return Ok(Decision::default());
        }

        // 1-3. Isolated shares, cumulative isolated time, the allocation.
        let capacity = view.cluster.total_gpus();
        let share = capacity.div_ceil(n as u32) as f64;
        let mut terms = Vec::with_capacity(n);
        for job in &jobs {
            let (remaining, iteration_s) = Self::remaining_iterations(job, view.spec(job), now);
            let fraction = if job.gpus == 0 {
                1.0
            } else {
                (share / job.gpus as f64).min(1.0)
            };
            let state = &mut self.state[job.id.index()];
            if let Some((previous, previous_fraction)) = state.previous {
                state.cumulative_isolated += (previous - remaining) / previous_fraction;
            }
            state.previous = Some((remaining, fraction));
            terms.push(FtfTerm {
                since_arrival_s: now.saturating_since(job.submit).as_secs_f64(),
                work_s: remaining * iteration_s,
                isolated: state.cumulative_isolated + remaining / fraction,
                gpus: job.gpus,
            });
        }
        let x = min_max_allocation(&terms, capacity as f64).map_or_else(|| vec![1.0; n], |a| a.x);

        // 4. Rank.
        let mut keys = Vec::with_capacity(n);
        for (job, &x) in jobs.iter().zip(&x) {
            let state = &mut self.state[job.id.index()];
            keys.push(ranking_key(
                x,
                job.executed_s_at(now),
                state.time_should_received,
            ));
            state.time_should_received += x * since_previous_s;
        }
        let mut ranked = rank_order(&keys);

        // 5. Dry run in rank order, then the real placement by GPU count.
        let mut chosen = vec![false; n];
        let mut dry = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        for &k in &ranked {
            chosen[k] = dry
                .place(view.spec(jobs[k]), jobs[k].pending_since, now)
                .is_ok();
        }
        ranked.sort_by_key(|&k| std::cmp::Reverse(jobs[k].gpus));
        let mut placer = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        let mut decision = Decision {
            run: Vec::with_capacity(n.min(capacity as usize)),
            ..Decision::default()
        };
        for &k in &ranked {
            let (job, spec) = (jobs[k], view.spec(jobs[k]));
            let placed = if chosen[k] {
                placer.place(spec, job.pending_since, now)
            } else {
                Err(PendingReason::LowerPriority)
            };
            match placed {
                Ok(placement) => decision.run.push(Assignment::exclusive(job.id, placement)),
                Err(_) if !Placer::could_ever_fit(view.cluster, spec) => {
                    decision.pending.push((job.id, PendingReason::NeverFits))
                }
                Err(reason) => decision.pending.push((job.id, reason)),
            }
        }
        self.list = ranked.iter().map(|&k| jobs[k].id).collect();
        for job in view.jobs {
            self.position[job.id.index()] = u32::MAX;
        }
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        self.observe(now);
        if let Some(state) = self.state.get_mut(job.id.index()) {
            *state = JobState::default();
        }
        self.list.retain(|id| *id != job.id);
    }
}

#[cfg(test)]
#[path = "muri_tests.rs"]
mod tests;
