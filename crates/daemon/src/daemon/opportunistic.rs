//! Opportunistic jobs, as AntMan (OSDI'20) runs them in production: they soak up GPUs the other
//! jobs leave idle and give them back at once.
//!
//! The policy never sees them: they are not in its snapshot, so they count against no quota
//! and no fair share, and no decision preempts or places them. After the policy's starts, the
//! daemon starts queued opportunistic jobs, oldest first, on whole GPUs nothing else holds (one
//! node of a type they may use), leaving alone the nodes a placed job is waiting for. When a job
//! the policy placed needs GPUs an opportunistic run holds, that run gets its checkpoint signal
//! and at most [`crate::records::job::OPPORTUNISTIC_GRACE_S`] to go; it is requeued like any preempted
//! run, and the placed job starts as soon as the GPUs are free.

use crate::daemon::round::gate::Start;
use crate::daemon::{Daemon, DaemonError, State};
use crate::records::job::{JobState, StopReason};
use arbiter_model::{Assignment, NodeId};
use std::collections::BTreeSet;

impl Daemon {
    /// Asks the opportunistic runs on `a`'s nodes to yield as many GPUs as `a` lacks there
    /// (youngest run first; runs already yielding count). Returns the jobs that are yielding
    /// GPUs `a` waits for.
    pub(crate) fn make_room(
        &self,
        state: &mut State,
        held: &BTreeSet<u32>,
        a: &Assignment,
    ) -> Result<Vec<u32>, DaemonError> {
        let mut yielding = Vec::new();
        for &(node, count) in &a.placement.slots {
            let gpus = state.topology.gpus_of(node);
            let free = gpus.clone().filter(|g| !held.contains(g)).count() as u32;
            let mut lacking = count.saturating_sub(free);
            if lacking == 0 {
                continue;
            }
            // Opportunistic runs on this node: those already stopping first (their GPUs are on
            // their way), then the youngest.
            let mut here: Vec<(bool, i64, u32, u32)> = state
                .jobs
                .iter()
                .filter(|j| j.request.opportunistic)
                .filter_map(|j| {
                    let on_node =
                        j.state.gpus()?.iter().filter(|g| gpus.contains(g)).count() as u32;
                    match j.state {
                        JobState::Stopping { .. } => Some((false, 0, j.id, on_node)),
                        JobState::Running { started_unix_s, .. } => {
                            Some((true, -started_unix_s, j.id, on_node))
                        }
                        _ => None,
                    }
                })
                .filter(|(_, _, _, on_node)| *on_node > 0)
                .collect();
            here.sort();
            for (running, _, id, on_node) in here {
                if lacking == 0 {
                    break;
                }
                if running {
                    tracing::info!(
                        job = id,
                        for_job = a.job.0,
                        "opportunistic run yields its GPUs"
                    );
                    self.stop(state, id, StopReason::Preempted, false)?;
                    state.counters.preemptions += 1;
                }
                yielding.push(id);
                lacking = lacking.saturating_sub(on_node);
            }
        }
        Ok(yielding)
    }

    /// Starts queued opportunistic jobs, oldest first, each on free GPUs of one node it may run
    /// on, avoiding `reserved` nodes; says why the others wait.
    pub(crate) fn start_opportunistic(
        &self,
        state: &mut State,
        held: &mut BTreeSet<u32>,
        reserved: &BTreeSet<NodeId>,
        now_s: i64,
    ) -> Result<(), DaemonError> {
        let mut queued = state.jobs.opportunistic_waiting();
        queued.retain(|id| !state.jobs[*id as usize].backing_off(now_s));
        let mut starts = Vec::new();
        for id in queued {
            let spec = &state.specs[id as usize];
            let node = state.topology.cluster().nodes.iter().find(|n| {
                !reserved.contains(&n.id)
                    && spec.gpu_type.is_none_or(|t| t == n.gpu_type)
                    && spec.speed_on(n.gpu_type) > 0.0
                    && state
                        .topology
                        .gpus_of(n.id)
                        .filter(|g| !held.contains(g))
                        .count() as u32
                        >= spec.gpus
            });
            let Some(node) = node.map(|n| n.id) else {
                crate::daemon::round::hold::set(
                    &mut state.jobs[id as usize],
                    &crate::daemon::round::hold::Hold::Opportunistic,
                );
                continue;
            };
            let gpus: Vec<u32> = state
                .topology
                .gpus_of(node)
                .filter(|g| !held.contains(g))
                .take(spec.gpus as usize)
                .collect();
            held.extend(gpus.iter().copied());
            starts.push(Start {
                id,
                gpus,
                host: None,
            });
        }
        self.start_runs(state, starts)?;
        Ok(())
    }
}
