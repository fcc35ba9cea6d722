//! Reservations and maintenance windows in a simulation (issue 29, item 6), by the daemon's
//! rules: only what ends before the start is placed on reserved nodes, runs there are preempted
//! at the start, and a tenant's reservation is that tenant's alone.

use arbiter_model::{Cluster, JobId, JobSpec, SimTime};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::reservations::ReservationSpec;
use arbiter_sim::{JobOutcome, OverheadModel, SimConfig, simulate};

fn job(id: u32, submit_s: u64, gpus: u32, run_s: f64, tenant: &str) -> JobSpec {
    let mut spec = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s);
    spec.tenant = tenant.into();
    spec
}

fn run(
    specs: &[JobSpec],
    kind: PolicyKind,
    reservations: Vec<ReservationSpec>,
) -> Vec<arbiter_sim::JobRecord> {
    let cluster = Cluster::homogeneous(1, 2, 2, 32, 256, "V100").expect("cluster");
    let mut policy = build(kind, &PolicyConfig::default()).expect("policy");
    let config = SimConfig {
        overhead: OverheadModel::None,
        reservations,
        ..SimConfig::default()
    };
    simulate(&cluster, specs, policy.as_mut(), &config)
        .expect("runs")
        .records
}

fn maintenance(node: &str, start_s: f64, duration_s: f64) -> ReservationSpec {
    ReservationSpec {
        nodes: vec![node.into()],
        start_s,
        duration_s,
        tenant: None,
    }
}

#[test]
fn only_what_ends_before_a_window_is_placed_on_its_node() {
    let name = Cluster::homogeneous(1, 2, 2, 32, 256, "V100")
        .expect("cluster")
        .nodes[0]
        .name
        .clone();
    // n0 is down for maintenance from 100 s to 1100 s.
    let specs = [
        job(0, 0, 2, 50.0, "a"),
        job(1, 0, 2, 500.0, "a"),
        job(2, 10, 2, 200.0, "a"),
    ];
    let records = run(
        &specs,
        PolicyKind::Fifo,
        vec![maintenance(&name, 100.0, 1000.0)],
    );
    let start = |i: usize| records[i].first_start_s.expect("ran");
    assert_eq!(
        (start(0), start(1)),
        (0.0, 0.0),
        "the short job ends before the window"
    );
    assert_eq!(
        start(2),
        500.0,
        "n0 is free at 50 s but reserved from 100 s: it waits for n1"
    );
    assert!(records.iter().all(|r| r.outcome == JobOutcome::Completed));
    // Without the window it would have taken n0 at 50 s.
    let free = run(&specs, PolicyKind::Fifo, Vec::new());
    assert_eq!(free[2].first_start_s, Some(50.0));
}

#[test]
fn a_run_still_there_at_the_start_is_preempted_and_a_tenants_window_is_its_own() {
    let name = Cluster::homogeneous(1, 2, 2, 32, 256, "V100")
        .expect("cluster")
        .nodes[0]
        .name
        .clone();
    // 60 s of work at half speed: its estimate (its work) ends before the window at 100 s, but
    // it runs until 120 s, so the window's start preempts it; it resumes on n1.
    let mut slow = job(0, 0, 2, 60.0, "a");
    slow.speed_by_gpu_type = vec![0.5];
    let records = run(
        &[slow],
        PolicyKind::Fifo,
        vec![maintenance(&name, 100.0, 1000.0)],
    );
    assert_eq!(
        (records[0].first_start_s, records[0].preemptions),
        (Some(0.0), 1),
        "{:?}",
        records[0]
    );
    assert_eq!(
        records[0].finish_s,
        Some(120.0),
        "100 s at half speed, then the last 10 s of work on n1"
    );
    // Reserved for b from the start: a's jobs keep off n0 (the second waits for n1), b's runs there.
    let for_b = ReservationSpec {
        nodes: vec![name.clone()],
        start_s: 0.0,
        duration_s: 5000.0,
        tenant: Some("b".into()),
    };
    let specs = [
        job(0, 0, 2, 100.0, "a"),
        job(1, 0, 2, 100.0, "a"),
        job(2, 10, 2, 100.0, "b"),
    ];
    // (SJF lets b's job pass a's waiting one; FIFO would keep it behind.)
    let records = run(&specs, PolicyKind::Sjf, vec![for_b]);
    let start = |i: usize| records[i].first_start_s.expect("ran");
    assert_eq!((start(0), start(1), start(2)), (0.0, 100.0, 10.0));
    // An unknown node is refused naming it.
    let cluster = Cluster::homogeneous(1, 2, 2, 32, 256, "V100").expect("cluster");
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default()).expect("policy");
    let config = SimConfig {
        reservations: vec![maintenance("n9", 0.0, 1.0)],
        ..SimConfig::default()
    };
    let err = simulate(&cluster, &specs, policy.as_mut(), &config)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("no node `n9`"), "{err}");
}
