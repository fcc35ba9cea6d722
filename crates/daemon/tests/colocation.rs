//! Co-located jobs in the daemon's loop (issue 11, item 8), stepped by hand on the fake
//! executor: Muri-S interleaves two jobs whose iterations stress different resources on the
//! same GPU — both runs get the same GPU indices — when their stage times come with the
//! submission; an executor that gives a GPU to one job at a time (Slurm) never starts a run on
//! GPUs another run holds: the grouped job waits, with the reason.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::executor::fake::Call;
use arbiter_daemon::records::holders::{GpuHolders, SharedGpus};
use arbiter_daemon::records::job::{JobState, SubmitRequest};
use arbiter_daemon::records::topology::NodeGpus;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

/// Mostly GPU compute.
const GPU_HEAVY: &str = r#"{"io_s": 0.02, "cpu_s": 0.08, "gpu_s": 0.4}"#;
/// Mostly reading and preprocessing.
const INPUT_HEAVY: &str = r#"{"io_s": 0.3, "cpu_s": 0.15, "gpu_s": 0.05}"#;

fn job_with(stages: &str) -> String {
    format!(
        r#"{{"command": "train", "gpus": 1, "expected_run_time_s": 600, "iteration_stages": {stages}}}"#
    )
}

/// Where each launch of `id` put it.
fn launches(h: &Harness, id: u32) -> Vec<Vec<NodeGpus>> {
    h.fake
        .calls()
        .into_iter()
        .filter_map(|c| {
            if let Call::Launch { job, nodes, .. } = c {
                (job == id).then_some(nodes)
            } else {
                None
            }
        })
        .collect()
}

fn gpus(h: &Harness, id: u32) -> Option<Vec<u32>> {
    h.job(id).state.gpus().map(<[u32]>::to_vec)
}

fn shared_with(h: &Harness, id: u32, viewer: Option<&str>) -> Vec<SharedGpus> {
    let job = h.job(id);
    h.daemon
        .with_state(|s| GpuHolders::of(&s.jobs).shared_with(&job, viewer))
}

#[test]
fn muri_s_interleaves_two_jobs_with_complementary_stages_on_one_gpu_and_both_runs_get_it() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    let first = h.submit(&job_with(GPU_HEAVY));
    h.step_to(T0_MS + 1_000);
    assert_eq!(gpus(&h, first), Some(vec![0]), "alone, it runs at once");
    assert!(shared_with(&h, first, Some("t")).is_empty());
    // A second job needs the only GPU: Muri groups the two, and the second starts on the GPU the
    // first holds — the first keeps running (no preemption).
    let second = h.submit(&job_with(INPUT_HEAVY));
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        gpus(&h, second),
        Some(vec![0]),
        "{:?}",
        h.job(second).pending_reason
    );
    assert!(matches!(h.job(first).state, JobState::Running { .. }));
    assert_eq!(
        launches(&h, first),
        vec![vec![NodeGpus {
            node: "n0".into(),
            devices: vec![0]
        }]]
    );
    assert_eq!(
        launches(&h, second),
        launches(&h, first),
        "both runs see the same device"
    );
    assert!(
        !h.fake
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Signal { .. })),
        "nothing preempted"
    );
    // Each says whom it shares with.
    assert_eq!(
        shared_with(&h, first, Some("t")),
        vec![SharedGpus {
            id: Some(second),
            gpus: vec![0],
            other_tenant: false
        }]
    );
    assert_eq!(
        shared_with(&h, second, None),
        vec![SharedGpus {
            id: Some(first),
            gpus: vec![0],
            other_tenant: false
        }]
    );
    // Stable across rounds: the group stays as it is.
    h.step_to(T0_MS + 15_000);
    assert_eq!(
        (launches(&h, first).len(), launches(&h, second).len()),
        (1, 1)
    );
    // When one ends, the other runs on alone.
    h.fake.exit(first, Some(0));
    h.step_to(T0_MS + 16_000);
    assert_eq!(h.job(first).state, JobState::Succeeded);
    assert_eq!(gpus(&h, second), Some(vec![0]));
    assert!(shared_with(&h, second, None).is_empty());
}

#[test]
fn two_grouped_jobs_submitted_together_start_together_on_the_same_gpus() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 2), 10.0);
    let two = |stages: &str| {
        format!(r#"{{"command": "train", "gpus": 2, "iteration_stages": {stages}}}"#)
    };
    let a = h.submit(&two(GPU_HEAVY));
    let b = h.submit(&two(INPUT_HEAVY));
    h.step_to(T0_MS + 1_000);
    assert_eq!(gpus(&h, a), Some(vec![0, 1]));
    assert_eq!(gpus(&h, b), Some(vec![0, 1]));
}

#[test]
fn jobs_without_stage_times_are_never_interleaved() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    let a = h.submit(r#"{"command": "train", "expected_run_time_s": 600}"#);
    let b = h.submit(r#"{"command": "train", "expected_run_time_s": 900}"#);
    h.step_to(T0_MS + 1_000);
    assert_eq!(gpus(&h, a), Some(vec![0]));
    assert_eq!(gpus(&h, b), None, "one job per GPU without stage times");
}

#[test]
fn without_colocation_a_grouped_job_waits_with_its_reason_and_starts_when_the_gpu_is_free() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    h.fake
        .set_capabilities(arbiter_daemon::config::ExecutorKind::Slurm.capabilities());
    let first = h.submit(&job_with(GPU_HEAVY));
    h.step_to(T0_MS + 1_000);
    let second = h.submit(&job_with(INPUT_HEAVY));
    h.step_to(T0_MS + 2_000);
    h.step_to(T0_MS + 3_000);
    assert_eq!(gpus(&h, first), Some(vec![0]));
    assert!(
        launches(&h, second).is_empty(),
        "never started on a GPU another run holds"
    );
    let reason = h.job(second).pending_reason.unwrap_or_default();
    assert!(
        reason.contains("muri-s")
            && reason.contains(&format!("job {first}"))
            && reason.contains("one job at a time"),
        "{reason}"
    );
    h.fake.exit(first, Some(0));
    h.step_to(T0_MS + 4_000);
    assert_eq!(
        gpus(&h, second),
        Some(vec![0]),
        "{:?}",
        h.job(second).pending_reason
    );
    assert_eq!(launches(&h, second).len(), 1);
    // Two grouped jobs queued at once: the first member runs alone, the other waits.
    let (c, d) = (
        h.submit(&job_with(GPU_HEAVY)),
        h.submit(&job_with(INPUT_HEAVY)),
    );
    h.fake.exit(second, Some(0));
    h.step_to(T0_MS + 5_000);
    let holders: Vec<u32> = [c, d]
        .into_iter()
        .filter(|id| gpus(&h, *id).is_some())
        .collect();
    assert_eq!(holders.len(), 1, "one run per GPU");
}

#[test]
fn without_colocation_the_reason_does_not_name_another_tenants_job() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    h.fake
        .set_capabilities(arbiter_daemon::config::ExecutorKind::Slurm.capabilities());
    let first = h.submit(&job_with(GPU_HEAVY));
    h.step_to(T0_MS + 1_000);
    let theirs = h
        .daemon
        .submit(
            "u",
            serde_json::from_str::<SubmitRequest>(&job_with(INPUT_HEAVY)).expect("valid"),
        )
        .expect("accepted")
        .id;
    h.step_to(T0_MS + 2_000);
    assert_eq!(gpus(&h, first), Some(vec![0]));
    let reason = h.job(theirs).pending_reason.unwrap_or_default();
    assert!(
        reason.contains("another tenant's job") && !reason.contains(&format!("job {first}")),
        "{reason}"
    );
}

#[test]
fn a_submission_with_impossible_stage_times_is_refused_naming_the_field() {
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    for stages in [
        r#"{"io_s": -1, "cpu_s": 0.1, "gpu_s": 0.1}"#,
        r#"{"io_s": 0, "cpu_s": 0, "gpu_s": 0}"#,
        r#"{"io_s": 1e300, "cpu_s": 0, "gpu_s": 0.1}"#,
    ] {
        let request: SubmitRequest = serde_json::from_str(&job_with(stages)).expect("parses");
        match h.daemon.submit("t", request) {
            Err(RequestError::Invalid(e)) => assert_eq!(e.field, "iteration_stages", "{e}"),
            other => panic!("{stages}: expected a refusal, got {other:?}"),
        }
    }
    let mut request: SubmitRequest = serde_json::from_str(&job_with(GPU_HEAVY)).expect("parses");
    request.iteration_stages.as_mut().expect("stages").gpu_s = f64::NAN;
    assert!(
        matches!(h.daemon.submit("t", request), Err(RequestError::Invalid(e)) if e.field == "iteration_stages")
    );
}

/// Regression: Muri's and Themis-Muri's lists dropped a job whose preempted run was still
/// stopping (the daemon leaves such a job out of the policy's view) and never took it back:
/// three jobs waited for ever, "lower priority than the running jobs", next to 8 idle GPUs.
#[test]
fn a_job_whose_run_takes_time_to_stop_is_scheduled_again_and_no_gpu_idles_while_jobs_wait() {
    for kind in [PolicyKind::MuriS, PolicyKind::MuriL, PolicyKind::ThemisMuri] {
        let h = Harness::new(kind, nodes("n", "a100", 4, 4), 1.0);
        h.fake.set_slow_stops();
        let four = |stages: &str| {
            format!(r#"{{"command": "train", "gpus": 4, "iteration_stages": {stages}}}"#)
        };
        let mut ids = Vec::new();
        let mut t = T0_MS;
        // Five 4-GPU jobs on 16 GPUs, one at a time: Muri moves running jobs to pair two.
        for i in 0..5 {
            ids.push(h.submit(&four(if i % 2 == 0 { GPU_HEAVY } else { INPUT_HEAVY })));
            t += 30;
            h.step_to(t);
        }
        // Runs end a while after their checkpoint signal.
        for k in 0..30 {
            if k % 3 == 2 {
                for id in ids
                    .iter()
                    .filter(|id| matches!(h.job(**id).state, JobState::Stopping { .. }))
                {
                    h.fake.exit(*id, Some(0));
                }
            }
            t += 200;
            h.step_to(t);
        }
        let busy: std::collections::BTreeSet<u32> = ids
            .iter()
            .filter_map(|id| gpus(&h, *id))
            .flatten()
            .collect();
        let waiting: Vec<String> = ids
            .iter()
            .filter(|id| gpus(&h, **id).is_none())
            .map(|id| format!("{id}: {:?}", h.job(*id).pending_reason))
            .collect();
        assert_eq!(
            busy.len(),
            16,
            "{}: all GPUs busy while {waiting:?} wait",
            kind.name()
        );
    }
}
