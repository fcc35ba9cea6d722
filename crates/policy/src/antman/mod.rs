//! AntMan (Xiao et al., OSDI'20) as Muri's simulator models it (`antman_sim_jobs` and the
//! `antman` placement of its `switch.py` / `node.py`; see `docs/muri-reference.md` §4).
//!
//! Jobs come in two classes, from the trace's `priority`: 0 is **resource-guaranteed**, anything
//! else **opportunistic**. Nothing is ever preempted or migrated: a job that starts runs to its
//! end on the GPUs it started on.
//!
//! At every scheduling point the waiting jobs are tried in order — guaranteed before
//! opportunistic, then by submission, then by id — and every one is tried (a job that does not
//! fit does not block the ones behind it):
//!
//! - A **guaranteed** job needs GPUs that no other guaranteed job holds; opportunistic jobs on a
//!   GPU are ignored (they are slowed, not evicted). A gang of up to one node's GPUs takes the
//!   first node with enough such GPUs; if none has, it **reserves** every such GPU of the node
//!   with the most of them and, at later points, grows that reservation on the same node until it
//!   is complete. A larger gang takes whole free nodes, first in index order, and keeps those it
//!   found even when they are not yet enough. Reserved GPUs are closed to other guaranteed jobs
//!   and open to opportunistic ones.
//! - An **opportunistic** job runs on the least-used GPUs of the whole cluster (any nodes, not
//!   consolidated) whose utilization is below 0.8 — so a GPU has at most one opportunistic job;
//!   if fewer than its gang size are that idle, it waits. Utilization is Muri's bookkeeping: a
//!   guaranteed job adds 0.1 to each of its GPUs (0.09 while reserving, 0.01 more once complete),
//!   an opportunistic one 0.9, in floating point and in Muri's order of operations (a GPU
//!   whose opportunistic job left before its guaranteed one reads −1.4e-17 once both are gone,
//!   which sorts before an untouched 0.0, as in Muri).
//! - Guaranteed jobs run at full speed. An opportunistic job's iteration time is recomputed at
//!   every point from whom it shares its GPUs with ([`opportunistic_iteration_s`]); it is a
//!   [`Guest`](arbiter_model::Guest) to the engine: not counted against the GPUs' capacity, and
//!   telling it how many of its GPUs a running guaranteed job holds (so that utilization counts
//!   each GPU once).
//!
//! Simplifications, all of which leave Muri's 64-GPU runs unchanged: CPU and memory are not
//! checked (Muri's rules ask for at most 48 of the 92 CPUs and a few GB of the 520 GB of a node
//! there); a gang larger than a node that is not a multiple of the node size takes whole nodes
//! plus one node's share, all or nothing (Muri's traces have none, and Muri's code for it
//! reports success with fewer GPUs). Jobs without stage times (traces other than Muri's) slow an
//! opportunistic co-runner to half speed.

use crate::descriptor::{DaemonSupport, Descriptor, Family};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{
    Assignment, Decision, IterationStages, JobId, JobSpec, NodeId, PendingReason, Placement,
    SimTime,
};
use std::collections::{BTreeMap, BTreeSet};

/// `antman`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("antman", Family::Events, "AntMan: guaranteed jobs on GPUs of their own, opportunistic jobs on lightly used GPUs, no preemption (OSDI'20, as Muri models it)").daemon(DaemonSupport::Refused("it runs opportunistic jobs on GPUs that running jobs hold, which the daemon does not do; use any other policy and `arbiter submit --opportunistic` (such jobs run on idle GPUs and are stopped when a job needs them)"))
    .paper("AntMan (OSDI'20), as Muri's simulator models it")
    .detail("resource-guaranteed jobs (trace `priority` 0) get GPUs no other guaranteed job holds and reserve partial gangs while they wait; opportunistic jobs (other priorities) run on the least-used GPUs anywhere in the cluster, slowed by their co-runners' stage times; non-preemptive");

/// Builds the `antman` policy (it has no parameters: Muri's model of it has none; it places as
/// that model does).
pub fn build(_: Placing) -> Result<AntMan, PolicyError> {
    Ok(AntMan::default())
}

/// Utilization below which a GPU takes an opportunistic job (`gpu_util_upper`).
const OPPORTUNISTIC_BELOW: f64 = 0.8;
/// What a guaranteed job adds to each of its GPUs (`gpu_util` of priority 0).
const GUARANTEED_UTIL: f64 = 0.1;
/// What an opportunistic job adds (`gpu_util` of priority 1).
const OPPORTUNISTIC_UTIL: f64 = 0.9;
/// Added to a guaranteed job's GPUs when its gang is complete (`add_job_gpu_util`).
const COMPLETION_UTIL: f64 = 0.01;

/// The two classes of jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Trace priority 0.
    Guaranteed,
    /// Any other priority.
    Opportunistic,
}

impl Class {
    fn of(spec: &JobSpec) -> Self {
        if spec.priority == 0 {
            Class::Guaranteed
        } else {
            Class::Opportunistic
        }
    }
}

/// A job that holds, reserves or uses GPUs.
#[derive(Clone, Debug)]
struct Tracked {
    class: Class,
    /// Its GPUs (flat indices), in the order they were taken.
    gpus: Vec<usize>,
    /// GPUs still to reserve (0: complete, running).
    remaining: u32,
    /// The node a partial reservation grows on.
    last_node: Option<usize>,
    /// Sort key of Muri's runnable list: submission and id.
    submit: SimTime,
}

/// AntMan. Its state — which job holds, reserves or uses which GPU, and each GPU's utilization
/// — lives across scheduling points, like the cluster state of Muri's simulator; jobs that left
/// the view since the last point are released at the next one.
#[derive(Clone, Debug, Default)]
pub struct AntMan {
    /// First flat GPU index of each node (and the total at the end); built on the first call.
    node_start: Vec<usize>,
    /// The guaranteed job holding or reserving each GPU.
    holder: Vec<Option<JobId>>,
    /// The opportunistic job on each GPU.
    guest: Vec<Option<JobId>>,
    /// Muri's per-GPU utilization.
    util: Vec<f64>,
    /// Jobs with GPUs, running or reserving.
    jobs: BTreeMap<JobId, Tracked>,
}

impl AntMan {
    fn layout(&mut self, view: &SchedulerView<'_>) {
        if !self.node_start.is_empty() {
            return;
        }
        let mut start = 0;
        for node in &view.cluster.nodes {
            self.node_start.push(start);
            start += node.gpus as usize;
        }
        self.node_start.push(start);
        self.holder = vec![None; start];
        self.guest = vec![None; start];
        self.util = vec![0.0; start];
    }

    fn nodes(&self) -> usize {
        self.node_start.len().saturating_sub(1)
    }

    fn node_gpus(&self, node: usize) -> std::ops::Range<usize> {
        self.node_start[node]..self.node_start[node + 1]
    }

    fn node_of(&self, gpu: usize) -> usize {
        self.node_start.partition_point(|&s| s <= gpu) - 1
    }

    /// GPUs of `node` no guaranteed job holds or reserves, in index order.
    fn free_for_guaranteed(&self, node: usize) -> Vec<usize> {
        self.node_gpus(node)
            .filter(|&g| self.holder[g].is_none())
            .collect()
    }

    /// Releases a job that left (finished).
    fn release(&mut self, id: JobId) {
        let Some(t) = self.jobs.remove(&id) else {
            return;
        };
        let amount = match t.class {
            Class::Guaranteed => GUARANTEED_UTIL,
            Class::Opportunistic => OPPORTUNISTIC_UTIL,
        };
        for &g in &t.gpus {
            match t.class {
                Class::Guaranteed => self.holder[g] = None,
                Class::Opportunistic => self.guest[g] = None,
            }
            self.util[g] -= amount;
        }
    }

    /// Reserves `gpus` for guaranteed job `id` (`gpu_util - 0.01` each, as Muri's `alloc_job_res`).
    fn reserve(&mut self, id: JobId, gpus: &[usize]) {
        for &g in gpus {
            self.holder[g] = Some(id);
            self.util[g] += GUARANTEED_UTIL - COMPLETION_UTIL;
        }
        if let Some(t) = self.jobs.get_mut(&id) {
            t.gpus.extend_from_slice(gpus);
            t.remaining = t.remaining.saturating_sub(gpus.len() as u32);
        }
    }

    /// A complete gang: each of its GPUs gets the last 0.01.
    fn complete(&mut self, id: JobId) {
        if let Some(t) = self.jobs.get(&id) {
            for &g in &t.gpus {
                self.util[g] += COMPLETION_UTIL;
            }
        }
    }

    /// One attempt to place guaranteed job `id` of `gang` GPUs; `true` once its gang is complete.
    fn try_guaranteed(&mut self, id: JobId, gang: u32, per_node: usize) -> bool {
        let (remaining, last_node) = match self.jobs.get(&id) {
            Some(t) => (t.remaining as usize, t.last_node),
            None => return false,
        };
        let gang = gang as usize;
        if gang <= per_node {
            if remaining == gang {
                // First attempt: the first node with room, else reserve on the fullest.
                let mut most: Option<(usize, Vec<usize>)> = None;
                for node in 0..self.nodes() {
                    let free = self.free_for_guaranteed(node);
                    if free.len() >= gang {
                        self.reserve(id, &free[..gang]);
                        self.set_last_node(id, node);
                        self.complete(id);
                        return true;
                    }
                    if free.len() > most.as_ref().map_or(0, |(_, f)| f.len()) {
                        most = Some((node, free));
                    }
                }
                if let Some((node, free)) = most {
                    self.reserve(id, &free);
                    self.set_last_node(id, node);
                }
                return false;
            }
            // The reservation grows on its node only.
            let Some(node) = last_node else { return false };
            let free = self.free_for_guaranteed(node);
            if free.len() >= remaining {
                self.reserve(id, &free[..remaining]);
                self.complete(id);
                return true;
            }
            self.reserve(id, &free);
            return false;
        }
        // Larger than a node: whole free nodes, first in index order, kept even when too few.
        let whole = remaining / per_node;
        let part = remaining % per_node;
        let full: Vec<usize> = (0..self.nodes())
            .filter(|&n| {
                self.node_gpus(n).len() >= per_node && self.free_for_guaranteed(n).len() >= per_node
            })
            .take(whole)
            .collect();
        // The remainder (not in Muri's traces): one more node with room for it, all or nothing.
        let rest = if part > 0 {
            (0..self.nodes())
                .filter(|n| !full.contains(n))
                .map(|n| self.free_for_guaranteed(n))
                .find(|f| f.len() >= part)
        } else {
            None
        };
        let enough = full.len() == whole && (part == 0 || rest.is_some());
        if part > 0 && !enough {
            // All or nothing for the remainder's gang: keep whole nodes only.
            for &node in &full {
                let gpus: Vec<usize> = self.node_gpus(node).collect();
                self.reserve(id, &gpus);
            }
            return false;
        }
        for &node in &full {
            let gpus: Vec<usize> = self.node_gpus(node).collect();
            self.reserve(id, &gpus);
        }
        if let Some(free) = rest {
            self.reserve(id, &free[..part]);
        }
        if enough {
            self.complete(id);
        }
        enough
    }

    fn set_last_node(&mut self, id: JobId, node: usize) {
        if let Some(t) = self.jobs.get_mut(&id) {
            t.last_node = Some(node);
        }
    }

    /// Places opportunistic job `id` on the `gang` least-used GPUs below the threshold.
    fn try_opportunistic(&mut self, id: JobId, gang: u32) -> bool {
        let mut candidates: Vec<usize> = (0..self.util.len())
            .filter(|&g| self.util[g] < OPPORTUNISTIC_BELOW)
            .collect();
        if candidates.len() < gang as usize {
            return false;
        }
        // Python's stable sort by value (-0.0 equals 0.0).
        candidates.sort_by(|&a, &b| {
            self.util[a]
                .partial_cmp(&self.util[b])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        candidates.truncate(gang as usize);
        for &g in &candidates {
            self.util[g] += OPPORTUNISTIC_UTIL;
            self.guest[g] = Some(id);
        }
        if let Some(t) = self.jobs.get_mut(&id) {
            t.gpus = candidates;
            t.remaining = 0;
        }
        true
    }

    /// The engine's placement of a job's GPUs: per node, in order of first appearance.
    fn placement(&self, gpus: &[usize]) -> Placement {
        let mut placement = Placement::default();
        for &g in gpus {
            let node = NodeId(self.node_of(g) as u32);
            match placement.slots.iter_mut().find(|(n, _)| *n == node) {
                Some(slot) => slot.1 += 1,
                None => placement.slots.push((node, 1)),
            }
        }
        placement
    }

    /// The jobs an opportunistic job shares its GPUs with (ascending id).
    fn co_runners(&self, id: JobId, gpus: &[usize]) -> BTreeSet<JobId> {
        let mut others = BTreeSet::new();
        for &g in gpus {
            others.extend(self.holder[g]);
            others.extend(self.guest[g].filter(|&o| o != id));
        }
        others
    }
}

/// An opportunistic job's iteration time next to its co-runners (`antman_calc_iter_time`): its
/// own, or — for each complete guaranteed co-runner — how many of the co-runner's iterations its
/// stages take to squeeze through the co-runner's idle gaps (storage I/O while the co-runner
/// computes, CPU while it does I/O and GPU, GPU while it does I/O and CPU) times the co-runner's
/// iteration time; twice its own next to another opportunistic job. The largest wins.
/// `None` stages (not a Muri trace) count as an opportunistic co-runner.
pub fn opportunistic_iteration_s(
    own_iteration_s: f64,
    own: Option<IterationStages>,
    co_runners: &[CoRunner],
) -> f64 {
    let mut iteration_s = own_iteration_s;
    for c in co_runners {
        let squeezed = match (c, own) {
            (
                CoRunner::Guaranteed {
                    stages,
                    iteration_s: c_iteration_s,
                },
                Some(t),
            ) => squeeze(t, *stages).map(|iters| iters * c_iteration_s),
            _ => None,
        };
        iteration_s = iteration_s.max(squeezed.unwrap_or(own_iteration_s * 2.0));
    }
    iteration_s
}

/// A job an opportunistic job shares GPUs with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CoRunner {
    /// A running resource-guaranteed job with its stage and iteration times.
    Guaranteed {
        /// Its stage times.
        stages: IterationStages,
        /// Its iteration time, seconds.
        iteration_s: f64,
    },
    /// Another opportunistic job, or a job without stage times.
    Other,
}

/// Muri's count of the co-runner's iterations it takes to fit one iteration of `t` into `c`'s
/// gaps (`None` where a gap is empty: Muri would divide by zero).
fn squeeze(t: IterationStages, c: IterationStages) -> Option<f64> {
    let (mut t1, mut t2) = (t.cpu_s, t.gpu_s);
    let t0 = t.io_s;
    let (c0, c1, c2) = (c.io_s, c.cpu_s, c.gpu_s);
    if c1 + c2 <= 0.0 || c0 + c2 <= 0.0 || c0 + c1 <= 0.0 {
        return None;
    }
    let mut iters = (t0 / (c1 + c2)).floor();
    let data_extra = t0 % (c1 + c2);
    if data_extra > 0.0 {
        iters += 1.0;
        t1 -= t1.min(c2).min(c1 + c2 - data_extra);
    }
    iters += (t1 / (c0 + c2)).floor();
    let gpu_extra = t1 % (c0 + c2);
    if gpu_extra > 0.0 {
        iters += 1.0;
        if gpu_extra < c0 {
            t2 -= t2.min(c0 + c1 - gpu_extra);
        }
    }
    iters += (t2 / (c0 + c1)).floor();
    let net_extra = t2 % (c0 + c1);
    if net_extra > c0 {
        iters += 1.0;
    }
    Some(iters)
}

impl Policy for AntMan {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        _now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.layout(view);
        let total = self.util.len();
        let per_node = view
            .cluster
            .nodes
            .iter()
            .map(|n| n.gpus as usize)
            .max()
            .unwrap_or(0);
        // Jobs that left since the last point give their GPUs back, in Muri's runnable order.
        let mut present = vec![false; view.specs.len()];
        for j in view.jobs {
            present[j.id.index()] = true;
        }
        let mut gone: Vec<(Class, SimTime, JobId)> = self
            .jobs
            .iter()
            .filter(|(id, _)| !present.get(id.index()).copied().unwrap_or(false))
            .map(|(id, t)| (t.class, t.submit, *id))
            .collect();
        gone.sort();
        for (_, _, id) in gone {
            self.release(id);
        }
        // Muri's order: guaranteed first, then submission, then id; every waiting job is tried.
        let mut order: Vec<(Class, SimTime, JobId, u32)> = view
            .jobs
            .iter()
            .map(|j| (Class::of(view.spec(j)), j.submit, j.id, j.gpus))
            .collect();
        // The ids make the keys unique: an unstable sort gives the same order.
        order.sort_unstable();
        let mut decision = Decision::default();
        // Whether a guaranteed job could get any GPU, and how many GPUs an opportunistic one
        // could use: once both are nothing, an attempt changes nothing and fails (thousands of
        // jobs wait at every point of Muri's big traces), so it is not made.
        let room = |me: &Self| {
            (
                me.holder.iter().any(Option::is_none),
                me.util.iter().filter(|&&u| u < OPPORTUNISTIC_BELOW).count(),
            )
        };
        let (mut guaranteed_room, mut opportunistic_room) = room(self);
        for &(class, submit, id, gang) in &order {
            if self.jobs.get(&id).is_some_and(|t| t.remaining == 0) {
                continue; // running
            }
            if gang as usize > total || gang == 0 {
                decision.pending.push((id, PendingReason::NeverFits));
                continue;
            }
            let hopeless = match class {
                Class::Guaranteed => !guaranteed_room,
                Class::Opportunistic => opportunistic_room < gang as usize,
            };
            if hopeless {
                decision.pending.push((id, PendingReason::InsufficientGpus));
                continue;
            }
            self.jobs.entry(id).or_insert(Tracked {
                class,
                gpus: Vec::new(),
                remaining: gang,
                last_node: None,
                submit,
            });
            let placed = match class {
                Class::Guaranteed => self.try_guaranteed(id, gang, per_node),
                Class::Opportunistic => self.try_opportunistic(id, gang),
            };
            if !placed {
                if self.jobs.get(&id).is_some_and(|t| t.gpus.is_empty()) {
                    self.jobs.remove(&id);
                }
                decision.pending.push((id, PendingReason::InsufficientGpus));
            }
            (guaranteed_room, opportunistic_room) = room(self);
        }
        // Every running job, at its speed from now on.
        let specs = view.specs;
        for (&id, t) in self.jobs.iter().filter(|(_, t)| t.remaining == 0) {
            let placement = self.placement(&t.gpus);
            match t.class {
                Class::Guaranteed => decision.run.push(Assignment::exclusive(id, placement)),
                Class::Opportunistic => {
                    let spec = &specs[id.index()];
                    let own_s = spec.iteration_s.unwrap_or(1.0);
                    let co: Vec<CoRunner> = self
                        .co_runners(id, &t.gpus)
                        .into_iter()
                        .filter_map(|o| {
                            let other = self.jobs.get(&o)?;
                            let o_spec = &specs[o.index()];
                            match (other.class, o_spec.stages, o_spec.iteration_s) {
                                // A partial reservation does not run: it does not slow anyone.
                                (Class::Guaranteed, _, _) if other.remaining > 0 => None,
                                (Class::Guaranteed, Some(stages), Some(iteration_s)) => {
                                    Some(CoRunner::Guaranteed {
                                        stages,
                                        iteration_s,
                                    })
                                }
                                _ => Some(CoRunner::Other),
                            }
                        })
                        .collect();
                    let iteration_s = opportunistic_iteration_s(own_s, spec.stages, &co);
                    // Its GPUs a running guaranteed job holds (a partial reservation holds none
                    // yet: the engine has those GPUs free).
                    let on_held = t
                        .gpus
                        .iter()
                        .filter(|&&g| {
                            self.holder[g]
                                .and_then(|h| self.jobs.get(&h))
                                .is_some_and(|h| h.remaining == 0)
                        })
                        .count() as u32;
                    decision.run.push(Assignment::guest(
                        id,
                        placement,
                        own_s / iteration_s,
                        on_held,
                    ));
                }
            }
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests;
