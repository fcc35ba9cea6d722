//! The daemon's cluster: nodes with typed GPUs, CPUs, memory and racks — one machine (from
//! `nvidia-smi` or declared GPUs), or the nodes of a Slurm partition (`sinfo --json`).
//!
//! GPUs have global ids, numbered node by node in node order; a job's record lists the global
//! ids it holds. Each node also has its own device indices (what `CUDA_VISIBLE_DEVICES` lists
//! there): on one machine split into one node per GPU type, the machine's device indices.

use crate::config::GpuInventory;
use arbiter_model::{Cluster, GpuTypeId, Node, NodeId, Placement, RackId};
use serde::Serialize;
use std::collections::BTreeMap;

/// GPUs of one node given to a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGpus {
    /// The node's name (a Slurm node name; the machine's own name for the local executor).
    pub node: String,
    /// Device indices on that node (what `CUDA_VISIBLE_DEVICES` lists there).
    pub devices: Vec<u32>,
}

/// One node as the daemon knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeSpec {
    /// Its name (a Slurm node name, or this machine's name).
    pub name: String,
    /// The type of its GPUs (`a100`).
    pub gpu_type: String,
    /// Device index of each GPU on the node's host, in order.
    pub devices: Vec<u32>,
    /// CPU cores.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// Rack (switch) name.
    pub rack: String,
}

/// The nodes, the policy's [`Cluster`] built from them, and the GPU numbering.
#[derive(Clone, Debug)]
pub struct Topology {
    nodes: Vec<NodeSpec>,
    cluster: Cluster,
    /// Global id of each node's first GPU.
    first_gpu: Vec<u32>,
    /// Per global GPU id: its node.
    node_of: Vec<u32>,
}

impl Topology {
    /// A topology from `nodes` (in order; GPU types and racks numbered by first appearance).
    pub fn new(nodes: Vec<NodeSpec>) -> Result<Self, String> {
        if nodes.is_empty() {
            return Err("the cluster has no nodes".into());
        }
        let mut types: Vec<String> = Vec::new();
        let mut racks: BTreeMap<String, u32> = BTreeMap::new();
        let mut model_nodes = Vec::with_capacity(nodes.len());
        let mut first_gpu = Vec::with_capacity(nodes.len());
        let mut node_of = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, n) in nodes.iter().enumerate() {
            // Node names, GPU types and racks (the admin's: declared, or Slurm's) are shown to
            // every tenant (`arbiter cluster`, the dashboard): the same characters as in names
            // tenants give are refused.
            for (field, text) in [
                ("node name", &n.name),
                ("GPU type", &n.gpu_type),
                ("rack", &n.rack),
            ] {
                crate::security::text::check(field, text, crate::security::text::Text::Line)
                    .map_err(|e| format!("node {}: {e}", n.name.escape_debug()))?;
            }
            if !seen.insert(n.name.as_str()) {
                return Err(format!("node {} is listed twice", n.name));
            }
            let t = match types.iter().position(|t| *t == n.gpu_type) {
                Some(t) => t,
                None => {
                    types.push(n.gpu_type.clone());
                    types.len() - 1
                }
            };
            let next_rack = racks.len() as u32;
            let rack = *racks.entry(n.rack.clone()).or_insert(next_rack);
            first_gpu.push(node_of.len() as u32);
            node_of.extend(std::iter::repeat_n(i as u32, n.devices.len()));
            model_nodes.push(Node {
                id: NodeId(i as u32),
                name: n.name.clone(),
                rack: RackId(rack),
                gpu_type: GpuTypeId(t as u8),
                gpus: n.devices.len() as u32,
                cpus: n.cpus,
                memory_gib: n.memory_gib,
            });
        }
        let cluster = Cluster::new(types, model_nodes).map_err(|e| e.to_string())?;
        Ok(Topology {
            nodes,
            cluster,
            first_gpu,
            node_of,
        })
    }

    /// This machine, as nodes: one per GPU type (a policy places a job on one type), named
    /// `host` when the machine has one type and `host-type` otherwise; CPUs and memory split in
    /// proportion to GPUs. Device indices follow `inventory`'s order.
    pub fn machine(
        host: &str,
        inventory: &GpuInventory,
        cpus: u32,
        memory_gib: u32,
    ) -> Vec<NodeSpec> {
        let total: u32 = inventory.iter().map(|(_, n)| n).sum::<u32>().max(1);
        let mut next_device = 0;
        inventory
            .iter()
            .map(|(gpu_type, count)| {
                let devices: Vec<u32> = (next_device..next_device + count).collect();
                next_device += count;
                NodeSpec {
                    name: if inventory.len() == 1 {
                        host.to_string()
                    } else {
                        format!("{host}-{gpu_type}")
                    },
                    gpu_type: gpu_type.clone(),
                    devices,
                    cpus: (cpus.max(1) * count / total).max(1),
                    memory_gib: memory_gib * count / total,
                    rack: "local".into(),
                }
            })
            .collect()
    }

    /// The policy's view.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The nodes.
    pub fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    /// GPUs in the cluster.
    pub fn total_gpus(&self) -> u32 {
        self.node_of.len() as u32
    }

    /// GPUs per type, in type order (what submissions are checked against).
    pub fn inventory(&self) -> GpuInventory {
        let mut by_type: GpuInventory = self
            .cluster
            .gpu_type_names
            .iter()
            .map(|t| (t.clone(), 0))
            .collect();
        for n in &self.cluster.nodes {
            by_type[n.gpu_type.0 as usize].1 += n.gpus;
        }
        by_type
    }

    /// Global ids of node `node`'s GPUs.
    pub fn gpus_of(&self, node: NodeId) -> std::ops::Range<u32> {
        let i = node.index();
        let first = self.first_gpu.get(i).copied().unwrap_or(0);
        first..first + self.nodes.get(i).map_or(0, |n| n.devices.len() as u32)
    }

    /// The node of global GPU `gpu`.
    pub fn node_of(&self, gpu: u32) -> Option<NodeId> {
        self.node_of.get(gpu as usize).map(|n| NodeId(*n))
    }

    /// The placement global GPUs `gpus` make (`None` for an empty or unknown set).
    pub fn placement_of(&self, gpus: &[u32]) -> Option<Placement> {
        let mut per_node: BTreeMap<NodeId, u32> = BTreeMap::new();
        for g in gpus {
            *per_node.entry(self.node_of(*g)?).or_insert(0) += 1;
        }
        if per_node.is_empty() {
            return None;
        }
        Some(Placement {
            slots: per_node.into_iter().collect(),
        })
    }

    /// Global GPUs grouped by node, as device indices (what an executor is given).
    pub fn devices(&self, gpus: &[u32]) -> Vec<NodeGpus> {
        let mut per_node: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for g in gpus {
            if let Some(n) = self.node_of(*g) {
                let local = g - self.first_gpu[n.index()];
                per_node
                    .entry(n.0)
                    .or_default()
                    .push(self.nodes[n.index()].devices[local as usize]);
            }
        }
        per_node
            .into_iter()
            .map(|(n, devices)| NodeGpus {
                node: self.nodes[n as usize].name.clone(),
                devices,
            })
            .collect()
    }

    /// The GPU type name of global GPU `gpu`.
    pub fn gpu_type_name(&self, gpu: u32) -> Option<&str> {
        let node = self.node_of(gpu)?;
        Some(self.nodes[node.index()].gpu_type.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, t: &str, gpus: u32, rack: &str) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            gpu_type: t.into(),
            devices: (0..gpus).collect(),
            cpus: 8,
            memory_gib: 16,
            rack: rack.into(),
        }
    }

    #[test]
    fn gpus_are_numbered_node_by_node_and_map_back_to_devices() {
        let t = Topology::new(vec![
            node("n1", "v100", 4, "r1"),
            node("n2", "v100", 4, "r1"),
            node("n3", "a100", 4, "r2"),
        ])
        .expect("valid");
        assert_eq!(t.total_gpus(), 12);
        assert_eq!(t.inventory(), vec![("v100".into(), 8), ("a100".into(), 4)]);
        assert_eq!(t.gpus_of(NodeId(2)), 8..12);
        assert_eq!(t.cluster().nodes[2].rack, RackId(1));
        let gang = [2, 3, 4, 5];
        assert_eq!(
            t.placement_of(&gang).expect("known").slots.as_slice(),
            &[(NodeId(0), 2), (NodeId(1), 2)]
        );
        assert_eq!(
            t.devices(&gang),
            vec![
                NodeGpus {
                    node: "n1".into(),
                    devices: vec![2, 3]
                },
                NodeGpus {
                    node: "n2".into(),
                    devices: vec![0, 1]
                }
            ]
        );
        assert_eq!(t.gpu_type_name(9), Some("a100"));
        assert!(
            Topology::new(vec![node("n1", "v100", 1, "r"), node("n1", "v100", 1, "r")]).is_err(),
            "a name twice"
        );
    }

    #[test]
    fn names_shown_to_tenants_hold_no_control_format_or_separator_character() {
        let e = Topology::new(vec![node("n1", "a100\u{202e}", 1, "r")]).expect_err("refused");
        assert_eq!(
            e,
            "node n1: GPU type: contains the direction control character \\u{202e}"
        );
        assert!(Topology::new(vec![node("n\u{1b}[2K", "a100", 1, "r")]).is_err());
        assert!(Topology::new(vec![node("n1", "a100", 1, "r\u{2028}")]).is_err());
    }

    #[test]
    fn a_machine_with_two_gpu_types_is_two_nodes_with_its_device_indices() {
        let nodes = Topology::machine("box", &vec![("v100".into(), 2), ("k80".into(), 2)], 16, 64);
        assert_eq!(
            nodes
                .iter()
                .map(|n| (n.name.as_str(), n.devices.clone(), n.cpus))
                .collect::<Vec<_>>(),
            vec![("box-v100", vec![0, 1], 8), ("box-k80", vec![2, 3], 8)]
        );
        let t = Topology::new(nodes).expect("valid");
        assert_eq!(
            t.devices(&[3]),
            vec![NodeGpus {
                node: "box-k80".into(),
                devices: vec![3]
            }]
        );
        assert_eq!(
            Topology::machine("box", &vec![("a100".into(), 1)], 4, 8)[0].name,
            "box"
        );
    }
}
