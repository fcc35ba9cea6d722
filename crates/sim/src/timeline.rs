//! What ran where and when: the pieces of every job's time on GPUs, recorded only when a report
//! asks for them ([`crate::SimConfig::record_timeline`]). Reports draw Gantt charts,
//! utilization and queue length over time from them; metrics never read them.

use crate::metrics::{GpuSharing, GpuTime, gpu_time};
use serde::{Deserialize, Serialize};

/// One stretch of a job on GPUs with nothing about it changing: same placement, same sharing.
/// A stint (start to preemption, migration or completion) is one or more consecutive segments;
/// a gap between two segments of a job is time it spent queued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSegment {
    /// Dense job id.
    pub job: u32,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// `(node index, GPUs on it)`, as the placement names them.
    pub slots: Vec<(u32, u32)>,
    /// The share of these GPUs' time that is the job's: 1 alone, 1/k in a group of k sharing
    /// them (space sharing).
    pub gpu_share: f64,
    /// Whether it ran as a guest on GPUs it does not hold (opportunistic sharing).
    pub guest: bool,
    /// A guest's GPUs that another job held (the rest nobody held); 0 for a job that holds its
    /// GPUs.
    #[serde(default)]
    pub on_held: u32,
}

impl RunSegment {
    /// GPUs it ran on.
    pub fn gpus(&self) -> u32 {
        self.slots.iter().map(|(_, g)| g).sum()
    }

    /// GPU-seconds it was allocated (its share of the GPUs' time); 0 for a guest, whose GPUs
    /// count for their holder.
    pub fn allocated_gpu_s(&self) -> f64 {
        if self.guest {
            0.0
        } else {
            (self.end_s - self.start_s) * self.gpus() as f64 * self.gpu_share
        }
    }

    /// How it shared its GPUs, for [`crate::metrics::gpu_time`].
    pub fn sharing(&self) -> GpuSharing {
        if self.guest {
            GpuSharing::Guest {
                on_held: self.on_held,
            }
        } else {
            GpuSharing::Held {
                share: self.gpu_share,
            }
        }
    }

    /// Its part of the cluster's busy and shared GPUs while it ran (GPUs, not GPU-seconds), by
    /// the rule utilization counts by ([`crate::metrics::gpu_time`]: each GPU once).
    pub fn gpus_counted(&self) -> GpuTime {
        gpu_time(1.0, self.gpus(), self.sharing())
    }
}

/// A running job a quota tree reclaimed: preempted so that an owner's jobs get its guaranteed
/// quota back ([`arbiter_policy::quotas::QuotaRound::reclaimed`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaReclaim {
    /// Dense job id.
    pub job: u32,
    /// When, seconds.
    pub at_s: f64,
}

/// A simulation's quota tree as a report draws it: the leaves jobs count in (tenants), each
/// with its quota and the trace's tenants counted there, and the dimension each node's GPUs
/// count in (so that GPUs held by type follow from the [`RunSegment`]s' slots).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaLayout {
    /// What quotas count: GPU type names, or `all` for every GPU.
    pub dims: Vec<String>,
    /// Each cluster node's dimension, by node index (as [`RunSegment::slots`] name nodes).
    pub dim_of_node: Vec<usize>,
    /// The leaves, in the tree's order: every childless group the tree names, and the implicit
    /// leaves (a group's own jobs, the tenants the tree does not name) that count some job.
    pub leaves: Vec<QuotaLeaf>,
}

/// One leaf of a [`QuotaLayout`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaLeaf {
    /// Its name in the tree (`team-a`, `ml-org (own jobs)`, `(other tenants)`).
    pub name: String,
    /// Its path from the top of the tree, `/`-separated (`ml-org/team-a`).
    pub path: String,
    /// Guaranteed GPUs per dimension.
    pub guaranteed: Vec<u32>,
    /// The most GPUs it may hold per dimension (guaranteed + borrowing limit); `None`: no limit.
    pub limit: Vec<Option<u32>>,
    /// The trace's tenants whose jobs count here, sorted.
    pub tenants: Vec<String>,
}

impl QuotaLayout {
    /// The layout of `tree` on `cluster` for a trace with these `tenants` (in any order, with
    /// repeats).
    pub fn of<'t>(
        tree: &arbiter_policy::quotas::QuotaTree,
        cluster: &arbiter_model::Cluster,
        tenants: impl IntoIterator<Item = &'t str>,
    ) -> Self {
        let mut by_leaf: std::collections::BTreeMap<usize, std::collections::BTreeSet<&str>> =
            std::collections::BTreeMap::new();
        for t in tenants {
            by_leaf.entry(tree.leaf(t)).or_default().insert(t);
        }
        let named: std::collections::BTreeSet<&str> =
            tree.groups.iter().map(|g| g.name.as_str()).collect();
        let leaves = (1..tree.nodes.len())
            .filter(|&n| tree.nodes[n].children.is_empty())
            .filter(|&n| named.contains(tree.nodes[n].name.as_str()) || by_leaf.contains_key(&n))
            .map(|n| {
                let node = &tree.nodes[n];
                QuotaLeaf {
                    name: node.name.clone(),
                    path: tree
                        .path(n)
                        .iter()
                        .map(|&p| tree.nodes[p].name.as_str())
                        .collect::<Vec<_>>()
                        .join("/"),
                    guaranteed: node.quota.iter().map(|q| q.guaranteed).collect(),
                    limit: node
                        .quota
                        .iter()
                        .map(|q| q.borrowing_limit.map(|_| q.limit()))
                        .collect(),
                    tenants: by_leaf
                        .get(&n)
                        .map(|ts| ts.iter().map(|t| t.to_string()).collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
        QuotaLayout {
            dims: tree.dims.clone(),
            dim_of_node: cluster
                .nodes
                .iter()
                .map(|n| {
                    tree.dim_of_type
                        .get(n.gpu_type.index())
                        .copied()
                        .unwrap_or(0)
                })
                .collect(),
            leaves,
        }
    }

    /// The index in [`QuotaLayout::leaves`] of the leaf `tenant`'s jobs count in, if listed.
    pub fn leaf_of(&self, tenant: &str) -> Option<usize> {
        self.leaves
            .iter()
            .position(|l| l.tenants.iter().any(|t| t == tenant))
    }
}
