//! GPUs the running jobs hold per node of the quota tree, kept between rounds when the caller
//! keeps the present (the simulator's `SchedulerView::current`): a round then costs what waits,
//! not every running job. Updated from the wrapper's own decisions and the jobs that finish;
//! counted again from the view whenever the number of running jobs says something else happened
//! (a failure, a reservation's preemption) — jobs only leave the running set without a decision.

use super::round::{JobKeys, running_dims};
use super::tree::QuotaTree;
use crate::SchedulerView;
use arbiter_model::{Decision, JobId};
use smallvec::SmallVec;

/// A running job's entry: its leaf, GPUs per dimension and place in [`Held::running`].
#[derive(Clone, Debug)]
struct Entry {
    leaf: usize,
    by_dim: SmallVec<[u32; 2]>,
    at: usize,
}

/// The running jobs' GPUs, per tree node and dimension.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Per job id, while it runs.
    by_job: Vec<Option<Entry>>,
    /// The running jobs, in no order (a job leaves by swapping the last into its place).
    running: Vec<JobId>,
    /// GPUs held per node and dimension (`node * dims + dim`).
    pub per_node: Vec<u32>,
    /// GPUs per dimension.
    pub capacity: Vec<u32>,
    /// Whether the counts are those of the last view.
    valid: bool,
}

impl Held {
    /// Counts from `view` again unless the counts kept agree with it (`queued` jobs waiting).
    pub fn refresh(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        queued: usize,
        keys: &mut JobKeys,
    ) {
        if self.valid
            && self.running.len() == view.jobs.len() - queued
            && self.by_job.len() == view.specs.len()
        {
            return;
        }
        let dims = tree.dims.len();
        self.by_job = vec![None; view.specs.len()];
        self.running.clear();
        self.per_node = vec![0; tree.nodes.len() * dims];
        self.capacity = tree.capacity(view.cluster);
        for job in view.jobs.iter().filter(|j| j.is_running()) {
            let leaf = keys.of(tree, view, job).leaf();
            self.add(tree, job.id, leaf, running_dims(tree, view, job));
        }
        self.valid = true;
    }

    /// Whether `job` runs, as counted.
    pub fn runs(&self, job: JobId) -> bool {
        self.by_job.get(job.index()).is_some_and(Option::is_some)
    }

    /// Forgets the counts: the caller offered no present, so what changed since is unknown.
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    fn add(&mut self, tree: &QuotaTree, job: JobId, leaf: usize, by_dim: SmallVec<[u32; 2]>) {
        tree.add_on_path(&mut self.per_node, leaf, &by_dim, true);
        if let Some(slot) = self.by_job.get_mut(job.index()) {
            *slot = Some(Entry {
                leaf,
                by_dim,
                at: self.running.len(),
            });
            self.running.push(job);
        }
    }

    /// A job no longer runs.
    pub fn finished(&mut self, tree: &QuotaTree, job: JobId) {
        let Some(entry) = self.by_job.get_mut(job.index()).and_then(Option::take) else {
            return;
        };
        tree.add_on_path(&mut self.per_node, entry.leaf, &entry.by_dim, false);
        self.running.swap_remove(entry.at);
        if let Some(&moved) = self.running.get(entry.at)
            && let Some(Some(e)) = self.by_job.get_mut(moved.index())
        {
            e.at = entry.at;
        }
    }

    /// The running set once `decision` is in force (it is checked whole, or the run stops).
    pub fn apply(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        decision: &Decision,
        keys: &mut JobKeys,
    ) {
        if !self.valid {
            return;
        }
        if !decision.keep_unlisted {
            let listed: std::collections::BTreeSet<JobId> =
                decision.run.iter().map(|a| a.job).collect();
            let gone: Vec<JobId> = self
                .running
                .iter()
                .copied()
                .filter(|j| !listed.contains(j))
                .collect();
            for job in gone {
                self.finished(tree, job);
            }
        }
        for a in &decision.run {
            self.finished(tree, a.job);
            let by_dim = tree.placement_dims(view.cluster, &a.placement.slots);
            let leaf = keys.of_id(tree, view, a.job).leaf();
            self.add(tree, a.job, leaf, by_dim);
        }
    }
}
