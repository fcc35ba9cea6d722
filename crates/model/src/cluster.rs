//! The cluster: nodes with GPUs of one type each, grouped into racks.

use crate::ids::{GpuTypeId, NodeId, RackId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Dense id; equals the node's index in [`Cluster::nodes`].
    pub id: NodeId,
    /// Human-readable name (`n0`, or a hostname in production).
    pub name: String,
    /// Rack (switch) the node hangs off; placement prefers one rack per job.
    pub rack: RackId,
    /// Type of every GPU on this node.
    pub gpu_type: GpuTypeId,
    /// Number of GPUs.
    pub gpus: u32,
    /// Number of CPU cores.
    pub cpus: u32,
    /// Memory in GiB.
    pub memory_gib: u32,
}

/// Why a cluster description was rejected.
#[derive(Debug, Error, PartialEq)]
pub enum ClusterError {
    /// No nodes, or nodes without GPUs only.
    #[error("the cluster has no GPUs")]
    NoGpus,
    /// A node's id does not match its position.
    #[error("node {0} is out of order: node ids must be 0..n in order")]
    NodeOutOfOrder(NodeId),
    /// A node names a GPU type that the type table does not have.
    #[error("node {node} has unknown GPU type {gpu_type}")]
    UnknownGpuType {
        /// The node.
        node: NodeId,
        /// Its type id.
        gpu_type: GpuTypeId,
    },
    /// More GPU types than the id type holds.
    #[error("too many GPU types ({0}); at most 255 are supported")]
    TooManyGpuTypes(usize),
}

/// A cluster: the static inventory a scheduler places jobs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Names of the GPU types, indexed by [`GpuTypeId`].
    pub gpu_type_names: Vec<String>,
    /// Nodes in id order.
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// Checks and builds a cluster from its parts.
    pub fn new(gpu_type_names: Vec<String>, nodes: Vec<Node>) -> Result<Self, ClusterError> {
        if gpu_type_names.len() > u8::MAX as usize {
            return Err(ClusterError::TooManyGpuTypes(gpu_type_names.len()));
        }
        for (index, node) in nodes.iter().enumerate() {
            if node.id.index() != index {
                return Err(ClusterError::NodeOutOfOrder(node.id));
            }
            if node.gpu_type.index() >= gpu_type_names.len() {
                return Err(ClusterError::UnknownGpuType {
                    node: node.id,
                    gpu_type: node.gpu_type,
                });
            }
        }
        let cluster = Cluster {
            gpu_type_names,
            nodes,
        };
        if cluster.total_gpus() == 0 {
            return Err(ClusterError::NoGpus);
        }
        Ok(cluster)
    }

    /// A homogeneous cluster of `racks × nodes_per_rack` nodes, each with `gpus_per_node` GPUs of
    /// one type, `cpus_per_node` cores and `memory_gib_per_node` GiB.
    pub fn homogeneous(
        racks: u32,
        nodes_per_rack: u32,
        gpus_per_node: u32,
        cpus_per_node: u32,
        memory_gib_per_node: u32,
        gpu_type: &str,
    ) -> Result<Self, ClusterError> {
        let mut nodes = Vec::with_capacity((racks * nodes_per_rack) as usize);
        for rack in 0..racks {
            for _ in 0..nodes_per_rack {
                let id = NodeId(nodes.len() as u32);
                nodes.push(Node {
                    id,
                    name: format!("n{}", id.0),
                    rack: RackId(rack),
                    gpu_type: GpuTypeId(0),
                    gpus: gpus_per_node,
                    cpus: cpus_per_node,
                    memory_gib: memory_gib_per_node,
                });
            }
        }
        Cluster::new(vec![gpu_type.to_string()], nodes)
    }

    /// Total GPUs over all nodes.
    pub fn total_gpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    /// The largest GPU count of any one node.
    pub fn max_gpus_per_node(&self) -> u32 {
        self.nodes.iter().map(|n| n.gpus).max().unwrap_or(0)
    }

    /// Number of racks (highest rack id + 1).
    pub fn rack_count(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| n.rack.index() + 1)
            .max()
            .unwrap_or(0)
    }

    /// The node with this id, if any.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The name of a GPU type.
    pub fn gpu_type_name(&self, id: GpuTypeId) -> &str {
        self.gpu_type_names
            .get(id.index())
            .map(String::as_str)
            .unwrap_or("?")
    }

    /// The id of a GPU type by name (case-insensitive).
    pub fn gpu_type_by_name(&self, name: &str) -> Option<GpuTypeId> {
        self.gpu_type_names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| GpuTypeId(i as u8))
    }
}

/// Price of one GPU-hour of a GPU type, dollars: Gavel's GCP prices for the types it knows (V100
/// $0.74, P100 $0.43, K80 $0.135 — the `min-cost` policy's and the cost metric's default), $1 for
/// others.
pub fn default_price_per_gpu_hour(gpu_type: &str) -> f64 {
    match gpu_type.to_ascii_lowercase().as_str() {
        "v100" => 0.74,
        "p100" => 0.43,
        "k80" => 0.135,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homogeneous_cluster_numbers_nodes_and_racks() {
        let c = Cluster::homogeneous(2, 3, 8, 64, 512, "V100").expect("valid");
        assert_eq!(c.nodes.len(), 6);
        assert_eq!(c.total_gpus(), 48);
        assert_eq!(c.rack_count(), 2);
        assert_eq!(c.nodes[4].rack, RackId(1));
        assert_eq!(c.gpu_type_by_name("v100"), Some(GpuTypeId(0)));
    }

    #[test]
    fn cluster_without_gpus_is_rejected() {
        assert_eq!(
            Cluster::homogeneous(1, 2, 0, 8, 8, "none"),
            Err(ClusterError::NoGpus)
        );
    }
}
