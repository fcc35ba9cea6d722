//! Rounds that hold waiting jobs by class. When no waiting job is within its tenant's
//! guaranteed quota and no limit is overdrawn, nothing is reclaimed, and every waiting job is
//! a borrower: the few the free GPUs take are admitted in [`super::admit_borrowers`]'s order, and every
//! job never reached is held for its leaf and dimension's room once the admissions are done.
//! That reason is worked out once per leaf and dimension, not once per job, and the jobs are
//! not sorted: each leaf's first few in its order are kept as they pass. A busy cluster holds
//! most of a hundred thousand jobs this way at every round of the daemon, which builds each
//! round whole (see `Quotas::showing_every_round`).
//!
//! Where a round is not of that form — a job fits its tenant's guaranteed quota, a limit is
//! overdrawn, or the admissions reach past a leaf's first few jobs — [`plan`] gives up and the
//! round is decided job by job; a property test checks that both ways decide alike.

use super::{
    JobKeys, JobOrder, Ledger, QuotaHold, QuotaRound, QuotaTree, SchedulerView, job_order, pick_dim,
};
use crate::order_key;
use arbiter_model::{ActiveJob, JobId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The waiting jobs a round held by class.
#[derive(Clone, Debug, Default)]
pub(super) struct ByClass {
    /// Whether the last round held jobs this way (else `QuotaRound::holds` lists every hold).
    active: bool,
    /// Dimensions of the tree.
    dims: usize,
    /// Per leaf and dimension (`leaf * dims + dim`): the hold of a preemptible job counted
    /// there (with no GPUs: a job's own are put in as it is asked for).
    reasons: Vec<Option<QuotaHold>>,
    /// Per job id: its class (`(leaf * dims + dim) * 2`, plus one when preemptible;
    /// [`NOT_BY_CLASS`] for a job admitted or held one by one) and its GPUs. Only the entries
    /// of the jobs the round holds (`QuotaRound::blocked`) are read: the others are left from
    /// earlier rounds.
    of_job: Vec<(u32, u32)>,
    /// The jobs held by class, in the order they were seen.
    ids: Vec<JobId>,
    /// Per position in the round's view, a bit set when the job is held (by class or one by
    /// one): every job not offered.
    held_at: Vec<u64>,
}

/// The class of a job the round admitted or held one by one.
const NOT_BY_CLASS: u32 = u32::MAX;

/// The most jobs of a leaf kept in its order as they pass; admissions that reach further
/// decide the round job by job. (Few in tests, to reach that way too.)
const IN_ORDER: usize = if cfg!(test) { 4 } else { 128 };

#[cfg(test)]
thread_local! {
    /// Whether rounds are decided job by job even where they could hold by class (tests
    /// compare both).
    pub(crate) static JOB_BY_JOB: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl ByClass {
    /// Marks the round as not holding by class (its buffers kept).
    pub(super) fn forget(&mut self) {
        self.active = false;
    }

    /// Whether the last round held jobs by class.
    pub(super) fn is_active(&self) -> bool {
        self.active
    }

    /// The jobs held by class this round.
    pub(super) fn ids(&self) -> &[JobId] {
        if self.active { &self.ids } else { &[] }
    }

    /// The positions of the jobs held, as bits (see `held_at`).
    pub(super) fn held_positions(&self) -> Option<&[u64]> {
        self.active.then_some(&self.held_at[..])
    }

    /// Job `id`'s hold, if the round held it by class (the caller knows it is held).
    pub(super) fn hold_of(&self, id: JobId) -> Option<QuotaHold> {
        let &(class, gpus) = self.of_job.get(id.index())?;
        if !self.active || class == NOT_BY_CLASS {
            return None;
        }
        let at = (class / 2) as usize;
        if class % 2 == 0 {
            return Some(QuotaHold::NotPreemptible {
                dim: at % self.dims.max(1),
            });
        }
        self.reasons
            .get(at)
            .copied()
            .flatten()
            .map(|h| h.with_gpus(gpus))
    }
}

/// A leaf's waiting jobs: the first [`IN_ORDER`] in its order (by position in the view), and
/// how many there are.
#[derive(Default)]
struct LeafQueue {
    first: BinaryHeap<(JobOrder, u32)>,
    count: usize,
}

impl LeafQueue {
    fn offer(&mut self, order: JobOrder, at: u32) {
        self.count += 1;
        if self.first.len() < IN_ORDER {
            self.first.push((order, at));
        } else if self.first.peek().is_some_and(|last| order < last.0) {
            self.first.pop();
            self.first.push((order, at));
        }
    }
}

/// What a pass over the waiting jobs counts.
struct Waiting {
    /// GPUs waiting per leaf and dimension.
    gpus: Vec<f64>,
    /// The smallest waiting job's GPUs per dimension.
    smallest: Vec<u32>,
}

/// Decides the round into `round`, holding by class, when it has that form (see the module's
/// comment); returns the GPUs waiting per leaf and dimension. `None`: decide it job by job
/// (`round` is left as it came, but for the buffers).
pub(super) fn plan(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    queued: Option<&[u32]>,
    keys: &mut JobKeys,
    ledger: &Ledger<'_>,
    capacity: &[u32],
    round: &mut QuotaRound,
) -> Option<Vec<f64>> {
    // (`round.by_class` comes forgotten: see `plan_with`.)
    #[cfg(test)]
    if JOB_BY_JOB.get() {
        return None;
    }
    if tree.overdrawn(&ledger.used) {
        return None;
    }
    let dims = tree.dims.len();
    let full = (0..dims).all(|d| ledger.used[ledger.at(0, d)] >= capacity[d]);
    // (With no GPU free, nothing is admitted: no job's order matters.)
    let mut queues: Vec<LeafQueue> = Vec::new();
    let waiting = count_waiting(
        tree,
        view,
        queued,
        keys,
        ledger,
        capacity,
        round,
        (!full).then_some(&mut queues),
    )?;
    let mut ledger = Ledger {
        tree,
        dims,
        used: ledger.used.clone(),
    };
    if !full
        && !admit(
            view,
            &mut ledger,
            queues,
            capacity,
            &waiting.smallest,
            round,
        )
    {
        round.holds.clear();
        round.admitted_borrowing.clear();
        return None;
    }
    let by_class = &mut round.by_class;
    for (at, reason) in by_class.reasons.iter_mut().enumerate() {
        if reason.is_some() {
            let (leaf, dim) = (at / dims, at % dims);
            let (room, binding) = ledger.room(leaf, dim, capacity[dim]);
            *reason = Some(ledger.hold_for(dim, 0, room, binding));
        }
    }
    if !round.holds.is_empty() || !round.admitted_borrowing.is_empty() {
        let of_job = &by_class.of_job;
        by_class.ids.retain(|j| of_job[j.index()].0 != NOT_BY_CLASS);
    }
    by_class.active = true;
    Some(waiting.gpus)
}

/// Counts every waiting job into `round.by_class` (its class, and a reason to work out per
/// leaf and dimension with preemptible jobs) and, with `queues`, into its leaf's queue. `None`
/// as soon as one is within its tenant's guaranteed quota.
#[allow(clippy::too_many_arguments)]
fn count_waiting(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    queued: Option<&[u32]>,
    keys: &mut JobKeys,
    ledger: &Ledger<'_>,
    capacity: &[u32],
    round: &mut QuotaRound,
    mut queues: Option<&mut Vec<LeafQueue>>,
) -> Option<Waiting> {
    let dims = tree.dims.len();
    let by_class = &mut round.by_class;
    by_class.ids.clear();
    by_class.dims = dims;
    by_class.reasons.clear();
    by_class.reasons.resize(tree.nodes.len() * dims, None);
    if by_class.of_job.len() < view.specs.len() {
        by_class.of_job.resize(view.specs.len(), (NOT_BY_CLASS, 0));
    }
    if let Some(queues) = queues.as_deref_mut() {
        queues.resize_with(tree.nodes.len(), LeafQueue::default);
    }
    by_class.held_at.clear();
    by_class.held_at.resize(view.jobs.len().div_ceil(64), 0);
    let mut gpus = vec![0u64; tree.nodes.len() * dims];
    let mut smallest = vec![u32::MAX; dims];
    let counts = Counts {
        tree,
        used: &ledger.used,
        capacity,
        gpus: &mut gpus,
        smallest: &mut smallest,
        queues: queues.map(|q| &mut q[..]),
    };
    let all_beyond = match queued {
        Some(positions) => counts.each(
            view,
            keys,
            by_class,
            positions.iter().map(|&at| (at, view.jobs.get(at as usize))),
        ),
        None => counts.each(
            view,
            keys,
            by_class,
            view.jobs
                .iter()
                .enumerate()
                .filter(|(_, j)| !j.is_running())
                .map(|(at, j)| (at as u32, Some(j))),
        ),
    };
    all_beyond.then(|| Waiting {
        gpus: gpus.into_iter().map(|g| g as f64).collect(),
        smallest,
    })
}

/// What [`count_waiting`] adds each waiting job to.
struct Counts<'a> {
    tree: &'a QuotaTree,
    /// GPUs held per node and dimension.
    used: &'a [u32],
    capacity: &'a [u32],
    /// GPUs waiting per leaf and dimension.
    gpus: &'a mut [u64],
    /// The smallest waiting job's GPUs per dimension.
    smallest: &'a mut [u32],
    /// Per leaf, its first jobs in order (when the admissions need them).
    queues: Option<&'a mut [LeafQueue]>,
}

impl Counts<'_> {
    /// Counts `waiting` (position, job: `None` when the position is not in the view) into
    /// `by_class`; `false` as soon as one is within its tenant's guaranteed quota. (One loop
    /// over slices taken once: as a closure over the round's fields, called from two places,
    /// each job cost half as much again, every field read again through the closure.)
    fn each<'v>(
        mut self,
        view: &SchedulerView<'_>,
        keys: &mut JobKeys,
        by_class: &mut ByClass,
        waiting: impl Iterator<Item = (u32, Option<&'v ActiveJob>)>,
    ) -> bool {
        let (tree, used, dims) = (self.tree, self.used, self.tree.dims.len());
        let ByClass {
            reasons,
            of_job,
            ids,
            held_at,
            ..
        } = by_class;
        let (reasons, of_job, held_at) = (&mut reasons[..], &mut of_job[..], &mut held_at[..]);
        for (at, job) in waiting {
            let Some(job) = job else {
                return false;
            };
            let key = keys.of(tree, view, job);
            let leaf = key.leaf();
            let dim = pick_dim(tree, key, job.gpus, used, self.capacity);
            let class = leaf * dims + dim;
            let (Some(&held), Some(slot), Some(word)) = (
                used.get(class),
                of_job.get_mut(job.id.index()),
                held_at.get_mut(at as usize / 64),
            ) else {
                return false;
            };
            if held + job.gpus <= tree.guaranteed(leaf, dim) {
                return false;
            }
            *slot = (class as u32 * 2 + u32::from(key.preemptible), job.gpus);
            *word |= 1 << (at % 64);
            self.gpus[class] += u64::from(job.gpus);
            self.smallest[dim] = self.smallest[dim].min(job.gpus);
            if key.preemptible {
                // (Worked out once the admissions are done.)
                reasons[class] = Some(QuotaHold::NotPreemptible { dim });
            }
            ids.push(job.id);
            if let Some(queues) = self.queues.as_deref_mut() {
                queues[leaf].offer(job_order(key, job), at);
            }
        }
        true
    }
}

/// [`super::admit_borrowers`]'s admissions while GPUs are free, on each leaf's first jobs (`queues`,
/// by leaf): the jobs it takes are admitted or held one by one, their classes cleared. `false`
/// when they would reach past a leaf's first [`IN_ORDER`].
fn admit(
    view: &SchedulerView<'_>,
    ledger: &mut Ledger<'_>,
    queues: Vec<LeafQueue>,
    capacity: &[u32],
    smallest: &[u32],
    round: &mut QuotaRound,
) -> bool {
    let (tree, dims) = (ledger.tree, ledger.dims);
    let lists: Vec<(Vec<(JobOrder, u32)>, usize)> = queues
        .into_iter()
        .map(|q| (q.first.into_sorted_vec(), q.count))
        .collect();
    // A listed job, its dimension and whether it may be preempted (from its class).
    let of_job = &mut round.by_class.of_job;
    let read = |of_job: &[(u32, u32)], &(_, at): &(JobOrder, u32)| {
        let job = &view.jobs[at as usize];
        let class = of_job[job.id.index()].0;
        (job, (class / 2) as usize % dims, class % 2 == 1)
    };
    // Per leaf: what its tenant would have borrowed by then, per dimension.
    let mut borrowed: Vec<u32> = (0..tree.nodes.len() * dims)
        .map(|at| ledger.used[at].saturating_sub(tree.nodes[at / dims].quota[at % dims].guaranteed))
        .collect();
    let key =
        |leaf: usize, entry: &(JobOrder, u32), job: &ActiveJob, dim: usize, borrowed: &[u32]| {
            let after = f64::from(borrowed[leaf * dims + dim] + job.gpus) / tree.nodes[leaf].weight;
            (order_key(after), entry.0)
        };
    let nothing_fits = |ledger: &Ledger<'_>| {
        (0..dims).all(|d| capacity[d].saturating_sub(ledger.used[ledger.at(0, d)]) < smallest[d])
    };
    let mut heap = BinaryHeap::new();
    for (leaf, (list, _)) in lists.iter().enumerate() {
        if let Some(first) = list.first() {
            let (job, dim, _) = read(of_job, first);
            heap.push(Reverse((key(leaf, first, job, dim, &borrowed), leaf)));
        }
    }
    let mut next = vec![0usize; lists.len()];
    let mut room_of: Vec<Option<(u32, Option<usize>)>> = vec![None; tree.nodes.len() * dims];
    let mut full = nothing_fits(ledger);
    while !full && let Some(Reverse((_, leaf))) = heap.pop() {
        let (list, count) = &lists[leaf];
        let Some(entry) = list.get(next[leaf]) else {
            return false;
        };
        next[leaf] += 1;
        let (job, dim, preemptible) = read(of_job, entry);
        borrowed[leaf * dims + dim] += job.gpus;
        match list.get(next[leaf]) {
            Some(n) => {
                let (next_job, next_dim, _) = read(of_job, n);
                heap.push(Reverse((key(leaf, n, next_job, next_dim, &borrowed), leaf)));
            }
            // Its next job is past the first few kept.
            None if next[leaf] < *count => return false,
            None => {}
        }
        of_job[job.id.index()].0 = NOT_BY_CLASS;
        let mut room = || {
            *room_of[leaf * dims + dim].get_or_insert_with(|| ledger.room(leaf, dim, capacity[dim]))
        };
        if preemptible && job.gpus <= room().0 {
            ledger.add_dim(leaf, dim, job.gpus, true);
            round.admitted_borrowing.push(job.id);
            round.by_class.held_at[entry.1 as usize / 64] &= !(1 << (entry.1 % 64));
            room_of.iter_mut().for_each(|r| *r = None);
            full = nothing_fits(ledger);
            continue;
        }
        let hold = if preemptible {
            let (room, binding) = room();
            ledger.hold_for(dim, job.gpus, room, binding)
        } else {
            QuotaHold::NotPreemptible { dim }
        };
        round.holds.push((job.id, hold));
    }
    true
}

/// Whether the whole rounds of a caller try holding by class: after a round that could not (a
/// job within its quota, a leaf's admissions past its first few), the next 1, 2, 4 … 16 whole
/// rounds do not, as a try that fails costs a pass over the waiting jobs on top of the round
/// (a simulation under hard caps, with idle GPUs that no waiting job may take, fails every
/// time). A round that holds by class tries again at the next.
#[derive(Debug, Default)]
pub(crate) struct Tries {
    /// Whole rounds left that do not try.
    skip: u32,
    /// Rounds skipped after the last failure.
    after_failure: u32,
}

impl Tries {
    /// Whether this round tries.
    pub(crate) fn now(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// A round that tried held by class (`held`), or not.
    pub(crate) fn tried(&mut self, held: bool) {
        if held {
            self.after_failure = 0;
        } else {
            self.after_failure = (self.after_failure * 2).clamp(1, 16);
            self.skip = self.after_failure;
        }
    }
}
