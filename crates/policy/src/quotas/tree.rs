//! The quota tree: groups and tenants, nested, each with per-GPU-type quotas, as a scenario file
//! or the daemon's store gives them ([`QuotaGroup`]), checked and bound to a cluster's GPU types
//! ([`QuotaTree`]).
//!
//! ```toml
//! [[quota_groups]]
//! name = "ml-org"
//! gpus.a100 = { guaranteed = 16, borrowing_limit = 8 }
//!
//! [[quota_groups]]
//! name = "team-a"            # a tenant: its jobs count here
//! parent = "ml-org"
//! over_quota_weight = 2
//! gpus.a100 = { guaranteed = 8, lending_limit = 4 }
//! ```
//!
//! Words are Kueue's (`nominalQuota` is *guaranteed* here, `borrowingLimit`, `lendingLimit`)
//! with KAI-Scheduler's tree and `overQuotaWeight`. A GPU type key `all` counts every GPU
//! whatever its type (then every group must use `all`).

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The GPU type key that counts every GPU, whatever its type.
pub const ALL_TYPES: &str = "all";

/// One group (or tenant) of the quota tree, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaGroup {
    /// Its name; a tenant of this name has its jobs counted here.
    pub name: String,
    /// The group it belongs to; none: directly under the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Its share of what is left after every group's guaranteed quota, against its siblings'
    /// (KAI's `overQuotaWeight`).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub over_quota_weight: f64,
    /// Quotas by GPU type name (or `all`).
    #[serde(default)]
    pub gpus: BTreeMap<String, GpuQuota>,
}

impl QuotaGroup {
    /// A group with one quota over every GPU type (`all`), weight 1.
    pub fn all_gpus(name: &str, parent: Option<&str>, quota: GpuQuota) -> Self {
        QuotaGroup {
            name: name.to_string(),
            parent: parent.map(str::to_string),
            over_quota_weight: 1.0,
            gpus: BTreeMap::from([(ALL_TYPES.to_string(), quota)]),
        }
    }
}

fn one() -> f64 {
    1.0
}

fn is_one(w: &f64) -> bool {
    *w == 1.0
}

/// A group's quota of one GPU type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuQuota {
    /// GPUs it is guaranteed: reclaimed from borrowers when its jobs wait for them.
    #[serde(default)]
    pub guaranteed: u32,
    /// How many GPUs above `guaranteed` it may hold, on others' idle quota; none: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<u32>,
    /// How many of its idle guaranteed GPUs others may borrow; none: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<u32>,
}

impl GpuQuota {
    /// The most GPUs its jobs may hold (`u32::MAX`: no limit).
    pub fn limit(&self) -> u32 {
        self.borrowing_limit
            .map_or(u32::MAX, |b| self.guaranteed.saturating_add(b))
    }
}

/// A node of the bound tree.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeNode {
    /// Its name (an implicit node's says what it is).
    pub name: String,
    /// Its parent's index; none for the root.
    pub parent: Option<usize>,
    /// Its children's indices, in the order written.
    pub children: Vec<usize>,
    /// Over-quota weight.
    pub weight: f64,
    /// Its quota per dimension ([`QuotaTree::dims`]).
    pub quota: Vec<GpuQuota>,
}

/// The quota tree bound to a cluster's GPU types: checked, indexed, with the implicit nodes that
/// make every job count somewhere.
///
/// Index 0 is the root (the cluster). Tenants the tree does not name share the implicit leaf
/// `(other tenants)` under the root: nothing guaranteed, no limit. A group with children that is
/// also a tenant counts its own jobs in an implicit leaf `<name> (own jobs)` under it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaTree {
    /// Every node, root first, parents before children.
    pub nodes: Vec<TreeNode>,
    /// The dimensions quotas count: one per GPU type, or one (`all`) for every GPU.
    pub dims: Vec<String>,
    /// The dimension of each GPU type of the cluster (by `GpuTypeId` index).
    pub dim_of_type: Vec<usize>,
    /// The leaf each named tenant's jobs count in (hashed: a search in an ordered map compares
    /// the name with up to eleven keys of a node, and every job is looked up once).
    leaf_of: FxHashMap<String, usize>,
    /// The leaf of the tenants the tree does not name.
    others: usize,
    /// The groups as written, for showing and saving.
    pub groups: Vec<QuotaGroup>,
    /// Each node's path from the root's child down to it (root excluded).
    paths: Vec<Vec<usize>>,
    /// Guaranteed GPUs and limits per node and dimension (`node * dims + dim`), flat: the
    /// simulator reads them at every event.
    guaranteed_at: Vec<u32>,
    limit_at: Vec<u32>,
    /// Whether any node has a borrowing limit (without one, no limit can be overdrawn).
    limited: bool,
    /// Whether any node has a lending limit (without one, all idle quota is lent).
    lending_limited: bool,
    /// Each node's parent (`NO_PARENT` for the root), flat: the simulator walks a job's path
    /// up at every start and end.
    parent_at: Vec<u32>,
    /// Whether one dimension counts every GPU (`all`), kept rather than compared each time.
    all_types: bool,
}

/// The root's entry in [`QuotaTree::parent_at`].
const NO_PARENT: u32 = u32::MAX;

impl QuotaTree {
    /// Checks `groups` and binds them to a cluster with these GPU types (`type_names`) and GPUs
    /// of each (`capacity`, same order). Refuses a tree that does not add up, with the numbers.
    pub fn new(
        groups: &[QuotaGroup],
        type_names: &[String],
        capacity: &[u32],
    ) -> Result<Self, String> {
        let dims = dimensions(groups, type_names)?;
        let dim_of_type = if dims.len() == 1 && dims[0] == ALL_TYPES {
            vec![0; type_names.len()]
        } else {
            (0..type_names.len()).collect()
        };
        let by_name = index_names(groups)?;
        let mut tree = QuotaTree {
            nodes: Vec::new(),
            dims,
            dim_of_type,
            leaf_of: FxHashMap::default(),
            others: 0,
            groups: groups.to_vec(),
            paths: Vec::new(),
            guaranteed_at: Vec::new(),
            limit_at: Vec::new(),
            limited: false,
            lending_limited: false,
            parent_at: Vec::new(),
            all_types: false,
        };
        tree.nodes.push(TreeNode {
            name: "(cluster)".into(),
            parent: None,
            children: Vec::new(),
            weight: 1.0,
            quota: vec![GpuQuota::default(); tree.dims.len()],
        });
        let order = parents_first(groups, &by_name)?;
        let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
        for g in order {
            let group = &groups[g];
            let parent = group.parent.as_deref().map_or(0, |p| index_of[p]);
            let quota = tree.quota_of(group)?;
            let at = tree.push(&group.name, parent, group.over_quota_weight, quota);
            index_of.insert(group.name.as_str(), at);
        }
        tree.others = tree.push(
            "(other tenants)",
            0,
            1.0,
            vec![GpuQuota::default(); tree.dims.len()],
        );
        tree.bind_leaves(&index_of);
        tree.paths = (0..tree.nodes.len()).map(|n| tree.walk_up(n)).collect();
        let quotas = || tree.nodes.iter().flat_map(|n| n.quota.iter());
        tree.guaranteed_at = quotas().map(|q| q.guaranteed).collect();
        tree.limit_at = quotas().map(GpuQuota::limit).collect();
        tree.limited = quotas().any(|q| q.borrowing_limit.is_some());
        tree.lending_limited = quotas().any(|q| q.lending_limit.is_some());
        tree.parent_at = tree
            .nodes
            .iter()
            .map(|n| n.parent.map_or(NO_PARENT, |p| p as u32))
            .collect();
        tree.all_types = tree.dims.len() == 1 && tree.dims[0] == ALL_TYPES;
        tree.check_sums(&capacity_by_dim(
            &tree.dim_of_type,
            tree.dims.len(),
            capacity,
        ))?;
        Ok(tree)
    }

    /// What [`QuotaTree::new`] checks without a cluster: names, parents, cycles, limits,
    /// weights, children within their parent — all but the GPU types the cluster has and the
    /// top level within its GPUs. (A scenario file is checked as it is read; its clusters are
    /// built per trace later.)
    pub fn check_shape(groups: &[QuotaGroup]) -> Result<(), String> {
        let named: std::collections::BTreeSet<&String> = groups
            .iter()
            .flat_map(|g| g.gpus.keys())
            .filter(|k| k.as_str() != ALL_TYPES)
            .collect();
        let mut types: Vec<String> = named.into_iter().cloned().collect();
        if types.is_empty() {
            // (`all` throughout: one type stands for the cluster's.)
            types.push("any".into());
        }
        let capacity = vec![u32::MAX; types.len()];
        QuotaTree::new(groups, &types, &capacity).map(|_| ())
    }

    /// [`QuotaTree::new`] for `cluster`'s GPU types and GPUs.
    pub fn for_cluster(
        groups: &[QuotaGroup],
        cluster: &arbiter_model::Cluster,
    ) -> Result<Self, String> {
        let mut by_type = vec![0u32; cluster.gpu_type_names.len()];
        for node in &cluster.nodes {
            if let Some(c) = by_type.get_mut(node.gpu_type.index()) {
                *c += node.gpus;
            }
        }
        QuotaTree::new(groups, &cluster.gpu_type_names, &by_type)
    }

    /// The dimension a node's GPUs count in.
    pub fn dim_of_node(
        &self,
        cluster: &arbiter_model::Cluster,
        node: arbiter_model::NodeId,
    ) -> Option<usize> {
        cluster
            .node(node)
            .and_then(|n| self.dim_of_type.get(n.gpu_type.index()).copied())
    }

    /// Node `node`'s guaranteed GPUs of dimension `dim`.
    #[inline]
    pub fn guaranteed(&self, node: usize, dim: usize) -> u32 {
        self.guaranteed_at[node * self.dims.len() + dim]
    }

    /// The most GPUs of dimension `dim` node `node`'s jobs may hold (`u32::MAX`: no limit).
    pub fn limit(&self, node: usize, dim: usize) -> u32 {
        self.limit_at[node * self.dims.len() + dim]
    }

    /// Whether any node has a borrowing limit.
    #[inline]
    pub fn has_limits(&self) -> bool {
        self.limited
    }

    /// Whether some node holds more than its guaranteed quota of dimension `dim` in `used` (per
    /// node and dimension): some job borrows there.
    #[inline]
    pub fn borrowed_in(&self, used: &[u32], dim: usize) -> bool {
        let dims = self.dims.len();
        (1..self.nodes.len()).any(|n| used[n * dims + dim] > self.guaranteed_at[n * dims + dim])
    }

    /// Whether any node has a lending limit.
    #[inline]
    pub fn has_lending_limits(&self) -> bool {
        self.lending_limited
    }

    /// The first node (root first) where `used` (per node and dimension, `node * dims + dim`)
    /// is above a limit.
    pub fn overdrawn_at(&self, used: &[u32]) -> Option<usize> {
        if !self.limited {
            return None;
        }
        let at = used.iter().zip(&self.limit_at).position(|(u, l)| u > l)?;
        Some(at / self.dims.len())
    }

    /// Whether `used` is above a limit anywhere (see [`QuotaTree::overdrawn_at`]).
    pub fn overdrawn(&self, used: &[u32]) -> bool {
        self.overdrawn_at(used).is_some()
    }

    /// A placement's GPUs per dimension, by the type of the nodes it is on.
    pub fn placement_dims(
        &self,
        cluster: &arbiter_model::Cluster,
        slots: &[(arbiter_model::NodeId, u32)],
    ) -> smallvec::SmallVec<[u32; 2]> {
        let mut v: smallvec::SmallVec<[u32; 2]> = smallvec::smallvec![0; self.dims.len()];
        self.placement_dims_into(cluster, slots, &mut v);
        v
    }

    /// [`QuotaTree::placement_dims`] written into `out` (one entry per dimension).
    #[inline]
    pub fn placement_dims_into(
        &self,
        cluster: &arbiter_model::Cluster,
        slots: &[(arbiter_model::NodeId, u32)],
        out: &mut [u32],
    ) {
        if self.counts_all_types()
            && let [only] = out
        {
            // Every GPU counts in the one dimension (no call to clear it first: this runs as
            // every job starts).
            *only = slots.iter().map(|&(_, gpus)| gpus).sum();
            return;
        }
        out.fill(0);
        for &(node, gpus) in slots {
            if let Some(d) = self.dim_of_node(cluster, node) {
                out[d] += gpus;
            }
        }
    }

    /// Whether one dimension counts every GPU, whatever its type (`all`).
    #[inline]
    pub fn counts_all_types(&self) -> bool {
        self.all_types
    }

    /// The GPUs of `cluster`'s nodes per dimension.
    pub fn capacity(&self, cluster: &arbiter_model::Cluster) -> Vec<u32> {
        let mut out = vec![0; self.dims.len()];
        for node in &cluster.nodes {
            if let Some(&d) = self.dim_of_type.get(node.gpu_type.index()) {
                out[d] += node.gpus;
            }
        }
        out
    }

    /// Adds `by_dim` (or takes it away) to `per_node` (`node * dims + dim`) on the path from
    /// `leaf` to the root: what a job's GPUs count for at every level.
    #[inline(always)]
    pub fn add_on_path(&self, per_node: &mut [u32], leaf: usize, by_dim: &[u32], add: bool) {
        match *by_dim {
            // One dimension (the common tree, GPUs of any type): a short walk, kept inline; the
            // loop over dimensions, which the compiler unrolls and vectorises, out of line.
            [gpus] => self.add_one_dim_on_path(per_node, leaf, gpus, add),
            _ => self.add_dims_on_path(per_node, leaf, by_dim, add),
        }
    }

    /// [`QuotaTree::add_on_path`] for any number of dimensions.
    #[inline(never)]
    fn add_dims_on_path(&self, per_node: &mut [u32], leaf: usize, by_dim: &[u32], add: bool) {
        let dims = self.dims.len();
        self.walk_path(leaf, |n| {
            for (d, &g) in by_dim.iter().enumerate() {
                if let Some(at) = per_node.get_mut(n * dims + d) {
                    *at = count(*at, g, add);
                }
            }
        });
    }

    /// [`QuotaTree::add_on_path`] where the tree has one dimension (`node` is the index: no
    /// multiplication by the dimensions, at every start and end in the simulator).
    #[inline(always)]
    fn add_one_dim_on_path(&self, per_node: &mut [u32], leaf: usize, gpus: u32, add: bool) {
        self.walk_path(leaf, |n| {
            if let Some(at) = per_node.get_mut(n) {
                *at = count(*at, gpus, add);
            }
        });
    }

    /// [`QuotaTree::add_on_path`] for `gpus` GPUs of one dimension.
    pub fn add_dim_on_path(
        &self,
        per_node: &mut [u32],
        leaf: usize,
        dim: usize,
        gpus: u32,
        add: bool,
    ) {
        let dims = self.dims.len();
        self.walk_path(leaf, |n| {
            if let Some(at) = per_node.get_mut(n * dims + dim) {
                *at = count(*at, gpus, add);
            }
        });
    }

    /// Calls `visit` on every node from `leaf` up to the root.
    #[inline(always)]
    fn walk_path(&self, leaf: usize, mut visit: impl FnMut(usize)) {
        let mut n = leaf;
        loop {
            visit(n);
            match self.parent_at.get(n) {
                Some(&p) if p != NO_PARENT => n = p as usize,
                _ => break,
            }
        }
    }

    fn push(&mut self, name: &str, parent: usize, weight: f64, quota: Vec<GpuQuota>) -> usize {
        let at = self.nodes.len();
        self.nodes.push(TreeNode {
            name: name.to_string(),
            parent: Some(parent),
            children: Vec::new(),
            weight,
            quota,
        });
        self.nodes[parent].children.push(at);
        at
    }

    /// A group's quotas by dimension, checked.
    fn quota_of(&self, group: &QuotaGroup) -> Result<Vec<GpuQuota>, String> {
        let name = &group.name;
        if !(group.over_quota_weight.is_finite() && group.over_quota_weight > 0.0) {
            return Err(format!(
                "quota group `{name}`: over_quota_weight {} is not a positive number",
                group.over_quota_weight
            ));
        }
        let mut quota = vec![GpuQuota::default(); self.dims.len()];
        for (type_name, q) in &group.gpus {
            if let Some(lend) = q.lending_limit
                && lend > q.guaranteed
            {
                return Err(format!(
                    "quota group `{name}`: {type_name} lending_limit {lend} is above its guaranteed {} (only idle guaranteed GPUs can be lent)",
                    q.guaranteed
                ));
            }
            let dim = self
                .dims
                .iter()
                .position(|d| d == type_name)
                .ok_or_else(|| format!("quota group `{name}`: unknown GPU type `{type_name}`"))?;
            quota[dim] = *q;
        }
        Ok(quota)
    }

    /// Leaves for tenants: a childless group is its own; a group with children gets an implicit
    /// leaf for its own jobs.
    fn bind_leaves(&mut self, index_of: &BTreeMap<&str, usize>) {
        let named: Vec<(String, usize)> =
            index_of.iter().map(|(n, i)| (n.to_string(), *i)).collect();
        for (name, at) in named {
            let leaf = if self.nodes[at].children.is_empty() {
                at
            } else {
                let dims = self.dims.len();
                self.push(
                    &format!("{name} (own jobs)"),
                    at,
                    1.0,
                    vec![GpuQuota::default(); dims],
                )
            };
            self.leaf_of.insert(name, leaf);
        }
    }

    /// Children's guaranteed quotas fit in their parent's, and the top level's in the cluster.
    fn check_sums(&self, capacity: &[u32]) -> Result<(), String> {
        for (at, node) in self.nodes.iter().enumerate() {
            for (dim, &cluster_gpus) in capacity.iter().enumerate() {
                let sum: u64 = node
                    .children
                    .iter()
                    .map(|&c| u64::from(self.nodes[c].quota[dim].guaranteed))
                    .sum();
                let (whose, room) = if at == 0 && cluster_gpus == u32::MAX {
                    // (`check_shape`: no cluster yet, only what a count can hold.)
                    ("the most GPUs a quota can count,".to_string(), cluster_gpus)
                } else if at == 0 {
                    ("the cluster's".to_string(), cluster_gpus)
                } else {
                    (
                        format!("its parent `{}`'s", node.name),
                        node.quota[dim].guaranteed,
                    )
                };
                if sum > u64::from(room) {
                    let parts: Vec<String> = node
                        .children
                        .iter()
                        .filter(|&&c| self.nodes[c].quota[dim].guaranteed > 0)
                        .map(|&c| {
                            format!(
                                "{} {}",
                                self.nodes[c].name, self.nodes[c].quota[dim].guaranteed
                            )
                        })
                        .collect();
                    return Err(format!(
                        "quota tree does not add up: the guaranteed {} GPUs of {} add up to {sum}, above {whose} {room}",
                        self.dims[dim],
                        parts.join(" + "),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The leaf a tenant's jobs count in.
    pub fn leaf(&self, tenant: &str) -> usize {
        self.leaf_of.get(tenant).copied().unwrap_or(self.others)
    }

    /// Whether a node is an ancestor of (or is) another.
    pub fn contains(&self, ancestor: usize, mut node: usize) -> bool {
        loop {
            if node == ancestor {
                return true;
            }
            match self.nodes[node].parent {
                Some(p) => node = p,
                None => return false,
            }
        }
    }

    /// The path from the root's child down to `node` (root excluded).
    pub fn path(&self, node: usize) -> &[usize] {
        &self.paths[node]
    }

    fn walk_up(&self, mut node: usize) -> Vec<usize> {
        let mut path = Vec::new();
        while let Some(parent) = self.nodes[node].parent {
            path.push(node);
            node = parent;
        }
        path.reverse();
        path
    }
}

/// `held` with `gpus` added (`add`) or taken away (never below zero).
#[inline(always)]
fn count(held: u32, gpus: u32, add: bool) -> u32 {
    if add {
        held + gpus
    } else {
        held.saturating_sub(gpus)
    }
}

/// What quotas count: every GPU type (`all`), or the types named.
fn dimensions(groups: &[QuotaGroup], type_names: &[String]) -> Result<Vec<String>, String> {
    let uses_all = groups.iter().any(|g| g.gpus.contains_key(ALL_TYPES));
    for g in groups {
        for key in g.gpus.keys() {
            if uses_all && key != ALL_TYPES {
                return Err(format!(
                    "quota group `{}`: GPU type `{key}` beside `all` elsewhere in the tree; use either `all` or GPU types throughout",
                    g.name
                ));
            }
            if !uses_all && !type_names.iter().any(|t| t == key) {
                return Err(format!(
                    "quota group `{}`: unknown GPU type `{key}` (the cluster has {}; `all` counts every GPU)",
                    g.name,
                    type_names.join(", ")
                ));
            }
        }
    }
    Ok(if uses_all {
        vec![ALL_TYPES.to_string()]
    } else {
        type_names.to_vec()
    })
}

/// Names are unique, not empty, and not an implicit node's.
fn index_names(groups: &[QuotaGroup]) -> Result<BTreeMap<&str, usize>, String> {
    let mut by_name = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        let name = g.name.trim();
        if name.is_empty()
            || name != g.name
            || name.contains('(')
            || name.chars().any(char::is_control)
        {
            return Err(format!(
                "quota group {}: name {:?} must be a non-empty name without spaces at its ends, parentheses or control characters",
                i + 1,
                g.name
            ));
        }
        if by_name.insert(g.name.as_str(), i).is_some() {
            return Err(format!("quota group `{}` is defined twice", g.name));
        }
    }
    Ok(by_name)
}

/// Group indices with every parent before its children; refuses unknown parents and cycles.
fn parents_first(
    groups: &[QuotaGroup],
    by_name: &BTreeMap<&str, usize>,
) -> Result<Vec<usize>, String> {
    for g in groups {
        if let Some(p) = &g.parent
            && !by_name.contains_key(p.as_str())
        {
            return Err(format!(
                "quota group `{}`: parent `{p}` is not a quota group",
                g.name
            ));
        }
    }
    let mut order = Vec::with_capacity(groups.len());
    let mut placed = vec![false; groups.len()];
    while order.len() < groups.len() {
        let before = order.len();
        for (i, g) in groups.iter().enumerate() {
            let ready = g.parent.as_deref().is_none_or(|p| placed[by_name[p]]);
            if !placed[i] && ready {
                placed[i] = true;
                order.push(i);
            }
        }
        if order.len() == before {
            let stuck: Vec<&str> = groups
                .iter()
                .enumerate()
                .filter(|(i, _)| !placed[*i])
                .map(|(_, g)| g.name.as_str())
                .collect();
            return Err(format!("quota groups form a cycle: {}", stuck.join(" → ")));
        }
    }
    Ok(order)
}

/// GPUs per dimension.
pub fn capacity_by_dim(dim_of_type: &[usize], dims: usize, by_type: &[u32]) -> Vec<u32> {
    let mut out = vec![0; dims];
    for (t, &gpus) in by_type.iter().enumerate() {
        if let Some(&d) = dim_of_type.get(t) {
            out[d] += gpus;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn group(
        name: &str,
        parent: Option<&str>,
        dim: &str,
        guaranteed: u32,
        borrow: Option<u32>,
        lend: Option<u32>,
    ) -> QuotaGroup {
        QuotaGroup {
            name: name.into(),
            parent: parent.map(Into::into),
            over_quota_weight: 1.0,
            gpus: BTreeMap::from([(
                dim.to_string(),
                GpuQuota {
                    guaranteed,
                    borrowing_limit: borrow,
                    lending_limit: lend,
                },
            )]),
        }
    }

    fn types() -> Vec<String> {
        vec!["a100".into(), "v100".into()]
    }

    #[test]
    fn children_above_their_parent_are_refused_with_the_numbers() {
        let groups = [
            group("org", None, "a100", 8, None, None),
            group("a", Some("org"), "a100", 6, None, None),
            group("b", Some("org"), "a100", 4, None, None),
        ];
        let e = QuotaTree::new(&groups, &types(), &[16, 16]).expect_err("10 > 8");
        assert!(
            e.contains("a 6 + b 4 add up to 10, above its parent `org`'s 8"),
            "{e}"
        );
        let e = QuotaTree::new(
            &[group("org", None, "a100", 20, None, None)],
            &types(),
            &[16, 16],
        )
        .expect_err("20 > 16");
        assert!(e.contains("above the cluster's 16"), "{e}");
    }

    #[test]
    fn unknown_parents_types_cycles_and_bad_limits_are_refused() {
        let e = QuotaTree::new(
            &[group("a", Some("nope"), "a100", 1, None, None)],
            &types(),
            &[8, 8],
        )
        .expect_err("parent");
        assert!(e.contains("parent `nope`"), "{e}");
        let e = QuotaTree::new(
            &[group("a", None, "h100", 1, None, None)],
            &types(),
            &[8, 8],
        )
        .expect_err("type");
        assert!(e.contains("unknown GPU type `h100`"), "{e}");
        let e = QuotaTree::new(
            &[
                group("a", Some("b"), "a100", 0, None, None),
                group("b", Some("a"), "a100", 0, None, None),
            ],
            &types(),
            &[8, 8],
        )
        .expect_err("cycle");
        assert!(e.contains("cycle"), "{e}");
        let e = QuotaTree::new(
            &[group("a", None, "a100", 2, None, Some(3))],
            &types(),
            &[8, 8],
        )
        .expect_err("lend");
        assert!(
            e.contains("lending_limit 3 is above its guaranteed 2"),
            "{e}"
        );
        let e = QuotaTree::new(
            &[
                group("a", None, "all", 2, None, None),
                group("b", None, "a100", 2, None, None),
            ],
            &types(),
            &[8, 8],
        )
        .expect_err("mixed");
        assert!(e.contains("either `all` or GPU types"), "{e}");
    }

    #[test]
    fn a_trees_shape_is_checked_without_a_cluster() {
        // Children above their parent, a cycle, a control character: refused with the numbers.
        let e = QuotaTree::check_shape(&[
            group("org", None, "a100", 4, None, None),
            group("a", Some("org"), "a100", 3, None, None),
            group("b", Some("org"), "a100", 3, None, None),
        ])
        .expect_err("children above");
        assert!(
            e.contains("a 3 + b 3 add up to 6, above its parent `org`'s 4"),
            "{e}"
        );
        let e = QuotaTree::check_shape(&[group("a\nb", None, "all", 1, None, None)])
            .expect_err("control character");
        assert!(e.contains("control characters"), "{e}");
        let e = QuotaTree::check_shape(&[
            group("a", None, "all", u32::MAX, None, None),
            group("b", None, "all", 1, None, None),
        ])
        .expect_err("more than a count holds");
        assert!(e.contains("above the most GPUs a quota can count"), "{e}");
        // What only a cluster can say is left to binding: any type, any top-level total.
        QuotaTree::check_shape(&[
            group("a", None, "h100", 1000, None, None),
            group("b", None, "a100", 1000, None, None),
        ])
        .expect("types and totals wait for the cluster");
        QuotaTree::check_shape(&[group("a", None, "all", 1000, Some(0), None)])
            .expect("`all` alone");
    }

    #[test]
    fn tenants_map_to_leaves_and_unnamed_ones_share_one() {
        let groups = [
            group("org", None, "all", 8, None, None),
            group("a", Some("org"), "all", 4, None, None),
        ];
        let tree = QuotaTree::new(&groups, &types(), &[8, 8]).expect("valid");
        assert_eq!(tree.dims, vec!["all"]);
        assert_eq!(tree.nodes[tree.leaf("a")].name, "a");
        assert_eq!(tree.nodes[tree.leaf("org")].name, "org (own jobs)");
        assert_eq!(tree.nodes[tree.leaf("zed")].name, "(other tenants)");
        assert_eq!(tree.leaf("x"), tree.leaf("y"));
        assert!(tree.contains(tree.leaf("org"), tree.leaf("org")));
        assert_eq!(tree.path(tree.leaf("a")).len(), 2);
    }
}
