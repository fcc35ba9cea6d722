//! Which GPUs are taken: the one place where over-allocation is checked.

use crate::cluster::Cluster;
use crate::decision::Placement;
use crate::ids::NodeId;
use thiserror::Error;

/// An allocation that would break the cluster's capacity.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// The placement names a node the cluster does not have.
    #[error("placement names {0}, which the cluster does not have")]
    UnknownNode(NodeId),
    /// The placement asks a node for more GPUs than it has free.
    #[error("{node} has {free} free GPUs, placement asks for {asked}")]
    OverCommitted {
        /// The node.
        node: NodeId,
        /// GPUs free on it.
        free: u32,
        /// GPUs asked for.
        asked: u32,
    },
    /// A placement with a node listed twice or with zero GPUs on a node.
    #[error("malformed placement: {0}")]
    Malformed(String),
    /// Releasing GPUs that were not taken.
    #[error("{node} would have more free GPUs than it has")]
    OverReleased {
        /// The node.
        node: NodeId,
    },
}

/// Free GPUs per node. Allocation is all-or-nothing and checked: free counts never go negative
/// and never exceed a node's capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupancy {
    free: Vec<u32>,
    capacity: Vec<u32>,
    free_total: u32,
}

impl Occupancy {
    /// An empty cluster: every GPU free.
    pub fn new(cluster: &Cluster) -> Self {
        let capacity: Vec<u32> = cluster.nodes.iter().map(|n| n.gpus).collect();
        let free_total = capacity.iter().sum();
        Occupancy {
            free: capacity.clone(),
            capacity,
            free_total,
        }
    }

    /// Makes this an empty `cluster` again (every GPU free), reusing its memory when it already
    /// has the cluster's shape.
    pub fn reset(&mut self, cluster: &Cluster) {
        let same = self.capacity.len() == cluster.nodes.len()
            && self
                .capacity
                .iter()
                .zip(&cluster.nodes)
                .all(|(c, n)| *c == n.gpus);
        if !same {
            *self = Occupancy::new(cluster);
            return;
        }
        self.free.copy_from_slice(&self.capacity);
        self.free_total = self.capacity.iter().sum();
    }

    /// Free GPUs on a node (0 for an unknown node).
    #[inline]
    pub fn free_on(&self, node: NodeId) -> u32 {
        self.free.get(node.index()).copied().unwrap_or(0)
    }

    /// Free GPUs per node, indexed by node id.
    pub fn free_per_node(&self) -> &[u32] {
        &self.free
    }

    /// GPU capacity of a node.
    #[inline]
    pub fn capacity_of(&self, node: NodeId) -> u32 {
        self.capacity.get(node.index()).copied().unwrap_or(0)
    }

    /// Free GPUs in the whole cluster.
    #[inline]
    pub fn free_total(&self) -> u32 {
        self.free_total
    }

    /// Whether `placement` fits in what is free now.
    pub fn fits(&self, placement: &Placement) -> bool {
        self.check(placement).is_ok()
    }

    fn check(&self, placement: &Placement) -> Result<(), AllocError> {
        self.check_less(placement, &[])
    }

    /// Whether `placement` fits in what is free now less `taken` GPUs per node (index by node;
    /// none past its end): [`Occupancy::allocate`]'s check for GPUs taken on top of this
    /// occupancy without a copy of it, with the same errors.
    pub fn check_less(&self, placement: &Placement, taken: &[u32]) -> Result<(), AllocError> {
        for (i, &(node, gpus)) in placement.slots.iter().enumerate() {
            if gpus == 0 {
                return Err(AllocError::Malformed(format!("zero GPUs on {node}")));
            }
            if placement.slots[..i].iter().any(|(n, _)| *n == node) {
                return Err(AllocError::Malformed(format!("{node} listed twice")));
            }
            let free = *self
                .free
                .get(node.index())
                .ok_or(AllocError::UnknownNode(node))?;
            let free = free.saturating_sub(taken.get(node.index()).copied().unwrap_or(0));
            if gpus > free {
                return Err(AllocError::OverCommitted {
                    node,
                    free,
                    asked: gpus,
                });
            }
        }
        Ok(())
    }

    /// Takes the GPUs of `placement`, or changes nothing and says why not.
    pub fn allocate(&mut self, placement: &Placement) -> Result<(), AllocError> {
        self.check(placement)?;
        for &(node, gpus) in &placement.slots {
            self.free[node.index()] -= gpus;
            self.free_total -= gpus;
        }
        Ok(())
    }

    /// Gives back the GPUs of `placement`, or changes nothing and says why not.
    pub fn release(&mut self, placement: &Placement) -> Result<(), AllocError> {
        for &(node, gpus) in &placement.slots {
            let i = node.index();
            let free = *self.free.get(i).ok_or(AllocError::UnknownNode(node))?;
            if free + gpus > self.capacity[i] {
                return Err(AllocError::OverReleased { node });
            }
        }
        for &(node, gpus) in &placement.slots {
            self.free[node.index()] += gpus;
            self.free_total += gpus;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cluster() -> Cluster {
        Cluster::homogeneous(1, 2, 4, 32, 128, "V100").expect("valid")
    }

    #[test]
    fn over_commit_is_refused_and_changes_nothing() {
        let mut occ = Occupancy::new(&cluster());
        occ.allocate(&Placement::single(NodeId(0), 3))
            .expect("fits");
        let before = occ.clone();
        let err = occ
            .allocate(&Placement::single(NodeId(0), 2))
            .expect_err("over-commits");
        assert_eq!(
            err,
            AllocError::OverCommitted {
                node: NodeId(0),
                free: 1,
                asked: 2
            }
        );
        assert_eq!(occ, before);
    }

    #[test]
    fn releasing_what_was_not_taken_is_refused() {
        let mut occ = Occupancy::new(&cluster());
        assert!(occ.release(&Placement::single(NodeId(1), 1)).is_err());
        assert!(occ.allocate(&Placement::single(NodeId(7), 1)).is_err());
    }

    proptest! {
        /// Whatever sequence of allocations and releases is attempted, free GPUs stay within
        /// [0, capacity] on every node and the total matches the per-node sum.
        #[test]
        fn free_counts_stay_within_capacity(ops in proptest::collection::vec((0u32..3, 1u32..6, any::<bool>()), 1..60)) {
            let c = cluster();
            let mut occ = Occupancy::new(&c);
            let mut held: Vec<Placement> = Vec::new();
            for (node, gpus, take) in ops {
                if take || held.is_empty() {
                    let p = Placement::single(NodeId(node), gpus);
                    if occ.allocate(&p).is_ok() { held.push(p); }
                } else {
                    let p = held.pop().expect("non-empty");
                    occ.release(&p).expect("held placements release");
                }
                let sum: u32 = occ.free_per_node().iter().sum();
                prop_assert_eq!(sum, occ.free_total());
                for n in &c.nodes {
                    prop_assert!(occ.free_on(n.id) <= n.gpus);
                }
            }
        }
    }
}
