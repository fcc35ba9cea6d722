//! One scheduling round of the daemon, as a pipeline: the simulator's policy decides, the shared
//! planner ([`arbiter_model::Planner::plan`]) checks the decision and turns it into actions, the
//! gate keeps back what the daemon may not carry out yet, the executor carries out the rest, and
//! every waiting job is told why it waits.
//!
//! ```text
//!   tend runs (ended runs, grace periods, time limits, pruning)
//!     ──► snapshot (quota admission, back-offs) ──► decide (policy, or agent; fallback)   decide.rs
//!     ──► plan (Planner::plan: refused whole if invalid)
//!     ──► gate: stops (protections, co-location support)                                  gate.rs
//!     ──► carry out stops ──► runs that ended meanwhile
//!     ──► gate: starts (still stopping, quota, shared GPUs, free GPUs) ──► carry out starts
//!     ──► explain (each waiting job's hold, in words)                                      hold.rs
//! ```

pub(crate) mod decide;
pub(crate) mod gate;
pub(crate) mod hold;
mod prune;

use crate::daemon::{Daemon, DaemonError, State};
use crate::executor::{Ended, SweepInput, checkpoint_signal};
use crate::records::job::{JobRecord, JobState, StopReason};
use arbiter_model::{
    Action, ActiveJob, Assignment, Cluster, Decision, JobId, PendingReason, Plan, Standing,
};
use decide::{Decided, Snapshot};
use gate::{ExecutorCan, Start, StartCheck, StartRound, StopGate, StopStep, Taken};
use hold::{Hold, Protection};
use std::collections::{BTreeMap, BTreeSet};

impl Daemon {
    /// One scheduling round: tend the runs, ask the policy, carry out its plan.
    pub fn tick(&self) -> Result<(), DaemonError> {
        // Rounds never overlap, also while the state is unlocked for an external agent.
        let _round = self
            .round
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now_ms = self.now_ms();
        let mut guard = self.lock();
        self.tend_runs(&mut guard, now_ms)?;
        let scheduled = match self.snapshot(&mut guard, now_ms) {
            None => Ok(()),
            Some(snapshot) => {
                let (relocked, decided) = self.decide(guard, snapshot, now_ms);
                guard = relocked;
                // Set again below when the policy's decision is carried out whole.
                guard.present_exact = false;
                match decided {
                    Decided::Apply {
                        snapshot,
                        decision,
                        by,
                        fallback,
                    } => self
                        .schedule(&mut guard, snapshot, &decision, by, now_ms)
                        .map(|whole| guard.present_exact = whole && !fallback),
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

    /// Before the decision: write what the store refused before, learn which runs ended, kill
    /// runs past their grace period, stop runs past their time limit, prune ended jobs.
    fn tend_runs(&self, state: &mut State, now_ms: u64) -> Result<(), DaemonError> {
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
        self.kill_overdue(state, now_ms);
        let now_s = (now_ms / 1000) as i64;
        let over: Vec<u32> = state
            .jobs
            .holding()
            .into_iter()
            .filter_map(|j| match (&j.state, j.request.max_run_time_s) {
                (JobState::Running { started_unix_s, .. }, Some(limit))
                    if i64::try_from(limit)
                        .is_ok_and(|l| now_s.saturating_sub(*started_unix_s) >= l) =>
                {
                    Some(j.id)
                }
                _ => None,
            })
            .collect();
        for id in over {
            self.stop(state, id, StopReason::TimedOut, false)?;
        }
        self.collect_ended(state);
        self.prune_ended(state, now_s);
        self.settle_dependencies(state, now_s);
        self.evict_for_reservations(state, now_s)?;
        crate::daemon::reservations::mark_avoided_nodes(
            state,
            now_s,
            self.settings.default_max_run_time_s,
        );
        Ok(())
    }

    /// Kills runs past their grace period (again at every round until they are gone: a job
    /// forking faster than one scan of the process table must not outlive its run).
    fn kill_overdue(&self, state: &mut State, now_ms: u64) {
        for (id, w) in state.watched.iter_mut() {
            if w.kill_at_ms.is_some_and(|at| now_ms >= at) {
                if !w.sigkilled {
                    tracing::warn!(
                        job = id,
                        handle = w.handle,
                        "grace period over: killing the run"
                    );
                    w.sigkilled = true;
                }
                self.executor.kill(*id, w.handle);
                w.kill_at_ms = Some(now_ms + 200);
            }
        }
    }

    /// Carries out `decision` (made by the policy named `by` on `snapshot`): plan, gate, carry
    /// out, explain. Whether it was carried out whole: every start started, every stop done,
    /// nothing moved or reshared.
    fn schedule(
        &self,
        state: &mut State,
        snapshot: Snapshot,
        decision: &Decision,
        by: &'static str,
        now_ms: u64,
    ) -> Result<bool, DaemonError> {
        let Snapshot {
            active,
            retry_wake,
            reduced,
            present,
        } = snapshot;
        let free_now = present.as_ref().map(|p| &p.free);
        let plan = plan(state, &active, reduced.as_ref(), free_now, decision).map_err(|e| {
            DaemonError::Config(format!(
                "policy {by} decided what cannot be carried out; nothing applied: {e}"
            ))
        })?;
        if decision.keep_unlisted {
            state.counters.rounds_by_changes += 1;
        }
        self.note_decision(state, decision, retry_wake);
        let rule = self.protection_rule(state, now_ms);
        let capabilities = self.executor.capabilities();
        let can = ExecutorCan {
            live_reshare: capabilities.live_reshare,
            colocation: capabilities.colocation,
        };
        let gate = gate::gate_stops(
            &plan.preempt,
            &plan.actions,
            can,
            |id| rule.of(state, id),
            |a| a.host == state.jobs[a.job.index()].host_share,
        );
        self.carry_out_stops(state, &gate)?;
        if let Some(until) = gate.protected.values().map(|p| p.until_ms()).min() {
            // Come back when the first protection ends.
            state.wake_at_ms = Some(state.wake_at_ms.map_or(until, |w| w.min(until)));
        }
        // Runs that ended meanwhile (an executor may end a run at its signal) free their GPUs for
        // the starts.
        self.collect_ended(state);
        let round = StartRound {
            by_job: &decision.run.iter().map(|a| (a.job.0, a)).collect(),
            can,
            by,
            executor: self.executor.name(),
            colocation_hint: capabilities.colocation_hint,
        };
        let started = self.carry_out_starts(state, &gate, &round, now_ms)?;
        explain(state, &active, decision, &started);
        let starts = plan
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Start(_)))
            .count();
        let moves = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::Migrate(_) | Action::Reshare(_)));
        Ok(gate.protected.is_empty() && !moves && started.len() == starts)
    }

    /// What the decision says beside its placements: when to decide again, and admission
    /// answers (Chronus), kept with the job, the first one only.
    fn note_decision(&self, state: &mut State, decision: &Decision, retry_wake: Option<u64>) {
        state.wake_at_ms = match (decision.wake_at.map(|t| t.as_ms()), retry_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for &(id, admitted) in &decision.admitted {
            if state
                .jobs
                .get(id.index())
                .is_some_and(|j| j.deadline_admitted.is_none())
            {
                state.jobs[id.index()].deadline_admitted = Some(admitted);
                tracing::info!(
                    job = id.0,
                    admitted,
                    "deadline {}",
                    if admitted {
                        "guaranteed"
                    } else {
                        "not guaranteed: runs on spare GPUs"
                    }
                );
                self.record(state, id.0);
            }
        }
    }

    /// Which running jobs may not be stopped yet: within their minimum run time, or — under a
    /// policy that decides by rounds (Gavel's and Synergy's families, Gandiva) — mid-round. Such
    /// a policy called at every event between rounds would otherwise re-rank and swap jobs each
    /// time (eight 3-second jobs on 4 GPUs: 1,483 preemptions under ftf+proportional); between
    /// rounds it may still start jobs on free GPUs. Starts the next round when this one is over.
    fn protection_rule(&self, state: &mut State, now_ms: u64) -> ProtectionRule {
        let round_ms = (self.settings.round_s * 1000.0) as u64;
        // This call is the next round's boundary once the round that began at
        // `round_started_ms` is over. (Protecting runs until the end of the round that begins
        // now would defer preemptions forever: the loop's round timer lands on boundaries.)
        let round_over = now_ms >= state.round_started_ms.saturating_add(round_ms);
        if round_over {
            state.round_started_ms = now_ms;
        }
        ProtectionRule {
            now_ms,
            min_run_s: self.settings.min_run_s,
            mid_round_until_ms: (self.settings.policy.decides_by_rounds() && !round_over)
                .then(|| state.round_started_ms.saturating_add(round_ms)),
        }
    }

    /// Preempts, moves and reshares as the gate let through, in order.
    fn carry_out_stops(&self, state: &mut State, gate: &StopGate<'_>) -> Result<(), DaemonError> {
        for step in &gate.steps {
            let id = match *step {
                StopStep::Reshare(a) => {
                    self.reshare(state, a);
                    continue;
                }
                StopStep::Preempt(id) => id,
                StopStep::Move(a) => {
                    tracing::info!(
                        job = a.job.0,
                        "the policy moves it to {}: checkpoint, then start there",
                        a.placement
                    );
                    a.job.0
                }
            };
            self.stop(state, id, StopReason::Preempted, false)?;
            state.counters.preemptions += 1;
        }
        Ok(())
    }

    /// Starts what the gate lets start, on concrete GPUs, and says why the others wait; then the
    /// opportunistic jobs on GPUs still idle. Returns the jobs started.
    fn carry_out_starts(
        &self,
        state: &mut State,
        gate: &StopGate<'_>,
        round: &StartRound<'_, '_>,
        now_ms: u64,
    ) -> Result<BTreeSet<u32>, DaemonError> {
        let mut taken = Taken::now(state);
        let mut starts: Vec<Start> = Vec::new();
        // Nodes a placed job waits for: no opportunistic job starts there.
        let mut reserved: BTreeSet<arbiter_model::NodeId> = BTreeSet::new();
        for &a in &gate.starts {
            let id = a.job.0;
            let hold = match gate::check_start(state, &taken, round, a) {
                StartCheck::Start(gpus) => {
                    let tenant = state.jobs[id as usize].tenant.clone();
                    taken.give(id, &tenant, &gpus);
                    starts.push(Start {
                        id,
                        gpus,
                        host: a.host,
                    });
                    continue;
                }
                StartCheck::Hold(hold) => hold,
                StartCheck::NoRoom => {
                    reserved.extend(a.placement.slots.iter().map(|(n, _)| *n));
                    let yielding = self.make_room(state, &taken.held, a)?;
                    gate::no_room(state, &gate.protected, a, &yielding, now_ms)
                }
            };
            let job = &mut state.jobs[id as usize];
            if hold::set(job, &hold) && matches!(hold, Hold::SharingUnsupported { .. }) {
                tracing::warn!(
                    job = id,
                    "not started: {}",
                    job.pending_reason.as_deref().unwrap_or_default()
                );
            }
        }
        // Persisted together, then launched in order.
        let started = self.start_runs(state, starts)?.into_iter().collect();
        self.start_opportunistic(state, &mut taken.held, &reserved, (now_ms / 1000) as i64)?;
        Ok(started)
    }

    /// A running job keeps its GPUs with a new partner or CPU/memory share: its limits change
    /// in place.
    fn reshare(&self, state: &mut State, a: &Assignment) {
        let id = a.job.0;
        if state.jobs[id as usize].host_share == a.host {
            return; // only the partner changed: nothing to do for the run
        }
        let Some(handle) = state.jobs[id as usize].state.pid() else {
            return;
        };
        let gpus = state.jobs[id as usize].state.gpus().map_or(0, <[u32]>::len) as u32;
        let (cpus, memory_bytes) = self.limits_for(state, id, gpus, a.host);
        match self.executor.reshare(id, handle, cpus, memory_bytes) {
            Ok(()) => {
                tracing::info!(
                    job = id,
                    cpus,
                    memory_gib = memory_bytes as f64 / (1u64 << 30) as f64,
                    "CPU/memory share changed"
                );
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
        let live: Vec<(u32, Option<u32>)> = state
            .watched
            .iter()
            .map(|(id, w)| {
                (
                    w.handle,
                    state
                        .allocated_uids
                        .get(&state.jobs[*id as usize].tenant)
                        .copied(),
                )
            })
            .collect();
        let ended: Vec<u32> = state
            .ended_tenants
            .iter()
            .filter_map(|t| state.allocated_uids.get(t))
            .copied()
            .collect();
        self.executor.sweep(&SweepInput {
            automatic_uids: &automatic,
            live: &live,
            ended_uids: &ended,
        });
    }

    /// Sends the checkpoint signal of a job being stopped (used by `stop` and recovery).
    pub(crate) fn send_checkpoint_signal(&self, job: &JobRecord, handle: u32) {
        self.executor.signal(
            job.id,
            handle,
            checkpoint_signal(&job.request.checkpoint_signal),
        );
    }

    /// A run ended (reported by the executor): conclude it, unless it is not the job's current
    /// run.
    fn end_run(&self, state: &mut State, ended: Ended) {
        let id = ended.job;
        let Some(job) = state.jobs.get(id as usize) else {
            return;
        };
        if job.state.pid() != Some(ended.handle) {
            return; // an earlier run of the job, already concluded
        }
        self.run_ended(state, id, ended.code);
    }
}

/// The running jobs the planner may see stopped: see `Daemon::protection_rule`.
struct ProtectionRule {
    now_ms: u64,
    min_run_s: f64,
    /// When the current round ends, where the policy decides by rounds and it is not over.
    mid_round_until_ms: Option<u64>,
}

impl ProtectionRule {
    fn of(&self, state: &State, id: u32) -> Option<Protection> {
        let job = &state.jobs[id as usize];
        let JobState::Running { started_unix_s, .. } = job.state else {
            return None;
        };
        let min_run_s = job
            .request
            .min_run_time_s
            .map_or(self.min_run_s, |s| s as f64);
        let min_run_ends_ms = (started_unix_s.max(0) as f64 * 1000.0 + min_run_s * 1000.0) as u64;
        if self.now_ms < min_run_ends_ms {
            Some(Protection::MinRun(min_run_ends_ms))
        } else {
            self.mid_round_until_ms
                .filter(|until| self.now_ms < *until)
                .map(Protection::Round)
        }
    }
}

/// The shared planner's check of `decision` on the jobs the policy was shown (gang sizes, GPU
/// types, capacity, co-location, CPU/memory): a decision that fails it is refused whole, loudly,
/// and nothing is applied. A decision by changes is checked against `free_now`, the occupancy
/// the policy was offered; without one (none was offered) the planner refuses it.
fn plan<'d>(
    state: &mut State,
    active: &[ActiveJob],
    reduced: Option<&Cluster>,
    free_now: Option<&arbiter_model::Occupancy>,
    decision: &'d Decision,
) -> Result<Plan<'d>, arbiter_model::PlanError> {
    let partner_of = state.jobs.gpu_holders().partners();
    let State {
        jobs,
        planner,
        specs,
        topology,
        ..
    } = state;
    let jobs = &*jobs;
    // `active` is in id order (built from the jobs in order).
    let standing = |id: JobId| {
        let a = &active[active.binary_search_by_key(&id.0, |a| a.id.0).ok()?];
        Some(match a.placement() {
            Some(placement) => Standing::Running {
                placement,
                partner: partner_of.get(&id.0).map(|p| JobId(*p)),
                host: jobs[id.index()].host_share,
            },
            None => Standing::Queued,
        })
    };
    let running = active.iter().filter(|a| a.is_running()).map(|a| a.id);
    planner.plan(
        reduced.unwrap_or(topology.cluster()),
        specs,
        standing,
        running,
        free_now,
        decision,
    )
}

/// Tells each waiting job the policy did not place why it waits: the policy's reason, else
/// lower priority. Jobs placed but held back, and jobs not offered (backing off, held by their
/// quota), were told already.
fn explain(state: &mut State, active: &[ActiveJob], decision: &Decision, started: &BTreeSet<u32>) {
    // Per job id: whether the policy placed it (or it started).
    let mut placed = vec![false; state.jobs.len()];
    for id in decision
        .run
        .iter()
        .map(|a| a.job.0)
        .chain(started.iter().copied())
    {
        if let Some(p) = placed.get_mut(id as usize) {
            *p = true;
        }
    }
    // The last word on a job counts.
    let mut reasons: Vec<Option<PendingReason>> = vec![None; state.jobs.len()];
    for (id, r) in &decision.pending {
        if let Some(slot) = reasons.get_mut(id.index()) {
            *slot = Some(*r);
        }
    }
    let mut words = String::new();
    let State {
        jobs,
        specs,
        reservations,
        policy,
        worded_quota_tree,
        ..
    } = &mut *state;
    let quota = policy.as_deref().and_then(|p| p.quota_round());
    if let Some((tree, _)) = quota
        && worded_quota_tree.as_ref() != Some(tree)
    {
        jobs.forget_quota_reasons();
        *worded_quota_tree = Some(tree.clone());
    }
    // Words per hold, made once: a full cluster holds most queued jobs for a handful of reasons.
    let mut quota_words: BTreeMap<arbiter_policy::quotas::QuotaHold, String> = BTreeMap::new();
    // The jobs told here: offered, still waiting now (not started meanwhile, not cancelled
    // while an agent decided), not placed.
    let waits = |j: &JobRecord| matches!(j.state, JobState::Queued) && !j.request.opportunistic;
    // (Each reason is set through `reason_of`, `set_shared_reason` or `set_quota_reason`, which
    // cannot change a job's state: the jobs holding GPUs need not be looked at again. The
    // policy's reason and the quota tree's, most waiting jobs', are set without reading the
    // record when the job already has it.)
    for a in active {
        let at = a.id.index();
        if placed.get(at).is_none_or(|&p| p) {
            continue;
        }
        let reason = reasons
            .get(at)
            .copied()
            .flatten()
            .unwrap_or(PendingReason::LowerPriority);
        let held = quota
            .filter(|_| reason == PendingReason::Quota)
            .and_then(|(tree, round)| round.hold_of(a.id).map(|h| (tree, h)));
        if let Some((tree, hold)) = held {
            let hold = hold.without_counts();
            jobs.set_quota_reason(at, hold, waits, || {
                quota_words.entry(hold).or_insert_with(|| hold.reason(tree))
            });
            continue;
        }
        // A job kept off reserved nodes says so: the policy's words alone would not tell why
        // GPUs that look free are not its. (Its spec is read only when there are reservations.)
        let avoids =
            !reservations.is_empty() && specs.get(at).is_some_and(|s| s.avoid_nodes.is_some());
        if !avoids {
            jobs.set_shared_reason(at, reason.as_str(), waits);
            continue;
        }
        let Some(job) = jobs.get(at).filter(|j| waits(j)) else {
            continue;
        };
        let hold = reservations
            .iter()
            .rev()
            .find(|r| r.tenant.as_deref() != Some(job.tenant.as_str()))
            .map_or(Hold::Policy(reason), |r| Hold::Reserved {
                policy: reason,
                what: r.describe(&job.tenant),
            });
        if let Some(slot) = jobs.reason_of(at) {
            hold::set_reusing(slot, &hold, &mut words);
        }
    }
}

/// The cluster as the policy sees it when some nodes take no new runs: each of them offers only
/// the GPUs its runs hold (they keep them; nothing new lands there). `None` when all are usable.
pub(crate) fn usable_cluster(
    state: &State,
    unavailable: &BTreeSet<String>,
) -> Option<arbiter_model::Cluster> {
    if unavailable.is_empty() {
        return None;
    }
    let holders = state.jobs.gpu_holders();
    let mut cluster = state.topology.cluster().clone();
    for node in cluster
        .nodes
        .iter_mut()
        .filter(|n| unavailable.contains(&n.name))
    {
        node.gpus = state
            .topology
            .gpus_of(node.id)
            .filter(|g| holders.is_held(*g))
            .count() as u32;
    }
    Some(cluster)
}

/// Brings `state.sharing_since` in line with who holds which GPUs after a round: a job whose set
/// of GPU partners changed starts settling again (`pairs::SETTLE_S`), jobs holding no GPUs are
/// forgotten.
fn observe_sharing(state: &mut State, now_ms: u64) {
    let holding = state.jobs.gpu_holders().sharing();
    state.sharing_since.retain(|id, _| holding.contains_key(id));
    for (id, others) in holding {
        match state.sharing_since.get(&id) {
            Some((seen, _)) if *seen == others => {}
            _ => {
                state.sharing_since.insert(id, (others, now_ms));
            }
        }
    }
}
