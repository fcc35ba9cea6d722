//! The gate between the shared planner's plan and the executor: which of the plan's steps the
//! daemon carries out now, and which wait and why. Every rule here is a place where the daemon
//! departs from the simulator (which carries a plan out whole and at once), so each is named
//! and tested on its own:
//!
//! - a running job within its minimum run time, or mid-round under a policy that decides by
//!   rounds, is not stopped or moved ([`super::hold::Protection`]);
//! - an executor that cannot share GPUs does not move a run into a group;
//! - a start waits while its previous run is stopping, while its GPUs are not free, or where it
//!   would share GPUs the executor cannot share ([`check_start`]).
//!
//! The functions read the state and decide; the round (`super`) carries their answers out.

use super::hold::{Hold, Partner, Protection};
use crate::daemon::State;
use crate::records::job::JobState;
use arbiter_model::{Action, Assignment, HostShare, JobId};
use std::collections::{BTreeMap, BTreeSet};

/// A step of the plan carried out before anything starts, in the plan's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum StopStep<'d> {
    /// Preempt this running job.
    Preempt(u32),
    /// Change this running job's CPU/memory share (or partner) in place.
    Reshare(&'d Assignment),
    /// Checkpoint this running job; it starts again as its assignment says once it has ended.
    Move(&'d Assignment),
}

/// What the gate lets through of a plan before the starts.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct StopGate<'d> {
    /// Stops and in-place changes, in order.
    pub steps: Vec<StopStep<'d>>,
    /// Jobs to start, in the decision's order: queued jobs, and the runs being moved.
    pub starts: Vec<&'d Assignment>,
    /// Running jobs the plan would stop or move that stay where they are for now.
    pub protected: BTreeMap<u32, Protection>,
}

/// What the executor can do, as far as the gate cares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExecutorCan {
    /// Change a run's CPU/memory limits without restarting it.
    pub live_reshare: bool,
    /// Let runs share GPUs.
    pub colocation: bool,
}

/// Gates the plan's preemptions (`preempt`) and actions. `protection` says whether a running
/// job may not be stopped yet; `share_unchanged` whether an assignment keeps its job's
/// CPU/memory share (only its partner changes).
pub(crate) fn gate_stops<'d>(
    preempt: &[JobId],
    actions: &[Action<'d>],
    can: ExecutorCan,
    protection: impl Fn(u32) -> Option<Protection>,
    share_unchanged: impl Fn(&Assignment) -> bool,
) -> StopGate<'d> {
    let mut gate = StopGate::default();
    for id in preempt {
        match protection(id.0) {
            Some(p) => drop(gate.protected.insert(id.0, p)),
            None => gate.steps.push(StopStep::Preempt(id.0)),
        }
    }
    for action in actions {
        match *action {
            Action::Start(a) => gate.starts.push(a),
            Action::Keep(_) => {}
            Action::Reshare(a) if can.live_reshare || share_unchanged(a) => {
                gate.steps.push(StopStep::Reshare(a))
            }
            // Without co-location (Slurm), a run is not moved into a group: it would be stopped
            // only to wait for its partners' GPUs (see `check_start`).
            Action::Migrate(a) if !can.colocation && a.colocation.is_some() => {}
            // Moved to other GPUs — or given a CPU/memory share an executor cannot change live —
            // a run is checkpointed and started again once it has ended; unless it is protected.
            Action::Migrate(a) | Action::Reshare(a) => match protection(a.job.0) {
                Some(p) => drop(gate.protected.insert(a.job.0, p)),
                None => {
                    gate.steps.push(StopStep::Move(a));
                    gate.starts.push(a);
                }
            },
        }
    }
    gate
}

/// GPUs taken as the round's starts are decided: held by runs (and, for quotas, per tenant),
/// and given this round, per job (co-located partners take the same ones).
pub(crate) struct Taken {
    pub held: BTreeSet<u32>,
    pub held_by_tenant: BTreeMap<String, u32>,
    pub given: BTreeMap<u32, Vec<u32>>,
}

impl Taken {
    /// What the jobs hold now (opportunistic jobs count against no tenant).
    pub(crate) fn now(state: &State) -> Self {
        let holders = state.jobs.gpu_holders();
        Taken {
            held: holders.held(),
            held_by_tenant: holders.held_by_tenant(),
            given: BTreeMap::new(),
        }
    }

    /// Records a start on `gpus`.
    pub(crate) fn give(&mut self, id: u32, tenant: &str, gpus: &[u32]) {
        self.held.extend(gpus.iter().copied());
        *self.held_by_tenant.entry(tenant.to_string()).or_insert(0) += gpus.len() as u32;
        self.given.insert(id, gpus.to_vec());
    }
}

/// A run to start: the job, its GPUs (global ids), its CPU/memory share.
#[derive(Debug)]
pub(crate) struct Start {
    pub(crate) id: u32,
    pub(crate) gpus: Vec<u32>,
    pub(crate) host: Option<HostShare>,
}

/// The gate's answer for one start.
#[derive(Debug, PartialEq)]
pub(crate) enum StartCheck {
    /// Start it on these GPUs.
    Start(Vec<u32>),
    /// It waits.
    Hold(Hold),
    /// Its GPUs are not free: room must be made (opportunistic runs yield) or waited for.
    NoRoom,
}

/// Facts about the round a start is checked against, beside the state.
pub(crate) struct StartRound<'a, 'd> {
    /// The decision's assignments by job (for co-location groups).
    pub by_job: &'a BTreeMap<u32, &'d Assignment>,
    pub can: ExecutorCan,
    /// Who decided (named in a hold).
    pub by: &'static str,
    pub executor: &'static str,
    /// How to let the executor share GPUs, if it can be told to.
    pub colocation_hint: Option<&'static str>,
}

/// Whether `a` starts now, on which GPUs, or why not.
pub(crate) fn check_start(
    state: &State,
    taken: &Taken,
    round: &StartRound<'_, '_>,
    a: &Assignment,
) -> StartCheck {
    let id = a.job.0;
    let job = &state.jobs[id as usize];
    if !matches!(job.state, JobState::Queued) {
        return StartCheck::Hold(Hold::StillStopping);
    }
    // The quota let the policy see only jobs that fit (`decide::admission`); this is the last
    // word for a quota changed while an external agent was deciding.
    let quota = state.tenants.get(&job.tenant).and_then(|t| t.gpu_quota);
    let held_now = taken.held_by_tenant.get(&job.tenant).copied().unwrap_or(0);
    if let Some(quota) = quota.filter(|q| held_now + a.placement.gpus() > *q) {
        tracing::warn!(
            job = id,
            "the policy placed a job its tenant's quota holds back (the quota changed meanwhile?)"
        );
        return StartCheck::Hold(Hold::QuotaChanged { quota });
    }
    let shares_with = partner_gpus(state, taken, round.by_job, a)
        .filter(|(_, g)| state.topology.placement_of(g).as_ref() == Some(&a.placement));
    // An executor that gives a GPU to one run at a time (Slurm) cannot carry the sharing out:
    // the first member of a group to start runs alone, the others wait — never started on GPUs
    // another run holds.
    if let (false, Some((member, gpus))) = (round.can.colocation, &shares_with) {
        let with = if state.jobs[*member as usize].tenant == job.tenant {
            Partner::Own(*member)
        } else {
            Partner::Other
        };
        return StartCheck::Hold(Hold::SharingUnsupported {
            by: round.by,
            gpus: gpus.clone(),
            with,
            executor: round.executor,
            hint: round.colocation_hint,
        });
    }
    match shares_with
        .map(|(_, g)| g)
        .or_else(|| free_gpus(state, &taken.held, a))
    {
        Some(gpus) => StartCheck::Start(gpus),
        None => StartCheck::NoRoom,
    }
}

/// The GPUs another member of `a`'s co-location group has (given this round, or held), and who.
fn partner_gpus(
    state: &State,
    taken: &Taken,
    by_job: &BTreeMap<u32, &Assignment>,
    a: &Assignment,
) -> Option<(u32, Vec<u32>)> {
    let mut at = a.colocation.map(|c| c.partner);
    for _ in 1..arbiter_model::MAX_GROUP {
        let member = at.filter(|m| *m != a.job)?;
        let gpus = taken
            .given
            .get(&member.0)
            .cloned()
            .or_else(|| state.jobs[member.index()].state.gpus().map(<[u32]>::to_vec));
        if let Some(gpus) = gpus {
            return Some((member.0, gpus));
        }
        at = by_job
            .get(&member.0)
            .and_then(|m| m.colocation)
            .map(|c| c.partner);
    }
    None
}

/// Free GPUs for `a`'s placement (the lowest ids free on each of its nodes), or `None` when a
/// node does not have them free yet.
pub(crate) fn free_gpus(state: &State, held: &BTreeSet<u32>, a: &Assignment) -> Option<Vec<u32>> {
    let mut gpus = Vec::with_capacity(a.placement.gpus() as usize);
    for &(node, count) in &a.placement.slots {
        let free: Vec<u32> = state
            .topology
            .gpus_of(node)
            .filter(|g| !held.contains(g))
            .take(count as usize)
            .collect();
        if free.len() < count as usize {
            return None;
        }
        gpus.extend(free);
    }
    Some(gpus)
}

/// Why `a` waits for GPUs that are not free: opportunistic runs yielding them (`yielding`), a
/// protected job holding them, or a preempted one still releasing them.
pub(crate) fn no_room(
    state: &State,
    protected: &BTreeMap<u32, Protection>,
    a: &Assignment,
    yielding: &[u32],
    now_ms: u64,
) -> Hold {
    let tenant = &state.jobs[a.job.index()].tenant;
    let own = |other: u32| state.jobs[other as usize].tenant == *tenant;
    if !yielding.is_empty() {
        return Hold::Yielding {
            own: yielding.iter().copied().filter(|j| own(*j)).collect(),
            others: yielding.iter().any(|j| !own(*j)),
        };
    }
    let on_its_nodes = |p: u32| {
        state.jobs[p as usize].state.gpus().is_some_and(|g| {
            g.iter().any(|g| {
                a.placement
                    .slots
                    .iter()
                    .any(|(n, _)| state.topology.node_of(*g) == Some(*n))
            })
        })
    };
    match protected.iter().find(|(p, _)| on_its_nodes(**p)) {
        Some((&p, &protection)) => Hold::Protected {
            holder: if own(p) {
                Partner::Own(p)
            } else {
                Partner::Other
            },
            protection,
            left_s: protection.until_ms().saturating_sub(now_ms) as f64 / 1000.0,
        },
        None => Hold::Releasing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{Colocation, NodeId, Placement};

    fn assignment(job: u32, gpus: u32) -> Assignment {
        Assignment::exclusive(
            JobId(job),
            Placement {
                slots: [(NodeId(0), gpus)].into_iter().collect(),
            },
        )
    }

    const LOCAL: ExecutorCan = ExecutorCan {
        live_reshare: true,
        colocation: true,
    };
    const SLURM: ExecutorCan = ExecutorCan {
        live_reshare: false,
        colocation: false,
    };

    #[test]
    fn a_protected_job_is_neither_preempted_nor_moved_and_says_until_when() {
        let moved = assignment(2, 1);
        let actions = [Action::Migrate(&moved)];
        let protection = |id: u32| (id != 3).then_some(Protection::MinRun(9_000));
        let gate = gate_stops(&[JobId(1), JobId(3)], &actions, LOCAL, protection, |_| {
            false
        });
        assert_eq!(gate.steps, vec![StopStep::Preempt(3)]);
        assert!(gate.starts.is_empty());
        assert_eq!(
            gate.protected,
            BTreeMap::from([
                (1, Protection::MinRun(9_000)),
                (2, Protection::MinRun(9_000))
            ])
        );
    }

    #[test]
    fn a_move_is_a_stop_then_a_start_in_the_decisions_order() {
        let (queued, moved) = (assignment(1, 1), assignment(2, 2));
        let actions = [Action::Migrate(&moved), Action::Start(&queued)];
        let gate = gate_stops(&[], &actions, LOCAL, |_| None, |_| false);
        assert_eq!(gate.steps, vec![StopStep::Move(&moved)]);
        assert_eq!(gate.starts, vec![&moved, &queued]);
    }

    #[test]
    fn a_new_share_is_applied_in_place_where_the_executor_can_else_by_a_restart() {
        let reshared = assignment(4, 1);
        let actions = [Action::Reshare(&reshared)];
        assert_eq!(
            gate_stops(&[], &actions, LOCAL, |_| None, |_| false).steps,
            vec![StopStep::Reshare(&reshared)]
        );
        assert_eq!(
            gate_stops(&[], &actions, SLURM, |_| None, |_| false).steps,
            vec![StopStep::Move(&reshared)]
        );
        // Only the partner changed: in place everywhere.
        assert_eq!(
            gate_stops(&[], &actions, SLURM, |_| None, |_| true).steps,
            vec![StopStep::Reshare(&reshared)]
        );
    }

    #[test]
    fn without_colocation_a_run_is_not_moved_into_a_group() {
        let mut grouped = assignment(5, 1);
        grouped.colocation = Some(Colocation {
            partner: JobId(6),
            speed: 0.9,
        });
        let actions = [Action::Migrate(&grouped)];
        assert_eq!(
            gate_stops(&[], &actions, SLURM, |_| None, |_| false),
            StopGate::default()
        );
        assert_eq!(
            gate_stops(&[], &actions, LOCAL, |_| None, |_| false).steps,
            vec![StopStep::Move(&grouped)]
        );
    }
}
