//! Chronus through the engine: with exact run times, a job whose deadline was admitted always
//! meets it (property test); refused jobs and best-effort jobs run on spare GPUs.

use arbiter_model::{Cluster, JobId, JobSpec, SimDuration, SimTime};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{OverheadModel, SimConfig, simulate};
use proptest::prelude::*;

fn run(cluster: &Cluster, jobs: &[JobSpec], lease_s: f64) -> arbiter_sim::SimOutput {
    // Guarantees count GPUs, as Chronus' artifact does: a gang may take GPUs on any nodes.
    let mut config = PolicyConfig {
        placement: arbiter_policy::PlacementStrategy::Anywhere,
        ..PolicyConfig::default()
    };
    config.chronus.lease_s = lease_s;
    let mut policy = build(PolicyKind::Chronus, &config).expect("builds");
    simulate(
        cluster,
        jobs,
        policy.as_mut(),
        &SimConfig {
            overhead: OverheadModel::OnRestart,
            ..SimConfig::default()
        },
    )
    .expect("runs")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn an_admitted_job_always_meets_its_deadline(
        nodes in 1u32..4,
        per_node in 1u32..5,
        jobs in prop::collection::vec((0u64..2000, 1u32..9, 10.0f64..900.0, 1.0f64..6.0, any::<bool>(), 0u64..60), 1..30),
    ) {
        let gpus = nodes * per_node;
        let cluster = Cluster::homogeneous(1, nodes, per_node, 64, 512, "V100").expect("valid");
        let mut specs: Vec<JobSpec> = jobs
            .iter()
            .map(|&(submit_s, size, run_s, slack, slo, overhead_s)| {
                let mut s = JobSpec::new(JobId(0), SimTime::from_ms(submit_s * 1000), size.min(gpus), run_s);
                s.restart_overhead = Some(SimDuration::from_secs(overhead_s));
                if slo {
                    s.deadline = Some(SimTime::from_secs_f64(submit_s as f64 + slack * run_s + 60.0));
                }
                s
            })
            .collect();
        specs.sort_by_key(|s| s.submit);
        for (i, s) in specs.iter_mut().enumerate() {
            s.id = JobId(i as u32);
        }
        let out = run(&cluster, &specs, 300.0);
        for (spec, record) in specs.iter().zip(&out.records) {
            prop_assert!(record.finish_s.is_some(), "{} never finished", spec.id);
            prop_assert_eq!(record.admitted.is_some(), spec.deadline.is_some(), "{}: every deadline job gets one answer", spec.id);
            if record.admitted == Some(true) {
                let (finish, deadline) = (record.finish_s.unwrap_or(f64::INFINITY), spec.deadline.map_or(0.0, SimTime::as_secs_f64));
                prop_assert!(finish <= deadline + 1e-6, "{} admitted but finished at {finish} after its deadline {deadline}", spec.id);
            }
        }
    }
}

#[test]
fn with_room_for_only_one_deadline_the_second_is_refused_and_still_runs() {
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    // Leases of 100 s; both need one lease ending by 200 s (only lease 1): one is admitted.
    let mut jobs: Vec<JobSpec> = (0..2)
        .map(|i| JobSpec::new(JobId(i), SimTime::ZERO, 1, 80.0))
        .collect();
    for j in &mut jobs {
        j.deadline = Some(SimTime::from_ms(200_000));
    }
    let out = run(&cluster, &jobs, 100.0);
    let answers: Vec<Option<bool>> = out.records.iter().map(|r| r.admitted).collect();
    assert_eq!(answers, vec![Some(true), Some(false)]);
    assert!(out.records.iter().all(|r| r.finish_s.is_some()));
    let admitted = &out.records[0];
    assert!(
        admitted.finish_s.is_some_and(|f| f <= 200.0),
        "{admitted:?}"
    );
}
