//! Reservations and maintenance windows in the daemon (`records/reservation.rs` has the rules):
//! kept in the store, applied at every round — runs on a node whose window has begun and that
//! may not stay are preempted, and each job the policy is shown carries the nodes it may not be
//! placed on now (placement avoids them; the planner refuses a decision that uses them).

use crate::daemon::{Daemon, RequestError, State};
use crate::records::job::{FieldError, JobState, StopReason};
use crate::records::reservation::{Reservation, ReservationRequest};
use arbiter_model::NodeId;
use std::sync::Arc;

impl Daemon {
    /// Adds a reservation (the admin's); it applies from the next round.
    pub fn add_reservation(
        &self,
        request: ReservationRequest,
    ) -> Result<Reservation, RequestError> {
        let known: Vec<String> = self.settings.nodes.iter().map(|n| n.name.clone()).collect();
        request.validate(&known)?;
        let reservation = {
            let state = self.lock();
            if let Some(t) = request
                .tenant
                .as_deref()
                .filter(|t| !state.tenants.contains_key(*t))
            {
                return Err(FieldError {
                    field: "tenant",
                    reason: format!("`{}` is not a tenant", t.escape_debug()),
                }
                .into());
            }
            drop(state);
            let end = request
                .start_unix_s
                .saturating_add(i64::try_from(request.duration_s).unwrap_or(i64::MAX));
            let new = Reservation {
                id: 0,
                nodes: request.nodes,
                start_unix_s: request.start_unix_s,
                end_unix_s: end,
                tenant: request.tenant,
                reason: request.reason,
            };
            let stored = self.store.add_reservation(new)?;
            self.lock().reservations.push(stored.clone());
            stored
        };
        tracing::info!(reservation = reservation.id, nodes = ?reservation.nodes, "reservation added");
        self.wake.notify_one();
        Ok(reservation)
    }

    /// Deletes reservation `id`; `NotFound` if there is none.
    pub fn delete_reservation(&self, id: u32) -> Result<(), RequestError> {
        if !self.store.delete_reservation(id)? {
            return Err(RequestError::NotFound(id));
        }
        self.lock().reservations.retain(|r| r.id != id);
        self.wake.notify_one();
        Ok(())
    }

    /// The reservations not over at `now_s`, by start.
    pub fn reservations(&self) -> Vec<Reservation> {
        let now_s = self.now_s();
        let mut out: Vec<Reservation> = self.with_state(|s| {
            s.reservations
                .iter()
                .filter(|r| r.end_unix_s > now_s)
                .cloned()
                .collect()
        });
        out.sort_by_key(|r| (r.start_unix_s, r.id));
        out
    }

    /// Preempts the runs on nodes whose reservation has begun and does not admit them.
    pub(crate) fn evict_for_reservations(
        &self,
        state: &mut State,
        now_s: i64,
    ) -> Result<(), crate::daemon::DaemonError> {
        if state.reservations.iter().all(|r| !r.active(now_s)) {
            return Ok(());
        }
        let evicted: Vec<(u32, u32)> = state
            .jobs
            .iter()
            .filter(|j| matches!(j.state, JobState::Running { .. }))
            .filter_map(|j| {
                let nodes = state.topology.devices(j.state.gpus().unwrap_or_default());
                let r = state.reservations.iter().find(|r| {
                    r.evicts(&j.tenant, now_s) && nodes.iter().any(|n| r.nodes.contains(&n.node))
                })?;
                Some((j.id, r.id))
            })
            .collect();
        for (id, reservation) in evicted {
            tracing::info!(
                job = id,
                reservation,
                "preempted: its node's reservation has begun"
            );
            self.stop(state, id, StopReason::Preempted, false)?;
        }
        Ok(())
    }
}

/// Per reservation not over at `now_s`, its nodes' ids in `cluster`.
fn node_ids(state: &State, now_s: i64) -> Vec<(usize, Vec<NodeId>)> {
    let cluster = state.topology.cluster();
    state
        .reservations
        .iter()
        .enumerate()
        .filter(|(_, r)| r.end_unix_s > now_s)
        .map(|(i, r)| {
            (
                i,
                cluster
                    .nodes
                    .iter()
                    .filter(|n| r.nodes.contains(&n.name))
                    .map(|n| n.id)
                    .collect(),
            )
        })
        .collect()
}

/// Gives each job's spec the nodes it may not be placed on at `now_s` (a running job: only
/// those whose window has begun, which its run has just left); none when nothing is reserved.
pub(crate) fn mark_avoided_nodes(state: &mut State, now_s: i64, default_limit_s: Option<u64>) {
    // Reservations that are over stay on record until deleted, and cost no round anything.
    let nodes = node_ids(state, now_s);
    if nodes.is_empty() && !state.avoiding {
        return;
    }
    let State {
        jobs,
        specs,
        reservations,
        ..
    } = &mut *state;
    let mut any = false;
    for (id, spec) in specs.iter_mut().enumerate() {
        let Some(job) = jobs.get(id).filter(|j| !j.state.is_terminal()) else {
            spec.avoid_nodes = None;
            continue;
        };
        let running = job.state.gpus().is_some();
        let limit = job.request.max_run_time_s.or(default_limit_s);
        let mut avoid: Vec<NodeId> = Vec::new();
        for (i, ids) in &nodes {
            let r = &reservations[*i];
            let keeps_off = if running {
                r.evicts(&job.tenant, now_s)
            } else {
                !r.admits(&job.tenant, limit, now_s)
            };
            if keeps_off {
                avoid.extend(ids);
            }
        }
        avoid.sort_unstable();
        avoid.dedup();
        any |= !avoid.is_empty();
        spec.avoid_nodes = (!avoid.is_empty()).then(|| Arc::new(avoid));
    }
    state.avoiding = any;
}
