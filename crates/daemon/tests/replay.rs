//! The strongest check of "same policy code": the daemon's scheduling loop, driven by the fake
//! executor on a virtual clock, replays a trace and gives every job the start and end times
//! `arbiter simulate` gives it.

mod loop_harness;

use arbiter_model::{Cluster, JobSpec, SimDuration, SimTime};
use arbiter_policy::PolicyKind;
use arbiter_sim::{OverheadModel, SimConfig, simulate};
use loop_harness::{Harness, T0_MS, nodes, start_end_s};
use std::path::Path;

/// The first `count` jobs of Muri's trace 1 that fit a node, times rounded to whole seconds (the
/// daemon keeps seconds), no restart overhead (a checkpointing fake job resumes at once).
fn muri_jobs(count: usize) -> Vec<JobSpec> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/muri/trace1.csv");
    let trace = arbiter_trace::muri::read(&path, 1.0).expect("bundled Muri trace");
    let mut jobs: Vec<JobSpec> = trace
        .jobs
        .into_iter()
        .filter(|j| j.gpus <= 8)
        .take(count)
        .collect();
    for (i, job) in jobs.iter_mut().enumerate() {
        job.id = arbiter_model::JobId(i as u32);
        job.submit = SimTime::from_ms(job.submit.as_ms() / 1000 * 1000);
        // Shortened (Muri's jobs run for days) so that the 60 jobs contend for the GPUs.
        job.run_time_s = (job.run_time_s / 500.0).round().max(1.0);
        job.restart_overhead = Some(SimDuration::from_ms(0));
    }
    jobs
}

/// Per job: (first start, end), seconds from the trace's start, by the simulator.
fn by_simulator(
    kind: PolicyKind,
    cluster: &Cluster,
    jobs: &[JobSpec],
    round_s: f64,
) -> Vec<(Option<i64>, Option<i64>)> {
    let prior = arbiter_daemon::daemon::policy_support::gittins_prior(None).expect("prior");
    let config =
        arbiter_daemon::daemon::policy_support::policy_config(&Default::default(), round_s, &prior);
    let mut policy = arbiter_policy::build(kind, &config).expect("policy");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..Default::default()
    };
    let out = simulate(cluster, jobs, policy.as_mut(), &sim).expect("simulates");
    out.records
        .iter()
        .map(|r| {
            (
                r.first_start_s.map(|s| s.round() as i64),
                r.finish_s.map(|s| s.round() as i64),
            )
        })
        .collect()
}

/// Per job: (first start, end) by the daemon's loop with the fake executor.
fn by_daemon(kind: PolicyKind, jobs: &[JobSpec], round_s: f64) -> Vec<(Option<i64>, Option<i64>)> {
    let h = Harness::new(kind, nodes("n", "v100", 2, 8), round_s);
    let at = |s: &JobSpec| T0_MS + s.submit.as_ms();
    let mut next = 0;
    let mut now = T0_MS;
    loop {
        // The next event: an arrival, a run's end, or the policy's wake-up.
        let candidates = [
            jobs.get(next).map(at),
            h.fake.next_end_ms(),
            h.daemon.next_wake_ms().filter(|w| *w > now),
        ];
        let Some(t) = candidates.into_iter().flatten().min() else {
            break;
        };
        now = t;
        h.clock.set(now);
        while let Some(job) = jobs.get(next).filter(|j| at(j) == now) {
            let id = h.submit(&format!(
                r#"{{"command": "train", "gpus": {}, "expected_run_time_s": {}}}"#,
                job.gpus, job.run_time_s as u64
            ));
            h.fake.set_work(id, job.run_time_s, 0);
            next += 1;
        }
        h.step_to(now);
    }
    (0..jobs.len() as u32)
        .map(|id| start_end_s(&h.job(id)))
        .collect()
}

fn same_times(kind: PolicyKind) {
    let jobs = muri_jobs(60);
    let topology =
        arbiter_daemon::records::topology::Topology::new(nodes("n", "v100", 2, 8)).expect("valid");
    let sim = by_simulator(kind, topology.cluster(), &jobs, 1e9);
    let daemon = by_daemon(kind, &jobs, 1e9);
    assert!(
        sim.iter().all(|(s, e)| s.is_some() && e.is_some()),
        "every job finishes in the simulator"
    );
    let differ: Vec<String> = sim
        .iter()
        .zip(&daemon)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("job {i}: simulator {a:?}, daemon {b:?}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{kind}: {} of {} jobs differ:\n{}",
        differ.len(),
        jobs.len(),
        differ.join("\n")
    );
}

#[test]
fn fifo_starts_and_ends_every_job_when_the_simulator_does() {
    same_times(PolicyKind::Fifo);
}

#[test]
fn srtf_starts_and_ends_every_job_when_the_simulator_does() {
    same_times(PolicyKind::Srtf);
}

#[test]
fn las_starts_and_ends_every_job_when_the_simulator_does() {
    same_times(PolicyKind::Las);
}

#[test]
fn the_replay_has_teeth_jobs_wait_and_are_preempted_and_policies_differ() {
    let jobs = muri_jobs(60);
    let fifo = by_daemon(PolicyKind::Fifo, &jobs, 1e9);
    let srtf = by_daemon(PolicyKind::Srtf, &jobs, 1e9);
    let waited = jobs
        .iter()
        .zip(&fifo)
        .filter(|(j, (s, _))| s.is_some_and(|s| s > (j.submit.as_ms() / 1000) as i64))
        .count();
    assert!(
        waited >= 10,
        "only {waited} jobs waited under fifo: the trace does not contend"
    );
    assert_ne!(
        fifo, srtf,
        "fifo and srtf give the same times: the comparison cannot tell policies apart"
    );
    // Preemptions happened under LAS (the fake's record of checkpoint signals).
    let h = Harness::new(PolicyKind::Las, nodes("n", "v100", 2, 8), 1e9);
    let mut now = T0_MS;
    for job in &jobs {
        now = now.max(T0_MS + job.submit.as_ms());
        h.clock.set(now);
        let id = h.submit(&format!(
            r#"{{"command": "train", "gpus": {}, "expected_run_time_s": {}}}"#,
            job.gpus, job.run_time_s as u64
        ));
        h.fake.set_work(id, job.run_time_s, 0);
        h.step_to(now);
    }
    while let Some(t) = [
        h.fake.next_end_ms(),
        h.daemon.next_wake_ms().filter(|w| *w > now),
    ]
    .into_iter()
    .flatten()
    .min()
    {
        now = t;
        h.step_to(now);
    }
    let signals = h
        .fake
        .calls()
        .iter()
        .filter(|c| matches!(c, arbiter_daemon::executor::fake::Call::Signal { .. }))
        .count();
    assert!(signals > 0, "LAS preempted nothing in this trace");
    eprintln!(
        "fifo: {waited} of {} jobs waited; las: {signals} preemptions",
        jobs.len()
    );
}
