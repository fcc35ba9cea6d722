//! Opportunistic jobs (AntMan) in the daemon's loop, stepped by hand on the fake executor: they
//! take idle GPUs outside the policy and yield at once to a job the policy places.

mod loop_harness;

use arbiter_daemon::executor::fake::Call;
use arbiter_daemon::records::job::JobState;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn launches(h: &Harness, id: u32) -> usize {
    h.fake
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Launch { job, .. } if *job == id))
        .count()
}

fn signalled(h: &Harness, id: u32) -> bool {
    h.fake
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { job, .. } if *job == id))
}

#[test]
fn an_opportunistic_job_takes_idle_gpus_and_yields_them_to_a_placed_job() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 10.0);
    // Alone, it takes idle GPUs.
    let soak = h.submit(r#"{"command": "soak", "gpus": 2, "opportunistic": true}"#);
    h.step_to(T0_MS + 1_000);
    assert_eq!(launches(&h, soak), 1);
    // A placed job takes the two other GPUs; the opportunistic one is left alone.
    let first = h.submit(r#"{"command": "train", "gpus": 2}"#);
    h.step_to(T0_MS + 2_000);
    assert_eq!(launches(&h, first), 1);
    assert!(!signalled(&h, soak));
    // Another needs the opportunistic job's GPUs: it gets its checkpoint signal now...
    let second = h.submit(r#"{"command": "train", "gpus": 2}"#);
    h.step_to(T0_MS + 3_000);
    assert!(signalled(&h, soak), "the opportunistic run yields");
    // ...and (its run ended at the signal) the placed job starts on them at the next round.
    h.step_to(T0_MS + 3_100);
    assert_eq!(launches(&h, second), 1);
    let soaked = h.job(soak);
    assert!(
        matches!(soaked.state, JobState::Queued),
        "requeued, not failed: {:?}",
        soaked.state
    );
    assert_eq!((soaked.preemptions, soaked.failures), (1, 0));
    assert!(
        soaked
            .pending_reason
            .as_deref()
            .is_some_and(|r| r.contains("idle GPUs")),
        "{:?}",
        soaked.pending_reason
    );
    // When a placed job ends, the opportunistic one runs again.
    h.fake.exit(first, Some(0));
    h.step_to(T0_MS + 4_000);
    assert_eq!(launches(&h, soak), 2);
}

#[test]
fn the_policy_never_sees_opportunistic_jobs() {
    // SRTF would preempt a long job for a short one; an opportunistic job is not in its view at
    // all: a long placed job is not preempted for a short opportunistic one, and an
    // opportunistic job waiting does not make a placed job wait.
    let h = Harness::new(PolicyKind::Srtf, nodes("n", "v100", 1, 2), 10.0);
    let long = h.submit(r#"{"command": "train", "gpus": 2, "expected_run_time_s": 10000}"#);
    h.step_to(T0_MS + 1_000);
    let short = h.submit(
        r#"{"command": "quick", "gpus": 1, "expected_run_time_s": 5, "opportunistic": true}"#,
    );
    h.step_to(T0_MS + 2_000);
    assert!(
        !signalled(&h, long),
        "no preemption for an opportunistic job"
    );
    assert_eq!(launches(&h, short), 0);
    assert!(matches!(h.job(long).state, JobState::Running { .. }));
}
