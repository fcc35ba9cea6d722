//! AntMan through the engine: opportunistic jobs never delay guaranteed ones, every job ends,
//! runs are reproducible, and guests run at the speed their co-runners leave them.

use arbiter_model::{Cluster, IterationStages, JobId, JobSpec, SimTime};
use arbiter_policy::{build, PolicyConfig, PolicyKind};
use arbiter_sim::{simulate, JobOutcome, OverheadModel, SimConfig, SimOutput};
use proptest::prelude::*;

fn run(cluster: &Cluster, jobs: &[JobSpec]) -> SimOutput {
    let mut policy = build(PolicyKind::AntMan, &PolicyConfig::default()).expect("builds");
    let config = SimConfig { overhead: OverheadModel::None, ..SimConfig::default() };
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
    (1u32..4, 1u32..5).prop_flat_map(|(nodes, gpus)| {
        let cluster = Cluster::homogeneous(1, nodes, gpus, 32, 256, "V100").expect("valid");
        let total = nodes * gpus;
        let raw = proptest::collection::vec((0u64..3_000, 1u32..=total, 1u32..20_000, 0i32..2, 0usize..3), 1..30);
        (Just(cluster), raw)
    })
    .prop_map(|(cluster, mut raw)| {
        raw.sort_by_key(|r| r.0);
        let jobs = raw.into_iter().enumerate().map(|(i, (submit, gpus, run, priority, shape))| job(i as u32, submit, gpus, run as f64, priority, shape)).collect();
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
