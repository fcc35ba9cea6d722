//! AntMan through the engine: opportunistic jobs never delay guaranteed ones, every job ends,
//! runs are reproducible, and guests run at the speed their co-runners leave them.

use arbiter_model::{Cluster, IterationStages, JobId, JobSpec, SimTime};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{JobOutcome, OverheadModel, SimConfig, SimOutput, simulate};
use proptest::prelude::*;

mod support;

fn run(cluster: &Cluster, jobs: &[JobSpec]) -> SimOutput {
    let mut policy = build(PolicyKind::AntMan, &PolicyConfig::default()).expect("builds");
    let config = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    simulate(cluster, jobs, policy.as_mut(), &config).expect("runs")
}

/// A job with Muri-like stage times (seconds) that add up to its iteration time.
fn job(id: u32, submit_s: u64, gpus: u32, run_s: f64, priority: i32, shape: usize) -> JobSpec {
    let shapes = [(0.05, 0.02, 0.03), (0.01, 0.01, 0.08), (0.02, 0.06, 0.02)];
    let (io_s, cpu_s, gpu_s) = shapes[shape % shapes.len()];
    let mut j = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s);
    j.priority = priority;
    j.stages = Some(IterationStages { io_s, cpu_s, gpu_s });
    j.iteration_s = Some(io_s + cpu_s + gpu_s);
    j
}

/// The guaranteed jobs alone, renumbered (the engine wants ids in order).
fn guaranteed_only(jobs: &[JobSpec]) -> (Vec<JobSpec>, Vec<usize>) {
    let mut kept = Vec::new();
    let mut original = Vec::new();
    for (i, j) in jobs.iter().enumerate().filter(|(_, j)| j.priority == 0) {
        let mut j = j.clone();
        j.id = JobId(kept.len() as u32);
        kept.push(j);
        original.push(i);
    }
    (kept, original)
}

fn workload() -> impl Strategy<Value = (Cluster, Vec<JobSpec>)> {
    (1u32..4, 1u32..5)
        .prop_flat_map(|(nodes, gpus)| {
            let cluster = Cluster::homogeneous(1, nodes, gpus, 32, 256, "V100").expect("valid");
            let total = nodes * gpus;
            let raw = proptest::collection::vec(
                (0u64..3_000, 1u32..=total, 1u32..20_000, 0i32..2, 0usize..3),
                1..30,
            );
            (Just(cluster), raw)
        })
        .prop_map(|(cluster, mut raw)| {
            raw.sort_by_key(|r| r.0);
            let jobs = raw
                .into_iter()
                .enumerate()
                .map(|(i, (submit, gpus, run, priority, shape))| {
                    job(i as u32, submit, gpus, run as f64, priority, shape)
                })
                .collect();
            (cluster, jobs)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Guaranteed jobs start and finish exactly when they would without any opportunistic job
    /// in the cluster; every job finishes; the same input gives the same records.
    #[test]
    fn an_opportunistic_job_never_delays_a_guaranteed_one((cluster, jobs) in workload()) {
        let all = run(&cluster, &jobs);
        for r in &all.records {
            prop_assert_eq!(r.outcome, JobOutcome::Completed);
        }
        let (alone, original) = guaranteed_only(&jobs);
        if !alone.is_empty() {
            let without = run(&cluster, &alone);
            for (k, &i) in original.iter().enumerate() {
                prop_assert_eq!(all.records[i].first_start_s, without.records[k].first_start_s, "job {} start", i);
                prop_assert_eq!(all.records[i].finish_s, without.records[k].finish_s, "job {} finish", i);
            }
        }
        prop_assert_eq!(&all.records, &run(&cluster, &jobs).records);
    }
}

#[test]
fn a_guest_runs_at_the_speed_its_co_runner_leaves_it() {
    // One GPU. The guaranteed job (GPU-heavy shape 1: 0.01, 0.01, 0.08 s) runs 100 s; the
    // opportunistic one (shape 0: 0.05, 0.02, 0.03 s, 0.1 s an iteration) shares the GPU. By
    // hand (Muri's antman_calc_iter_time): its I/O of 0.05 s in gaps of 0.09 s: 0 whole and a
    // remainder, 1 iteration, overlapping min(0.02, 0.08, 0.09 - 0.05) = 0.02 s of its CPU;
    // CPU left 0, GPU 0.03 s in gaps of 0.02 s: 1 iteration and 0.01 s left, not more than the
    // 0.01 s of I/O — 2 iterations of 0.1 s: 0.2 s, half speed while they share.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![job(0, 0, 1, 100.0, 0, 1), job(1, 0, 1, 100.0, 1, 0)];
    let out = run(&cluster, &jobs);
    // 100 s shared at half speed (50 s of work), then 50 s alone.
    assert_eq!(out.records[0].finish_s, Some(100.0));
    assert_eq!(out.records[1].finish_s, Some(150.0));
}

/// Issue 32: a guest's GPU time was added on top of its GPUs' holders, so AntMan reported
/// utilization above 1 (1.44 on Muri's trace1). Each GPU counts once, by hand.
#[test]
fn utilization_counts_each_gpu_once_and_reports_sharing_beside_it() {
    use arbiter_sim::{Summary, Window};
    let summary =
        |out: &SimOutput| Summary::compute(&out.records, Window::default(), out.capacity_gpus);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // One GPU: the guaranteed job holds it 0–100 s, the guest runs on it 0–150 s (half speed
    // while they share). The GPU is busy 150 s of 150: utilization 1 (was (100 + 150) / 150 =
    // 1.67), shared 100 s of those 150, the guest's own GPU time 150 s of 150.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let out = run(
        &cluster,
        &[job(0, 0, 1, 100.0, 0, 1), job(1, 0, 1, 100.0, 1, 0)],
    );
    let s = summary(&out);
    assert!(close(s.gpu_utilization, 1.0), "{s:?}");
    assert!(close(s.shared_gpu_fraction, 100.0 / 150.0), "{s:?}");
    assert!(close(s.guest_gpu_fraction, 1.0), "{s:?}");
    let r = &out.records;
    assert_eq!(
        (r[0].busy_gpu_s, r[0].shared_gpu_s, r[0].guest_gpu_s),
        (100.0, 0.0, 0.0)
    );
    assert_eq!(
        (r[1].busy_gpu_s, r[1].shared_gpu_s, r[1].guest_gpu_s),
        (50.0, 100.0, 150.0)
    );
    // The per-job GPU-seconds are as before: the guest's every GPU-second.
    assert_eq!(r[1].gpu_s_allocated, 150.0);

    // Two GPUs. The guest (100 s of work) starts at 0 on GPU 0, the least used; a guaranteed
    // job (50 s) arrives at 10 and takes GPU 0 too — AntMan gives guaranteed jobs GPUs in index
    // order, guests or not — while GPU 1 stays idle. The guest runs at full speed 0–10, half
    // 10–60 (25 s of work), alone again from 60: done at 125. GPU 0 is busy 125 s, GPU 1 never:
    // 125 of 2 × 125 GPU-seconds, utilization 0.5 (was (125 + 50) / 250 = 0.7; counting the
    // guest on an idle GPU whenever one is free would give 0.7 too); shared 50 s of 125.
    let cluster = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
    let out = run(
        &cluster,
        &[job(0, 0, 1, 100.0, 1, 0), job(1, 10, 1, 50.0, 0, 1)],
    );
    assert_eq!(
        (out.records[0].finish_s, out.records[1].finish_s),
        (Some(125.0), Some(60.0))
    );
    let s = summary(&out);
    assert!(close(s.gpu_utilization, 0.5), "{s:?}");
    assert!(close(s.shared_gpu_fraction, 50.0 / 125.0), "{s:?}");
    assert!(close(s.guest_gpu_fraction, 125.0 / 250.0), "{s:?}");
    let r = &out.records;
    assert_eq!(
        (r[0].busy_gpu_s, r[0].shared_gpu_s, r[0].guest_gpu_s),
        (75.0, 50.0, 125.0)
    );
    assert_eq!(
        (r[1].busy_gpu_s, r[1].shared_gpu_s, r[1].guest_gpu_s),
        (50.0, 0.0, 0.0)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// However guests and guaranteed jobs overlap, the busy GPUs never exceed the cluster's (at
    /// any moment of the timeline, and so over the run), the shared ones never exceed the busy
    /// ones, and the records and the timeline count alike.
    #[test]
    fn antman_never_counts_more_gpus_than_the_cluster_has((cluster, jobs) in workload()) {
        let mut policy = build(PolicyKind::AntMan, &PolicyConfig::default()).expect("builds");
        let config = SimConfig { overhead: OverheadModel::None, record_timeline: true, ..SimConfig::default() };
        let out = simulate(&cluster, &jobs, policy.as_mut(), &config).expect("runs");
        let s = arbiter_sim::Summary::compute(&out.records, arbiter_sim::Window::default(), out.capacity_gpus);
        prop_assert!(s.gpu_utilization <= 1.0 + 1e-9, "{:?}", s);
        prop_assert!((0.0..=1.0 + 1e-9).contains(&s.shared_gpu_fraction), "{:?}", s);
        let segments = out.timeline.iter().map(|t| (t.start_s, t.end_s, t.gpus_counted().busy, t.gpus_counted().shared));
        for (at, busy, shared) in support::gpus_counted_over_time(segments) {
            prop_assert!(busy <= cluster.total_gpus() as f64 + 1e-9, "{} busy GPUs of {} at {}", busy, cluster.total_gpus(), at);
            prop_assert!(shared <= busy + 1e-9, "{} shared of {} busy at {}", shared, busy, at);
        }
        for r in &out.records {
            let from_timeline: f64 = out.timeline.iter().filter(|t| t.job == r.job).map(|t| t.gpus_counted().busy * (t.end_s - t.start_s)).sum();
            prop_assert!((from_timeline - r.busy_gpu_s).abs() < 1e-6, "job {}: {} vs {}", r.job, from_timeline, r.busy_gpu_s);
        }
    }
}
