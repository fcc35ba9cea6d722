//! Themis both ways through the simulator: `themis-muri` on Muri's trace3 against the published
//! number, and `themis` (leases + auction) on small hand-checked workloads.

use arbiter_model::{Cluster, JobId, JobSpec, SimTime};
use arbiter_policy::themis::ThemisConfig;
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::scenario::Scenario;
use arbiter_sim::{OverheadModel, SimConfig, SimOutput, simulate};
use std::path::Path;

/// Muri's setting (as `scenarios/muri-traces.toml`), trace3 only, written out so this test does
/// not depend on that file's other rows.
const MURI_TRACE3: &str = r#"
name = "themis-trace3"
policies = ["themis-muri"]
seeds = [0]
[cluster]
spec_file = "../data/muri/n8g8.csv"
gpu_type = "V100"
[simulation]
schedule_on_events = true
overhead = "per-event"
[placement]
strategy = "consolidated"
keep_placements = false
[[trace]]
name = "trace3"
format = "muri"
path = "../data/muri/trace3.csv"
iteration_time_factor = 1.015
"#;

#[test]
fn themis_muri_reproduces_muris_trace3_within_five_percent() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/themis-trace3.toml");
    let scenario = Scenario::parse(MURI_TRACE3, &path, &[]).expect("scenario parses");
    let rows = scenario.run(&|_, _| {}, &|| 0.0).expect("runs");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!((row.summary.jobs, row.summary.unfinished), (992, 0));
    let avg = row.summary.avg_jct_s;
    // Published (Muri's raw Figure 10 data): 397,058.80 s. Muri's simulator with cvxpy 1.9 +
    // ECOS 2.0.14 gives 411,777 s; with the analytic-centre choice we make instead of ECOS it
    // gives 411,069 s, which this port follows event by event until sub-second timing
    // differences (integer milliseconds) flip a near-tie (412,456 s).
    assert!((avg / 397_058.80 - 1.0).abs() <= 0.05, "avg JCT {avg}");
    assert!(
        (avg / 411_068.63 - 1.0).abs() <= 0.01,
        "avg JCT {avg} strays from the reference model"
    );
}

fn job(id: u32, submit_s: u64, gpus: u32, run_s: f64) -> JobSpec {
    JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s)
}

fn run_themis(lease_s: f64, fairness_knob: f64, cluster: &Cluster, jobs: &[JobSpec]) -> SimOutput {
    let config = PolicyConfig {
        themis: ThemisConfig {
            fairness_knob,
            lease_s,
        },
        ..PolicyConfig::default()
    };
    let mut policy = build(PolicyKind::Themis, &config).expect("policy builds");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    simulate(cluster, jobs, policy.as_mut(), &sim).expect("simulation runs")
}

#[test]
fn themis_preempts_only_when_a_lease_expires() {
    // One node of 4 GPUs. J0: t=0, 4 GPUs, 1000 s; J1: t=10, 4 GPUs, 100 s.
    let cluster = Cluster::homogeneous(1, 1, 4, 32, 64, "V100").expect("valid");
    let jobs = [job(0, 0, 4, 1000.0), job(1, 10, 4, 100.0)];
    // Lease 600 s: J0 keeps the GPUs until 600 although J1 is worse off from its arrival. At 600
    // J1 (ρ_wait = (590 + 100 + 600)/200) beats J0 ((600 + 400 + 600)/2000) and runs to 700;
    // then J0 resumes and ends at 700 + 400.
    let out = run_themis(600.0, 0.8, &cluster, &jobs);
    let finish: Vec<f64> = out
        .records
        .iter()
        .map(|r| r.finish_s.expect("finished"))
        .collect();
    assert_eq!(finish, vec![1100.0, 700.0]);
    assert_eq!(out.records[0].preemptions, 1);
    // Lease 60 s: J1 waits only until 60 and is done at 160; J0 still ends at 1100.
    let out = run_themis(60.0, 0.8, &cluster, &jobs);
    let finish: Vec<f64> = out
        .records
        .iter()
        .map(|r| r.finish_s.expect("finished"))
        .collect();
    assert_eq!(finish, vec![1100.0, 160.0]);
}

#[test]
fn themis_finishes_a_mixed_workload_deterministically_and_keeps_gpus_busy() {
    // Two nodes of 4 GPUs, twelve jobs of 1-8 GPUs arriving over 10 minutes.
    let cluster = Cluster::homogeneous(1, 2, 4, 32, 64, "V100").expect("valid");
    let sizes = [1, 2, 4, 8, 1, 2, 4, 1, 2, 1, 4, 2];
    let jobs: Vec<JobSpec> = sizes
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            job(
                i as u32,
                50 * i as u64,
                g,
                300.0 + 170.0 * ((i * 7) % 5) as f64,
            )
        })
        .collect();
    for fairness_knob in [0.0, 0.5, 0.9] {
        let a = run_themis(120.0, fairness_knob, &cluster, &jobs);
        let b = run_themis(120.0, fairness_knob, &cluster, &jobs);
        assert_eq!(a.records, b.records, "deterministic");
        assert!(
            a.records.iter().all(|r| r.finish_s.is_some()),
            "every job finishes (f = {fairness_knob})"
        );
        // Work-conserving: the last job ends no later than all the work done back to back
        // after the last arrival, spread over the whole cluster, plus a lease per job.
        let work: f64 = jobs.iter().map(|j| j.run_time_s * j.gpus as f64).sum();
        let last = a
            .records
            .iter()
            .filter_map(|r| r.finish_s)
            .fold(0.0, f64::max);
        assert!(
            last <= 550.0 + work / 8.0 + 120.0 * jobs.len() as f64,
            "makespan {last}"
        );
    }
}
