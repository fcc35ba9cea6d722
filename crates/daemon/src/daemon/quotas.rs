//! The quota tree in the daemon (`arbiter_policy::quotas` has the rules): kept in the store,
//! changed by the admin only (checked whole before it is stored: a tree that does not add up is
//! refused with the numbers), enforced by the policy wrapper the daemon built its policy in, and
//! shown to each tenant as far as it may see it — its own node and its parents' totals, never a
//! sibling's.

use crate::daemon::{Daemon, RequestError, State};
use crate::records::job::FieldError;
use crate::records::view;
use arbiter_model::{ActiveJob, Cluster, SimTime};
use arbiter_policy::SchedulerView;
use arbiter_policy::quotas::round::RunningUse;
use arbiter_policy::quotas::{QuotaGroup, QuotaRound, QuotaTree};
use serde_json::{Value, json};

/// The tree of `groups` bound to `cluster`: none when there are no groups; with why, when they
/// do not fit (not enforced then, and said loudly).
pub(crate) fn bind(
    groups: &[QuotaGroup],
    cluster: &Cluster,
) -> (Option<QuotaTree>, Option<String>) {
    if groups.is_empty() {
        return (None, None);
    }
    match QuotaTree::for_cluster(groups, cluster) {
        Ok(tree) => (Some(tree), None),
        Err(e) => {
            tracing::error!(
                "the stored quota tree does not fit this cluster and is not enforced: {e}; change it with `arbiter quota set` or `arbiter quota delete`"
            );
            (None, Some(e))
        }
    }
}

impl Daemon {
    /// Adds or replaces the group `group.name` (the admin's); the tree is checked whole first.
    pub fn set_quota_group(&self, group: QuotaGroup) -> Result<QuotaGroup, RequestError> {
        let mut groups = self.lock().quota_groups.clone();
        match groups.iter_mut().find(|g| g.name == group.name) {
            Some(slot) => *slot = group.clone(),
            None => groups.push(group.clone()),
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        self.install_quota_groups(groups)?;
        tracing::info!(group = %group.name, parent = ?group.parent, "quota group set");
        Ok(group)
    }

    /// Deletes group `name`; refused while other groups name it as their parent.
    pub fn delete_quota_group(&self, name: &str) -> Result<(), RequestError> {
        let mut groups = self.lock().quota_groups.clone();
        if !groups.iter().any(|g| g.name == name) {
            return Err(RequestError::Invalid(FieldError {
                field: "name",
                reason: format!("`{}` is not a quota group", name.escape_debug()),
            }));
        }
        let children: Vec<&str> = groups
            .iter()
            .filter(|g| g.parent.as_deref() == Some(name))
            .map(|g| g.name.as_str())
            .collect();
        if !children.is_empty() {
            return Err(RequestError::Conflict(format!(
                "quota group `{name}` has children ({}): move or delete them first",
                children.join(", ")
            )));
        }
        groups.retain(|g| g.name != name);
        self.install_quota_groups(groups)?;
        tracing::info!(group = %name, "quota group deleted");
        Ok(())
    }

    /// Checks `groups` against the cluster, stores them, and has the policy enforce them from the
    /// next round.
    fn install_quota_groups(&self, groups: Vec<QuotaGroup>) -> Result<(), RequestError> {
        let tree = if groups.is_empty() {
            None
        } else {
            let cluster = self.lock().topology.cluster().clone();
            Some(
                QuotaTree::for_cluster(&groups, &cluster).map_err(|reason| FieldError {
                    field: "quota",
                    reason,
                })?,
            )
        };
        self.store.put_quota_groups(&groups)?;
        let mut state = self.lock();
        set_tree(&mut state, tree.clone());
        if let Some(agent) = &self.agent
            && let Some(policy) = agent.lock().unwrap_or_else(|p| p.into_inner()).as_mut()
            && let Err(e) = policy.set_quota_tree(tree)
        {
            tracing::error!("the external policy took no quota tree: {e}");
        }
        state.quota_groups = groups;
        state.quota_error = None;
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    /// The quota tree as `viewer` may see it (`None`: the admin, who sees every node): each
    /// node's quotas per GPU type, the GPUs its jobs hold and borrow now, its fair share at the
    /// last round, and the viewer's own jobs that borrow now (reclaimable).
    pub fn quota_view(&self, viewer: Option<&str>) -> Value {
        let state = self.lock();
        // The error names groups, a sibling's among them: the admin's to read.
        let error = match (&state.quota_error, viewer) {
            (Some(e), None) => Some(e.clone()),
            (Some(_), Some(_)) => Some("the quota tree does not fit the cluster and is not enforced (the admin is told why)".to_string()),
            (None, _) => None,
        };
        let Some((tree, round)) = state
            .policy
            .as_ref()
            .or(Some(&state.fallback))
            .and_then(|p| p.quota_round())
        else {
            let definitions: Vec<&QuotaGroup> = state
                .quota_groups
                .iter()
                .filter(|_| viewer.is_none())
                .collect();
            return json!({ "enforced": false, "error": error, "groups": [], "definitions": definitions });
        };
        let nodes: Vec<usize> = match viewer {
            None => (1..tree.nodes.len()).collect(),
            Some(tenant) => tree.path(tree.leaf(tenant)).to_vec(),
        };
        let now = running_use(&state, tree, SimTime::from_ms(self.now_ms()));
        let groups: Vec<Value> = nodes
            .iter()
            .map(|&n| node_view(tree, round, &now, &state, n, viewer))
            .collect();
        let definitions: Vec<&QuotaGroup> = state
            .quota_groups
            .iter()
            .filter(|_| viewer.is_none())
            .collect();
        json!({ "enforced": true, "error": error, "gpu_types": tree.dims, "groups": groups, "reclaimed_last_round": round.reclaimed.len(), "definitions": definitions })
    }
}

/// Gives the tree to the policy and the fallback (both were built under a quota wrapper).
fn set_tree(state: &mut State, tree: Option<QuotaTree>) {
    if let Some(policy) = state.policy.as_mut()
        && let Err(e) = policy.set_quota_tree(tree.clone())
    {
        tracing::error!("the policy took no quota tree: {e}");
    }
    if let Err(e) = state.fallback.set_quota_tree(tree) {
        tracing::error!("the fallback policy took no quota tree: {e}");
    }
}

/// What the running jobs hold now, and which borrow (reclaimable): worked out from the jobs
/// holding GPUs when asked, not at every round (a pass over a full cluster's running jobs that
/// no decision needs), so that both are of the same moment.
fn running_use(state: &State, tree: &QuotaTree, now: SimTime) -> RunningUse {
    let running: Vec<ActiveJob> = state
        .jobs
        .holding()
        .into_iter()
        .filter_map(|job| {
            view::active_of(job, state.specs.get(job.id as usize)?, &state.topology, now)
        })
        .filter(ActiveJob::is_running)
        .collect();
    let view = SchedulerView {
        cluster: state.topology.cluster(),
        jobs: &running,
        specs: &state.specs,
        current: None,
    };
    arbiter_policy::quotas::round::running_use(tree, &view)
}

/// One node: its quotas, the GPUs its subtree holds now (`now`) and its share at the last
/// round per GPU type; a leaf's borrowing jobs for the admin or the leaf's own tenant.
fn node_view(
    tree: &QuotaTree,
    round: &QuotaRound,
    now: &RunningUse,
    state: &State,
    n: usize,
    viewer: Option<&str>,
) -> Value {
    let node = &tree.nodes[n];
    let dims = tree.dims.len();
    let mut gpus = serde_json::Map::new();
    for (d, name) in tree.dims.iter().enumerate() {
        let q = node.quota[d];
        let held = now.held.get(n * dims + d).copied().unwrap_or(0);
        gpus.insert(name.clone(), json!({
            "guaranteed": q.guaranteed, "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit,
            "held": held, "borrowed": held.saturating_sub(q.guaranteed),
            "fair_share": round.share.get(n * dims + d).map(|s| (s * 100.0).round() / 100.0),
        }));
    }
    let parent = node
        .parent
        .filter(|&p| p != 0)
        .map(|p| tree.nodes[p].name.clone());
    let is_leaf = node.children.is_empty();
    let borrowing: Vec<u32> = if is_leaf {
        now.borrowers
            .iter()
            .filter(|j| {
                state.jobs.get(j.0 as usize).is_some_and(|job| {
                    tree.leaf(&job.tenant) == n && viewer.is_none_or(|v| v == job.tenant)
                })
            })
            .map(|j| j.0)
            .collect()
    } else {
        Vec::new()
    };
    json!({ "name": node.name, "parent": parent, "over_quota_weight": node.weight, "gpus": gpus, "leaf": is_leaf, "borrowing_jobs": borrowing })
}
