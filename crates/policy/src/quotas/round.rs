//! One round of the quota tree: which waiting jobs the policy may see, which borrowers are
//! reclaimed, and why the others wait. Pure: the tree and a view in, a [`QuotaRound`] out.
//!
//! ```text
//!   GPUs held per node of the tree ──► waiting jobs within their tenant's guaranteed quota
//!       ──► over a limit or the cluster? reclaim borrowers beyond their fair share
//!           (lowest class first, then fewest GPU-seconds lost)
//!       ──► borrowing jobs, least-borrowed tenant (per over-quota weight) first, each admitted
//!           only if every limit on its path, its siblings' unlendable idle quota and the free
//!           GPUs leave room
//! ```
//!
//! Where no waiting job is within its tenant's guaranteed quota and no limit is overdrawn (a
//! busy cluster's usual round), the same decision is taken without a candidate per job: the
//! waiting jobs are held by class (see the `by_class` module).
//!
//! Everything admitted fits together, so whatever subset the policy then starts keeps every
//! limit. A job of a class that is not preemptible runs only within guaranteed quota (KAI's
//! rule): borrowed GPUs must be given back when their owner asks.

mod by_class;

use super::share::{entitlements, protected_idle};
use super::tree::QuotaTree;
use crate::SchedulerView;
use arbiter_model::{ActiveJob, JobId, SimTime, TenantName};
use by_class::ByClass;
#[cfg(test)]
pub(crate) use by_class::JOB_BY_JOB;
pub(crate) use by_class::Tries;
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Why the quota tree holds a waiting job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QuotaHold {
    /// A node on its path is at its limit (guaranteed plus borrowing limit).
    Limit {
        /// The node.
        node: usize,
        /// The dimension.
        dim: usize,
        /// Its limit.
        limit: u32,
        /// GPUs its subtree holds or was given this round.
        used: u32,
        /// The job's GPUs.
        gpus: u32,
    },
    /// Idle quota exists, but its owners do not lend it (lending limits) or it is taken.
    NotLent {
        /// The dimension.
        dim: usize,
        /// GPUs left to borrow on its path.
        room: u32,
        /// The job's GPUs.
        gpus: u32,
    },
    /// It would borrow, and its class may not be preempted: such jobs run only within quota.
    NotPreemptible {
        /// The dimension.
        dim: usize,
    },
}

/// A job's GPUs in each dimension.
type ByDim = smallvec::SmallVec<[u32; 2]>;

/// What the quota tree decided at one round.
#[derive(Clone, Debug, Default)]
pub struct QuotaRound {
    /// Waiting jobs held back one by one, with why: sorted by id when they are few, else in the
    /// order they were decided. Most of a round's are held by class instead where it can
    /// ([`ByClass`]): use [`QuotaRound::hold_of`] and [`QuotaRound::holds`].
    holds: Vec<(JobId, QuotaHold)>,
    /// Waiting jobs held back by class.
    by_class: ByClass,
    /// Running jobs reclaimed (preempted) for guaranteed quota, sorted by id.
    pub reclaimed: Vec<JobId>,
    /// Waiting jobs admitted beyond their tenant's guaranteed quota (borrowing), sorted by id.
    pub admitted_borrowing: Vec<JobId>,
    /// Whether some waiting job within its tenant's guaranteed quota was admitted.
    pub guaranteed_waiting: bool,
    /// Per node and dimension (`node * dims + dim`): GPUs held as the round began.
    pub held: Vec<u32>,
    /// Per node and dimension: the fair share (entitlement) this round.
    pub share: Vec<f64>,
    /// Per job id, a bit set when it is held back or reclaimed: not offered to the policy.
    blocked: Vec<u64>,
    /// Per job id, its position in `holds` (empty when there are few: `holds` is then sorted
    /// by id and searched).
    hold_at: Vec<u32>,
}

impl QuotaRound {
    /// Indexes the holds by job (`jobs`: how many job ids there are). A few are sorted by id;
    /// many (a full cluster holds most of a hundred thousand jobs) keep the order they were
    /// decided in and get a position per job id, so that a round costs what its holds do and a
    /// simulation's round not what its whole trace does.
    fn index_holds(&mut self, jobs: usize) {
        let blocked = || {
            self.holds
                .iter()
                .map(|(j, _)| *j)
                .chain(self.by_class.ids().iter().copied())
                .chain(self.reclaimed.iter().copied())
        };
        let last = blocked().map(|j| j.index()).max();
        let mut bits = std::mem::take(&mut self.blocked);
        bits.clear();
        bits.resize(last.map_or(0, |l| l / 64 + 1), 0);
        for job in blocked() {
            bits[job.index() / 64] |= 1 << (job.index() % 64);
        }
        self.blocked = bits;
        self.hold_at.clear();
        if self.holds.len() < jobs / 8 {
            self.holds.sort_unstable_by_key(|(j, _)| *j);
            return;
        }
        self.hold_at.resize(jobs, u32::MAX);
        for (at, (job, _)) in self.holds.iter().enumerate() {
            if let Some(slot) = self.hold_at.get_mut(job.index()) {
                *slot = at as u32;
            }
        }
    }

    /// Whether the policy is offered `job` this round (not held back, not reclaimed).
    pub fn offered(&self, job: JobId) -> bool {
        !self.is_blocked(job)
    }

    /// Why `job` is held back, if it is.
    pub fn hold_of(&self, job: JobId) -> Option<QuotaHold> {
        if self.by_class.is_active() && self.is_blocked(job) {
            // (Every job blocked is held, each waiting job's class written this round: nothing
            // is reclaimed in such a round. A job held one by one has none.)
            return self
                .by_class
                .hold_of(job)
                .or_else(|| self.held_one_by_one(job));
        }
        self.held_one_by_one(job)
    }

    /// Why `job` is held back, if it is held one by one (`holds`).
    fn held_one_by_one(&self, job: JobId) -> Option<QuotaHold> {
        if self.hold_at.is_empty() {
            return self
                .holds
                .binary_search_by_key(&job, |(j, _)| *j)
                .ok()
                .map(|at| self.holds[at].1);
        }
        self.hold_at
            .get(job.index())
            .and_then(|&at| self.holds.get(at as usize))
            .map(|(_, h)| *h)
    }

    /// Whether `job` is held back.
    pub fn is_held(&self, job: JobId) -> bool {
        if self.by_class.is_active() {
            return self.is_blocked(job);
        }
        self.hold_of(job).is_some()
    }

    /// Whether any waiting job is held back.
    pub fn has_holds(&self) -> bool {
        !self.holds.is_empty() || !self.by_class.ids().is_empty()
    }

    /// How many waiting jobs are held back.
    pub fn held_count(&self) -> usize {
        self.holds.len() + self.by_class.ids().len()
    }

    /// The jobs held back, in the order [`QuotaRound::holds`] gives them.
    pub fn held_jobs(&self) -> impl Iterator<Item = JobId> + '_ {
        self.holds
            .iter()
            .map(|(j, _)| *j)
            .chain(self.by_class.ids().iter().copied())
    }

    /// The jobs held back with why: one by one as decided, or by class in the order seen.
    pub fn holds(&self) -> impl Iterator<Item = (JobId, QuotaHold)> + '_ {
        self.holds.iter().copied().chain(
            self.by_class
                .ids()
                .iter()
                .filter_map(|&j| self.by_class.hold_of(j).map(|h| (j, h))),
        )
    }

    /// With a round that held jobs by class: the positions in its view of the jobs it held
    /// (every job not offered), as bits.
    pub(crate) fn held_positions(&self) -> Option<&[u64]> {
        self.by_class.held_positions()
    }

    /// Whether this round held waiting jobs by class.
    pub(crate) fn holds_by_class(&self) -> bool {
        self.by_class.is_active()
    }

    /// Whether `job`'s bit is set in `blocked`.
    fn is_blocked(&self, job: JobId) -> bool {
        self.blocked
            .get(job.index() / 64)
            .is_some_and(|w| w & (1 << (job.index() % 64)) != 0)
    }
}

impl QuotaHold {
    /// The same hold for a job of `gpus` GPUs.
    fn with_gpus(self, gpus: u32) -> QuotaHold {
        let mut hold = self;
        match &mut hold {
            QuotaHold::Limit { gpus: g, .. } | QuotaHold::NotLent { gpus: g, .. } => *g = gpus,
            QuotaHold::NotPreemptible { .. } => {}
        }
        hold
    }

    /// The same hold without the GPUs in use or the room left, which its words leave out: two
    /// holds that are equal so are worded alike (under the same tree).
    pub fn without_counts(self) -> QuotaHold {
        let mut hold = self;
        match &mut hold {
            QuotaHold::Limit { used, .. } => *used = 0,
            QuotaHold::NotLent { room, .. } => *room = 0,
            QuotaHold::NotPreemptible { .. } => {}
        }
        hold
    }

    /// Why, in words, naming the tree's nodes (a tenant sees only its own path's). Only what
    /// changes with the configuration goes in, not the GPUs held now: a job's reason is stored
    /// when it changes, and a full cluster holds most of its queue.
    pub fn reason(&self, tree: &QuotaTree) -> String {
        match *self {
            QuotaHold::Limit {
                node,
                dim,
                limit,
                used: _,
                gpus,
            } => {
                let n = &tree.nodes[node];
                let g = n.quota[dim].guaranteed;
                format!(
                    "{} at its {} borrowing limit ({limit}: {g} guaranteed + {} borrowed); this job needs {gpus}",
                    n.name,
                    dim_words(tree, dim),
                    limit - g
                )
            }
            QuotaHold::NotLent { dim, room: _, gpus } => {
                format!(
                    "beyond its guaranteed {} quota, and the idle GPUs it may borrow are taken (others' guaranteed jobs and lending limits come first); this job needs {gpus}",
                    dim_words(tree, dim)
                )
            }
            QuotaHold::NotPreemptible { dim } => format!(
                "its priority class is not preemptible, so it runs only within its guaranteed {} quota, which its jobs fill",
                dim_words(tree, dim)
            ),
        }
    }
}

/// A dimension as words: its GPU type, or "GPU" for every type.
fn dim_words(tree: &QuotaTree, dim: usize) -> &str {
    if tree.dims[dim] == super::tree::ALL_TYPES {
        "GPU"
    } else {
        &tree.dims[dim]
    }
}

/// The round's working state: GPUs used per node and dimension as jobs are admitted.
struct Ledger<'t> {
    tree: &'t QuotaTree,
    dims: usize,
    used: Vec<u32>,
}

impl Ledger<'_> {
    fn at(&self, node: usize, dim: usize) -> usize {
        node * self.dims + dim
    }

    /// Whether `node` holds more than `floor` GPUs of `dim`.
    fn above(&self, node: usize, dim: usize, floor: f64) -> bool {
        f64::from(self.used[self.at(node, dim)]) > floor + 1e-9
    }

    /// Whether `node` holds more than its guaranteed quota of `dim`: only then may a job of its
    /// be reclaimed for an owner's guarantee.
    fn above_guaranteed(&self, node: usize, dim: usize) -> bool {
        self.above(
            node,
            dim,
            f64::from(self.tree.nodes[node].quota[dim].guaranteed),
        )
    }

    /// Adds (or with `sign` false, takes away) GPUs on the path from `leaf` to the root.
    fn add(&mut self, leaf: usize, by_dim: &[u32], sign: bool) {
        self.tree.add_on_path(&mut self.used, leaf, by_dim, sign);
    }

    /// [`Ledger::add`] for `gpus` GPUs of dimension `dim`.
    fn add_dim(&mut self, leaf: usize, dim: usize, gpus: u32, sign: bool) {
        self.tree
            .add_dim_on_path(&mut self.used, leaf, dim, gpus, sign);
    }

    /// Room left for `leaf` to borrow in `dim`: the cluster's free GPUs, less its path's
    /// siblings' unlendable idle quota, within every limit on the path; with the constraint that
    /// binds.
    fn room(&self, leaf: usize, dim: usize, capacity: u32) -> (u32, Option<usize>) {
        let mut room = i64::from(capacity) - i64::from(self.used[self.at(0, dim)]);
        let mut binding = None;
        for &n in self.tree.path(leaf) {
            let parent = self.tree.nodes[n].parent.unwrap_or(0);
            let protected: f64 = self.tree.nodes[parent]
                .children
                .iter()
                .filter(|&&s| s != n)
                .map(|&s| {
                    let q = self.tree.nodes[s].quota[dim];
                    protected_idle(
                        q.guaranteed,
                        q.lending_limit,
                        f64::from(self.used[self.at(s, dim)]),
                    )
                })
                .sum();
            room -= protected.ceil() as i64;
            let limit = self.tree.nodes[n].quota[dim].limit();
            let by_limit = i64::from(limit) - i64::from(self.used[self.at(n, dim)]);
            if by_limit < room {
                room = by_limit;
                binding = Some(n);
            }
        }
        (room.max(0) as u32, binding)
    }
}

impl Ledger<'_> {
    /// Why a job of `gpus` GPUs in `dim` is held when its path leaves `room`, `binding` the
    /// node whose limit binds.
    fn hold_for(&self, dim: usize, gpus: u32, room: u32, binding: Option<usize>) -> QuotaHold {
        match binding {
            Some(node) => QuotaHold::Limit {
                node,
                dim,
                limit: self.tree.nodes[node].quota[dim].limit(),
                used: self.used[self.at(node, dim)],
                gpus,
            },
            None => QuotaHold::NotLent { dim, room, gpus },
        }
    }
}

/// What the quota tree reads of a job's spec, kept per job id between rounds by the wrapper:
/// reading a hundred thousand specs (and their tenants' names) costs a round more than the rest
/// of the tree's work. A spec never changes once submitted; a new tree starts a new table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JobKey {
    leaf: u32,
    class: i32,
    priority: i32,
    preemptible: bool,
    /// The dimension of its GPU type, when it names one.
    typed_dim: Option<u16>,
}

/// [`JobKey`]s by job id.
#[derive(Debug, Default)]
pub(crate) struct JobKeys {
    keys: Vec<JobKey>,
    leaves: LeafCache,
}

/// The leaves of the tenants seen lately, by the address of their shared name
/// ([`TenantName::copy_address`]): a trace's jobs share a few dozen names, and a comparison of
/// addresses spares hashing and comparing a name for each job (half of what reading a job's
/// key cost on Philly). Each slot keeps the name it saw, so its address cannot be reused by
/// another name while cached.
#[derive(Debug, Default)]
struct LeafCache {
    slots: Vec<Option<(TenantName, u32)>>,
}

impl LeafCache {
    /// Slots (a power of two).
    const SLOTS: usize = 64;

    fn leaf(&mut self, tree: &QuotaTree, tenant: &TenantName) -> u32 {
        if self.slots.is_empty() {
            self.slots.resize(Self::SLOTS, None);
        }
        // Fibonacci hashing of the address (allocations are 8-aligned: the low bits are
        // always zero), its top bits picking the slot.
        let at = (tenant.copy_address() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - Self::SLOTS.trailing_zeros());
        let slot = &mut self.slots[at as usize];
        match slot {
            Some((seen, leaf)) if seen.is_same_copy(tenant) => *leaf,
            _ => {
                let leaf = tree.leaf(tenant) as u32;
                *slot = Some((tenant.clone(), leaf));
                leaf
            }
        }
    }
}

impl JobKey {
    /// The leaf its tenant's jobs count in.
    pub(crate) fn leaf(self) -> usize {
        self.leaf as usize
    }
}

impl JobKeys {
    #[inline]
    pub(crate) fn of(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        job: &ActiveJob,
    ) -> JobKey {
        self.of_id(tree, view, job.id)
    }

    /// The key of job `id`, read from its spec the first time it is asked. Read when asked,
    /// not ahead: the simulator asks as a job arrives, when its spec is in cache (the engine
    /// has just read it), while a pass over every spec ahead streams the whole trace (384
    /// bytes a job: at 82,000 jobs, a sixth of what the quota tree costs a Philly replay).
    #[inline]
    pub(crate) fn of_id(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        id: JobId,
    ) -> JobKey {
        match self.keys.get(id.index()) {
            Some(key) if key.leaf != JobKey::UNKNOWN.leaf => *key,
            _ => self.read(tree, view, id),
        }
    }

    /// Reads job `id`'s key from its spec, and keeps it.
    #[cold]
    #[inline(never)]
    fn read(&mut self, tree: &QuotaTree, view: &SchedulerView<'_>, id: JobId) -> JobKey {
        let at = id.index();
        if at >= self.keys.len() {
            self.keys
                .resize(view.specs.len().max(at + 1), JobKey::UNKNOWN);
        }
        let spec = &view.specs[at];
        let key = JobKey::of(tree, spec, self.leaves.leaf(tree, &spec.tenant));
        self.keys[at] = key;
        key
    }
}

impl JobKeys {
    /// The leaf job `id` counts in: kept, or looked up.
    pub(crate) fn leaf_of(&self, tree: &QuotaTree, view: &SchedulerView<'_>, id: JobId) -> usize {
        match self
            .keys
            .get(id.index())
            .filter(|k| k.leaf != JobKey::UNKNOWN.leaf)
        {
            Some(key) => key.leaf(),
            None => tree.leaf(&view.specs[id.index()].tenant),
        }
    }
}

impl JobKey {
    /// A job whose key is not read yet (no tree has this many nodes).
    const UNKNOWN: JobKey = JobKey {
        leaf: u32::MAX,
        class: 0,
        priority: 0,
        preemptible: false,
        typed_dim: None,
    };

    /// `spec`'s key, its tenant's `leaf` given.
    fn of(tree: &QuotaTree, spec: &arbiter_model::JobSpec, leaf: u32) -> JobKey {
        JobKey {
            leaf,
            class: spec.class.value,
            priority: spec.priority,
            preemptible: spec.class.preemptible,
            typed_dim: spec
                .gpu_type
                .map(|t| tree.dim_of_type.get(t.index()).copied().unwrap_or(0) as u16),
        }
    }
}

/// A waiting job of a tenant at or above its guaranteed quota in a full cluster: held unless a
/// reclaim frees GPUs, so kept without its order.
#[derive(Clone, Copy)]
struct Wholesale<'v> {
    job: &'v ActiveJob,
    dim: usize,
    preemptible: bool,
}

/// A waiting job with what the round knows of it.
#[derive(Clone, Copy)]
struct Candidate<'v> {
    job: &'v ActiveJob,
    preemptible: bool,
    leaf: usize,
    dim: usize,
    order: JobOrder,
}

/// What a caller that keeps the present between rounds (the simulator, through the wrapper)
/// already knows, so that a round costs what waits rather than every running job.
pub(crate) struct Known<'a> {
    /// GPUs held per node and dimension (`node * dims + dim`) by the running jobs.
    pub held: &'a [u32],
    /// GPUs per dimension.
    pub capacity: &'a [u32],
    /// Positions in `view.jobs` of the waiting jobs.
    pub queued: &'a [u32],
}

/// Buffers the rounds of a simulation reuse.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The node that last had room for a lone waiting job, looked at first the next time.
    roomy: usize,
    used: Vec<u32>,
    free: Vec<i64>,
    /// GPUs taken (node, GPUs) by the waiting jobs placed so far.
    taken: Vec<(usize, u32)>,
    order: Vec<(JobOrder, u32, usize)>,
}

/// With the present kept (the simulator): whether [`plan_with`] would offer the policy the view
/// as it is because every waiting job is within its tenant's guaranteed quota, no limit is
/// overdrawn once they count, and the free GPUs (`free`, per node) place them all as the
/// reclaim would (first fit, in their order). Nothing is then held, reclaimed or admitted as a
/// borrower, and the round need not be built: an event that brings a job within its quota costs
/// what the waiting jobs do, not a pass over the running ones.
pub(crate) fn admits_all_within(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    known: &Known<'_>,
    free: &[u32],
    keys: &mut JobKeys,
    scratch: &mut Scratch,
) -> bool {
    let dims = tree.dims.len();
    if let [at] = known.queued[..]
        && !tree.has_limits()
    {
        // One job waits (an arrival, most often), and no limit can be overdrawn: its quota and
        // the free GPUs decide, without copying the counts or the free GPUs.
        let Some(job) = view.jobs.get(at as usize) else {
            return false;
        };
        let (key, leaf, dim) = counted_in(tree, view, known, keys, job);
        if known.held[leaf * dims + dim] + job.gpus <= tree.guaranteed(leaf, dim) {
            // Within its guaranteed quota: nothing is reclaimed for it if a node has room, or
            // if no one borrows (without limits, only a borrower's GPUs can be reclaimed).
            return has_node_with_room(tree, view, free, dim, key, job, &mut scratch.roomy)
                || !tree.borrowed_in(known.held, dim);
        }
        // A borrower, alone: with every idle GPU lendable and no limit, the round admits it if
        // it may be preempted and the cluster has its GPUs free (a node's room is the
        // policy's business), and holds or reclaims nothing.
        return !tree.has_lending_limits()
            && key.preemptible
            && job.gpus <= known.capacity[dim].saturating_sub(known.held[dim]);
    }
    admits_all_within_many(tree, view, known, free, keys, scratch)
}

/// [`admits_all_within`] for several waiting jobs, or under limits.
#[cold]
#[inline(never)]
fn admits_all_within_many(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    known: &Known<'_>,
    free: &[u32],
    keys: &mut JobKeys,
    scratch: &mut Scratch,
) -> bool {
    let dims = tree.dims.len();
    scratch.used.clear();
    scratch.used.extend_from_slice(known.held);
    scratch.order.clear();
    for &at in known.queued {
        let Some(job) = view.jobs.get(at as usize) else {
            return false;
        };
        let (key, leaf, dim) = counted_in(tree, view, known, keys, job);
        if scratch.used[leaf * dims + dim] + job.gpus > tree.guaranteed(leaf, dim) {
            return false;
        }
        tree.add_dim_on_path(&mut scratch.used, leaf, dim, job.gpus, true);
        scratch.order.push((job_order(key, job), at, dim));
    }
    if tree.overdrawn(&scratch.used) {
        return false;
    }
    // Without limits only a borrower's GPUs can be reclaimed: where no one borrows in the
    // jobs' dimensions, their places do not matter (most events with several jobs waiting on a
    // busy cluster whose tenants keep within their quotas).
    if !tree.has_limits()
        && scratch
            .order
            .iter()
            .all(|&(_, _, dim)| !tree.borrowed_in(known.held, dim))
    {
        return true;
    }
    if let [(_, at, dim)] = scratch.order[..]
        && first_fit_node(tree, view, free, dim, &view.jobs[at as usize], 0).is_some()
    {
        // One job (an arrival, most often) that one node holds: no copy of the free GPUs.
        return true;
    }
    scratch.order.sort_unstable();
    // Each on one node, in order, the GPUs taken kept aside (no copy of every node's free GPUs).
    scratch.taken.clear();
    let each_on_one_node = scratch.order.iter().all(|&(_, at, dim)| {
        let job = &view.jobs[at as usize];
        first_fit_node_less(tree, view, free, &scratch.taken, dim, job)
            .map(|n| scratch.taken.push((n, job.gpus)))
            .is_some()
    });
    if each_on_one_node {
        return true;
    }
    // A job no one node holds may take several: placed again on a copy.
    scratch.free.clear();
    scratch.free.extend(free.iter().map(|&f| i64::from(f)));
    scratch.order.iter().all(|&(_, at, dim)| {
        place_first_fit(tree, view, &mut scratch.free, dim, &view.jobs[at as usize])
    })
}

/// A waiting job's key, and the leaf and dimension it counts in given the GPUs held.
fn counted_in(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    known: &Known<'_>,
    keys: &mut JobKeys,
    job: &ActiveJob,
) -> (JobKey, usize, usize) {
    let key = keys.of(tree, view, job);
    let dim = pick_dim(tree, key, job.gpus, known.held, known.capacity);
    (key, key.leaf(), dim)
}

/// Decides the quota tree's round for `view` (see the module's comment).
pub fn plan(tree: &QuotaTree, view: &SchedulerView<'_>, now: SimTime) -> QuotaRound {
    plan_with(
        tree,
        view,
        now,
        None,
        &mut JobKeys::default(),
        QuotaRound::default(),
        true,
    )
}

/// [`plan`], with what the caller knows (`None`: everything is counted from the view), the
/// spec fields kept, the last round to take buffers from, and whether to try holding the
/// waiting jobs by class ([`by_class`]; a round that cannot is then decided job by job).
pub(crate) fn plan_with(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    now: SimTime,
    known: Option<Known<'_>>,
    keys: &mut JobKeys,
    mut recycled: QuotaRound,
    try_by_class: bool,
) -> QuotaRound {
    let dims = tree.dims.len();
    let capacity = known
        .as_ref()
        .map_or_else(|| tree.capacity(view.cluster), |k| k.capacity.to_vec());
    let mut ledger = Ledger {
        tree,
        dims,
        used: vec![0; tree.nodes.len() * dims],
    };
    // The running jobs, with their leaves and GPUs per dimension: counted now, or (with what the
    // caller knows) only when a reclaim needs them.
    let mut running: Option<Vec<(&ActiveJob, usize, ByDim)>> = None;
    match &known {
        Some(k) => ledger.used.copy_from_slice(k.held),
        None => {
            let list = running_jobs(tree, view, None, keys);
            for (_, leaf, by_dim) in &list {
                ledger.add(*leaf, by_dim, true);
            }
            running = Some(list);
        }
    }
    let held = ledger.used.clone();
    // (The last round's buffers, emptied: a full cluster's holds are megabytes, and memory
    // taken fresh at every round is memory the kernel zeroes at every round.)
    let mut round = QuotaRound {
        held: held.clone(),
        holds: std::mem::take(&mut recycled.holds),
        by_class: std::mem::take(&mut recycled.by_class),
        blocked: std::mem::take(&mut recycled.blocked),
        hold_at: std::mem::take(&mut recycled.hold_at),
        ..QuotaRound::default()
    };
    round.holds.clear();
    let queued = known.as_ref().map(|k| k.queued);
    // (Its buffers came from the last round, which may have held by class.)
    round.by_class.forget();
    if try_by_class
        && let Some(waiting) =
            by_class::plan(tree, view, queued, keys, &ledger, &capacity, &mut round)
    {
        round.share = shares(tree, &held, &waiting, &capacity);
        round.admitted_borrowing.sort_unstable();
        round.index_holds(view.specs.len());
        return round;
    }
    let Waiting {
        by_leaf,
        mut wholesale,
        gpus: waiting,
    } = waiting_jobs(tree, view, queued, keys, &ledger, &capacity);
    // Within guaranteed quota: counted first, in each tenant's order.
    let mut within = Vec::new();
    let mut rest: Vec<Vec<Candidate<'_>>> = Vec::with_capacity(by_leaf.len());
    for mut leaf_jobs in by_leaf {
        let leaf = leaf_jobs[0].leaf;
        if (0..dims).all(|d| ledger.used[ledger.at(leaf, d)] > tree.nodes[leaf].quota[d].guaranteed)
        {
            // Above its guaranteed quota everywhere: every job is beyond it.
            rest.push(leaf_jobs);
            continue;
        }
        // (In place: a tenant at its guarantee keeps every job beyond it.)
        leaf_jobs.retain(|c| {
            let g = tree.nodes[c.leaf].quota[c.dim].guaranteed;
            let fits = ledger.used[ledger.at(c.leaf, c.dim)] + c.job.gpus <= g;
            if fits {
                ledger.add_dim(c.leaf, c.dim, c.job.gpus, true);
                within.push(*c);
            }
            !fits
        });
        if !leaf_jobs.is_empty() {
            rest.push(leaf_jobs);
        }
    }
    round.share = shares(tree, &held, &waiting, &capacity);
    if !within.is_empty() || tree.overdrawn(&ledger.used) {
        Waiting::unwholesale(std::mem::take(&mut wholesale), &mut rest, tree, view, keys);
        let running = running.get_or_insert_with(|| running_jobs(tree, view, queued, keys));
        reclaim(tree, view, now, &mut ledger, running, &within, &mut round);
    }
    hold_over_limits(&mut ledger, &mut within, &mut round);
    round.guaranteed_waiting = !within.is_empty();
    admit_borrowers(
        tree,
        &mut ledger,
        rest,
        wholesale,
        &held,
        &capacity,
        &mut round,
    );
    round.reclaimed.sort_unstable();
    round.admitted_borrowing.sort_unstable();
    round.index_holds(view.specs.len());
    round
}

/// The running jobs of `view`, each with its leaf and its GPUs per dimension. With the
/// positions of the waiting jobs (`queued`), the others are the running ones: only they are
/// read (a pass over every job reads a hundred thousand records to find a few thousand).
fn running_jobs<'v>(
    tree: &QuotaTree,
    view: &'v SchedulerView<'_>,
    queued: Option<&[u32]>,
    keys: &mut JobKeys,
) -> Vec<(&'v ActiveJob, usize, ByDim)> {
    let with_keys = |job: &'v ActiveJob, keys: &mut JobKeys| {
        (
            job,
            keys.of(tree, view, job).leaf(),
            running_dims(tree, view, job),
        )
    };
    match queued {
        Some(queued) => {
            let waiting = positions(view.jobs.len(), queued);
            unset(&waiting, view.jobs.len())
                .map(|at| with_keys(&view.jobs[at], keys))
                .collect()
        }
        None => view
            .jobs
            .iter()
            .filter(|j| j.is_running())
            .map(|job| with_keys(job, keys))
            .collect(),
    }
}

/// `at` as a set of bits over `len` positions.
fn positions(len: usize, at: &[u32]) -> Vec<u64> {
    let mut bits = vec![0u64; len.div_ceil(64)];
    for &p in at {
        if let Some(word) = bits.get_mut(p as usize / 64) {
            *word |= 1 << (p % 64);
        }
    }
    bits
}

/// The positions below `len` whose bits are not set in `bits` (beyond its words: none is), in
/// order.
pub(crate) fn unset(bits: &[u64], len: usize) -> impl Iterator<Item = usize> + '_ {
    (0..len.div_ceil(64)).flat_map(move |w| {
        let mut free = !bits.get(w).copied().unwrap_or(0);
        let tail = len - w * 64;
        if tail < 64 {
            free &= (1u64 << tail) - 1;
        }
        std::iter::from_fn(move || {
            (free != 0).then(|| {
                let bit = free.trailing_zeros() as usize;
                free &= free - 1;
                w * 64 + bit
            })
        })
    })
}

/// A running job's GPUs by dimension, by the type of the nodes it runs on.
fn running_dims(tree: &QuotaTree, view: &SchedulerView<'_>, job: &ActiveJob) -> ByDim {
    tree.placement_dims(
        view.cluster,
        job.placement().map(|p| p.slots.as_slice()).unwrap_or(&[]),
    )
}

/// The dimension a waiting job counts in (`used`: GPUs held per node and dimension): its GPU
/// type's, else the first where its tenant has guaranteed quota left, else the one with the most
/// free GPUs (Kueue's flavor order, in small). Inline for the common answers (a typed job, a
/// tree of one dimension), read for every waiting job; the search out of line.
#[inline]
fn pick_dim(tree: &QuotaTree, key: JobKey, gpus: u32, used: &[u32], capacity: &[u32]) -> usize {
    match key.typed_dim {
        Some(d) => usize::from(d),
        None if tree.dims.len() == 1 => 0,
        None => pick_untyped_dim(tree, key, gpus, used, capacity),
    }
}

/// [`pick_dim`] for a job of no GPU type in a tree of several dimensions.
#[inline(never)]
fn pick_untyped_dim(
    tree: &QuotaTree,
    key: JobKey,
    gpus: u32,
    used: &[u32],
    capacity: &[u32],
) -> usize {
    let dims = tree.dims.len();
    let leaf = key.leaf as usize;
    (0..dims)
        .find(|&d| used[leaf * dims + d] + gpus <= tree.nodes[leaf].quota[d].guaranteed)
        .unwrap_or_else(|| {
            (0..dims)
                .max_by_key(|&d| (capacity[d].saturating_sub(used[d]), Reverse(d)))
                .unwrap_or(0)
        })
}

/// The order of a tenant's waiting jobs: class, then priority, higher first; then submission.
type JobOrder = (Reverse<i32>, Reverse<i32>, SimTime, JobId);

fn job_order(key: JobKey, job: &ActiveJob) -> JobOrder {
    (
        Reverse(key.class),
        Reverse(key.priority),
        job.submit,
        job.id,
    )
}

/// Waiting jobs by leaf, each leaf's in its tenant's order (class, then priority, higher
/// first; then submission), each in a dimension: its GPU type's, else the first where its
/// tenant has guaranteed quota left, else the one with the most free GPUs (Kueue's flavor
/// order, in small).
fn waiting_jobs<'v>(
    tree: &QuotaTree,
    view: &'v SchedulerView<'_>,
    queued: Option<&[u32]>,
    keys: &mut JobKeys,
    ledger: &Ledger<'_>,
    capacity: &[u32],
) -> Waiting<'v> {
    let dims = tree.dims.len();
    let mut by_leaf: Vec<Vec<Candidate<'v>>> = (0..tree.nodes.len()).map(|_| Vec::new()).collect();
    let mut wholesale: Vec<Vec<Wholesale<'v>>> =
        (0..tree.nodes.len()).map(|_| Vec::new()).collect();
    // With no GPU left, a tenant at or above its guaranteed quota has nothing to admit: its
    // jobs are all held (unless a reclaim frees GPUs), and their order does not matter.
    let full = (0..dims).all(|d| ledger.used[ledger.at(0, d)] >= capacity[d]);
    let saturated: Vec<bool> = (0..tree.nodes.len())
        .map(|leaf| {
            full && (0..dims)
                .all(|d| ledger.used[ledger.at(leaf, d)] >= tree.nodes[leaf].quota[d].guaranteed)
        })
        .collect();
    let waiting: Box<dyn Iterator<Item = &'v ActiveJob>> = match queued {
        Some(positions) => Box::new(positions.iter().filter_map(|&i| view.jobs.get(i as usize))),
        None => Box::new(view.jobs.iter().filter(|j| !j.is_running())),
    };
    let mut waiting_gpus = vec![0u64; tree.nodes.len() * dims];
    for job in waiting {
        let key = keys.of(tree, view, job);
        let leaf = key.leaf as usize;
        let dim = pick_dim(tree, key, job.gpus, &ledger.used, capacity);
        waiting_gpus[leaf * dims + dim] += u64::from(job.gpus);
        if saturated[leaf] && job.gpus > 0 {
            wholesale[leaf].push(Wholesale {
                job,
                dim,
                preemptible: key.preemptible,
            });
            continue;
        }
        let order = job_order(key, job);
        by_leaf[leaf].push(Candidate {
            job,
            preemptible: key.preemptible,
            leaf,
            dim,
            order,
        });
    }
    // A tenant's order decides which of its jobs are within its guaranteed quota, where it has
    // some left; the borrowers are taken in order as they are admitted.
    for (leaf, leaf_jobs) in by_leaf.iter_mut().enumerate() {
        if (0..dims).any(|d| ledger.used[ledger.at(leaf, d)] < tree.nodes[leaf].quota[d].guaranteed)
        {
            leaf_jobs.sort_unstable_by_key(|c| c.order);
        }
    }
    by_leaf.retain(|l| !l.is_empty());
    Waiting {
        by_leaf,
        wholesale,
        gpus: waiting_gpus.into_iter().map(|g| g as f64).collect(),
    }
}

/// The waiting jobs of a round.
struct Waiting<'v> {
    /// Per leaf with jobs, in its tenant's order where it has guaranteed quota left.
    by_leaf: Vec<Vec<Candidate<'v>>>,
    /// Per leaf: its jobs held wholesale (see [`Wholesale`]).
    wholesale: Vec<Vec<Wholesale<'v>>>,
    /// GPUs waiting per leaf and dimension.
    gpus: Vec<f64>,
}

impl<'v> Waiting<'v> {
    /// The jobs held wholesale as candidates after the others of their leaf in `rest` (a
    /// reclaim is about to free GPUs: they may be admitted after all).
    fn unwholesale(
        wholesale: Vec<Vec<Wholesale<'v>>>,
        rest: &mut Vec<Vec<Candidate<'v>>>,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        keys: &mut JobKeys,
    ) {
        for (leaf, jobs) in wholesale.into_iter().enumerate() {
            if jobs.is_empty() {
                continue;
            }
            let candidates = jobs.into_iter().map(|w| Candidate {
                job: w.job,
                preemptible: w.preemptible,
                leaf,
                dim: w.dim,
                order: job_order(keys.of(tree, view, w.job), w.job),
            });
            match rest.iter_mut().find(|l| l[0].leaf == leaf) {
                Some(list) => list.extend(candidates),
                None => rest.push(candidates.collect()),
            }
        }
        rest.sort_by_key(|l| l[0].leaf);
    }
}

/// Fair shares: each node's demand is what it holds and waits for (`waiting`: GPUs per leaf and
/// dimension), up to its limit.
fn shares(tree: &QuotaTree, held: &[u32], waiting: &[f64], capacity: &[u32]) -> Vec<f64> {
    let dims = tree.dims.len();
    let mut demand: Vec<f64> = held.iter().map(|&h| f64::from(h)).collect();
    for leaf in 0..tree.nodes.len() {
        for d in 0..dims {
            let w = waiting[leaf * dims + d];
            if w > 0.0 {
                demand[d] += w;
                for &n in tree.path(leaf) {
                    demand[n * dims + d] += w;
                }
            }
        }
    }
    for (n, node) in tree.nodes.iter().enumerate() {
        for d in 0..dims {
            demand[n * dims + d] = demand[n * dims + d].min(f64::from(node.quota[d].limit()));
        }
    }
    let mut share = vec![0.0; tree.nodes.len() * dims];
    for d in 0..dims {
        let by_node: Vec<f64> = (0..tree.nodes.len())
            .map(|n| demand[n * dims + d])
            .collect();
        for (n, x) in entitlements(tree, d, capacity[d], &by_node)
            .into_iter()
            .enumerate()
        {
            share[n * dims + d] = x;
        }
    }
    share
}

/// GPU-seconds a running job loses if stopped now: its GPUs times how long this stint ran
/// (what a job without a fresh checkpoint redoes).
fn lost_gpu_s(job: &ActiveJob, now: SimTime) -> f64 {
    match &job.state {
        arbiter_model::RunState::Running { since, .. } => {
            f64::from(job.gpus) * now.saturating_since(*since).as_secs_f64()
        }
        arbiter_model::RunState::Pending => 0.0,
    }
}

/// Reclaims borrowers where guaranteed jobs need their GPUs: first where a limit on the tree is
/// overdrawn once guaranteed jobs count (deepest first), then where a guaranteed job finds no
/// GPUs to be placed on. Candidates are preemptible jobs of tenants above their fair share,
/// lowest class first, then fewest GPU-seconds lost.
#[allow(clippy::too_many_arguments)]
fn reclaim(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    now: SimTime,
    ledger: &mut Ledger<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    within: &[Candidate<'_>],
    round: &mut QuotaRound,
) {
    let dims = tree.dims.len();
    let mut victims = Victims {
        taken: vec![false; running.len()],
        order: None,
        rank: None,
    };
    for scope in (1..tree.nodes.len()).rev() {
        for d in 0..dims {
            let mut excess = i64::from(ledger.used[ledger.at(scope, d)])
                - i64::from(tree.nodes[scope].quota[d].limit());
            if excess <= 0 {
                continue;
            }
            victims.ensure_order(view, now, running);
            for i in victims.candidates(view, running, |i| {
                running[i].2[d] > 0 && tree.contains(scope, running[i].1)
            }) {
                if excess <= 0 {
                    break;
                }
                if victims.take(i, d, ledger, running, round, false) {
                    excess -= i64::from(running[i].2[d]);
                }
            }
        }
    }
    reclaim_for_placement(
        tree,
        view,
        now,
        ledger,
        running,
        within,
        &mut victims,
        round,
    );
}

/// Which running jobs are reclaimed, and in what order they are candidates.
struct Victims {
    taken: Vec<bool>,
    /// Made when first needed: most rounds reclaim nothing.
    order: Option<Vec<usize>>,
    /// Each running job's position in `order`.
    rank: Option<Vec<usize>>,
}

impl Victims {
    /// Puts the running jobs in victim order, once.
    fn ensure_order(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
        running: &[(&ActiveJob, usize, ByDim)],
    ) {
        if self.order.is_none() {
            let order = victim_order(view, now, running);
            let mut rank = vec![0; order.len()];
            for (at, &i) in order.iter().enumerate() {
                rank[i] = at;
            }
            self.order = Some(order);
            self.rank = Some(rank);
        }
    }

    /// Candidates not yet taken that are preemptible and pass `keep`, in victim order.
    fn candidates(
        &self,
        view: &SchedulerView<'_>,
        running: &[(&ActiveJob, usize, ByDim)],
        keep: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        self.order
            .iter()
            .flatten()
            .copied()
            .filter(|&i| !self.taken[i] && view.spec(running[i].0).class.preemptible && keep(i))
            .collect()
    }

    /// Takes candidate `i` if its tenant is still above its fair share in `dim` (with
    /// `to_guaranteed`, above its guaranteed quota: a guaranteed job that finds no node may take
    /// any borrower's GPUs).
    fn take(
        &mut self,
        i: usize,
        dim: usize,
        ledger: &mut Ledger<'_>,
        running: &[(&ActiveJob, usize, ByDim)],
        round: &mut QuotaRound,
        to_guaranteed: bool,
    ) -> bool {
        let (job, leaf, by_dim) = &running[i];
        let above = if to_guaranteed {
            ledger.above_guaranteed(*leaf, dim)
        } else {
            ledger.above(*leaf, dim, round.share[*leaf * ledger.dims + dim])
        };
        if self.taken[i] || !above {
            return false;
        }
        self.taken[i] = true;
        ledger.add(*leaf, by_dim, false);
        round.reclaimed.push(job.id);
        true
    }
}

/// Running jobs by victim order: lowest class, then fewest GPU-seconds lost, then id.
fn victim_order(
    view: &SchedulerView<'_>,
    now: SimTime,
    running: &[(&ActiveJob, usize, ByDim)],
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..running.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |i: usize| {
            (
                view.spec(running[i].0).class.value,
                lost_gpu_s(running[i].0, now),
                running[i].0.id,
            )
        };
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.cmp(&kb.2))
    });
    order
}

/// Places the guaranteed jobs, in their order, on the GPUs left free (the first node with
/// room, as the default consolidated placement does; across nodes for a job larger than a
/// node); at the first that does not fit, reclaims candidates — on the one node that makes room
/// with the fewest, or across nodes — and places them all again, until each fits or nothing more
/// can be reclaimed for it (each pass reclaims at least one job, so this ends).
#[allow(clippy::too_many_arguments)]
fn reclaim_for_placement(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    now: SimTime,
    ledger: &mut Ledger<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    within: &[Candidate<'_>],
    victims: &mut Victims,
    round: &mut QuotaRound,
) {
    if within.is_empty() {
        return;
    }
    let mut order: Vec<&Candidate<'_>> = within.iter().collect();
    order.sort_by_key(|c| c.order);
    'pass: loop {
        let (mut free, on_node) = free_gpus(view, running, victims);
        // The guaranteed jobs placed this pass, in order.
        let mut placed: Vec<&Candidate<'_>> = Vec::new();
        for &c in &order {
            if place_first_fit(tree, view, &mut free, c.dim, c.job) {
                placed.push(c);
                continue;
            }
            let k = i64::from(c.job.gpus);
            let (of_dim, widest) = nodes_for(tree, view, c.dim, c.job);
            victims.ensure_order(view, now, running);
            // Only a job whose tenant is above its guaranteed quota can be taken (`take`): a plan
            // counting on any other job (the owner's own, or a tenant within its guarantee)
            // would reclaim nothing, and the owner would wait behind borrowers.
            let takeable = |i: usize| ledger.above_guaranteed(running[i].1, c.dim);
            let picked = if k <= widest {
                cheapest_node(
                    view, running, victims, &takeable, &free, &on_node, &of_dim, k,
                )
            } else {
                across_nodes(
                    view, running, victims, &takeable, &free, &on_node, &of_dim, k,
                )
            };
            let mut took = false;
            for i in picked {
                took |= victims.take(i, c.dim, ledger, running, round, true);
            }
            if !took {
                // No one node's borrowers make room for it beside the guaranteed jobs placed
                // before it: the room may be where one of those went (first fit gave a small
                // job the node only this one could use). Plan for them all together.
                let base = free_gpus(view, running, victims).0;
                for i in reclaim_to_fit(tree, view, running, victims, ledger, &base, &placed, c) {
                    took |= victims.take(i, c.dim, ledger, running, round, true);
                }
            }
            if took {
                continue 'pass;
            }
        }
        return;
    }
}

/// The borrowers to reclaim so that first fit places `c` after the guaranteed jobs `placed`
/// before it (in their order, as the policy will), if it would with every borrower of `c`'s
/// dimension gone (else none): the shortest run of them in victim order that does, less every
/// one of those that can stay (the dearest to lose tried first). Found by doubling and halving
/// the run, so that a round with thousands of borrowers tries a few dozen placements, not one
/// per borrower.
#[allow(clippy::too_many_arguments)]
fn reclaim_to_fit(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    victims: &Victims,
    ledger: &Ledger<'_>,
    base: &[i64],
    placed: &[&Candidate<'_>],
    c: &Candidate<'_>,
) -> Vec<usize> {
    let mut chosen = victims.candidates(view, running, |i| {
        running[i].2[c.dim] > 0 && ledger.above_guaranteed(running[i].1, c.dim)
    });
    let fits = |set: &[usize]| {
        let mut free = base.to_vec();
        for &i in set {
            for &(node, gpus) in running[i].0.placement().map_or(&[][..], |p| &p.slots) {
                if let Some(f) = free.get_mut(node.index()) {
                    *f += i64::from(gpus);
                }
            }
        }
        placed
            .iter()
            .chain([&c])
            .all(|p| place_first_fit(tree, view, &mut free, p.dim, p.job))
    };
    if chosen.is_empty() || !fits(&chosen) {
        return Vec::new();
    }
    // The shortest run from the cheapest that fits: `short` too few, `enough` enough.
    let (mut short, mut enough) = (0, 1);
    while enough < chosen.len() && !fits(&chosen[..enough]) {
        (short, enough) = (enough, (enough * 2).min(chosen.len()));
    }
    while enough - short > 1 {
        let mid = short + (enough - short) / 2;
        if fits(&chosen[..mid]) {
            enough = mid;
        } else {
            short = mid;
        }
    }
    chosen.truncate(enough);
    // Within it, the last are the dearest to lose: each stays if the rest still make room.
    if chosen.len() <= PRUNED_AT_MOST {
        for at in (0..chosen.len()).rev() {
            let i = chosen.remove(at);
            if !fits(&chosen) {
                chosen.insert(at, i);
            }
        }
    }
    chosen
}

/// The most victims [`reclaim_to_fit`] tries to spare one by one.
const PRUNED_AT_MOST: usize = 64;

/// The nodes of dimension `dim` that `job` may run on (its GPU type's, when it names one), and
/// the most GPUs one of them has.
fn nodes_for(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    dim: usize,
    job: &ActiveJob,
) -> (Vec<usize>, i64) {
    let nodes = &view.cluster.nodes;
    let typed = view.spec(job).gpu_type;
    let of_dim: Vec<usize> = (0..nodes.len())
        .filter(|&n| {
            tree.dim_of_type.get(nodes[n].gpu_type.index()) == Some(&dim)
                && typed.is_none_or(|t| nodes[n].gpu_type == t)
        })
        .collect();
    let widest = of_dim
        .iter()
        .map(|&n| i64::from(nodes[n].gpus))
        .max()
        .unwrap_or(0);
    (of_dim, widest)
}

/// Takes `job`'s GPUs from `free` as the default consolidated placement would: on the first
/// node of dimension `dim` (and of its GPU type) with room, or across them for a job larger than
/// the widest. Whether it could. The nodes are listed only when no one node has room.
fn place_first_fit(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    free: &mut [i64],
    dim: usize,
    job: &ActiveJob,
) -> bool {
    let k = i64::from(job.gpus);
    if let Some(n) = first_fit_node(tree, view, free, dim, job, 0) {
        // (No node is wider than its GPUs, so a job a node can hold is placed on one.)
        free[n] -= k;
        return true;
    }
    let (of_dim, widest) = nodes_for(tree, view, dim, job);
    k > widest && take_across(free, &of_dim, k)
}

/// Whether some node of dimension `dim` (and of `job`'s GPU type) has room for it in `free`:
/// `hint`, the node that had room last time, is looked at first (the free GPUs change little
/// from one event to the next), and becomes the node found. Where every node will do (one
/// dimension counts every GPU, and the job's `key` names no type), a node's type is not read.
fn has_node_with_room(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    free: &[u32],
    dim: usize,
    key: JobKey,
    job: &ActiveJob,
    hint: &mut usize,
) -> bool {
    let any_node = key.typed_dim.is_none() && tree.counts_all_types();
    if let Some(&f) = free.get(*hint)
        && f >= job.gpus
        && (any_node || room_on(tree, view, dim, job, *hint))
    {
        return true;
    }
    match first_fit_node(tree, view, free, dim, job, 0) {
        Some(n) => {
            *hint = n;
            true
        }
        None => false,
    }
}

/// Whether node `n` is of dimension `dim` and of `job`'s GPU type, if it names one.
fn room_on(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    dim: usize,
    job: &ActiveJob,
    n: usize,
) -> bool {
    let Some(node) = view.cluster.nodes.get(n) else {
        return false;
    };
    tree.dim_of_type.get(node.gpu_type.index()) == Some(&dim)
        && view.spec(job).gpu_type.is_none_or(|t| node.gpu_type == t)
}

/// The first node from `from` on of dimension `dim` (and of `job`'s GPU type) with room for it
/// in `free`.
fn first_fit_node<F: Copy + Into<i64>>(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    free: &[F],
    dim: usize,
    job: &ActiveJob,
    from: usize,
) -> Option<usize> {
    let k = i64::from(job.gpus);
    let nodes = &view.cluster.nodes;
    let end = nodes.len().min(free.len());
    let typed = view.spec(job).gpu_type;
    if typed.is_none() && tree.counts_all_types() {
        // Any node will do: only the free GPUs are read (not every node's type).
        return first_with_room(free.get(from..end)?, k).map(|at| from + at);
    }
    (from..end).find(|&n| {
        free[n].into() >= k
            && tree.dim_of_type.get(nodes[n].gpu_type.index()) == Some(&dim)
            && typed.is_none_or(|t| nodes[n].gpu_type == t)
    })
}

/// The first of `free` (GPUs per node) at `k` or more. Looked at eight at a time, each block
/// with one test the compiler makes branch-free (a full cluster's first node with room is
/// often hundreds in: a test and a branch per node cost most of an event that places two
/// jobs), then within the block that has one.
#[inline]
fn first_with_room<F: Copy + Into<i64>>(free: &[F], k: i64) -> Option<usize> {
    const BLOCK: usize = 8;
    let mut blocks = free.chunks_exact(BLOCK);
    let mut base = 0;
    for block in &mut blocks {
        if block.iter().fold(false, |any, &f| any | (f.into() >= k)) {
            return block
                .iter()
                .position(|&f| f.into() >= k)
                .map(|at| base + at);
        }
        base += BLOCK;
    }
    blocks
        .remainder()
        .iter()
        .position(|&f| f.into() >= k)
        .map(|at| base + at)
}

/// [`first_fit_node`] on `free` less the GPUs `taken` (node, GPUs) by the jobs placed before.
fn first_fit_node_less(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    free: &[u32],
    taken: &[(usize, u32)],
    dim: usize,
    job: &ActiveJob,
) -> Option<usize> {
    let mut from = 0;
    loop {
        let n = first_fit_node(tree, view, free, dim, job, from)?;
        let gone: u32 = taken.iter().filter(|(t, _)| *t == n).map(|(_, g)| g).sum();
        if free[n] - gone >= job.gpus {
            return Some(n);
        }
        from = n + 1;
    }
}

/// Free GPUs per node with the reclaimed jobs gone, and the other running jobs on each node.
fn free_gpus(
    view: &SchedulerView<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    victims: &Victims,
) -> (Vec<i64>, Vec<Vec<usize>>) {
    let mut free: Vec<i64> = view
        .cluster
        .nodes
        .iter()
        .map(|n| i64::from(n.gpus))
        .collect();
    let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); free.len()];
    for (i, (job, _, _)) in running
        .iter()
        .enumerate()
        .filter(|(i, _)| !victims.taken[*i])
    {
        for &(node, gpus) in job.placement().map(|p| p.slots.as_slice()).unwrap_or(&[]) {
            if let Some(f) = free.get_mut(node.index()) {
                *f -= i64::from(gpus);
                on_node[node.index()].push(i);
            }
        }
    }
    (free, on_node)
}

/// Takes `k` GPUs across `nodes` if they have them together.
fn take_across(free: &mut [i64], nodes: &[usize], k: i64) -> bool {
    if nodes.iter().map(|&n| free[n].max(0)).sum::<i64>() < k {
        return false;
    }
    let mut need = k;
    for &n in nodes {
        let got = free[n].max(0).min(need);
        free[n] -= got;
        need -= got;
    }
    true
}

/// The candidates (in victim order, `takeable` ones only) whose reclaim makes room for `k` GPUs
/// on one node: the node that needs the fewest. Each node's own jobs are looked at, not every
/// running job per node.
#[allow(clippy::too_many_arguments)]
fn cheapest_node(
    view: &SchedulerView<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    victims: &Victims,
    takeable: &dyn Fn(usize) -> bool,
    free: &[i64],
    on_node: &[Vec<usize>],
    nodes: &[usize],
    k: i64,
) -> Vec<usize> {
    let rank = victims.rank.as_deref().unwrap_or(&[]);
    let plans = nodes.iter().filter_map(|&n| {
        let mut here: Vec<usize> = on_node[n]
            .iter()
            .copied()
            .filter(|&i| {
                !victims.taken[i] && view.spec(running[i].0).class.preemptible && takeable(i)
            })
            .collect();
        here.sort_unstable_by_key(|&i| rank.get(i).copied().unwrap_or(usize::MAX));
        here.dedup();
        let mut room = free[n];
        let mut picked = Vec::new();
        for i in here {
            if room >= k {
                break;
            }
            room += i64::from(running[i].2.iter().sum::<u32>());
            picked.push(i);
        }
        (room >= k).then_some((picked.len(), n, picked))
    });
    plans
        .min_by_key(|(count, n, _)| (*count, *n))
        .map(|(_, _, picked)| picked)
        .unwrap_or_default()
}

/// The candidates (in victim order, `takeable` ones only) whose reclaim frees `k` GPUs across
/// `nodes`.
#[allow(clippy::too_many_arguments)]
fn across_nodes(
    view: &SchedulerView<'_>,
    running: &[(&ActiveJob, usize, ByDim)],
    victims: &Victims,
    takeable: &dyn Fn(usize) -> bool,
    free: &[i64],
    on_node: &[Vec<usize>],
    nodes: &[usize],
    k: i64,
) -> Vec<usize> {
    let mut total: i64 = nodes.iter().map(|&n| free[n].max(0)).sum();
    let mut picked = Vec::new();
    for i in victims.candidates(view, running, |i| {
        takeable(i) && nodes.iter().any(|&n| on_node[n].contains(&i))
    }) {
        if total >= k {
            break;
        }
        total += i64::from(running[i].2.iter().sum::<u32>());
        picked.push(i);
    }
    picked
}

/// Guaranteed jobs that would still overdraw a limit (borrowers that cannot be reclaimed hold
/// it) wait, the last in their tenant's order first.
fn hold_over_limits(
    ledger: &mut Ledger<'_>,
    within: &mut Vec<Candidate<'_>>,
    round: &mut QuotaRound,
) {
    let tree = ledger.tree;
    for i in (0..within.len()).rev() {
        let c = &within[i];
        let over = tree
            .path(c.leaf)
            .iter()
            .copied()
            .find(|&n| ledger.used[ledger.at(n, c.dim)] > tree.nodes[n].quota[c.dim].limit());
        if let Some(node) = over {
            let used = ledger.used[ledger.at(node, c.dim)] - c.job.gpus;
            round.holds.push((
                c.job.id,
                QuotaHold::Limit {
                    node,
                    dim: c.dim,
                    limit: tree.nodes[node].quota[c.dim].limit(),
                    used,
                    gpus: c.job.gpus,
                },
            ));
            ledger.add_dim(c.leaf, c.dim, c.job.gpus, false);
            within.remove(i);
        }
    }
}

/// Jobs beyond guaranteed quota, least-borrowed tenant (per over-quota weight) first — each
/// tenant's in its order, merged across tenants by what they would have borrowed with it —
/// each admitted if its path leaves room, else held with the constraint that binds. The room of
/// a leaf is computed once and again only after an admission (a full cluster holds thousands
/// of jobs at the cost of one).
#[allow(clippy::too_many_arguments)]
fn admit_borrowers(
    tree: &QuotaTree,
    ledger: &mut Ledger<'_>,
    rest: Vec<Vec<Candidate<'_>>>,
    wholesale: Vec<Vec<Wholesale<'_>>>,
    held: &[u32],
    capacity: &[u32],
    round: &mut QuotaRound,
) {
    let dims = tree.dims.len();
    if (0..dims).all(|d| ledger.used[ledger.at(0, d)] >= capacity[d]) {
        // No GPU left anywhere: nothing can be admitted, so the order does not matter; a leaf's
        // room is the same for each of its jobs.
        round.holds.reserve(
            rest.iter().map(Vec::len).sum::<usize>()
                + wholesale.iter().map(Vec::len).sum::<usize>(),
        );
        let mut lists = rest.iter().peekable();
        // (Leaf by leaf as `rest` lists them, each leaf's jobs held wholesale after its others.)
        for leaf in 0..tree.nodes.len() {
            let candidates = lists.next_if(|l| l[0].leaf == leaf).into_iter().flatten();
            let jobs = candidates.map(|c| (c.job, c.dim, c.preemptible)).chain(
                wholesale
                    .get(leaf)
                    .into_iter()
                    .flatten()
                    .map(|w| (w.job, w.dim, w.preemptible)),
            );
            let mut hold_of: SmallVec<[Option<QuotaHold>; 2]> = smallvec::smallvec![None; dims];
            for (job, dim, preemptible) in jobs {
                let hold = if preemptible {
                    hold_of[dim]
                        .get_or_insert_with(|| {
                            let (room, binding) = ledger.room(leaf, dim, capacity[dim]);
                            ledger.hold_for(dim, job.gpus, room, binding)
                        })
                        .with_gpus(job.gpus)
                } else {
                    QuotaHold::NotPreemptible { dim }
                };
                round.holds.push((job.id, hold));
            }
        }
        return;
    }
    debug_assert!(
        wholesale.iter().all(Vec::is_empty),
        "held wholesale only while full"
    );
    // Each tenant's jobs in its order, taken lazily: once no waiting job fits the free GPUs,
    // every one left is held with its leaf's room, in any order (a cluster with a few GPUs free
    // holds most of a hundred thousand jobs at the cost of a heap, not of a sort).
    let mut queues: Vec<BinaryHeap<Reverse<(JobOrder, usize)>>> = rest
        .iter()
        .map(|l| {
            l.iter()
                .enumerate()
                .map(|(i, c)| Reverse((c.order, i)))
                .collect()
        })
        .collect();
    let mut smallest: ByDim = smallvec::smallvec![u32::MAX; dims];
    for c in rest.iter().flatten() {
        smallest[c.dim] = smallest[c.dim].min(c.job.gpus);
    }
    let nothing_fits = |ledger: &Ledger<'_>| {
        (0..dims).all(|d| capacity[d].saturating_sub(ledger.used[ledger.at(0, d)]) < smallest[d])
    };
    // Per leaf list: what its tenant would have borrowed by then, per dimension.
    let mut borrowed: Vec<ByDim> = rest
        .iter()
        .map(|l| {
            (0..dims)
                .map(|d| {
                    held[l[0].leaf * dims + d]
                        .saturating_sub(tree.nodes[l[0].leaf].quota[d].guaranteed)
                })
                .collect()
        })
        .collect();
    let key = |c: &Candidate<'_>, borrowed: &ByDim| {
        let after = f64::from(borrowed[c.dim] + c.job.gpus) / tree.nodes[c.leaf].weight;
        (crate::order_key(after), c.order)
    };
    let mut heap = BinaryHeap::new();
    for (l, queue) in queues.iter().enumerate() {
        if let Some(Reverse((_, i))) = queue.peek() {
            heap.push(Reverse((key(&rest[l][*i], &borrowed[l]), l)));
        }
    }
    let mut room_of: Vec<Option<(u32, Option<usize>)>> = vec![None; tree.nodes.len() * dims];
    // A leaf's room in a dimension, computed once until the next admission.
    let room = |c: &Candidate<'_>, ledger: &Ledger<'_>, room_of: &mut [Option<_>]| {
        *room_of[c.leaf * dims + c.dim]
            .get_or_insert_with(|| ledger.room(c.leaf, c.dim, capacity[c.dim]))
    };
    let hold = |c: &Candidate<'_>, ledger: &Ledger<'_>, room_of: &mut [Option<_>]| {
        if !c.preemptible {
            return QuotaHold::NotPreemptible { dim: c.dim };
        }
        let (room, binding) = room(c, ledger, room_of);
        ledger.hold_for(c.dim, c.job.gpus, room, binding)
    };
    let mut full = nothing_fits(ledger);
    // Per leaf list: the positions taken in order (few: the free GPUs run out).
    let mut taken: Vec<Vec<usize>> = vec![Vec::new(); rest.len()];
    while !full && let Some(Reverse((_, l))) = heap.pop() {
        let Some(Reverse((_, i))) = queues[l].pop() else {
            continue;
        };
        taken[l].push(i);
        let c = &rest[l][i];
        borrowed[l][c.dim] += c.job.gpus;
        if let Some(Reverse((_, n))) = queues[l].peek() {
            heap.push(Reverse((key(&rest[l][*n], &borrowed[l]), l)));
        }
        if c.preemptible && c.job.gpus <= room(c, ledger, &mut room_of).0 {
            ledger.add_dim(c.leaf, c.dim, c.job.gpus, true);
            round.admitted_borrowing.push(c.job.id);
            room_of.iter_mut().for_each(|r| *r = None);
            full = nothing_fits(ledger);
            continue;
        }
        round.holds.push((c.job.id, hold(c, ledger, &mut room_of)));
    }
    drop(queues);
    round
        .holds
        .reserve(rest.iter().map(Vec::len).sum::<usize>());
    for (list, mut taken) in rest.iter().zip(taken) {
        taken.sort_unstable();
        let mut taken = taken.into_iter().peekable();
        for (i, c) in list.iter().enumerate() {
            if taken.next_if_eq(&i).is_none() {
                round.holds.push((c.job.id, hold(c, ledger, &mut room_of)));
            }
        }
    }
}

/// What the running jobs of a view hold in a tree, worked out when asked (the daemon's `GET
/// /v1/quotas`), not at every round: a pass over every running job no decision needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunningUse {
    /// GPUs held per node and dimension (`node * dims + dim`).
    pub held: Vec<u32>,
    /// The running jobs beyond their tenant's guaranteed quota — reclaimable, should the owner
    /// of the quota they borrow need it — sorted by id: each tenant's jobs of the highest class
    /// and oldest start fill its guaranteed quota first.
    pub borrowers: Vec<JobId>,
}

/// [`RunningUse`] of the running jobs of `view`.
pub fn running_use(tree: &QuotaTree, view: &SchedulerView<'_>) -> RunningUse {
    let mut keys = JobKeys::default();
    let running = running_jobs(tree, view, None, &mut keys);
    let mut ledger = Ledger {
        tree,
        dims: tree.dims.len(),
        used: vec![0; tree.nodes.len() * tree.dims.len()],
    };
    for (_, leaf, by_dim) in &running {
        ledger.add(*leaf, by_dim, true);
    }
    let borrowers = borrowing(tree, view, &mut keys, &running, &ledger.used);
    RunningUse {
        held: ledger.used,
        borrowers,
    }
}

/// [`RunningUse::borrowers`] among `running` (job, leaf, GPUs per dimension), given the GPUs they `held`
/// per node and dimension.
fn borrowing(
    tree: &QuotaTree,
    view: &SchedulerView<'_>,
    keys: &mut JobKeys,
    running: &[(&ActiveJob, usize, ByDim)],
    held: &[u32],
) -> Vec<JobId> {
    let dims = tree.dims.len();
    // Only tenants above their guaranteed quota have jobs beyond it.
    let over = |leaf: usize| {
        (0..dims).any(|d| held[leaf * dims + d] > tree.nodes[leaf].quota[d].guaranteed)
    };
    let mut order: Vec<&(&ActiveJob, usize, ByDim)> =
        running.iter().filter(|(_, leaf, _)| over(*leaf)).collect();
    order.sort_by_cached_key(|(j, leaf, _)| {
        (
            *leaf,
            Reverse(keys.of(tree, view, j).class),
            j.first_start,
            j.id,
        )
    });
    let mut filled = vec![0u32; tree.nodes.len() * dims];
    let mut out = Vec::new();
    for (job, leaf, by_dim) in order {
        let mut beyond = false;
        for d in 0..dims {
            filled[leaf * dims + d] += by_dim[d];
            beyond |=
                by_dim[d] > 0 && filled[leaf * dims + d] > tree.nodes[*leaf].quota[d].guaranteed;
        }
        if beyond {
            out.push(job.id);
        }
    }
    out.sort_unstable();
    out
}
