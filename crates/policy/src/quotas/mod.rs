//! Quotas as Kueue and KAI-Scheduler do them, over any policy: tenants under nested groups, each
//! with per-GPU-type guaranteed quotas, borrowing and lending limits and an over-quota weight
//! ([`tree`]); each round decides which waiting jobs the policy may see and which borrowers are
//! reclaimed ([`round`]), from fair shares computed down the tree ([`share`]).
//!
//! ```text
//!   view ──► round::plan (admit, reclaim, hold) ──► the policy decides on what is admitted
//!        ──► every limit checked on the decision's real placements ──► decision
//! ```
//!
//! The same wrapper runs in the simulator and the daemon, so both enforce a tree identically.
//! The policy orders jobs inside a tenant and among borrowers, as it always does; the quota tree
//! decides only who may run. A decision that would still put a node above a limit (a job
//! without a GPU type placed on another type than it was counted in) loses the jobs it started
//! there, the lowest-ordered first: they wait a round, held by the quota.

mod held;
pub mod round;
pub mod share;
pub mod tree;

use crate::mechanisms::colocation::PairSpeeds;
use crate::{Current, Policy, PolicyError, SchedulerView, TenantUsage, TenantWeights};
use arbiter_model::{ActiveJob, Cluster, Decision, JobId, JobSpec, PendingReason, SimTime};
pub use round::{QuotaHold, QuotaRound};
use std::sync::Arc;
pub use tree::{ALL_TYPES, GpuQuota, QuotaGroup, QuotaTree};

/// A policy under a quota tree (or under none, until one is set: the daemon wraps its policy
/// once and sets the tree as the admin changes it).
pub struct Quotas {
    tree: Option<QuotaTree>,
    inner: Box<dyn Policy>,
    last: QuotaRound,
    /// Whether `last` was built (else it is the default: nothing held, reclaimed or lent).
    /// Kept apart: comparing a round with the default at every event cost more than the check
    /// that spared building it.
    last_built: bool,
    /// A round no longer shown (the last built one, once an event needed none), kept for its
    /// buffers: the next round built reuses them. (Dropped, they cost every built round a
    /// fresh per-job table the size of the whole trace, as long as a round with four waiting
    /// jobs otherwise takes.)
    spare: QuotaRound,
    held: held::Held,
    keys: round::JobKeys,
    scratch: round::Scratch,
    /// Whether whole rounds try holding the waiting jobs by class.
    by_class: round::Tries,
    /// Whether every round is built whole, also where nothing would be held, reclaimed or lent:
    /// the daemon shows each round's fair shares (`GET /v1/quotas`) and words each held job's
    /// reason, which the simulator's shortcuts leave out.
    every_round_whole: bool,
}

impl Quotas {
    /// `inner` under the quota tree of `groups`, bound to `cluster`. Fails if the tree does not
    /// add up (see [`QuotaTree::new`]).
    pub fn new(
        groups: &[QuotaGroup],
        cluster: &Cluster,
        inner: Box<dyn Policy>,
    ) -> Result<Self, PolicyError> {
        let tree = QuotaTree::for_cluster(groups, cluster).map_err(PolicyError::Config)?;
        Ok(Quotas::with_tree(Some(tree), inner))
    }

    /// `inner` under `tree` (none: the policy alone, at no cost).
    pub fn with_tree(tree: Option<QuotaTree>, inner: Box<dyn Policy>) -> Self {
        Quotas {
            tree,
            inner,
            last: QuotaRound::default(),
            last_built: false,
            spare: QuotaRound::default(),
            held: held::Held::default(),
            keys: round::JobKeys::default(),
            scratch: round::Scratch::default(),
            by_class: round::Tries::default(),
            every_round_whole: false,
        }
    }

    /// Builds every round whole, for a caller that shows each round's fair shares (the daemon;
    /// the GPUs held and the borrowers it shows are worked out when asked,
    /// [`round::running_use`]): the present it offers still spares the round a pass over the
    /// running jobs.
    pub fn showing_every_round(mut self) -> Self {
        self.every_round_whole = true;
        self
    }

    /// The bound tree.
    pub fn tree(&self) -> Option<&QuotaTree> {
        self.tree.as_ref()
    }
}

impl Quotas {
    /// A round built whole: who is admitted, held and reclaimed, then the policy's decision on
    /// what is offered, its starts checked against every limit.
    // (Out of line: kept apart from the simulator's steady path, whose code then stays in
    // the instruction cache beside the engine's and the policy's.)
    #[cold]
    #[inline(never)]
    fn schedule_round(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let tree = self
            .tree
            .as_ref()
            .ok_or_else(|| PolicyError::Invariant("the quota tree vanished".into()))?;
        let last = std::mem::take(if self.last_built {
            &mut self.last
        } else {
            &mut self.spare
        });
        let try_by_class = self.by_class.now();
        let round = match view.current {
            Some(current) => {
                let known = self.held.known(tree, view, current.queued, &mut self.keys);
                round::plan_with(
                    tree,
                    view,
                    now,
                    Some(known),
                    &mut self.keys,
                    last,
                    try_by_class,
                )
            }
            None => {
                // Whatever ran since the last present is unknown: counted again when one comes.
                self.held.invalidate();
                round::plan_with(tree, view, now, None, &mut self.keys, last, try_by_class)
            }
        };
        if try_by_class {
            self.by_class.tried(round.holds_by_class());
        }
        let undisturbed = !round.has_holds()
            && round.reclaimed.is_empty()
            && (!round.guaranteed_waiting || round.admitted_borrowing.is_empty());
        let mut decision = if undisturbed {
            self.inner.schedule(view, now)?
        } else {
            self.decide_offered(view, &round, now)?
        };
        self.refuse_above_limits(view, &round, &mut decision);
        if view.current.is_some()
            && let Some(tree) = &self.tree
        {
            self.held.apply(tree, view, &decision, &mut self.keys);
        }
        self.last = round;
        self.last_built = true;
        Ok(decision)
    }

    /// Takes out of `decision` the starts that would go above a limit ([`keep_limits`]) and
    /// gives the jobs the round holds, and those, the quota as their pending reason.
    fn refuse_above_limits(
        &self,
        view: &SchedulerView<'_>,
        round: &QuotaRound,
        decision: &mut Decision,
    ) {
        let Some(tree) = &self.tree else {
            return;
        };
        let kept = view.current.is_some().then_some(&self.held);
        let dropped = keep_limits(tree, view, kept, &self.keys, decision);
        if round.has_holds() || !dropped.is_empty() {
            decision
                .pending
                .retain(|(j, _)| !round.is_held(*j) && !dropped.contains(j));
            decision
                .pending
                .extend(round.held_jobs().map(|j| (j, PendingReason::Quota)));
            decision
                .pending
                .extend(dropped.iter().map(|j| (*j, PendingReason::Quota)));
        }
    }
}

impl Quotas {
    /// The policy's decision over what the round offers. When guaranteed jobs wait beside
    /// admitted borrowers, the policy decides first without the borrowers; if that leaves GPUs
    /// for a borrower, it decides again with them, and the second answer stands only if it
    /// starts every guaranteed job the first did (a policy that lets a blocked job hold the
    /// queue, FIFO, would otherwise keep owners behind a borrower).
    fn decide_offered(
        &mut self,
        view: &SchedulerView<'_>,
        round: &QuotaRound,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        // With every running job offered (nothing reclaimed), the present still holds: the
        // policy may decide by changes on the jobs offered.
        let present = view.current.filter(|_| round.reclaimed.is_empty());
        let (offered, queued) = match round.held_positions() {
            // (By position: only the jobs offered are read.)
            Some(held) => offer(round::unset(held, view.jobs.len()).map(|at| &view.jobs[at])),
            None => offer(view.jobs.iter().filter(|j| round.offered(j.id))),
        };
        let all = SchedulerView {
            cluster: view.cluster,
            jobs: &offered,
            specs: view.specs,
            // (The jobs offered are a subset: positions by id would not match them.)
            current: present.map(|c| Current {
                free: c.free,
                queued: &queued,
                positions: None,
            }),
        };
        if !round.guaranteed_waiting || round.admitted_borrowing.is_empty() {
            return self.inner.schedule(&all, now);
        }
        let is_borrower = |j: &ActiveJob| round.admitted_borrowing.binary_search(&j.id).is_ok();
        let (owners, owners_queued) = offer(offered.iter().filter(|j| !is_borrower(j)));
        let first = self.inner.schedule(
            &SchedulerView {
                jobs: &owners,
                current: present.map(|c| Current {
                    free: c.free,
                    queued: &owners_queued,
                    positions: None,
                }),
                ..all
            },
            now,
        )?;
        let runs = |j: &JobId| {
            owners
                .binary_search_by_key(j, |o| o.id)
                .is_ok_and(|at| owners[at].is_running())
        };
        // GPUs the first decision leaves free: of the present, less what it starts; else of
        // the cluster, less all it places.
        let taken: u32 = first
            .run
            .iter()
            .filter(|a| a.guest.is_none() && a.colocation.is_none_or(|c| c.partner > a.job))
            .filter(|a| !first.keep_unlisted || !runs(&a.job))
            .map(|a| a.placement.gpus())
            .sum();
        let free = match present {
            Some(c) if first.keep_unlisted => c.free.free_total(),
            _ => view.cluster.total_gpus(),
        };
        let smallest = offered
            .iter()
            .filter(|j| is_borrower(j))
            .map(|j| j.gpus)
            .min()
            .unwrap_or(u32::MAX);
        if free.saturating_sub(taken) < smallest {
            return Ok(first);
        }
        let second = self.inner.schedule(&all, now)?;
        let started = |d: &Decision| -> std::collections::BTreeSet<JobId> {
            d.run
                .iter()
                .map(|a| a.job)
                .filter(|j| {
                    owners
                        .binary_search_by_key(j, |o| o.id)
                        .is_ok_and(|at| !owners[at].is_running())
                })
                .collect()
        };
        Ok(if started(&first).is_subset(&started(&second)) {
            second
        } else {
            first
        })
    }
}

/// The jobs offered, copied, and the positions among them of those waiting.
fn offer<'j>(jobs: impl Iterator<Item = &'j ActiveJob>) -> (Vec<ActiveJob>, Vec<u32>) {
    let mut offered = Vec::new();
    let mut queued = Vec::new();
    for job in jobs {
        if !job.is_running() {
            queued.push(offered.len() as u32);
        }
        offered.push(job.clone());
    }
    (offered, queued)
}

impl Policy for Quotas {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let Some(tree) = &self.tree else {
            return self.inner.schedule(view, now);
        };
        if let Some(current) = view.current
            && !self.every_round_whole
        {
            // The simulator's steady path: nothing waits (then nothing is admitted, held or
            // reclaimed, and nothing starts to go above a limit), or every waiting job is
            // within its guaranteed quota with room to run. The round is not built.
            let unneeded = current.queued.is_empty() || {
                let known = self.held.known(tree, view, current.queued, &mut self.keys);
                round::admits_all_within(
                    tree,
                    view,
                    &known,
                    current.free.free_per_node(),
                    &mut self.keys,
                    &mut self.scratch,
                )
            };
            if unneeded {
                // The decision stays where the policy wrote it (the caller's), checked and
                // counted in place: moving it out and back cost as much as the check.
                let mut result = self.inner.schedule(view, now);
                if let Ok(decision) = &mut result {
                    if !current.queued.is_empty() && tree.has_limits() {
                        self.refuse_above_limits(view, &QuotaRound::default(), decision);
                    }
                    self.held.apply(tree, view, decision, &mut self.keys);
                }
                if self.last_built {
                    self.spare = std::mem::take(&mut self.last);
                    self.last_built = false;
                }
                return result;
            }
        }
        self.schedule_round(view, now)
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        if let Some(tree) = &self.tree {
            self.held.finished(tree, job.id);
        }
        self.inner.job_finished(spec, job, now);
    }

    fn set_pair_speeds(&mut self, speeds: Arc<PairSpeeds>) {
        self.inner.set_pair_speeds(speeds);
    }

    fn set_tenant_weights(&mut self, weights: &TenantWeights) -> Result<(), PolicyError> {
        self.inner.set_tenant_weights(weights)
    }

    fn fairshare_half_life_s(&self) -> Option<f64> {
        self.inner.fairshare_half_life_s()
    }

    fn set_tenant_usage(&mut self, usage: &TenantUsage) {
        self.inner.set_tenant_usage(usage);
    }

    fn quota_round(&self) -> Option<(&QuotaTree, &QuotaRound)> {
        self.tree.as_ref().map(|tree| (tree, &self.last))
    }

    fn set_quota_tree(&mut self, tree: Option<QuotaTree>) -> Result<(), PolicyError> {
        self.tree = tree;
        self.last = QuotaRound::default();
        self.last_built = false;
        self.spare = QuotaRound::default();
        self.held = held::Held::default();
        self.keys = round::JobKeys::default();
        self.scratch = round::Scratch::default();
        self.by_class = round::Tries::default();
        Ok(())
    }
}

/// Takes out of `decision` the jobs it starts where their path would go above a limit, given
/// where they really are placed (lowest class, priority and latest submission first). Returns
/// them. Jobs already running are never taken out: only what starts now is checked. `kept`:
/// the running jobs' GPUs as kept for this view (with a present), which spares a pass over
/// every job.
fn keep_limits(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    kept: Option<&held::Held>,
    keys: &round::JobKeys,
    decision: &mut Decision,
) -> Vec<JobId> {
    let leaf_of = |job: JobId| keys.leaf_of(tree, view, job);
    if !tree.has_limits() {
        return Vec::new();
    }
    let dims = tree.dims.len();
    // Per job id, whether it runs (read from the view only without a kept present).
    let flags: Vec<bool> = match kept {
        Some(_) => Vec::new(),
        None => {
            let mut running = vec![false; view.specs.len()];
            for j in view.jobs.iter().filter(|j| j.is_running()) {
                running[j.id.index()] = true;
            }
            running
        }
    };
    let runs = |id: JobId| match kept {
        Some(h) => h.runs(id),
        None => flags.get(id.index()).copied().unwrap_or(false),
    };
    let mut used = vec![0u32; tree.nodes.len() * dims];
    if decision.keep_unlisted {
        match kept {
            Some(h) => used.copy_from_slice(&h.per_node),
            None => count_unlisted(tree, view, decision, &mut used),
        }
    }
    // Whether `used` starts from every running job's GPUs (the kept count): a running job a
    // decision by changes lists keeps its GPUs (it may not move), so it is counted already.
    let from_kept = decision.keep_unlisted && kept.is_some();
    let mut starting: Vec<usize> = Vec::new();
    for (i, a) in decision.run.iter().enumerate() {
        if a.guest.is_some()
            || a.colocation.is_some_and(|c| c.partner < a.job)
            || (from_kept && runs(a.job))
        {
            continue;
        }
        tree.add_on_path(
            &mut used,
            leaf_of(a.job),
            &tree.placement_dims(view.cluster, &a.placement.slots),
            true,
        );
        if !runs(a.job) {
            starting.push(i);
        }
    }
    starting.sort_by_key(|&i| {
        let spec = &view.specs[decision.run[i].job.index()];
        (
            spec.class.value,
            spec.priority,
            std::cmp::Reverse(spec.submit),
            std::cmp::Reverse(spec.id),
        )
    });
    let mut dropped = Vec::new();
    while let Some(node) = tree.overdrawn_at(&used) {
        let Some(pos) = starting
            .iter()
            .position(|&i| tree.contains(node, leaf_of(decision.run[i].job)))
        else {
            break;
        };
        let i = starting.remove(pos);
        let a = &decision.run[i];
        tree.add_on_path(
            &mut used,
            leaf_of(a.job),
            &tree.placement_dims(view.cluster, &a.placement.slots),
            false,
        );
        dropped.push(a.job);
    }
    if !dropped.is_empty() {
        decision.run.retain(|a| !dropped.contains(&a.job));
        for a in &mut decision.run {
            if a.colocation.is_some_and(|c| dropped.contains(&c.partner)) {
                a.colocation = None;
            }
        }
    }
    dropped.sort_unstable();
    dropped
}

/// Adds to `used` the GPUs of the running jobs a decision by changes does not list (they keep
/// them).
fn count_unlisted(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    decision: &Decision,
    used: &mut [u32],
) {
    let mut listed = vec![false; view.specs.len()];
    for a in &decision.run {
        listed[a.job.index()] = true;
    }
    for job in view
        .jobs
        .iter()
        .filter(|j| j.is_running() && !listed[j.id.index()])
    {
        let slots = job.placement().map(|p| p.slots.as_slice()).unwrap_or(&[]);
        tree.add_on_path(
            used,
            tree.leaf(&view.spec(job).tenant),
            &tree.placement_dims(view.cluster, slots),
            true,
        );
    }
}

#[cfg(test)]
mod tests;
