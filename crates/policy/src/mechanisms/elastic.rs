//! What the elastic-job policies of Pollux's evaluation share (its `tiresias`, `optimus`, and
//! `afs` as run on its simulator): GPU counts first, then placements the way Pollux's simulator
//! places them — a job keeps its GPUs while its count is unchanged; the others take GPUs from
//! the node with the most free ones first (lowest index among equals), as many as it has or the
//! job still needs, until the job has all of its count.

use arbiter_model::{ActiveJob, Assignment, Cluster, JobId, JobSpec, NodeId, Placement};
use smallvec::SmallVec;

/// Free GPUs per node index.
pub(crate) fn free_per_node(cluster: &Cluster) -> Vec<u32> {
    cluster.nodes.iter().map(|n| n.gpus).collect()
}

/// Takes `gpus` GPUs from `free`, most-free node first; `None` (and `free` untouched) if fewer
/// are free in all.
pub(crate) fn most_free_first(free: &mut [u32], gpus: u32) -> Option<Placement> {
    if free.iter().map(|f| u64::from(*f)).sum::<u64>() < u64::from(gpus) {
        return None;
    }
    let mut slots: SmallVec<[(NodeId, u32); 2]> = SmallVec::new();
    let mut left = gpus;
    while left > 0 {
        // The first node with the most free GPUs (Python's Counter.most_common order).
        let (node, &most) = free.iter().enumerate().rev().max_by_key(|(_, f)| **f)?;
        let take = most.min(left);
        free[node] -= take;
        left -= take;
        slots.push((NodeId(node as u32), take));
    }
    slots.sort_by_key(|(n, _)| *n);
    Some(Placement { slots })
}

/// Turns GPU counts into assignments: jobs whose count equals the GPUs they hold keep them; the
/// others are placed most-free-first in the order of `counts` (every job to run with its count,
/// > 0). `jobs` is sorted by id.
pub(crate) fn place_counts(
    cluster: &Cluster,
    jobs: &[&ActiveJob],
    counts: &[(JobId, u32)],
) -> Vec<Assignment> {
    let held = |id: JobId| {
        jobs.binary_search_by_key(&id, |j| j.id)
            .ok()
            .and_then(|k| jobs[k].placement())
    };
    let mut free = free_per_node(cluster);
    let mut run = Vec::with_capacity(counts.len());
    let mut to_place: Vec<(JobId, u32)> = Vec::new();
    for &(id, gpus) in counts {
        match held(id).filter(|p| p.gpus() == gpus) {
            Some(placement) => {
                for &(node, g) in &placement.slots {
                    if let Some(f) = free.get_mut(node.index()) {
                        *f = f.saturating_sub(g);
                    }
                }
                run.push(Assignment::exclusive(id, placement.clone()));
            }
            None => to_place.push((id, gpus)),
        }
    }
    for (id, gpus) in to_place {
        if let Some(placement) = most_free_first(&mut free, gpus) {
            run.push(Assignment::exclusive(id, placement));
        }
    }
    run
}

/// The GPU counts a job may run with: its elastic range, or just its gang.
pub(crate) fn gpu_bounds(spec: &JobSpec) -> (u32, u32) {
    spec.elastic.map_or((spec.gpus, spec.gpus), |r| {
        (r.min.max(1), r.max.max(r.min.max(1)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_free_first_takes_the_emptiest_node_lowest_index_first() {
        let mut free = vec![2, 4, 4, 1];
        let p = most_free_first(&mut free, 6).expect("fits");
        assert_eq!(p.slots.as_slice(), &[(NodeId(1), 4), (NodeId(2), 2)]);
        assert_eq!(free, vec![2, 0, 2, 1]);
        let p = most_free_first(&mut free, 4).expect("fits");
        // Nodes 0 and 2 tie at 2 free: node 0 first.
        assert_eq!(p.slots.as_slice(), &[(NodeId(0), 2), (NodeId(2), 2)]);
        assert_eq!(most_free_first(&mut free, 2), None);
        assert_eq!(free, vec![0, 0, 0, 1]);
    }
}
