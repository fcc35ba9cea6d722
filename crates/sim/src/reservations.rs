//! Reservations and maintenance windows in a simulation (`[[simulation.reservations]]`), by the
//! daemon's rules (`arbiter reserve`): nodes set aside from `start_s` for `duration_s`, for one
//! tenant or (no tenant) for maintenance. Before the start a job is placed there only if it
//! would end before it — a simulated job's time limit is its remaining work, as a user who
//! knows it would give — or the reservation is its tenant's; at the start, runs there that it
//! does not admit are preempted; during the window only its tenant's jobs are placed there.

use arbiter_model::{ActiveJob, Cluster, JobSpec, NodeId, SimTime};
use serde::{Deserialize, Serialize};

/// One reservation, as a scenario gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationSpec {
    /// Nodes, by name (`n0`, ... on a generated cluster).
    pub nodes: Vec<String>,
    /// When it starts, seconds from the start of the simulation.
    pub start_s: f64,
    /// How long it lasts, seconds.
    pub duration_s: f64,
    /// The tenant it is for; unset: maintenance (no job runs there).
    #[serde(default)]
    pub tenant: Option<String>,
}

impl ReservationSpec {
    /// Checks the numbers (`at`: its index, for the message).
    pub fn validate(&self, at: usize) -> Result<(), String> {
        if !(self.start_s.is_finite() && self.start_s >= 0.0) {
            return Err(format!(
                "reservations.{at}.start_s must be >= 0, got {}",
                self.start_s
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(format!(
                "reservations.{at}.duration_s must be > 0, got {}",
                self.duration_s
            ));
        }
        if self.nodes.is_empty() {
            return Err(format!("reservations.{at}.nodes is empty"));
        }
        Ok(())
    }
}

/// A reservation resolved on a cluster.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    nodes: Vec<NodeId>,
    pub(crate) start: SimTime,
    pub(crate) end: SimTime,
    tenant: Option<String>,
}

impl Window {
    /// The reservations of `specs` on `cluster`; an unknown node is an error naming it.
    pub(crate) fn resolve(
        specs: &[ReservationSpec],
        cluster: &Cluster,
    ) -> Result<Vec<Window>, String> {
        specs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let nodes = r
                    .nodes
                    .iter()
                    .map(|name| {
                        cluster
                            .nodes
                            .iter()
                            .find(|n| &n.name == name)
                            .map(|n| n.id)
                            .ok_or_else(|| {
                                format!("reservations.{i}.nodes: no node `{name}` in the cluster")
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let start = SimTime::from_secs_f64(r.start_s);
                Ok(Window {
                    nodes,
                    start,
                    end: SimTime::from_secs_f64(r.start_s + r.duration_s),
                    tenant: r.tenant.clone(),
                })
            })
            .collect()
    }

    fn active(&self, now: SimTime) -> bool {
        self.start <= now && now < self.end
    }

    fn is_tenants(&self, spec: &JobSpec) -> bool {
        self.tenant.as_deref() == Some(spec.tenant.as_str())
    }

    /// Whether a run of `spec` on its nodes must stop at `now`.
    pub(crate) fn evicts(&self, spec: &JobSpec, now: SimTime) -> bool {
        self.active(now) && !self.is_tenants(spec)
    }

    /// Whether its nodes hold `node`.
    pub(crate) fn holds(&self, node: NodeId) -> bool {
        self.nodes.contains(&node)
    }

    /// Whether `job` may be placed on its nodes at `now` (a running job: unless it is evicted).
    fn admits(&self, spec: &JobSpec, job: &ActiveJob, now: SimTime) -> bool {
        if self.is_tenants(spec) || now >= self.end {
            return true;
        }
        if job.is_running() || now >= self.start {
            return !self.active(now);
        }
        now.as_secs_f64() + job.remaining_s <= self.start.as_secs_f64()
    }
}

/// The nodes `job` must avoid at `now` (`None`: none).
pub(crate) fn avoided(
    windows: &[Window],
    spec: &JobSpec,
    job: &ActiveJob,
    now: SimTime,
) -> Option<std::sync::Arc<Vec<NodeId>>> {
    let mut nodes: Vec<NodeId> = windows
        .iter()
        .filter(|w| !w.admits(spec, job, now))
        .flat_map(|w| w.nodes.iter().copied())
        .collect();
    if nodes.is_empty() {
        return None;
    }
    nodes.sort_unstable();
    nodes.dedup();
    Some(std::sync::Arc::new(nodes))
}
