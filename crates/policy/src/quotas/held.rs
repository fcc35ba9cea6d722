//! GPUs the running jobs hold per node of the quota tree, kept between rounds when the caller
//! keeps the present (the simulator's `SchedulerView::current`): a round then costs what waits,
//! not every running job. Updated from the wrapper's own decisions and the jobs that finish;
//! counted again from the view whenever the number of running jobs says something else happened
//! (a failure, a reservation's preemption) — jobs only leave the running set without a decision.
//!
//! Kept flat and small: per job one entry of `1 + dims` numbers in one array (its leaf, then its
//! GPUs per dimension), and a count of the running jobs rather than a list. The simulator
//! touches a job's entry when it starts and when it ends, far apart in time, so each touch is
//! likely a cache miss; one entry is one miss (a list of the running jobs, which a job leaves by
//! swapping the last into its place, cost a second one per end: the moved job's place).

use super::round::{JobKeys, Known};
use super::tree::QuotaTree;
use crate::SchedulerView;
use arbiter_model::{Decision, JobId, NodeId};

/// The running jobs' GPUs, per tree node and dimension.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Per job id, `1 + dims` numbers: its leaf plus one while it runs (0: it does not), then
    /// the GPUs it holds per dimension.
    entries: Vec<u32>,
    /// How many jobs run, as counted.
    running: usize,
    /// GPUs held per node and dimension (`node * dims + dim`).
    pub per_node: Vec<u32>,
    /// GPUs per dimension.
    pub capacity: Vec<u32>,
    /// Dimensions of the tree counted for.
    dims: usize,
    /// Job ids the entries cover (kept: a division per event otherwise).
    jobs: usize,
    /// Whether the counts are those of the last view.
    valid: bool,
}

impl Held {
    /// Counts from `view` again unless the counts kept agree with it (`queued` jobs waiting).
    #[inline]
    pub fn refresh(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        queued: usize,
        keys: &mut JobKeys,
    ) {
        if self.valid && self.running == view.jobs.len() - queued && self.jobs == view.specs.len() {
            return;
        }
        self.count_again(tree, view, keys);
    }

    /// Counts every running job of `view` afresh.
    #[cold]
    #[inline(never)]
    fn count_again(&mut self, tree: &QuotaTree, view: &SchedulerView<'_>, keys: &mut JobKeys) {
        self.dims = tree.dims.len();
        self.entries.clear();
        self.entries.resize(view.specs.len() * self.stride(), 0);
        self.jobs = view.specs.len();
        self.running = 0;
        self.per_node = vec![0; tree.nodes.len() * self.dims];
        self.capacity = tree.capacity(view.cluster);
        for job in view.jobs.iter().filter(|j| j.is_running()) {
            let slots = job.placement().map(|p| p.slots.as_slice()).unwrap_or(&[]);
            self.start(tree, view, keys, job.id, slots);
        }
        self.valid = true;
    }

    /// Numbers per job in `entries`.
    fn stride(&self) -> usize {
        1 + self.dims
    }

    /// The counts brought up to date for `view` ([`Held::refresh`]; `queued`: the positions of
    /// the waiting jobs), as a round reads them.
    #[inline]
    pub fn known<'a>(
        &'a mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        queued: &'a [u32],
        keys: &mut JobKeys,
    ) -> Known<'a> {
        self.refresh(tree, view, queued.len(), keys);
        Known {
            held: &self.per_node,
            capacity: &self.capacity,
            queued,
        }
    }

    /// Job `job`'s entry, if the entries cover it.
    fn entry(&self, job: JobId) -> Option<&[u32]> {
        let stride = self.stride();
        self.entries
            .get(job.index() * stride..(job.index() + 1) * stride)
    }

    /// Whether `job` runs, as counted.
    #[inline]
    pub fn runs(&self, job: JobId) -> bool {
        self.entry(job).is_some_and(|e| e[0] != 0)
    }

    /// Forgets the counts: the caller offered no present, so what changed since is unknown.
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    /// Counts `job` running on `slots` (nodes and GPUs), in place of what it held if it ran.
    #[inline]
    fn start(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        keys: &mut JobKeys,
        job: JobId,
        slots: &[(NodeId, u32)],
    ) {
        let stride = self.stride();
        if job.index() >= self.jobs {
            return;
        }
        let leaf = keys.of_id(tree, view, job).leaf();
        let entry = &mut self.entries[job.index() * stride..(job.index() + 1) * stride];
        // It ran (a whole decision lists it again, maybe elsewhere): its GPUs leave first.
        if release(tree, &mut self.per_node, entry) {
            self.running -= 1;
        }
        entry[0] = leaf as u32 + 1;
        tree.placement_dims_into(view.cluster, slots, &mut entry[1..]);
        tree.add_on_path(&mut self.per_node, leaf, &entry[1..], true);
        self.running += 1;
    }

    /// A job no longer runs.
    #[inline]
    pub fn finished(&mut self, tree: &QuotaTree, job: JobId) {
        if job.index() >= self.jobs {
            return;
        }
        let stride = self.stride();
        let at = job.index() * stride;
        if release(tree, &mut self.per_node, &mut self.entries[at..at + stride]) {
            self.running -= 1;
        }
    }

    /// The running set once `decision` is in force (it is checked whole, or the run stops).
    #[inline(always)]
    pub fn apply(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        decision: &Decision,
        keys: &mut JobKeys,
    ) {
        // (Most events change nothing: that is seen here, without a call.)
        if self.valid && !(decision.keep_unlisted && decision.run.is_empty()) {
            self.apply_changes(tree, view, decision, keys);
        }
    }

    /// [`Held::apply`] for a decision that changes something.
    #[inline(never)]
    fn apply_changes(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        decision: &Decision,
        keys: &mut JobKeys,
    ) {
        if !decision.keep_unlisted {
            // A whole decision: every running job it does not list stops (a pass over the
            // view, as the policy's whole decision was).
            let mut listed: Vec<JobId> = decision.run.iter().map(|a| a.job).collect();
            listed.sort_unstable();
            for job in view.jobs {
                if self.runs(job.id) && listed.binary_search(&job.id).is_err() {
                    self.finished(tree, job.id);
                }
            }
        }
        for a in &decision.run {
            self.start(tree, view, keys, a.job, &a.placement.slots);
        }
    }
}

/// Takes a counted job's GPUs (`entry`: its leaf plus one, then its GPUs per dimension) off its
/// path and marks it not running. Whether it ran.
#[inline(always)]
fn release(tree: &QuotaTree, per_node: &mut [u32], entry: &mut [u32]) -> bool {
    if entry[0] == 0 {
        return false;
    }
    let leaf = std::mem::take(&mut entry[0]) as usize - 1;
    tree.add_on_path(per_node, leaf, &entry[1..], false);
    true
}
