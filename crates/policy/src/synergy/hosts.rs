//! Free GPUs, CPU cores and memory per server during one round, and multi-dimensional placement:
//! a job fits a server only if its GPUs, its CPUs and its memory all fit there.

use arbiter_model::{Cluster, HostShare, JobId, NodeId, Placement};
use std::collections::BTreeMap;

/// Amounts below this count as zero (fractional shares add up with rounding error).
const EPSILON: f64 = 1e-9;

/// One job placed this round: where, with how much per GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    /// Its GPUs per server.
    pub placement: Placement,
    /// CPU cores and memory per GPU.
    pub share: HostShare,
}

/// What is free on every server, and what every job placed so far this round holds.
#[derive(Clone, Debug)]
pub struct Hosts<'a> {
    cluster: &'a Cluster,
    free_gpus: Vec<u32>,
    free_cpus: Vec<f64>,
    free_memory: Vec<f64>,
    /// Jobs placed this round, by id.
    pub placed: BTreeMap<JobId, Placed>,
}

impl<'a> Hosts<'a> {
    /// An empty cluster.
    pub fn new(cluster: &'a Cluster) -> Self {
        Hosts {
            cluster,
            free_gpus: cluster.nodes.iter().map(|n| n.gpus).collect(),
            free_cpus: cluster.nodes.iter().map(|n| n.cpus as f64).collect(),
            free_memory: cluster.nodes.iter().map(|n| n.memory_gib as f64).collect(),
            placed: BTreeMap::new(),
        }
    }

    /// The GPU-proportional share of a server (its CPUs and memory divided by its GPUs).
    pub fn proportional(&self, node: NodeId) -> HostShare {
        let n = &self.cluster.nodes[node.index()];
        let gpus = n.gpus.max(1) as f64;
        HostShare {
            cpus_per_gpu: n.cpus as f64 / gpus,
            memory_per_gpu: n.memory_gib as f64 / gpus,
        }
    }

    /// Free GPUs in the whole cluster.
    pub fn free_gpus_total(&self) -> u32 {
        self.free_gpus.iter().sum()
    }

    /// Free GPUs on a server.
    pub fn free_gpus_on(&self, node: NodeId) -> u32 {
        self.free_gpus[node.index()]
    }

    /// How many GPUs with `share` each server could give right now.
    fn capacity_on(&self, i: usize, share: HostShare) -> u32 {
        let by = |free: f64, per_gpu: f64| {
            if per_gpu <= EPSILON {
                u32::MAX
            } else {
                ((free + EPSILON) / per_gpu).floor().max(0.0) as u32
            }
        };
        self.free_gpus[i]
            .min(by(self.free_cpus[i], share.cpus_per_gpu))
            .min(by(self.free_memory[i], share.memory_per_gpu))
    }

    /// Whether `placement` with `share` fits what is free.
    pub fn fits(&self, placement: &Placement, share: HostShare) -> bool {
        placement.slots.iter().all(|&(node, gpus)| {
            node.index() < self.free_gpus.len() && self.capacity_on(node.index(), share) >= gpus
        })
    }

    /// Finds GPUs for `gpus` GPUs with `share` each, without taking them: the job's `current`
    /// placement if it still fits (no migration), else one server — the one with the fewest free
    /// GPUs that fits (best fit, keeping whole servers for large jobs) — else, for a job larger
    /// than what one server can give, servers with the fewest free GPUs first.
    pub fn find(
        &self,
        gpus: u32,
        share: HostShare,
        current: Option<&Placement>,
    ) -> Option<Placement> {
        if let Some(p) = current.filter(|p| p.gpus() == gpus && self.fits(p, share)) {
            return Some(p.clone());
        }
        let n = self.free_gpus.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (self.free_gpus[i], i));
        if let Some(&i) = order.iter().find(|&&i| self.capacity_on(i, share) >= gpus) {
            return Some(Placement::single(NodeId(i as u32), gpus));
        }
        let mut placement = Placement::default();
        let mut left = gpus;
        // Spanning servers: whole free servers first (fewest pieces), then the rest.
        order.sort_by_key(|&i| (std::cmp::Reverse(self.capacity_on(i, share)), i));
        for i in order {
            if left == 0 {
                break;
            }
            let take = self.capacity_on(i, share).min(left);
            if take > 0 {
                placement.slots.push((NodeId(i as u32), take));
                left -= take;
            }
        }
        (left == 0).then_some(placement)
    }

    /// Takes `placement` with `share` for `job` (it must fit).
    pub fn take(&mut self, job: JobId, placement: Placement, share: HostShare) {
        for &(node, gpus) in &placement.slots {
            let i = node.index();
            self.free_gpus[i] -= gpus.min(self.free_gpus[i]);
            self.free_cpus[i] -= share.cpus_per_gpu * gpus as f64;
            self.free_memory[i] -= share.memory_per_gpu * gpus as f64;
        }
        self.placed.insert(job, Placed { placement, share });
    }

    /// Changes the share of a placed job (to shrink it, or to grow it within what is free).
    pub fn reshare(&mut self, job: JobId, share: HostShare) {
        let Some(placed) = self.placed.get_mut(&job) else {
            return;
        };
        for &(node, gpus) in &placed.placement.slots {
            let i = node.index();
            self.free_cpus[i] += (placed.share.cpus_per_gpu - share.cpus_per_gpu) * gpus as f64;
            self.free_memory[i] +=
                (placed.share.memory_per_gpu - share.memory_per_gpu) * gpus as f64;
        }
        placed.share = share;
    }

    /// Jobs placed on server `node`, by id.
    pub fn jobs_on(&self, node: NodeId) -> Vec<JobId> {
        self.placed
            .iter()
            .filter(|(_, p)| p.placement.slots.iter().any(|(n, _)| *n == node))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Free CPU cores and memory on a server.
    pub fn free_host_on(&self, node: NodeId) -> (f64, f64) {
        (self.free_cpus[node.index()], self.free_memory[node.index()])
    }

    /// The cluster.
    pub fn cluster(&self) -> &'a Cluster {
        self.cluster
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(c: f64, m: f64) -> HostShare {
        HostShare {
            cpus_per_gpu: c,
            memory_per_gpu: m,
        }
    }

    #[test]
    fn a_job_fits_only_where_gpus_cpus_and_memory_all_fit() {
        // Two servers of 8 GPUs, 24 CPUs, 500 memory.
        let c = Cluster::homogeneous(1, 2, 8, 24, 500, "V100").expect("valid");
        let mut hosts = Hosts::new(&c);
        // 2 GPUs at 12 CPUs each take all 24 CPUs of a server.
        let p = hosts.find(2, share(12.0, 62.5), None).expect("fits");
        hosts.take(JobId(0), p.clone(), share(12.0, 62.5));
        assert_eq!(hosts.free_gpus_on(p.slots[0].0), 6);
        // That server has 6 GPUs but no CPUs left: a 1-GPU job at 3 CPUs goes to the other.
        let q = hosts.find(1, share(3.0, 62.5), None).expect("fits");
        assert_ne!(q.slots[0].0, p.slots[0].0);
        // A job needing 9 GPUs spans servers, taking only what CPUs allow: 6 + 0 free on the first
        // (no CPUs), so it cannot fit at 3 CPUs per GPU: 8 GPUs on the second only.
        assert!(hosts.find(9, share(3.0, 62.5), None).is_none());
        // Shrinking the first job frees CPUs for GPUs that were stranded.
        hosts.reshare(JobId(0), share(3.0, 62.5));
        assert!(hosts.find(9, share(3.0, 62.5), None).is_some());
    }
}
