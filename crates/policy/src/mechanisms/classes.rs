//! Priority classes (Kubernetes' PriorityClass, Slurm's QOS priority) over any policy: a higher
//! class is served first and may preempt a lower class whose jobs are preemptible; inside a
//! class, the configured policy orders and places jobs as it always does.
//!
//! ```text
//!   classes, highest first ──► each class's own policy instance decides its jobs
//!       on the GPUs no higher class took (and, first, none that lower classes hold);
//!       jobs left waiting? ──► decide again, lower classes' preemptible GPUs offered too
//!   union of the classes' answers ──► one decision, checked as any other
//! ```
//!
//! Each class has its own instance of the policy, so a policy that keeps state between
//! decisions (Tiresias' queues, VTC's counters) keeps it per class. When every active job is in
//! one class the wrapper steps aside: the policy sees the view as it would without classes,
//! so a workload without classes schedules exactly as before.
//!
//! Why two tries per class: offered every preemptible GPU at once, a policy places by its own
//! rules (first fit, consolidation) and would preempt lower-class jobs even beside free GPUs.
//! The first try offers only free GPUs; only jobs still waiting make the second try offer what
//! lower classes may give up. Placements count GPUs per node, so a class's capacity is a copy
//! of the cluster with fewer GPUs per node (and CPUs and memory in proportion).

use crate::mechanisms::colocation::PairSpeeds;
use crate::{Policy, PolicyConfig, PolicyError, PolicyKind, SchedulerView, TenantWeights, build};
use arbiter_model::{ActiveJob, Cluster, Decision, JobId, JobSpec, Planner, RunState, SimTime};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A policy per priority class, deciding classes from the highest down.
pub struct PriorityClasses {
    kind: PolicyKind,
    config: PolicyConfig,
    /// One instance per class value, built when a job of that class is first seen.
    by_value: BTreeMap<Reverse<i32>, Box<dyn Policy>>,
    /// What every instance must be told, including those built later.
    pair_speeds: Option<Arc<PairSpeeds>>,
    weights: Option<TenantWeights>,
    usage: Option<crate::TenantUsage>,
    /// The decayed fair share's half-life every instance has.
    half_life_s: Option<f64>,
    planner: Planner,
    active: ActiveClasses,
    /// The last class's copy of the cluster, kept for its buffers (see [`reduced`]).
    reduced: Option<Cluster>,
}

/// The active jobs' classes. Every event asks which classes have jobs (one class: the policy
/// decides alone) and which class waits highest; read from each active job's spec (384 bytes, a
/// cache miss a job) that pass cost far more than the policy's own decision — a replay of
/// 100,000 jobs on 2,048 nodes with classes configured took 30 times as long as without.
///
/// Where the caller keeps the present and each job's position (the simulator, which hands every
/// job that leaves to `job_finished`), the counts per class are kept between events: a job is
/// counted once, from its spec, when first seen waiting, and uncounted as it finishes; its class
/// is kept by job id, so the highest waiting class and the passes over the active jobs read 8
/// bytes a job. Elsewhere (the daemon rebuilds its view at each round) every event counts again
/// from the specs.
#[derive(Debug, Default)]
struct ActiveClasses {
    /// Active jobs per class value, highest first.
    counts: BTreeMap<Reverse<i32>, usize>,
    /// The highest class with a job waiting, as the last count from the specs saw it (read
    /// where the classes are not kept).
    counted_highest_waiting: Option<i32>,
    /// While kept between events: per job id, its class (value, preemptible) while it is
    /// counted.
    of: Vec<Option<(i32, bool)>>,
    /// Jobs counted while kept.
    counted: usize,
    /// The workload the kept counts are of (its specs' address and length), if kept.
    kept_for: Option<(usize, usize)>,
}

impl ActiveClasses {
    /// Brings the counts up to date with `view`.
    fn refresh(&mut self, view: &SchedulerView<'_>) {
        let workload = (view.specs.as_ptr() as usize, view.specs.len());
        let keeps = view.current.is_some_and(|c| c.positions.is_some());
        if !keeps || self.kept_for != Some(workload) {
            return self.count_again(view, keeps.then_some(workload));
        }
        if self.counted < view.jobs.len()
            && let Some(current) = view.current
        {
            // New jobs wait; the engine adds them at the end of its queue.
            for &at in current.queued.iter().rev() {
                if self.counted == view.jobs.len() {
                    break;
                }
                let Some(job) = view.jobs.get(at as usize) else {
                    break;
                };
                if self.of.get(job.id.index()).is_some_and(Option::is_none) {
                    let class = &view.spec(job).class;
                    let value = class.value;
                    self.of[job.id.index()] = Some((value, class.preemptible));
                    *self.counts.entry(Reverse(value)).or_default() += 1;
                    self.counted += 1;
                }
            }
        }
        if self.counted != view.jobs.len() {
            // Something came or went unseen (never in the simulator): count again.
            self.count_again(view, Some(workload));
        }
    }

    /// Counts every active job of `view` from its spec; keeps each job's class when `keep`.
    fn count_again(&mut self, view: &SchedulerView<'_>, keep: Option<(usize, usize)>) {
        self.counts.clear();
        self.counted_highest_waiting = None;
        self.kept_for = keep;
        self.of.clear();
        if keep.is_some() {
            self.of.resize(view.specs.len(), None);
        }
        for job in view.jobs {
            let class = &view.spec(job).class;
            let value = class.value;
            *self.counts.entry(Reverse(value)).or_default() += 1;
            if !job.is_running() {
                self.counted_highest_waiting = self.counted_highest_waiting.max(Some(value));
            }
            if let Some(slot) = self.of.get_mut(job.id.index()) {
                *slot = Some((value, class.preemptible));
            }
        }
        self.counted = if keep.is_some() { view.jobs.len() } else { 0 };
    }

    /// The highest class with a job waiting in `view` (counted by [`ActiveClasses::refresh`]).
    fn highest_waiting(&self, view: &SchedulerView<'_>) -> Option<i32> {
        match view.current {
            Some(current) if self.kept_for.is_some() => current
                .queued
                .iter()
                .filter_map(|&at| view.jobs.get(at as usize))
                .filter_map(|job| self.of.get(job.id.index()).copied().flatten())
                .map(|(value, _)| value)
                .max(),
            _ => self.counted_highest_waiting,
        }
    }

    /// `job`'s class (value, preemptible): kept, or read from its spec.
    #[inline]
    fn class_of(&self, view: &SchedulerView<'_>, job: &ActiveJob) -> (i32, bool) {
        match self.of.get(job.id.index()) {
            Some(&Some(class)) => class,
            _ => {
                let class = &view.spec(job).class;
                (class.value, class.preemptible)
            }
        }
    }

    /// `job` left (finished or failed for good).
    fn finished(&mut self, job: JobId) {
        if let Some((value, _)) = self.of.get_mut(job.index()).and_then(Option::take) {
            self.counted -= 1;
            if let Some(count) = self.counts.get_mut(&Reverse(value)) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(&Reverse(value));
                }
            }
        }
    }
}

/// GPUs per node.
type PerNode = Vec<u32>;

/// What a class's decision takes on each node: GPUs, CPU cores, memory (GiB).
#[derive(Clone, Debug, Default)]
struct Taken {
    gpus: PerNode,
    cpus: Vec<f64>,
    memory_gib: Vec<f64>,
}

impl Taken {
    fn new(nodes: usize) -> Self {
        Taken {
            gpus: vec![0; nodes],
            cpus: vec![0.0; nodes],
            memory_gib: vec![0.0; nodes],
        }
    }

    fn add(&mut self, other: &Taken) {
        for n in 0..self.gpus.len() {
            self.gpus[n] += other.gpus[n];
            self.cpus[n] += other.cpus[n];
            self.memory_gib[n] += other.memory_gib[n];
        }
    }
}

impl PriorityClasses {
    /// `kind` with `config` in every class. Fails as [`build`] does.
    pub fn new(kind: PolicyKind, config: PolicyConfig) -> Result<Self, PolicyError> {
        if kind == PolicyKind::External {
            // One agent per class would be several programs answering for one queue.
            return Err(PolicyError::Config(
                "priority classes need a built-in policy, not an external agent".into(),
            ));
        }
        if kind == PolicyKind::AntMan {
            // AntMan keeps its own map of every GPU between decisions (and has its own two
            // classes: guaranteed and opportunistic); it cannot be given a part of the cluster.
            return Err(PolicyError::Config("antman has its own classes (guaranteed, opportunistic) and cannot run under priority classes".into()));
        }
        let half_life_s = build(kind, &config)?.fairshare_half_life_s();
        Ok(PriorityClasses {
            kind,
            config,
            by_value: BTreeMap::new(),
            pair_speeds: None,
            weights: None,
            usage: None,
            half_life_s,
            planner: Planner::new(0),
            active: ActiveClasses::default(),
            reduced: None,
        })
    }

    fn instance(&mut self, value: i32) -> Result<&mut Box<dyn Policy>, PolicyError> {
        if !self.by_value.contains_key(&Reverse(value)) {
            let mut policy = build(self.kind, &self.config)?;
            if let Some(speeds) = &self.pair_speeds {
                policy.set_pair_speeds(Arc::clone(speeds));
            }
            if let Some(weights) = &self.weights {
                policy.set_tenant_weights(weights)?;
            }
            if let Some(usage) = &self.usage {
                policy.set_tenant_usage(usage);
            }
            self.by_value.insert(Reverse(value), policy);
        }
        self.by_value
            .get_mut(&Reverse(value))
            .ok_or_else(|| PolicyError::Invariant("class instance vanished".into()))
    }

    /// Decides the jobs of class `value` on what `taken` and `lower` (GPUs per node held by
    /// lower classes' runs that are not offered) leave, its running jobs that no longer fit
    /// shown as waiting. Returns the decision, what it takes, and whether some of the class's
    /// jobs are left waiting.
    fn decide_class(
        &mut self,
        value: i32,
        view: &SchedulerView<'_>,
        taken: &Taken,
        lower: &[u32],
        now: SimTime,
    ) -> Result<(Decision, Taken, bool), PolicyError> {
        let room = room(view.cluster, taken, lower);
        let cluster = reduced(view.cluster, &room, self.reduced.take());
        let capacity: PerNode = cluster.nodes.iter().map(|n| n.gpus).collect();
        let jobs = class_jobs(view, &self.active, value, &capacity);
        let class_view = SchedulerView {
            cluster: &cluster,
            jobs: &jobs,
            specs: view.specs,
            current: None,
        };
        let mut decision = self.instance(value)?.schedule(&class_view, now)?;
        pin_host_shares(view.cluster, &room, &mut decision);
        let ids: BTreeSet<u32> = jobs.iter().map(|j| j.id.0).collect();
        let occupancy = self
            .planner
            .check(&cluster, view.specs, |id| ids.contains(&id.0), &decision)
            .map_err(|e| PolicyError::Invariant(format!("class {value}: {e}")))?;
        let mut used = host_use(view.cluster, &decision);
        used.gpus = cluster
            .nodes
            .iter()
            .map(|n| n.gpus - occupancy.free_on(n.id))
            .collect();
        let waiting = jobs.len() > decision.run.len();
        self.reduced = Some(cluster);
        Ok((decision, used, waiting))
    }

    /// Where only the lowest class has jobs waiting, under a policy that never moves or stops a
    /// running job: every higher class keeps its runs (what deciding it would give, without
    /// asking), and the lowest class is decided by changes on the present, on what the higher
    /// classes leave of the cluster (its copy with fewer GPUs per node, as in turn — there the
    /// present's free GPUs are its free GPUs once the class's own runs are counted). `None`
    /// where the policy answers with a whole decision.
    fn schedule_lowest_by_changes(
        &mut self,
        view: &SchedulerView<'_>,
        values: &BTreeSet<Reverse<i32>>,
        now: SimTime,
    ) -> Result<Option<Decision>, PolicyError> {
        let nodes = view.cluster.nodes.len();
        let Some(&Reverse(lowest)) = values.last() else {
            return Ok(None);
        };
        let mut taken = Taken::new(nodes);
        for &Reverse(value) in values.iter().filter(|v| v.0 != lowest) {
            let below = held_below(view, &self.active, value, false, nodes);
            let used = runs_kept(value, view, &self.active, &taken, &below);
            taken.add(&used);
        }
        let room = room(view.cluster, &taken, &vec![0; nodes]);
        let cluster = reduced(view.cluster, &room, self.reduced.take());
        let class_view = SchedulerView {
            cluster: &cluster,
            ..*view
        };
        let mut decision = self.instance(lowest)?.schedule(&class_view, now)?;
        self.reduced = Some(cluster);
        if !decision.keep_unlisted {
            return Ok(None);
        }
        pin_host_shares(view.cluster, &room, &mut decision);
        Ok(Some(decision))
    }

    /// Every class in turn, highest first (see the module's comment).
    fn schedule_classes(
        &mut self,
        view: &SchedulerView<'_>,
        values: &BTreeSet<Reverse<i32>>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let nodes = view.cluster.nodes.len();
        let mut taken = Taken::new(nodes);
        let mut merged = Decision::default();
        for &Reverse(value) in values {
            let (below_all, below_fixed) = (
                held_below(view, &self.active, value, false, nodes),
                held_below(view, &self.active, value, true, nodes),
            );
            let (mut decision, mut used, waiting) =
                self.decide_class(value, view, &taken, &below_all, now)?;
            if waiting && below_all != below_fixed {
                let admitted = std::mem::take(&mut decision.admitted);
                (decision, used, _) = self.decide_class(value, view, &taken, &below_fixed, now)?;
                decision.admitted = merge_admitted(admitted, decision.admitted);
            }
            taken.add(&used);
            merge(&mut merged, decision);
        }
        Ok(merged)
    }
}

impl Policy for PriorityClasses {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        self.active.refresh(view);
        match self.active.counts.len() {
            0 | 1 => {
                let value = self.active.counts.keys().next().map_or(0, |v| v.0);
                self.instance(value)?.schedule(view, now)
            }
            _ => {
                let values: BTreeSet<Reverse<i32>> = self.active.counts.keys().copied().collect();
                // The highest class with a job waiting.
                let highest_waiting = self.active.highest_waiting(view);
                // Only the lowest class has jobs waiting (a busy queue's usual state: a higher
                // class's are started at once), under a policy that never moves or stops a
                // running job, with the present offered: that class is decided by changes.
                let lowest = values.last().map(|v| v.0);
                let by_changes = view.current.is_some()
                    && matches!(self.kind, PolicyKind::Fifo | PolicyKind::Sjf)
                    && highest_waiting <= lowest;
                if by_changes
                    && let Some(decision) = self.schedule_lowest_by_changes(view, &values, now)?
                {
                    return Ok(decision);
                }
                self.schedule_classes(view, &values, now)
            }
        }
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        self.active.finished(job.id);
        if let Some(policy) = self.by_value.get_mut(&Reverse(spec.class.value)) {
            policy.job_finished(spec, job, now);
        }
    }

    fn set_pair_speeds(&mut self, speeds: Arc<PairSpeeds>) {
        for policy in self.by_value.values_mut() {
            policy.set_pair_speeds(Arc::clone(&speeds));
        }
        self.pair_speeds = Some(speeds);
    }

    fn set_tenant_weights(&mut self, weights: &TenantWeights) -> Result<(), PolicyError> {
        for policy in self.by_value.values_mut() {
            policy.set_tenant_weights(weights)?;
        }
        self.weights = Some(weights.clone());
        Ok(())
    }

    fn fairshare_half_life_s(&self) -> Option<f64> {
        self.half_life_s
    }

    fn set_tenant_usage(&mut self, usage: &crate::TenantUsage) {
        for policy in self.by_value.values_mut() {
            policy.set_tenant_usage(usage);
        }
        self.usage = Some(usage.clone());
    }
}

/// What class `value`, whose jobs all run, takes of each node under a policy that keeps runs
/// where they are (`fifo`, `sjf`), as [`PriorityClasses::decide_class`] would count it on what
/// `taken` and `lower` leave: every run kept, its host share pinned as there.
fn runs_kept(
    value: i32,
    view: &SchedulerView<'_>,
    classes: &ActiveClasses,
    taken: &Taken,
    lower: &[u32],
) -> Taken {
    let mut kept = Decision {
        run: view
            .jobs
            .iter()
            .filter(|j| classes.class_of(view, j).0 == value)
            .filter_map(|j| {
                j.placement()
                    .map(|p| arbiter_model::Assignment::exclusive(j.id, p.clone()))
            })
            .collect(),
        ..Decision::default()
    };
    pin_host_shares(view.cluster, &room(view.cluster, taken, lower), &mut kept);
    let mut used = host_use(view.cluster, &kept);
    for a in &kept.run {
        for &(node, gpus) in &a.placement.slots {
            if let Some(g) = used.gpus.get_mut(node.index()) {
                *g += gpus;
            }
        }
    }
    used
}

/// GPUs per node held by running jobs of classes below `value` (only the non-preemptible ones
/// with `only_fixed`). Jobs sharing GPUs count each (conservative: less is offered).
fn held_below(
    view: &SchedulerView<'_>,
    classes: &ActiveClasses,
    value: i32,
    only_fixed: bool,
    nodes: usize,
) -> PerNode {
    let mut held = vec![0; nodes];
    for job in view.jobs {
        let (class, preemptible) = classes.class_of(view, job);
        if class >= value || (only_fixed && preemptible) {
            continue;
        }
        if let Some(placement) = job.placement() {
            for &(node, gpus) in &placement.slots {
                if let Some(h) = held.get_mut(node.index()) {
                    *h += gpus;
                }
            }
        }
    }
    held
}

/// The jobs of class `value`, oldest runs first; a running job whose GPUs are no longer in
/// `capacity` (a higher class took them) is shown as waiting, so its policy may place it again.
fn class_jobs(
    view: &SchedulerView<'_>,
    classes: &ActiveClasses,
    value: i32,
    capacity: &[u32],
) -> Vec<ActiveJob> {
    let mut jobs: Vec<ActiveJob> = view
        .jobs
        .iter()
        .filter(|j| classes.class_of(view, j).0 == value)
        .cloned()
        .collect();
    jobs.sort_by_key(|j| (j.first_start.is_none(), j.first_start, j.id));
    let mut left = capacity.to_vec();
    for job in &mut jobs {
        let Some(placement) = job.placement() else {
            continue;
        };
        let fits = placement
            .slots
            .iter()
            .all(|&(node, gpus)| left.get(node.index()).is_some_and(|&l| l >= gpus));
        if fits {
            for &(node, gpus) in &placement.slots {
                left[node.index()] -= gpus;
            }
        } else {
            job.state = RunState::Pending;
        }
    }
    jobs.sort_by_key(|j| j.id);
    jobs
}

/// `cluster` as a class has it: each node with the GPUs, CPUs and memory of `room` (CPUs and
/// memory in whole numbers, rounded down). Written over `reuse`, an earlier copy, where it has
/// as many nodes and the same GPU types (at every event: a fresh copy allocated every node's
/// name again).
fn reduced(cluster: &Cluster, room: &Taken, reuse: Option<Cluster>) -> Cluster {
    let mut out = match reuse {
        Some(copy)
            if copy.nodes.len() == cluster.nodes.len()
                && copy.gpu_type_names == cluster.gpu_type_names =>
        {
            copy
        }
        _ => cluster.clone(),
    };
    for (n, (node, whole)) in out.nodes.iter_mut().zip(&cluster.nodes).enumerate() {
        node.id = whole.id;
        if node.name != whole.name {
            node.name.clone_from(&whole.name);
        }
        node.rack = whole.rack;
        node.gpu_type = whole.gpu_type;
        node.gpus = room.gpus[n];
        // Rounded down by the cast itself (toward zero, negatives to 0: the same number as
        // `floor()` for every input), without a call to libm's `floor` per node and event.
        node.cpus = room.cpus[n] as u32;
        node.memory_gib = room.memory_gib[n] as u32;
    }
    out
}

/// CPU cores and memory `decision` takes per node, as the planner counts them: a job's own
/// share, else its node's GPU-proportional one on the whole `cluster` (guests take none).
fn host_use(cluster: &Cluster, decision: &Decision) -> Taken {
    let mut used = Taken::new(cluster.nodes.len());
    for a in decision.run.iter().filter(|a| a.guest.is_none()) {
        for &(node, gpus) in &a.placement.slots {
            let Some(whole) = cluster.node(node) else {
                continue;
            };
            let share = a
                .host
                .unwrap_or_else(|| arbiter_model::proportional_share(whole));
            used.cpus[node.index()] += share.cpus_per_gpu * f64::from(gpus);
            used.memory_gib[node.index()] += share.memory_per_gpu * f64::from(gpus);
        }
    }
    used
}

/// What `taken` and the GPUs `lower` classes hold (with their GPU-proportional CPUs and
/// memory) leave of each node of `cluster`, exactly (the class's copy of the cluster rounds its
/// CPUs and memory down to whole numbers).
fn room(cluster: &Cluster, taken: &Taken, lower: &[u32]) -> Taken {
    let mut left = Taken::new(cluster.nodes.len());
    for (n, node) in cluster.nodes.iter().enumerate() {
        let share = arbiter_model::proportional_share(node);
        let held = f64::from(lower[n]);
        left.gpus[n] = node.gpus.saturating_sub(taken.gpus[n] + lower[n]);
        left.cpus[n] = (f64::from(node.cpus) - taken.cpus[n] - share.cpus_per_gpu * held).max(0.0);
        left.memory_gib[n] =
            (f64::from(node.memory_gib) - taken.memory_gib[n] - share.memory_per_gpu * held)
                .max(0.0);
    }
    left
}

/// A job placed without its own host share gets the node's GPU-proportional one, counted on the
/// whole node; what a class has of a node may give less per GPU (a higher class took more than
/// its proportional CPUs or memory), so every such job is given explicitly the smaller of the
/// two shares on each of its nodes. `room`: what the class has of each node, exactly — not its
/// copy of the cluster, whose CPUs and memory are rounded down: a share smaller only by that
/// rounding pinned nearly every job, and the simulator, seeing decisions set their own shares,
/// stopped offering the present for the rest of the run (every event then cost the whole queue).
fn pin_host_shares(whole: &Cluster, room: &Taken, decision: &mut Decision) {
    for a in decision
        .run
        .iter_mut()
        .filter(|a| a.host.is_none() && a.colocation.is_none() && a.guest.is_none())
    {
        let shares = a.placement.slots.iter().filter_map(|&(node, _)| {
            let w = whole.node(node)?;
            let n = node.index();
            let gpus = f64::from(*room.gpus.get(n)?).max(1.0);
            Some((w, room.cpus[n] / gpus, room.memory_gib[n] / gpus))
        });
        let share = shares.fold(
            None::<arbiter_model::HostShare>,
            |least, (w, cpus, memory)| {
                let ws = arbiter_model::proportional_share(w);
                let here = arbiter_model::HostShare {
                    cpus_per_gpu: ws.cpus_per_gpu.min(cpus),
                    memory_per_gpu: ws.memory_per_gpu.min(memory),
                };
                Some(least.map_or(here, |l| arbiter_model::HostShare {
                    cpus_per_gpu: l.cpus_per_gpu.min(here.cpus_per_gpu),
                    memory_per_gpu: l.memory_per_gpu.min(here.memory_per_gpu),
                }))
            },
        );
        let first_whole = a
            .placement
            .slots
            .first()
            .and_then(|&(node, _)| whole.node(node))
            .map(arbiter_model::proportional_share);
        // (Smaller beyond floating-point error: equal shares computed two ways differ in the
        // last bits.)
        let below = |part: f64, whole: f64| part < whole * (1.0 - 1e-9);
        if let (Some(s), Some(w)) = (share, first_whole)
            && (below(s.cpus_per_gpu, w.cpus_per_gpu) || below(s.memory_per_gpu, w.memory_per_gpu))
        {
            a.host = Some(s);
        }
    }
}

fn merge(into: &mut Decision, decision: Decision) {
    into.run.extend(decision.run);
    into.pending.extend(decision.pending);
    into.admitted.extend(decision.admitted);
    into.wake_at = match (into.wake_at, decision.wake_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
}

/// Admission answers of both tries, each job once (the first try's answer stands: the policy
/// remembers it and does not answer again).
fn merge_admitted(
    first: Vec<(arbiter_model::JobId, bool)>,
    second: Vec<(arbiter_model::JobId, bool)>,
) -> Vec<(arbiter_model::JobId, bool)> {
    let seen: BTreeSet<_> = first.iter().map(|(id, _)| *id).collect();
    first
        .into_iter()
        .chain(second.into_iter().filter(|(id, _)| !seen.contains(id)))
        .collect()
}

#[cfg(test)]
#[path = "classes_tests.rs"]
mod tests;
