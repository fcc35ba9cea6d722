//! Dependencies in a simulation (issue 29, item 2): pipelines wait for their stages, by the
//! daemon's rules, and a stage that can never start ends as `dependency-never-satisfied`.

use arbiter_model::{Cluster, Dependencies, JobId, JobSpec, SimTime};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{FailureConfig, JobOutcome, OverheadModel, SimConfig, simulate};
use std::sync::Arc;

fn job(id: u32, submit_s: u64, run_s: f64, dependency: Option<&str>) -> JobSpec {
    let mut spec = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), 1, run_s);
    spec.trace_id = format!("j{id}");
    spec.dependency = dependency.map(|d| Arc::new(Dependencies::parse(d).expect("parses")));
    spec
}

fn run(specs: &[JobSpec], config: &SimConfig) -> Vec<arbiter_sim::JobRecord> {
    let cluster = Cluster::homogeneous(1, 1, 4, 32, 256, "V100").expect("cluster");
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("fifo");
    simulate(&cluster, specs, policy.as_mut(), config)
        .expect("runs")
        .records
}

#[test]
fn a_pipeline_runs_stage_after_stage_beside_free_gpus() {
    // preprocess → train → evaluate, all submitted at once on a cluster with room for all.
    let specs = [
        job(0, 0, 100.0, None),
        job(1, 0, 200.0, Some("afterok:j0")),
        job(2, 0, 50.0, Some("afterany:j1")),
        job(3, 0, 10.0, Some("after:j0")),
    ];
    let records = run(
        &specs,
        &SimConfig {
            overhead: OverheadModel::None,
            ..SimConfig::default()
        },
    );
    let start = |i: usize| records[i].first_start_s.expect("started");
    assert_eq!((start(0), start(1), start(2)), (0.0, 100.0, 300.0));
    assert_eq!(start(3), 0.0, "after: once j0 started");
    assert_eq!(records[2].finish_s, Some(350.0));
    assert_eq!(
        records[2].jct_s(),
        Some(350.0),
        "its JCT counts from its submission"
    );
    assert!(records.iter().all(|r| r.outcome == JobOutcome::Completed));
}

#[test]
fn a_dependency_that_can_never_hold_ends_the_job_and_those_after_it() {
    // j0 fails for good (every attempt fails, no retry); afterok on it never holds, nor on what
    // waited for that; afternotok holds.
    let specs = [
        job(0, 0, 1_000_000.0, None),
        job(1, 0, 10.0, Some("afterok:j0")),
        job(2, 0, 10.0, Some("afterok:j1")),
        job(3, 0, 10.0, Some("afternotok:j0")),
        job(4, 0, 10.0, Some("afterok:missing")),
    ];
    let config = SimConfig {
        overhead: OverheadModel::None,
        failures: Some(FailureConfig {
            probability_per_attempt: 1.0,
            max_retries: 0,
        }),
        ..SimConfig::default()
    };
    let records = run(&specs, &config);
    let outcomes: Vec<JobOutcome> = records.iter().map(|r| r.outcome).collect();
    // j3 runs and may fail too (every attempt fails): it started, which is what matters here.
    assert_eq!(
        outcomes[..3],
        [
            JobOutcome::Failed,
            JobOutcome::DependencyNeverSatisfied,
            JobOutcome::DependencyNeverSatisfied
        ]
    );
    assert!(records[3].first_start_s.is_some());
    assert_eq!(
        outcomes[4],
        JobOutcome::DependencyNeverSatisfied,
        "a trace id not in the workload never holds"
    );
    assert!(records[1].first_start_s.is_none());
}

#[test]
fn singleton_runs_one_job_of_a_name_at_a_time() {
    let mut specs = vec![
        job(0, 0, 100.0, Some("singleton")),
        job(1, 0, 100.0, Some("singleton")),
        job(2, 0, 100.0, None),
    ];
    for s in &mut specs {
        s.name = Some("nightly".into());
    }
    let records = run(
        &specs,
        &SimConfig {
            overhead: OverheadModel::None,
            ..SimConfig::default()
        },
    );
    assert_eq!(
        records
            .iter()
            .map(|r| r.first_start_s.expect("ran"))
            .collect::<Vec<_>>(),
        [0.0, 100.0, 0.0]
    );
}

#[test]
fn a_native_trace_carries_dependencies_and_writes_them_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pipeline.csv");
    std::fs::write(&path, "trace_id,tenant,submit_s,gpus,run_time_s,dependency\na,t,0,1,10,\nb,t,0,1,10,afterok:a\nc,t,0,1,10,\"afterok:a:b,singleton\"\n").expect("written");
    let trace = arbiter_trace::read(
        &path,
        arbiter_trace::TraceFormat::Native,
        &Default::default(),
    )
    .expect("reads");
    assert_eq!(
        trace.jobs[2]
            .dependency
            .as_ref()
            .map(|d| (d.on.len(), d.singleton)),
        Some((2, true))
    );
    let mut out = Vec::new();
    arbiter_trace::native::write(&mut out, &trace.jobs).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("\"afterok:a:b,singleton\""), "{text}");
    std::fs::write(
        &path,
        "trace_id,tenant,submit_s,gpus,run_time_s,dependency\na,t,0,1,10,before:x\n",
    )
    .expect("written");
    let err = arbiter_trace::read(
        &path,
        arbiter_trace::TraceFormat::Native,
        &Default::default(),
    )
    .expect_err("refused")
    .to_string();
    assert!(
        err.contains("dependency") && err.contains("before"),
        "{err}"
    );
}
