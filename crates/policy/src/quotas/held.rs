//! GPUs the running jobs hold per node of the quota tree, kept between rounds when the caller
//! keeps the present (the simulator's `SchedulerView::current`): a round then costs what waits,
//! not every running job. Updated from the wrapper's own decisions and the jobs that finish;
//! counted again from the view whenever the number of running jobs says something else happened
//! (a failure, a reservation's preemption) — jobs only leave the running set without a decision.
//!
//! Kept flat and small (8 bytes per job, and its GPUs per dimension in one array): the
//! simulator touches a job's entry when it starts and when it ends, far apart in time, so each
//! touch is likely a cache miss, and fewer bytes are fewer misses.

use super::round::JobKeys;
use super::tree::QuotaTree;
use crate::SchedulerView;
use arbiter_model::{Decision, JobId};

/// A job's entry: its leaf and place in [`Held::running`] while it runs.
#[derive(Clone, Copy, Debug)]
struct Slot {
    leaf: u32,
    at: u32,
}

impl Slot {
    const IDLE: Slot = Slot {
        leaf: 0,
        at: u32::MAX,
    };

    fn runs(self) -> bool {
        self.at != u32::MAX
    }
}

/// The running jobs' GPUs, per tree node and dimension.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Per job id.
    slots: Vec<Slot>,
    /// Per job id and dimension (`job * dims + dim`): the GPUs it holds, while it runs.
    gpus: Vec<u32>,
    /// The running jobs, in no order (a job leaves by swapping the last into its place).
    running: Vec<JobId>,
    /// GPUs held per node and dimension (`node * dims + dim`).
    pub per_node: Vec<u32>,
    /// GPUs per dimension.
    pub capacity: Vec<u32>,
    /// Dimensions of the tree counted for.
    dims: usize,
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
            && self.slots.len() == view.specs.len()
        {
            return;
        }
        self.dims = tree.dims.len();
        self.slots.clear();
        self.slots.resize(view.specs.len(), Slot::IDLE);
        self.gpus.clear();
        self.gpus.resize(view.specs.len() * self.dims, 0);
        self.running.clear();
        self.per_node = vec![0; tree.nodes.len() * self.dims];
        self.capacity = tree.capacity(view.cluster);
        for job in view.jobs.iter().filter(|j| j.is_running()) {
            let slots = job.placement().map(|p| p.slots.as_slice()).unwrap_or(&[]);
            self.start(tree, view, keys, job.id, slots);
        }
        self.valid = true;
    }

    /// Whether `job` runs, as counted.
    pub fn runs(&self, job: JobId) -> bool {
        self.slots.get(job.index()).is_some_and(|s| s.runs())
    }

    /// Forgets the counts: the caller offered no present, so what changed since is unknown.
    pub fn invalidate(&mut self) {
        self.valid = false;
    }

    /// Counts `job` running on `slots` (nodes and GPUs).
    fn start(
        &mut self,
        tree: &QuotaTree,
        view: &SchedulerView<'_>,
        keys: &mut JobKeys,
        job: JobId,
        slots: &[(arbiter_model::NodeId, u32)],
    ) {
        let at = job.index();
        if at >= self.slots.len() {
            return;
        }
        let leaf = keys.of_id(tree, view, job).leaf();
        let gpus = &mut self.gpus[at * self.dims..(at + 1) * self.dims];
        tree.placement_dims_into(view.cluster, slots, gpus);
        tree.add_on_path(&mut self.per_node, leaf, gpus, true);
        self.slots[at] = Slot {
            leaf: leaf as u32,
            at: self.running.len() as u32,
        };
        self.running.push(job);
    }

    /// A job no longer runs.
    pub fn finished(&mut self, tree: &QuotaTree, job: JobId) {
        let at = job.index();
        let Some(slot) = self.slots.get_mut(at).filter(|s| s.runs()) else {
            return;
        };
        let Slot { leaf, at: place } = std::mem::replace(slot, Slot::IDLE);
        let gpus = &self.gpus[at * self.dims..(at + 1) * self.dims];
        tree.add_on_path(&mut self.per_node, leaf as usize, gpus, false);
        let place = place as usize;
        self.running.swap_remove(place);
        if let Some(&moved) = self.running.get(place)
            && let Some(s) = self.slots.get_mut(moved.index())
        {
            s.at = place as u32;
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
            self.start(tree, view, keys, a.job, &a.placement.slots);
        }
    }
}
