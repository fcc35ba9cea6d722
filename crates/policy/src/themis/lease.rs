//! `themis`: Themis' own mechanism (Mahajan et al., NSDI'20, §3–§4), for rigid gang jobs.
//!
//! - **Leases.** A job that gets GPUs holds them for a lease (`lease_s`); it is never preempted
//!   mid-lease. Lease ends fall on ticks of `lease_s / 4` ([`lease_end`]): a job granted GPUs
//!   between ticks holds them a little longer, and expiries batch into at most four points per
//!   lease length however many jobs run. The policy asks to be woken (`Decision::wake_at`) at the
//!   earliest expiry.
//! - **Finish-time fairness.** A job's `ρ = T_shared / T_independent` (Themis eq. 1) with
//!   `T_independent` its whole work done alone on `1/N` of the cluster
//!   ([`super::independent_time_s`], `N` = jobs in the system now) and `T_shared` = time since
//!   arrival + remaining work at its allocation rate. A job without GPUs has an infinite `ρ` at
//!   its current rate, so jobs are ranked by `ρ_wait`, the `ρ` they would have if made to wait
//!   one more lease and then run: `(t − arrival + lease + remaining) / T_independent` (for a job
//!   that holds GPUs whose lease expired this is what losing the auction would cost it too).
//! - **Auction.** Whenever GPUs are free (a lease expired, a job finished, a job arrived while
//!   GPUs idle), the free GPUs — all but those held under unexpired leases — are offered to the
//!   `⌈(1 − f) · M⌉` jobs with the worst `ρ_wait` among the `M` jobs without a running lease
//!   (`f` = `fairness_knob`; at least one). Each bids its `ρ` improvement from a bundle of GPUs,
//!   `V(k) = ρ_wait / ρ_run` for `k` ≥ its gang (`ρ_run`: running from now, rate 1) and 1 for
//!   fewer GPUs (a gang cannot use part of its GPUs), and the partial-allocation mechanism
//!   ([`super::auction`]) picks the proportional-fair winners and each winner's kept fraction
//!   `c_i`.
//! - **Leftovers**, work-conserving: GPUs the auction does not hand out (too few for any
//!   bidder's gang, or the gangs that fit do not fill them) go to the remaining jobs, worst
//!   `ρ_wait` first, each that fits taking a full lease.
//!
//! Simplified from the paper (documented choices, not bugs):
//! - Jobs are rigid gangs, not apps of elastic tasks: a bundle is worth something only once it
//!   covers the gang, and placement quality (the paper's locality-dependent slowdowns) is not in
//!   the valuation; winners are placed with the configured strategy afterwards, and a winner
//!   that does not fit the free shape waits (its GPUs become leftovers).
//! - The hidden payment is taken in *time*, not in GPUs: a gang cannot run on `c_i` of its
//!   GPUs, so a winner holds its whole gang for `c_i` of a lease (rounded to quarter leases),
//!   after which its GPUs are offered again (the paper hands the `1 − c_i` fraction to
//!   non-bidders at once).
//! - `T_independent` uses the current `N`; the paper's agents track it over the job's life.
//! - There are no app-level agents or bid rounds: the policy computes every bid itself from
//!   the job's remaining work (an oracle for `T_shared`, as the paper's agents estimate it).
//!
//! Under the simulator's `per-event` overhead (Muri's model, which charges every running job
//! its start-up cost at every scheduling point) each lease tick costs every running job, far
//! more than the paper's checkpoint-restart cost; evaluate `themis` with `on-restart`. (With a
//! tick shorter than a job's overhead that job would never progress.)

use super::auction::{Bid, partial_allocation};
use super::{ThemisConfig, independent_time_s};
use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{
    ActiveJob, Assignment, Decision, JobId, JobSpec, PendingReason, Placement, SimTime,
};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

/// `themis`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("themis", Family::Events, "Themis: leases, finish-time fairness rho, GPUs auctioned to the 1-f worst-off jobs (NSDI'20)").fairness_columns()
    .paper("Themis (NSDI'20)")
    .detail("Themis: leases (`policy.themis.lease_s`, ending on quarter-lease ticks), finish-time fairness ρ = T_shared/T_independent (1/N of the cluster); free GPUs auctioned to the ⌈(1−f)·M⌉ worst-off jobs (`policy.themis.fairness_knob`) with the partial-allocation mechanism (proportional-fair split, each winner keeps its share of a lease); leftovers work-conserving; no preemption mid-lease; rigid gangs. Evaluate with `overhead = \"on-restart\"`");

/// Builds `themis` with its knobs (checked) and the caller's placement strategy.
pub fn build(themis: &ThemisConfig, placing: Placing) -> Result<Themis, PolicyError> {
    Themis::new(*themis, placing.strategy)
}

/// Themis with leases and the partial-allocation auction. See the module docs.
#[derive(Clone, Debug)]
pub struct Themis {
    config: ThemisConfig,
    strategy: PlacementStrategy,
    /// Per job id: when its current lease ends (`None`: it holds none).
    lease_end: Vec<Option<SimTime>>,
}

/// A job that may get GPUs at this point, with its finish-time fairness.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    /// Index in the view.
    index: usize,
    /// `ρ` if it runs from now on.
    rho_run: f64,
    /// `ρ` if it waits one more lease.
    rho_wait: f64,
}

/// `(ρ_run, ρ_wait)` of a job at `now` among `contending` jobs on `cluster_gpus` GPUs.
pub fn rho_now(
    job: &ActiveJob,
    spec: &JobSpec,
    now: SimTime,
    lease_s: f64,
    cluster_gpus: u32,
    contending: usize,
) -> (f64, f64) {
    let independent = independent_time_s(spec.run_time_s, job.gpus, cluster_gpus, contending);
    // A job without work or GPUs defines no ratio: its times alone order it.
    let independent = if independent.is_finite() && independent > 0.0 {
        independent
    } else {
        1.0
    };
    let shared = now.saturating_since(job.submit).as_secs_f64() + job.remaining_s_at(now);
    (shared / independent, (shared + lease_s) / independent)
}

impl Themis {
    /// A Themis policy with the given knobs and placement strategy.
    pub fn new(config: ThemisConfig, strategy: PlacementStrategy) -> Result<Self, PolicyError> {
        config.validate()?;
        Ok(Themis {
            config,
            strategy,
            lease_end: Vec::new(),
        })
    }

    fn lease_of(&self, job: &ActiveJob) -> Option<SimTime> {
        self.lease_end.get(job.id.index()).copied().flatten()
    }
}

/// Takes GPUs for `job`: with `keep_only`, exactly its current ones if it runs and they are free
/// (`Err(None)` otherwise); else wherever the placer finds room (`Err(Some(why))` if nowhere).
fn claim(
    placer: &mut Placer<'_>,
    view: &SchedulerView<'_>,
    job: &ActiveJob,
    now: SimTime,
    keep_only: bool,
) -> Result<Placement, Option<PendingReason>> {
    if keep_only {
        return job
            .placement()
            .filter(|current| placer.take(current))
            .cloned()
            .ok_or(None);
    }
    let spec = view.spec(job);
    placer
        .place(spec, job.pending_since, now)
        .map_err(|reason| {
            Some(if Placer::could_ever_fit(view.cluster, spec) {
                reason
            } else {
                PendingReason::NeverFits
            })
        })
}

/// Lease ends fall on ticks of `lease_s / TICKS_PER_LEASE` (from time 0), so expiries batch.
pub const TICKS_PER_LEASE: u64 = 4;

/// When a lease granted at `now` for `fraction` of `lease_s` ends: the fraction rounded to the
/// nearest whole number of ticks (at least one), counted from the first tick at or after `now`.
/// A full lease granted on a tick lasts exactly `lease_s`.
pub fn lease_end(now: SimTime, fraction: f64, lease_s: f64) -> SimTime {
    let tick_ms = ((lease_s * 1000.0 / TICKS_PER_LEASE as f64).round() as u64).max(1);
    let ticks = ((fraction * TICKS_PER_LEASE as f64).round() as u64).clamp(1, TICKS_PER_LEASE);
    let first = now.as_ms().div_ceil(tick_ms).saturating_mul(tick_ms);
    SimTime::from_ms(first.saturating_add(ticks.saturating_mul(tick_ms)))
}

/// Whether `job` can never be placed on the cluster (checked in full only where GPU types matter;
/// otherwise its gang against the cluster's size).
fn never_fits(view: &SchedulerView<'_>, job: &ActiveJob, cluster_gpus: u32) -> bool {
    let spec = view.spec(job);
    let typed = spec.gpu_type.is_some()
        || !spec.speed_by_gpu_type.is_empty()
        || view.cluster.gpu_type_names.len() > 1;
    job.gpus > cluster_gpus || (typed && !Placer::could_ever_fit(view.cluster, spec))
}

/// Worst-off first: the larger `ρ_wait` first, ties by job id.
fn worst_first(view: &SchedulerView<'_>, a: &Candidate, b: &Candidate) -> Ordering {
    b.rho_wait
        .total_cmp(&a.rho_wait)
        .then_with(|| view.jobs[a.index].id.cmp(&view.jobs[b.index].id))
}

/// A candidate's bid for a bundle that covers its gang: `V = ρ_wait / ρ_run`, at least 1 (and
/// `f64::MAX` where running defines no ratio).
fn improvement(c: &Candidate) -> f64 {
    let v = if c.rho_run > 0.0 {
        c.rho_wait / c.rho_run
    } else {
        f64::MAX
    };
    v.clamp(1.0, f64::MAX)
}

/// The auction's bidders, as indexes into `candidates`, worst-off first: the first `bidders` of
/// them once the worst-off are brought forward (`candidates` is reordered for that), less those
/// that cannot matter. Of the bidders with a gang of g GPUs only the ⌊offered/g⌋ + 1 with the
/// largest valuations can matter (more of that size never fit together; one more covers the
/// split without any one of them); the others cannot win and change no one's payment. A gang
/// larger than the offer cannot win at all.
fn auction_entrants(
    view: &SchedulerView<'_>,
    candidates: &mut [Candidate],
    bidders: usize,
    offered: u32,
) -> Vec<usize> {
    // The bidders are found without sorting everyone: most points free one gang's GPUs among
    // thousands of jobs.
    if bidders > 0 && bidders < candidates.len() {
        candidates.select_nth_unstable_by(bidders - 1, |a, b| worst_first(view, a, b));
    }
    let mut by_size: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (k, candidate) in candidates.iter().enumerate().take(bidders) {
        let gpus = view.jobs[candidate.index].gpus;
        if gpus <= offered {
            by_size.entry(gpus).or_default().push(k);
        }
    }
    let mut auctioned: Vec<usize> = Vec::new();
    for (gpus, mut group) in by_size {
        let keep = (offered / gpus.max(1)) as usize + 1;
        let better = |a: &usize, b: &usize| {
            let (a, b) = (&candidates[*a], &candidates[*b]);
            improvement(b)
                .total_cmp(&improvement(a))
                .then_with(|| worst_first(view, a, b))
        };
        if group.len() > keep {
            group.select_nth_unstable_by(keep - 1, better);
            group.truncate(keep);
        }
        auctioned.extend(group);
    }
    auctioned.sort_unstable_by(|a, b| worst_first(view, &candidates[*a], &candidates[*b]));
    auctioned
}

/// Runs the partial-allocation auction of the `offered` GPUs among the `auctioned` candidates.
/// Per candidate: the fraction of a lease it won (`None`: it did not bid, or won no GPUs).
fn auction_leases(
    view: &SchedulerView<'_>,
    candidates: &[Candidate],
    auctioned: &[usize],
    offered: u32,
) -> Result<Vec<Option<f64>>, PolicyError> {
    let mut lease_for: Vec<Option<f64>> = vec![None; candidates.len()];
    if !auctioned.is_empty() {
        let bids: Vec<Bid> = auctioned
            .iter()
            .map(|&k| {
                let c = &candidates[k];
                Bid::gang(view.jobs[c.index].gpus, 1.0, improvement(c))
            })
            .collect();
        let outcome = partial_allocation(&bids, offered)?;
        for (&k, (&gpus, &fraction)) in auctioned
            .iter()
            .zip(outcome.gpus.iter().zip(&outcome.fraction))
        {
            if gpus > 0 {
                lease_for[k] = Some(fraction);
            }
        }
    }
    Ok(lease_for)
}

/// One scheduling point's placements under way: the GPUs still free, the decision so far, and
/// per candidate whether it started and, if not, the reason a placement attempt gave.
struct Grants<'c> {
    placer: Placer<'c>,
    decision: Decision,
    placed: Vec<bool>,
    reasons: Vec<Option<PendingReason>>,
}

impl Themis {
    /// Makes room in the lease table for every job id in the view.
    fn grow_lease_table(&mut self, view: &SchedulerView<'_>) {
        let n_ids = view
            .jobs
            .iter()
            .map(|j| j.id.index() + 1)
            .max()
            .unwrap_or(0);
        if self.lease_end.len() < n_ids {
            self.lease_end.resize(n_ids, None);
        }
    }

    /// Jobs under an unexpired lease keep their GPUs (taken from `placer`, run in `decision`);
    /// the others are returned as candidates, in view order, with their finish-time fairness.
    fn keep_unexpired_leases(
        &self,
        view: &SchedulerView<'_>,
        now: SimTime,
        placer: &mut Placer<'_>,
        decision: &mut Decision,
    ) -> Vec<Candidate> {
        let mut candidates = Vec::new();
        let cluster_gpus = view.cluster.total_gpus();
        let lease_s = self.config.lease_s;
        for (index, job) in view.jobs.iter().enumerate() {
            match (job.placement(), self.lease_of(job)) {
                (Some(placement), Some(end)) if end > now && placer.take(placement) => {
                    decision
                        .run
                        .push(Assignment::exclusive(job.id, placement.clone()));
                }
                _ => {
                    let (rho_run, rho_wait) = rho_now(
                        job,
                        view.spec(job),
                        now,
                        lease_s,
                        cluster_gpus,
                        view.jobs.len(),
                    );
                    candidates.push(Candidate {
                        index,
                        rho_run,
                        rho_wait,
                    });
                }
            }
        }
        candidates
    }

    /// How many candidates bid: the `⌈(1 − f) · M⌉` worst-off of the `M` (at least one), none
    /// when no GPUs are offered.
    fn bidder_count(&self, candidates: usize, offered: u32) -> usize {
        match candidates {
            _ if offered == 0 => 0,
            0 => 0,
            m => (((1.0 - self.config.fairness_knob) * m as f64).ceil() as usize).clamp(1, m),
        }
    }

    /// Runs `job` on `placement` under a lease of `fraction` of `lease_s` from `now`.
    fn start(
        &mut self,
        job: &ActiveJob,
        placement: Placement,
        fraction: f64,
        now: SimTime,
        decision: &mut Decision,
    ) {
        decision.run.push(Assignment::exclusive(job.id, placement));
        self.lease_end[job.id.index()] = Some(lease_end(now, fraction, self.config.lease_s));
    }

    /// Starts the auction's winners, worst-off first: first those that can stay on their GPUs
    /// (a renewed lease does not migrate), then the others, wherever they fit.
    fn start_winners(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
        candidates: &[Candidate],
        auctioned: &[usize],
        lease_for: &[Option<f64>],
        grants: &mut Grants<'_>,
    ) {
        for keep_only in [true, false] {
            for &k in auctioned {
                let (Some(fraction), false) = (lease_for[k], grants.placed[k]) else {
                    continue;
                };
                let job = &view.jobs[candidates[k].index];
                match claim(&mut grants.placer, view, job, now, keep_only) {
                    Ok(placement) => {
                        self.start(job, placement, fraction, now, &mut grants.decision);
                        grants.placed[k] = true;
                    }
                    Err(reason) => grants.reasons[k] = reason.or(grants.reasons[k]),
                }
            }
        }
    }

    /// Leftovers, work-conserving: the remaining jobs, worst-off first, each on its own GPUs if
    /// they are free, else anywhere, on a full lease. From a heap (worst-off on top), popped only
    /// while a gang could still fit.
    fn start_leftovers(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
        candidates: &[Candidate],
        grants: &mut Grants<'_>,
    ) {
        let fits_now = |k: usize| view.jobs[candidates[k].index].gpus <= grants.placer.free_total();
        let left: Vec<usize> = (0..candidates.len())
            .filter(|&k| !grants.placed[k] && fits_now(k))
            .collect();
        let smallest = left
            .iter()
            .map(|&k| view.jobs[candidates[k].index].gpus)
            .min()
            .unwrap_or(u32::MAX);
        let mut heap: BinaryHeap<(u64, Reverse<JobId>, usize)> = left
            .into_iter()
            .map(|k| {
                (
                    order_key(candidates[k].rho_wait),
                    Reverse(view.jobs[candidates[k].index].id),
                    k,
                )
            })
            .collect();
        let placer = &mut grants.placer;
        while placer.free_total() >= smallest {
            let Some((_, _, k)) = heap.pop() else { break };
            let job = &view.jobs[candidates[k].index];
            if grants.reasons[k] == Some(PendingReason::NeverFits) || placer.free_total() < job.gpus
            {
                continue;
            }
            match claim(placer, view, job, now, true)
                .or_else(|_| claim(placer, view, job, now, false))
            {
                Ok(placement) => {
                    self.start(job, placement, 1.0, now, &mut grants.decision);
                    grants.placed[k] = true;
                }
                Err(reason) => grants.reasons[k] = reason.or(grants.reasons[k]),
            }
        }
    }

    /// The candidates that did not start lose any lease they held and are reported pending:
    /// never fitting, else the reason a placement attempt gave, else too few GPUs (bidders, or
    /// nothing offered) or a lower priority (the rest). Returns the finished decision.
    fn pend_the_rest(
        &mut self,
        view: &SchedulerView<'_>,
        candidates: &[Candidate],
        bidders: usize,
        offered: u32,
        grants: Grants<'_>,
    ) -> Decision {
        let Grants {
            mut decision,
            placed,
            reasons,
            ..
        } = grants;
        let cluster_gpus = view.cluster.total_gpus();
        for (k, candidate) in candidates.iter().enumerate() {
            if !placed[k] {
                let job = &view.jobs[candidate.index];
                self.lease_end[job.id.index()] = None;
                let reason = if never_fits(view, job, cluster_gpus) {
                    PendingReason::NeverFits
                } else {
                    reasons[k].unwrap_or(if k < bidders || offered == 0 {
                        PendingReason::InsufficientGpus
                    } else {
                        PendingReason::LowerPriority
                    })
                };
                decision.pending.push((job.id, reason));
            }
        }
        decision
    }
}

impl Policy for Themis {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.grow_lease_table(view);
        let mut placer = Placer::new(view.cluster, self.strategy);
        let mut decision = Decision::default();
        // Jobs under an unexpired lease keep their GPUs; the free GPUs go to auction.
        let mut candidates = self.keep_unexpired_leases(view, now, &mut placer, &mut decision);
        let offered = placer.free_total();
        let bidders = self.bidder_count(candidates.len(), offered);
        let auctioned = auction_entrants(view, &mut candidates, bidders, offered);
        let lease_for = auction_leases(view, &candidates, &auctioned, offered)?;
        let mut grants = Grants {
            placer,
            decision,
            placed: vec![false; candidates.len()],
            reasons: vec![None; candidates.len()],
        };
        self.start_winners(view, now, &candidates, &auctioned, &lease_for, &mut grants);
        self.start_leftovers(view, now, &candidates, &mut grants);
        let mut decision = self.pend_the_rest(view, &candidates, bidders, offered, grants);
        decision.wake_at = decision
            .run
            .iter()
            .filter_map(|a| self.lease_end.get(a.job.index()).copied().flatten())
            .min();
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        if let Some(end) = self.lease_end.get_mut(job.id.index()) {
            *end = None;
        }
    }
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
