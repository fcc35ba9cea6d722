//! One scheduling round of the daemon: the simulator's policy decides, the shared planner
//! ([`arbiter_model::Planner::plan`]) checks the decision and turns it into actions, and the
//! daemon carries the actions out through its executor.
//!
//! ```text
//!   runs that ended ──► grace periods, time limits ──► snapshot ──► policy.schedule
//!     ──► Planner::plan (refused whole if invalid) ──► preempt / migrate / reshare
//!     ──► runs that ended meanwhile ──► start on concrete GPUs
//! ```

use crate::daemon::{Daemon, DaemonError, State};
use crate::decide::{Decided, Snapshot};
use crate::executor::{checkpoint_signal, Ended, SweepInput};
use crate::job::{JobRecord, JobState, StopReason};
use crate::runs::Start;
use arbiter_model::{Action, Assignment, Decision, JobId, Standing};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Why a running job may not be stopped yet, and until when (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protection {
    /// Within its minimum run time.
    MinRun(u64),
    /// A round-based policy's round is not over.
    Round(u64),
}

impl Protection {
    fn until_ms(self) -> u64 {
        match self {
            Protection::MinRun(t) | Protection::Round(t) => t,
        }
    }
}

impl Daemon {
    /// One scheduling round: write what the store refused before, learn which runs ended,
    /// enforce grace periods and time limits, ask the policy, carry out its plan.
    pub fn tick(&self) -> Result<(), DaemonError> {
        // Rounds never overlap, also while the state is unlocked for an external agent.
        let _round = self.round.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now_ms = self.now_ms();
        let mut guard = self.lock();
        let state = &mut *guard;
        state.counters.rounds += 1;
        self.flush_dirty(state);
        self.collect_ended(state);
        // The process table is read when a run has ended, else every few seconds (not at every
        // submission: a burst of them would read /proc hundreds of times a second).
        if state.run_ended_since_check || now_ms >= state.strays_checked_ms + 5_000 {
            self.sweep(state);
            state.strays_checked_ms = now_ms;
            state.run_ended_since_check = false;
            state.ended_tenants.clear();
        }
        // Kill runs past their grace period (again at every round until they are gone: a job
        // forking faster than one scan of the process table must not outlive its run).
        for (id, w) in state.watched.iter_mut() {
            if w.kill_at_ms.is_some_and(|at| now_ms >= at) {
                if !w.sigkilled {
                    tracing::warn!(job = id, handle = w.handle, "grace period over: killing the run");
                    w.sigkilled = true;
                }
                self.executor.kill(*id, w.handle);
                w.kill_at_ms = Some(now_ms + 200);
            }
        }
        let now_s = (now_ms / 1000) as i64;
        let over: Vec<u32> = state
            .jobs
            .iter()
            .filter_map(|j| match (&j.state, j.request.max_run_time_s) {
                (JobState::Running { started_unix_s, .. }, Some(limit)) if i64::try_from(limit).is_ok_and(|l| now_s.saturating_sub(*started_unix_s) >= l) => Some(j.id),
                _ => None,
            })
            .collect();
        for id in over {
            self.stop(state, id, StopReason::TimedOut, false)?;
        }
        self.collect_ended(state);
        self.prune_ended(state, now_s);
        let scheduled = match self.snapshot(state, now_ms) {
            None => Ok(()),
            Some(snapshot) => {
                let (relocked, decided) = self.decide(guard, snapshot, now_ms);
                guard = relocked;
                match decided {
                    Decided::Apply { snapshot, decision, by } => self.schedule(&mut guard, snapshot, &decision, by, now_ms),
                    Decided::Nothing => Ok(()),
                    Decided::Moved => {
                        // What the agent saw changed while it thought: decide again at once.
                        self.wake.notify_one();
                        Ok(())
                    }
                }
            }
        };
        observe_sharing(&mut guard, now_ms);
        scheduled
    }

    /// Carries out `decision` (made by the policy named `by` on `snapshot`): the shared
    /// planner checks it, then runs are stopped, moved and started, and waiting jobs say why.
    fn schedule(&self, state: &mut State, snapshot: Snapshot, decision: &Decision, by: &'static str, now_ms: u64) -> Result<(), DaemonError> {
        let now_s = (now_ms / 1000) as i64;
        let Snapshot { active, retry_wake, reduced, .. } = snapshot;
        let cluster = reduced.as_ref().unwrap_or(state.topology.cluster());
        // Who shares GPUs with whom: running jobs holding exactly the same GPUs.
        let mut by_gpus: BTreeMap<&[u32], Vec<u32>> = BTreeMap::new();
        for j in state.jobs.iter().filter(|j| matches!(j.state, JobState::Running { .. })) {
            if let Some(g) = j.state.gpus() {
                by_gpus.entry(g).or_default().push(j.id);
            }
        }
        // A group of jobs on the same GPUs is a ring, each naming the next (a pair names each other).
        let partner_of: BTreeMap<u32, u32> = by_gpus
            .values()
            .filter(|ids| (2..=arbiter_model::MAX_GROUP).contains(&ids.len()))
            .flat_map(|ids| ids.iter().enumerate().map(|(i, id)| (*id, ids[(i + 1) % ids.len()])))
            .collect();
        let jobs = &state.jobs;
        // `active` is in id order (built from the jobs in order).
        let standing = |id: JobId| {
            let a = &active[active.binary_search_by_key(&id.0, |a| a.id.0).ok()?];
            Some(match a.placement() {
                Some(placement) => Standing::Running { placement, partner: partner_of.get(&id.0).map(|p| JobId(*p)), host: jobs[id.index()].host_share },
                None => Standing::Queued,
            })
        };
        let running = active.iter().filter(|a| a.is_running()).map(|a| a.id);
        // The simulator's own check (gang sizes, GPU types, capacity, co-location, CPU/memory):
        // a decision that fails it is refused whole, loudly, and nothing is applied.
        // The daemon offers policies no current state (`SchedulerView::current`), so a decision
        // by changes would come only from a confused policy: the planner refuses it.
        let plan = match state.planner.plan(cluster, &state.specs, standing, running, None, decision) {
            Ok(plan) => plan,
            Err(e) => return Err(DaemonError::Config(format!("policy {by} decided what cannot be carried out; nothing applied: {e}"))),
        };
        state.wake_at_ms = match (decision.wake_at.map(|t| t.as_ms()), retry_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Why each waiting job waits, by job id (the last word on a job counts).
        let mut reasons: Vec<Option<&arbiter_model::PendingReason>> = vec![None; state.jobs.len()];
        for (id, r) in &decision.pending {
            if let Some(slot) = reasons.get_mut(id.index()) {
                *slot = Some(r);
            }
        }
        // Admission answers (Chronus): kept with the job, the first one only.
        for &(id, admitted) in &decision.admitted {
            if state.jobs.get(id.index()).is_some_and(|j| j.deadline_admitted.is_none()) {
                state.jobs[id.index()].deadline_admitted = Some(admitted);
                tracing::info!(job = id.0, admitted, "deadline {}", if admitted { "guaranteed" } else { "not guaranteed: runs on spare GPUs" });
                self.record(state, id.0);
            }
        }

        // Preempt what the plan stops — unless it is still within its minimum run time, or the
        // policy decides by rounds (Gavel's and Synergy's families, Gandiva) and the round is not over: such
        // a policy called at every event between rounds would otherwise re-rank and swap jobs each
        // time (eight 3-second jobs on 4 GPUs: 1,483 preemptions under ftf+proportional). Between
        // rounds it may still start jobs on free GPUs.
        let round_ms = (self.settings.round_s * 1000.0) as u64;
        // The round that began at `round_started_ms` is over: this call is the next round's
        // boundary, where a round-based policy's preemptions are carried out. (Protecting runs
        // until the end of the round that begins now would defer them forever: the loop's
        // round timer lands on boundaries.)
        let round_over = now_ms >= state.round_started_ms.saturating_add(round_ms);
        if round_over {
            state.round_started_ms = now_ms;
        }
        let round_ends_ms = state.round_started_ms.saturating_add(round_ms);
        let by_rounds = self.settings.policy.decides_by_rounds();
        let protection = |state: &State, id: u32| -> Option<Protection> {
            let JobState::Running { started_unix_s, .. } = state.jobs[id as usize].state else { return None };
            let min_run_s = state.jobs[id as usize].request.min_run_time_s.map_or(self.settings.min_run_s, |s| s as f64);
            let min_run_ends_ms = (started_unix_s.max(0) as f64 * 1000.0 + min_run_s * 1000.0) as u64;
            if now_ms < min_run_ends_ms {
                Some(Protection::MinRun(min_run_ends_ms))
            } else if by_rounds && !round_over && now_ms < round_ends_ms {
                Some(Protection::Round(round_ends_ms))
            } else {
                None
            }
        };
        let mut protected: BTreeMap<u32, Protection> = BTreeMap::new();
        for &id in &plan.preempt {
            if let Some(p) = protection(state, id.0) {
                protected.insert(id.0, p);
                continue;
            }
            self.stop(state, id.0, StopReason::Preempted, false)?;
            state.counters.preemptions += 1;
        }
        let live_reshare = self.executor.capabilities().live_reshare;
        let colocation = self.executor.capabilities().colocation;
        // Starts, in the decision's order: new jobs, and jobs whose run is being moved.
        let mut to_start: Vec<&Assignment> = Vec::new();
        for action in &plan.actions {
            match *action {
                Action::Start(a) => to_start.push(a),
                Action::Keep(_) => {}
                Action::Reshare(a) if live_reshare || a.host == state.jobs[a.job.index()].host_share => self.reshare(state, a),
                // Without co-location (Slurm), a run is not moved into a group: it would be
                // stopped only to wait for its partners' GPUs (see the starts below).
                Action::Migrate(a) if !colocation && a.colocation.is_some() => {}
                // A run the policy moves to other GPUs — or whose CPU/memory share changes on an
                // executor that cannot change it live — is checkpointed and started again there
                // once its run has ended. (Within its minimum run time, or mid-round for a
                // round-based policy, it stays put.)
                Action::Migrate(a) | Action::Reshare(a) => {
                    if let Some(p) = protection(state, a.job.0) {
                        protected.insert(a.job.0, p);
                        continue;
                    }
                    tracing::info!(job = a.job.0, "the policy moves it to {}: checkpoint, then start there", a.placement);
                    self.stop(state, a.job.0, StopReason::Preempted, false)?;
                    state.counters.preemptions += 1;
                    to_start.push(a);
                }
            }
        }
        if let Some(until) = protected.values().map(|p| p.until_ms()).min() {
            // Come back when the first protection ends.
            state.wake_at_ms = Some(state.wake_at_ms.map_or(until, |w| w.min(until)));
        }
        // Runs that ended meanwhile (an executor may end a run at its signal) free their GPUs for
        // the starts below.
        self.collect_ended(state);
        // GPUs held, and per tenant how many its jobs (not opportunistic ones) hold.
        let mut held: BTreeSet<u32> = BTreeSet::new();
        let mut held_by_tenant: BTreeMap<String, u32> = BTreeMap::new();
        for job in &state.jobs {
            if let Some(gpus) = job.state.gpus() {
                held.extend(gpus.iter().copied());
                if !job.request.opportunistic {
                    *held_by_tenant.entry(job.tenant.clone()).or_insert(0) += gpus.len() as u32;
                }
            }
        }
        // GPUs given in this round, per job (co-located partners take the same ones).
        let mut given: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut started: BTreeSet<u32> = BTreeSet::new();
        let mut starts: Vec<Start> = Vec::new();
        let by_job: BTreeMap<u32, &Assignment> = decision.run.iter().map(|a| (a.job.0, a)).collect();
        // Nodes a placed job waits for: no opportunistic job starts there.
        let mut reserved: BTreeSet<arbiter_model::NodeId> = BTreeSet::new();
        for a in to_start {
            let id = a.job.0;
            if !matches!(state.jobs[id as usize].state, JobState::Queued) {
                // Still stopping (its run has not ended yet): started at a later round.
                state.jobs[id as usize].pending_reason = Some("waiting for its previous run to end before it moves".into());
                continue;
            }
            // The quota let the policy see only jobs that fit (see `decide::admission`); this is
            // the last word for a quota changed while an external agent was deciding.
            let tenant = state.jobs[id as usize].tenant.clone();
            let quota = state.tenants.get(&tenant).and_then(|t| t.gpu_quota);
            let held_now = held_by_tenant.get(&tenant).copied().unwrap_or(0);
            if let Some(quota) = quota.filter(|q| held_now + a.placement.gpus() > *q) {
                tracing::warn!(job = id, "the policy placed a job its tenant's quota holds back (the quota changed meanwhile?)");
                state.jobs[id as usize].pending_reason = Some(format!("tenant {tenant} is at its GPU quota ({quota})"));
                continue;
            }
            // A member of a group takes the GPUs another member has (given this round, or held).
            let mut partner_gpus = None;
            let mut at = a.colocation.map(|c| c.partner);
            for _ in 1..arbiter_model::MAX_GROUP {
                let Some(member) = at.filter(|m| *m != a.job) else { break };
                partner_gpus = given.get(&member.0).cloned().or_else(|| state.jobs[member.index()].state.gpus().map(<[u32]>::to_vec)).map(|g| (member.0, g));
                if partner_gpus.is_some() {
                    break;
                }
                at = by_job.get(&member.0).and_then(|m| m.colocation).map(|c| c.partner);
            }
            // An executor that gives a GPU to one run at a time (Slurm) cannot carry the sharing
            // out: the first member of a group to start runs alone, the others wait — said in
            // their pending reason, never started on GPUs another run holds.
            let shares_with = partner_gpus.filter(|(_, g)| state.topology.placement_of(g).as_ref() == Some(&a.placement));
            if !colocation
                && let Some((member, gpus)) = &shares_with
            {
                let with = if state.jobs[*member as usize].tenant == state.jobs[id as usize].tenant { format!("job {member}") } else { "another tenant's job".into() };
                let gpus: Vec<String> = gpus.iter().map(u32::to_string).collect();
                let hint = if self.executor.name() == "slurm" { "; `[slurm] share_gpus = true` lets it" } else { "" };
                let reason = format!(
                    "the policy ({}) shares GPUs {} between it and {with}, which the {} executor cannot do (it gives a GPU to one job at a time{hint}): waiting for them to be free",
                    by,
                    gpus.join(","),
                    self.executor.name()
                );
                if state.jobs[id as usize].pending_reason.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(job = id, "not started: {reason}");
                }
                state.jobs[id as usize].pending_reason = Some(reason);
                continue;
            }
            let gpus = shares_with.map(|(_, g)| g).or_else(|| pick_gpus(state, &held, a));
            let Some(gpus) = gpus else {
                reserved.extend(a.placement.slots.iter().map(|(n, _)| *n));
                let yielding = self.make_room(state, &held, a)?;
                // A pending reason is shown to the job's tenant: another tenant's job is named
                // only as that, with nothing of its timing (it would tell when it started and
                // its minimum run time).
                let own = |other: u32| state.jobs[other as usize].tenant == state.jobs[id as usize].tenant;
                if !yielding.is_empty() {
                    let mut names: Vec<String> = yielding.iter().filter(|j| own(**j)).map(|j| format!("job {j}")).collect();
                    if yielding.iter().any(|j| !own(*j)) {
                        names.push("another tenant's opportunistic job(s)".into());
                    }
                    state.jobs[id as usize].pending_reason = Some(format!("waiting for {} to yield their GPUs", names.join(", ")));
                    continue;
                }
                let holder = protected.iter().find(|(p, _)| {
                    state.jobs[**p as usize].state.gpus().is_some_and(|g| g.iter().any(|g| a.placement.slots.iter().any(|(n, _)| state.topology.node_of(*g) == Some(*n))))
                });
                let left_s = |until: &u64| until.saturating_sub(now_ms) as f64 / 1000.0;
                state.jobs[id as usize].pending_reason = Some(match holder {
                    Some((p, protection)) if !own(*p) => match protection {
                        Protection::Round(_) => "waiting for the round to end before another tenant's job may be preempted".into(),
                        Protection::MinRun(_) => "waiting for another tenant's job's minimum run time before it may be preempted".into(),
                    },
                    Some((p, Protection::Round(until))) => format!("waiting for the round to end ({:.0} s) before job {p} may be preempted", left_s(until)),
                    Some((p, Protection::MinRun(until))) => format!("waiting for job {p}'s minimum run time ({:.0} s left) before it may be preempted", left_s(until)),
                    None => "waiting for a preempted job to release its GPUs".into(),
                });
                continue;
            };
            held.extend(gpus.iter().copied());
            *held_by_tenant.entry(tenant).or_insert(0) += gpus.len() as u32;
            given.insert(id, gpus.clone());
            starts.push(Start { id, gpus, host: a.host });
        }
        // Persisted together, then launched in order.
        started.extend(self.start_runs(state, starts)?);
        self.start_opportunistic(state, &mut held, &reserved, now_s)?;
        // Jobs the policy placed, and jobs started: by id.
        let mut placed = vec![false; state.jobs.len()];
        for id in decision.run.iter().map(|a| a.job.0).chain(started.iter().copied()) {
            if let Some(p) = placed.get_mut(id as usize) {
                *p = true;
            }
        }
        let mut reason = String::new();
        for job in state.jobs.iter_mut().filter(|j| matches!(j.state, JobState::Queued) && !j.request.opportunistic) {
            // Started, placed but held back above (GPUs still being released), or not offered
            // at all (backing off, held by its quota): its reason is written already.
            if placed[job.id as usize] || active.binary_search_by_key(&job.id, |a| a.id.0).is_err() {
                continue;
            }
            // Written out only where it changed (most waiting jobs wait for the same reason as
            // at the last round).
            reason.clear();
            match reasons.get(job.id as usize).copied().flatten() {
                Some(r) => {
                    let _ = write!(reason, "{r}");
                }
                None => reason.push_str("lower priority than the running jobs"),
            }
            if job.pending_reason.as_deref() != Some(reason.as_str()) {
                job.pending_reason = Some(reason.clone());
            }
        }
        Ok(())
    }

    /// A running job keeps its GPUs with a new partner or CPU/memory share: its limits change
    /// in place.
    fn reshare(&self, state: &mut State, a: &Assignment) {
        let id = a.job.0;
        if state.jobs[id as usize].host_share == a.host {
            return; // only the partner changed: nothing to do for the run
        }
        let Some(handle) = state.jobs[id as usize].state.pid() else { return };
        let gpus = state.jobs[id as usize].state.gpus().map_or(0, <[u32]>::len) as u32;
        let (cpus, memory_bytes) = self.limits_for(state, id, gpus, a.host);
        match self.executor.reshare(id, handle, cpus, memory_bytes) {
            Ok(()) => {
                tracing::info!(job = id, cpus, memory_gib = memory_bytes as f64 / (1u64 << 30) as f64, "CPU/memory share changed");
                state.jobs[id as usize].host_share = a.host;
                self.record(state, id);
            }
            Err(e) => tracing::warn!(job = id, "could not change its CPU/memory limits: {e}"),
        }
    }

    /// Concludes the runs the executor reports ended.
    pub(crate) fn collect_ended(&self, state: &mut State) {
        for ended in self.executor.take_ended() {
            self.end_run(state, ended);
        }
    }

    /// The executor's housekeeping (the local executor kills processes that escaped their run).
    fn sweep(&self, state: &State) {
        if !self.settings.isolation.is_isolated() {
            return;
        }
        let automatic = crate::executor::local::automatic_uids(&state.allocated_uids);
        let live: Vec<(u32, Option<u32>)> = state.watched.iter().map(|(id, w)| (w.handle, state.allocated_uids.get(&state.jobs[*id as usize].tenant).copied())).collect();
        let ended: Vec<u32> = state.ended_tenants.iter().filter_map(|t| state.allocated_uids.get(t)).copied().collect();
        self.executor.sweep(&SweepInput { automatic_uids: &automatic, live: &live, ended_uids: &ended });
    }

    /// Sends the checkpoint signal of a job being stopped (used by `stop` and recovery).
    pub(crate) fn send_checkpoint_signal(&self, job: &JobRecord, handle: u32) {
        self.executor.signal(job.id, handle, checkpoint_signal(&job.request.checkpoint_signal));
    }

    /// A run ended (reported by the executor): conclude it, unless it is not the job's current
    /// run.
    fn end_run(&self, state: &mut State, ended: Ended) {
        let id = ended.job;
        let Some(job) = state.jobs.get(id as usize) else { return };
        if job.state.pid() != Some(ended.handle) {
            return; // an earlier run of the job, already concluded
        }
        self.run_ended(state, id, ended.code);
    }
}

/// GPUs held by running or stopping jobs.
/// The cluster as the policy sees it when some nodes take no new runs: each of them offers only
/// the GPUs its runs hold (they keep them; nothing new lands there). `None` when all are usable.
pub(crate) fn usable_cluster(state: &State, unavailable: &BTreeSet<String>) -> Option<arbiter_model::Cluster> {
    if unavailable.is_empty() {
        return None;
    }
    let held = held_gpus(state);
    let mut cluster = state.topology.cluster().clone();
    for node in cluster.nodes.iter_mut().filter(|n| unavailable.contains(&n.name)) {
        node.gpus = state.topology.gpus_of(node.id).filter(|g| held.contains(g)).count() as u32;
    }
    Some(cluster)
}

/// Brings `state.sharing_since` in line with who holds which GPUs after a round: a job whose set
/// of GPU partners changed starts settling again (`pairs::SETTLE_S`), jobs holding no GPUs are
/// forgotten.
fn observe_sharing(state: &mut State, now_ms: u64) {
    // Jobs by GPU held (indexed by GPU: no map of thousands of GPUs at every round).
    let mut by_gpu: Vec<Vec<u32>> = vec![Vec::new(); state.topology.total_gpus() as usize];
    for job in &state.jobs {
        for &g in job.state.gpus().unwrap_or_default() {
            if by_gpu.len() <= g as usize {
                by_gpu.resize(g as usize + 1, Vec::new());
            }
            by_gpu[g as usize].push(job.id);
        }
    }
    let mut holding: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for ids in by_gpu.iter().filter(|ids| !ids.is_empty()) {
        for &id in ids {
            let others = holding.entry(id).or_default();
            others.extend(ids.iter().copied().filter(|o| *o != id));
        }
    }
    state.sharing_since.retain(|id, _| holding.contains_key(id));
    for (id, mut others) in holding {
        others.sort_unstable();
        others.dedup();
        match state.sharing_since.get(&id) {
            Some((seen, _)) if *seen == others => {}
            _ => {
                state.sharing_since.insert(id, (others, now_ms));
            }
        }
    }
}

pub(crate) fn held_gpus(state: &State) -> BTreeSet<u32> {
    state.jobs.iter().filter_map(|j| j.state.gpus()).flatten().copied().collect()
}

/// Free GPUs for `a`'s placement (the lowest ids free on each of its nodes), or `None` when a
/// node does not have them free yet.
fn pick_gpus(state: &State, held: &BTreeSet<u32>, a: &Assignment) -> Option<Vec<u32>> {
    let mut gpus = Vec::with_capacity(a.placement.gpus() as usize);
    for &(node, count) in &a.placement.slots {
        let free: Vec<u32> = state.topology.gpus_of(node).filter(|g| !held.contains(g)).take(count as usize).collect();
        if free.len() < count as usize {
            return None;
        }
        gpus.extend(free);
    }
    Some(gpus)
}
