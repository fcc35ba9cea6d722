//! The decision of a round: what the policy is shown (a [`Snapshot`]), who decides, and what
//! happens when the decider fails.
//!
//! ```text
//!   snapshot (state locked) ──► built-in policy (state locked: pure and quick)
//!                           └─► external agent (state UNLOCKED: it may take its whole timeout)
//!                                 ──► relock; anything it saw moved? ──► decide again next round
//!   policy or agent failed ──► policy_fallback decides this round (the agent is restarted)
//! ```
//!
//! The agent is a program of the admin's, but what it is shown comes from tenants (their jobs,
//! their progress reports): a tenant able to make it crash or hang must not be able to stop
//! scheduling for everyone, nor to make the API wait. So a failure costs one round of the
//! agent's decisions, never the round itself, and the state lock is never held while it thinks.

use super::hold::{self, Hold};
use crate::daemon::{AgentSlot, Daemon, State};
use crate::records::job::{JobRecord, JobState};
use crate::records::view;
use arbiter_model::{
    ActiveJob, Admission, Cluster, Decision, JobSpec, Occupancy, QuotaUse, SimTime, Waiting,
};
use arbiter_policy::{Current, SchedulerView};
use std::collections::BTreeMap;
use std::sync::MutexGuard;

/// Per job array with a running limit (`%N`): how many more of its tasks may start.
fn array_room(state: &State) -> BTreeMap<u32, (u32, u32)> {
    let mut room = BTreeMap::new();
    for (&id, array) in &state.arrays {
        let Some(limit) = array.max_running else {
            continue;
        };
        let running = array
            .ids()
            .filter_map(|t| state.jobs.get(t as usize))
            .filter(|j| j.state.gpus().is_some())
            .count() as u32;
        room.insert(id, (limit, limit.saturating_sub(running)));
    }
    room
}

/// Takes a start for a queued task of an array from `room`; `Some(hold)` when its array has
/// as many tasks running as its limit allows.
fn take_array_room(
    room: &mut BTreeMap<u32, (u32, u32)>,
    task: crate::records::array::ArrayTask,
) -> Option<Hold> {
    let (limit, left) = room.get_mut(&task.array_id)?;
    if *left == 0 {
        return Some(Hold::ArrayLimit {
            array_id: task.array_id,
            limit: *limit,
        });
    }
    *left -= 1;
    None
}

/// Most ended jobs kept for an agent that has not been asked since they ended.
pub(crate) const MAX_AGENT_BACKLOG: usize = 10_000;

/// What the policy is shown at a round, kept until its decision is carried out.
pub(crate) struct Snapshot {
    /// Queued (not backing off, not opportunistic) and running jobs, in id order.
    pub(crate) active: Vec<ActiveJob>,
    /// When the first job backing off may be retried (Unix ms).
    pub(crate) retry_wake: Option<u64>,
    /// The cluster without the nodes that take no new runs (`None`: the whole cluster).
    pub(crate) reduced: Option<Cluster>,
    /// The present, as the simulator offers it to policies: `None` unless the last round was
    /// carried out whole (`State::present_exact`), and while running jobs share GPUs (see
    /// [`present_of`]).
    pub(crate) present: Option<Box<Present>>,
}

/// What is free and what waits, for a policy that decides by changes (a start costs what the
/// queue's head does, not a scan of every job) and for the planner that checks such a
/// decision against it.
pub(crate) struct Present {
    /// The cluster's GPUs minus the running jobs' placements.
    pub(crate) free: Occupancy,
    /// Positions in [`Snapshot::active`] of the waiting jobs.
    pub(crate) queued: Vec<u32>,
}

impl Snapshot {
    /// The present to offer the policy.
    fn current(&self) -> Option<Current<'_>> {
        self.present.as_ref().map(|p| Current {
            free: &p.free,
            queued: &p.queued,
            positions: None,
        })
    }
}

/// The present of `active` on `cluster` (the one the policy is shown): `None` when two running
/// jobs share a GPU (an occupancy counts GPUs per node, not which) or a running job's
/// placement does not fit its node; the policy is then asked for a whole decision.
fn present_of(
    cluster: &Cluster,
    active: &[ActiveJob],
    jobs: &crate::records::jobs::Jobs,
) -> Option<Box<Present>> {
    let mut free = Occupancy::new(cluster);
    let mut queued = Vec::new();
    let mut held: Vec<bool> = Vec::new();
    for (at, job) in active.iter().enumerate() {
        let Some(placement) = job.placement() else {
            queued.push(at as u32);
            continue;
        };
        for &gpu in jobs.get(job.id.index())?.state.gpus()? {
            let gpu = gpu as usize;
            if gpu >= held.len() {
                held.resize(gpu + 1, false);
            }
            if std::mem::replace(&mut held[gpu], true) {
                return None;
            }
        }
        free.allocate(placement).ok()?;
    }
    Some(Box::new(Present { free, queued }))
}

/// What the decision step came to (one per round, moved once: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decided {
    /// Carry `decision` out; `by` names who decided (the policy, or the fallback when
    /// `fallback`).
    Apply {
        snapshot: Snapshot,
        decision: Decision,
        by: &'static str,
        fallback: bool,
    },
    /// The agent decided on jobs that have changed since (ended, started, cancelled): nothing
    /// is applied and the next round decides again.
    Moved,
    /// Nothing can be decided this round (the fallback failed too): runs keep their GPUs.
    Nothing,
}

/// A job as the agent saw it: its id, state and GPUs.
type Seen = (u32, &'static str, Option<Vec<u32>>);

impl Daemon {
    /// The policy's view of the jobs at `now_ms` (`None`, with every queued job told why, when
    /// no node takes new runs).
    ///
    /// One pass over the jobs (each pass over 100,000 records costs milliseconds), and one more
    /// where a tenant has a GPU quota:
    /// - A waiting job its tenant's quota holds back is not offered (see `arbiter_model::admit`):
    ///   a policy offered it could preempt other tenants' jobs for it, or keep it at the head of
    ///   a queue beside free GPUs, and then the quota would refuse it the start.
    /// - An elastic job may grow only into what its tenant's quota leaves (a policy that does
    ///   not know quotas would keep choosing a count the quota then refuses). Quotas may change
    ///   at any time, so this is done at every decision.
    /// - A job backing off after a failed run says so and is not offered until its time; the
    ///   round ends when the first one's wait does.
    /// - Opportunistic jobs are not the policy's (see `opportunistic`): no quota counts them.
    pub(crate) fn snapshot(&self, state: &mut State, now_ms: u64) -> Option<Snapshot> {
        let now_s = (now_ms / 1000) as i64;
        let now = SimTime::from_ms(now_ms);
        let admission = admission(state, now_s);
        let mut spare_gpus = admission.spare_gpus.clone();
        let mut active = Vec::with_capacity(state.offered_last_round);
        let mut retry_wake: Option<u64> = None;
        let mut array_room = array_room(state);
        let mut words = String::new();
        let State {
            jobs,
            specs,
            tenants,
            topology,
            dependent,
            ..
        } = &mut *state;
        // By id: a pruned job has a spec (a placeholder) but no record. (Reasons are set
        // through `reason_of`, which cannot change a job's state: the jobs holding GPUs need not
        // be looked at again.)
        for (id, spec) in specs.iter_mut().enumerate() {
            let Some(job) = jobs.get(id) else {
                continue;
            };
            if let (Some(most), Some(range)) = (job.request.max_gpus, spec.elastic.as_mut())
                && !job.state.is_terminal()
            {
                range.max = most;
                if tenants
                    .get(&job.tenant)
                    .is_some_and(|t| t.gpu_quota.is_some())
                {
                    // Its GPUs now (the least it starts on, when waiting), and what is spare.
                    let base = job.state.gpus().map_or(range.min, |g| g.len() as u32);
                    let spare = spare_gpus.get_mut(&job.tenant);
                    let grow = spare
                        .as_ref()
                        .map_or(0, |s| most.saturating_sub(base).min(**s));
                    if let Some(s) = spare {
                        *s -= grow;
                    }
                    range.max = (base + grow).max(range.min);
                }
            }
            let hold = if dependent.contains_key(&job.id) {
                // Told why by `settle_dependencies`.
                None
            } else if job.backing_off(now_s) {
                let at = job.retry_after_unix_s.unwrap_or(now_s);
                let at_ms = at.max(0) as u64 * 1000;
                retry_wake = Some(retry_wake.map_or(at_ms, |w| w.min(at_ms)));
                Some(Hold::BackingOff {
                    failures: job.failures,
                    retry_in_s: at - now_s,
                })
            } else if let Some(quota) = admission.hold_of(job.id) {
                Some(Hold::Quota(quota))
            } else if let Some(full) = job
                .array
                .filter(|_| matches!(job.state, JobState::Queued))
                .and_then(|task| take_array_room(&mut array_room, task))
            {
                Some(full)
            } else {
                if !job.request.opportunistic
                    && let Some(a) = view::active_of(job, spec, topology, now)
                {
                    active.push(a);
                }
                None
            };
            if let Some(hold) = hold
                && let Some(slot) = jobs.reason_of(id)
            {
                hold::set_reusing(slot, &hold, &mut words);
            }
        }
        state.offered_last_round = active.len();
        // Nodes that take no new runs (drained or down in Slurm) offer only what runs there.
        let reduced =
            crate::daemon::round::usable_cluster(state, &self.executor.unavailable_nodes());
        if reduced
            .as_ref()
            .unwrap_or(state.topology.cluster())
            .total_gpus()
            == 0
        {
            for job in state
                .jobs
                .iter_mut()
                .filter(|j| matches!(j.state, JobState::Queued))
            {
                hold::set(job, &Hold::NoUsableNode);
            }
            return None;
        }
        let present = if state.present_exact {
            present_of(
                reduced.as_ref().unwrap_or(state.topology.cluster()),
                &active,
                &state.jobs,
            )
        } else {
            None
        };
        Some(Snapshot {
            active,
            retry_wake,
            reduced,
            present,
        })
    }

    /// Asks the policy for its decision on `snapshot`. A built-in policy decides with the state
    /// locked; the external agent with it unlocked (the guard is given back relocked). A policy
    /// or agent that fails hands the round to the fallback.
    pub(crate) fn decide<'a>(
        &'a self,
        mut guard: MutexGuard<'a, State>,
        snapshot: Snapshot,
        now_ms: u64,
    ) -> (MutexGuard<'a, State>, Decided) {
        let now = SimTime::from_ms(now_ms);
        let Some(agent) = &self.agent else {
            let state = &mut *guard;
            self.give_pair_speeds(state);
            self.hand_usage_to_policy(state);
            let decided = match state.policy.as_mut() {
                Some(policy) => {
                    let view = SchedulerView {
                        cluster: snapshot
                            .reduced
                            .as_ref()
                            .unwrap_or(state.topology.cluster()),
                        jobs: &snapshot.active,
                        specs: &state.specs,
                        current: snapshot.current(),
                    };
                    policy.schedule(&view, now).map(|d| (d, policy.name()))
                }
                None => Err(arbiter_policy::PolicyError::Config("no policy".into())),
            };
            return match decided {
                Ok((decision, by)) => (
                    guard,
                    Decided::Apply {
                        snapshot,
                        decision,
                        by,
                        fallback: false,
                    },
                ),
                Err(e) => {
                    let name = guard.policy_name();
                    self.fall_back(
                        guard,
                        snapshot,
                        now_ms,
                        &format!("policy {name} failed: {e}"),
                    )
                }
            };
        };
        // The agent thinks on copies, with the state unlocked.
        let cluster = snapshot
            .reduced
            .clone()
            .unwrap_or_else(|| guard.topology.cluster().clone());
        let specs = guard.specs.clone();
        let finished = std::mem::take(&mut guard.agent_finished);
        let seen: Vec<Seen> = snapshot
            .active
            .iter()
            .map(|a| seen_of(&guard.jobs[a.id.index()]))
            .collect();
        drop(guard);
        let answer = self.ask_agent(agent, &cluster, &snapshot.active, &specs, finished, now);
        let guard = self.lock();
        match answer {
            Err(e) => self.fall_back(
                guard,
                snapshot,
                now_ms,
                &format!("the policy agent failed: {e}; it is restarted for the next round"),
            ),
            // (A job that ended meanwhile may even have been pruned.)
            Ok(_)
                if seen
                    .iter()
                    .any(|s| guard.jobs.get(s.0 as usize).map(seen_of).as_ref() != Some(s)) =>
            {
                (guard, Decided::Moved)
            }
            Ok(decision) => (
                guard,
                Decided::Apply {
                    snapshot,
                    decision,
                    by: "external",
                    fallback: false,
                },
            ),
        }
    }

    /// The agent's decision on a copy of the state (started first if it is not running). A
    /// failed agent is dropped, which stops it; the next round starts a fresh one.
    fn ask_agent(
        &self,
        agent: &AgentSlot,
        cluster: &Cluster,
        active: &[ActiveJob],
        specs: &[JobSpec],
        finished: Vec<(JobSpec, ActiveJob, SimTime)>,
        now: SimTime,
    ) -> Result<Decision, String> {
        let mut slot = agent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if slot.is_none() {
            let mut config = crate::daemon::policy_support::policy_config(
                &Default::default(),
                self.settings.round_s,
                &self.settings.gittins_prior,
            );
            config.external = self.settings.external.clone();
            *slot = Some(
                arbiter_policy::build(arbiter_policy::PolicyKind::External, &config)
                    .map_err(|e| format!("cannot start it again: {e}"))?,
            );
        }
        let policy = slot.as_mut().ok_or("no agent")?;
        for (spec, job, at) in &finished {
            policy.job_finished(spec, job, *at);
        }
        let view = SchedulerView {
            cluster,
            jobs: active,
            specs,
            current: None,
        };
        let decided = policy.schedule(&view, now);
        if decided.is_err() {
            *slot = None;
        }
        decided.map_err(|e| e.to_string())
    }

    /// The fallback's decision for this round, on the state as it is now (it may have moved
    /// while a failing agent was waited for). Said loudly: a log line and a counter.
    fn fall_back<'a>(
        &'a self,
        mut guard: MutexGuard<'a, State>,
        stale: Snapshot,
        now_ms: u64,
        why: &str,
    ) -> (MutexGuard<'a, State>, Decided) {
        tracing::error!(
            "{why}; policy_fallback ({}) decides this round",
            self.settings.fallback
        );
        let state = &mut *guard;
        state.counters.fallback_rounds += 1;
        let snapshot = if self.agent.is_some() {
            self.snapshot(state, now_ms)
        } else {
            Some(stale)
        };
        let Some(snapshot) = snapshot else {
            return (guard, Decided::Nothing);
        };
        let view = SchedulerView {
            cluster: snapshot
                .reduced
                .as_ref()
                .unwrap_or(state.topology.cluster()),
            jobs: &snapshot.active,
            specs: &state.specs,
            current: None,
        };
        match state.fallback.schedule(&view, SimTime::from_ms(now_ms)) {
            Ok(decision) => {
                let by = state.fallback.name();
                (
                    guard,
                    Decided::Apply {
                        snapshot,
                        decision,
                        by,
                        fallback: true,
                    },
                )
            }
            Err(e) => {
                tracing::error!(
                    "policy_fallback {} failed too: {e}; nothing changes this round",
                    self.settings.fallback
                );
                (guard, Decided::Nothing)
            }
        }
    }

    /// What was learned about co-located pairs since the last round (Gandiva's introspection
    /// and the packed program read it from this decision on).
    fn give_pair_speeds(&self, state: &mut State) {
        if !state.pairs_changed {
            return;
        }
        if let (Some(speeds), Some(policy)) = (
            crate::daemon::policy_support::pair_speeds(
                self.settings.policy,
                &state.pairs,
                &state.topology.cluster().gpu_type_names,
            ),
            state.policy.as_mut(),
        ) {
            policy.set_pair_speeds(speeds);
        }
        state.pairs_changed = false;
    }
}

/// A job as the agent is shown it, to tell afterwards whether it moved.
fn seen_of(job: &JobRecord) -> Seen {
    (
        job.id,
        job.state.name(),
        job.state.gpus().map(<[u32]>::to_vec),
    )
}

/// Which waiting jobs the GPU quotas let the policy see at this round (everything, at no cost,
/// when no tenant has a quota). A tenant's jobs count what they hold, running or still
/// stopping; opportunistic jobs count against no quota.
fn admission(state: &State, now_s: i64) -> Admission {
    if state.tenants.values().all(|t| t.gpu_quota.is_none()) {
        return Admission::default();
    }
    let held = state.jobs.gpu_holders().held_by_tenant();
    let quotas: BTreeMap<&str, QuotaUse> = state
        .tenants
        .values()
        .filter_map(|t| {
            Some((
                t.name.as_str(),
                QuotaUse {
                    quota_gpus: t.gpu_quota?,
                    held_gpus: held.get(&t.name).copied().unwrap_or(0),
                },
            ))
        })
        .collect();
    let waiting = state
        .jobs
        .iter()
        .filter(|j| {
            !j.request.opportunistic
                && quotas.contains_key(j.tenant.as_str())
                && matches!(j.state, JobState::Queued)
                && !j.backing_off(now_s)
        })
        .filter(|j| !state.dependent.contains_key(&j.id))
        .map(|job| Waiting {
            id: job.id,
            tenant: job.tenant.as_str(),
            priority: job.request.priority,
            submitted: job.submitted_unix_s,
            gpus: job.request.gpus,
        })
        .collect();
    arbiter_model::admit(&quotas, waiting)
}
