//! AntMan stepped by hand: placements, reservations, Muri's utilization arithmetic and speeds.

use super::*;
use crate::test_support::step;
use arbiter_model::Cluster;

fn stages(io_s: f64, cpu_s: f64, gpu_s: f64) -> IterationStages {
    IterationStages { io_s, cpu_s, gpu_s }
}

/// A job of `gpus` GPUs and `priority` (0 guaranteed), submitted at `submit_s`.
fn spec(id: u32, submit_s: u64, gpus: u32, priority: i32) -> JobSpec {
    let mut s = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, 1000.0);
    s.priority = priority;
    s.stages = Some(stages(0.01, 0.02, 0.07));
    s.iteration_s = Some(0.1);
    s
}

fn running(d: &Decision) -> Vec<(u32, String, Option<f64>)> {
    d.run
        .iter()
        .map(|a| (a.job.0, a.placement.to_string(), a.guest.map(|g| g.speed)))
        .collect()
}

#[test]
fn squeezing_into_a_co_runners_gaps_counts_its_iterations_by_hand() {
    // Own stages (3, 1, 2) s against a co-runner's (1, 1, 1) s. I/O fits in the co-runner's
    // CPU+GPU gaps of 2 s: floor(3/2) = 1 iteration and 1 s left over, which takes a second one
    // and, overlapping, eats min(1, 1, 2-1) = 1 s of its CPU stage (none left). GPU stage: 2 s
    // in gaps of I/O+CPU = 2 s: one more iteration, nothing left. Three co-runner iterations.
    assert_eq!(
        squeeze(stages(3.0, 1.0, 2.0), stages(1.0, 1.0, 1.0)),
        Some(3.0)
    );
    // A GPU stage of 1.4 s in gaps of 0.5 s: two iterations and 0.4 s left, more than the
    // co-runner's 0.25 s of I/O, so a third; 1.2 s leaves 0.2 s, which fits in the I/O.
    assert_eq!(
        squeeze(stages(0.0, 0.0, 1.4), stages(0.25, 0.25, 1.0)),
        Some(3.0)
    );
    assert_eq!(
        squeeze(stages(0.0, 0.0, 1.2), stages(0.25, 0.25, 1.0)),
        Some(2.0)
    );
    // An empty gap is not a gap (Muri would divide by zero).
    assert_eq!(squeeze(stages(1.0, 1.0, 1.0), stages(1.0, 0.0, 0.0)), None);
    // The slowest co-runner decides; another opportunistic job halves the speed.
    let c = CoRunner::Guaranteed {
        stages: stages(1.0, 1.0, 1.0),
        iteration_s: 3.0,
    };
    assert_eq!(
        opportunistic_iteration_s(6.0, Some(stages(3.0, 1.0, 2.0)), &[c]),
        9.0
    );
    assert_eq!(
        opportunistic_iteration_s(6.0, Some(stages(3.0, 1.0, 2.0)), &[c, CoRunner::Other]),
        12.0
    );
    assert_eq!(opportunistic_iteration_s(6.0, None, &[c]), 12.0);
    assert_eq!(opportunistic_iteration_s(6.0, None, &[]), 6.0);
}

#[test]
fn guaranteed_jobs_reserve_partial_gangs_that_opportunistic_jobs_may_use() {
    let cluster = Cluster::homogeneous(1, 2, 4, 32, 256, "V100").expect("valid");
    let specs = vec![
        spec(0, 0, 2, 0),
        spec(1, 0, 4, 0),
        spec(2, 1, 4, 0),
        spec(3, 2, 1, 1),
    ];
    let mut p = AntMan::default();
    let d = step(
        &mut p,
        &cluster,
        &specs,
        &[0, 1, 2, 3],
        &Decision::default(),
    );
    // 0 takes node 0's first two GPUs, 1 node 1; 2 reserves node 0's other two and waits. The
    // opportunistic job takes the least-used GPU: a reserved one (0.09 < 0.1).
    assert_eq!(
        p.holder,
        [
            Some(JobId(0)),
            Some(JobId(0)),
            Some(JobId(2)),
            Some(JobId(2)),
            Some(JobId(1)),
            Some(JobId(1)),
            Some(JobId(1)),
            Some(JobId(1))
        ]
    );
    assert_eq!(p.guest[2], Some(JobId(3)));
    assert_eq!(d.pending, vec![(JobId(2), PendingReason::InsufficientGpus)]);
    // A reservation does not run, so it does not slow the opportunistic job.
    assert_eq!(
        running(&d),
        vec![
            (0, "node0:2".into(), None),
            (1, "node1:4".into(), None),
            (3, "node0:1".into(), Some(1.0))
        ]
    );
    // 0 finishes: 2's reservation grows on node 0 and completes; now it slows job 3.
    let d = step(&mut p, &cluster, &specs, &[1, 2, 3], &d);
    assert_eq!(p.holder[..4], [Some(JobId(2)); 4]);
    let r = running(&d);
    assert_eq!(r[1].0, 2);
    assert_eq!(r[1].1, "node0:4");
    let own = specs[3]
        .stages
        .map(|s| squeeze(s, s).expect("gaps"))
        .expect("stages");
    assert_eq!(r[2], (3, "node0:1".into(), Some(0.1 / (own * 0.1))));
}

#[test]
fn utilization_keeps_muris_float_residues_and_they_decide_ties() {
    // Muri's arithmetic: an opportunistic job leaving a GPU it shared (1.0 - 0.9) and then the
    // guaranteed holder (- 0.1) leave -1.4e-17, which sorts before an untouched 0.0.
    let cluster = Cluster::homogeneous(1, 1, 3, 32, 256, "V100").expect("valid");
    let specs = vec![
        spec(0, 0, 1, 0),
        spec(1, 0, 1, 0),
        spec(2, 0, 1, 0),
        spec(3, 1, 1, 1),
        spec(4, 2, 1, 1),
        spec(5, 3, 1, 1),
    ];
    let mut p = AntMan::default();
    let d = step(&mut p, &cluster, &specs, &[0, 1, 2], &Decision::default());
    let d = step(&mut p, &cluster, &specs, &[1, 2, 3], &d); // 0 ends; 3 takes idle GPU 0
    let d = step(&mut p, &cluster, &specs, &[1, 2, 3, 4], &d); // 4 joins 1 on GPU 1 (first of the 0.1s)
    assert_eq!(p.guest, [Some(JobId(3)), Some(JobId(4)), None]);
    let d = step(&mut p, &cluster, &specs, &[1, 2, 3], &d); // 4 ends
    let d = step(&mut p, &cluster, &specs, &[2], &d); // 1 and 3 end
    assert_eq!(p.util[0].to_bits(), 0.0f64.to_bits());
    assert!(p.util[1] < 0.0 && p.util[1] > -1e-16, "{}", p.util[1]);
    // A newcomer takes GPU 1, ahead of GPU 0 and its exact 0.0.
    step(&mut p, &cluster, &specs, &[2, 5], &d);
    assert_eq!(p.guest, [None, Some(JobId(5)), None]);
}

#[test]
fn a_gang_larger_than_a_node_keeps_the_whole_nodes_it_found() {
    let cluster = Cluster::homogeneous(1, 3, 2, 32, 256, "V100").expect("valid");
    let specs = vec![spec(0, 0, 1, 0), spec(1, 0, 2, 0), spec(2, 1, 4, 0)];
    let mut p = AntMan::default();
    let d = step(&mut p, &cluster, &specs, &[0, 1, 2], &Decision::default());
    // 0 takes a GPU of node 0, 1 the whole node 1; 2 (4 GPUs = 2 nodes) finds only node 2
    // whole, keeps it and waits.
    assert_eq!(
        p.holder,
        [
            Some(JobId(0)),
            None,
            Some(JobId(1)),
            Some(JobId(1)),
            Some(JobId(2)),
            Some(JobId(2))
        ]
    );
    assert_eq!(
        running(&d),
        vec![(0, "node0:1".into(), None), (1, "node1:2".into(), None)]
    );
    // 0 ends: node 0 is whole again and completes 2's gang.
    let d = step(&mut p, &cluster, &specs, &[1, 2], &d);
    assert_eq!(
        running(&d),
        vec![
            (1, "node1:2".into(), None),
            (2, "node2:2+node0:2".into(), None)
        ]
    );
}

#[test]
fn opportunistic_jobs_spread_over_nodes_and_wait_when_too_few_gpus_are_idle() {
    let cluster = Cluster::homogeneous(1, 2, 2, 32, 256, "V100").expect("valid");
    let specs = vec![
        spec(0, 0, 1, 0),
        spec(1, 0, 1, 0),
        spec(2, 1, 3, 1),
        spec(3, 2, 2, 1),
    ];
    let mut p = AntMan::default();
    let d = step(
        &mut p,
        &cluster,
        &specs,
        &[0, 1, 2, 3],
        &Decision::default(),
    );
    // 0 and 1 share node 0; job 2 takes node 1's idle GPUs and one of node 0's; job 3 finds only
    // one GPU under 0.8 and waits.
    assert_eq!(
        p.guest,
        [Some(JobId(2)), None, Some(JobId(2)), Some(JobId(2))]
    );
    assert_eq!(running(&d)[2].1, "node1:2+node0:1");
    assert_eq!(d.pending, vec![(JobId(3), PendingReason::InsufficientGpus)]);
}
