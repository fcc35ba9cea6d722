//! Job dependencies (issue 29, item 2), Slurm's syntax and rules: a job waits, saying for what;
//! one whose dependency can never hold fails with `DependencyNeverSatisfied`; only the tenant's
//! own jobs can be named; all of it survives a restart.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn harness() -> Harness {
    Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 30.0)
}

/// A one-GPU job of `tenant` with `extra` JSON fields, `run_s` of work, exiting with `code`.
fn job(h: &Harness, tenant: &str, extra: &str, run_s: u64, code: i32) -> Result<u32, RequestError> {
    let id = h.submit_as(
        tenant,
        &format!(r#"{{"command": "train", "gpus": 1, "expected_run_time_s": {run_s}{extra}}}"#),
    )?;
    h.fake.set_work(id, run_s as f64, code);
    Ok(id)
}

fn after(kind: &str, on: u32) -> String {
    format!(r#", "dependency": "{kind}:{on}""#)
}

/// Steps every 10 s from `from_s` to `to_s` (seconds after the start).
fn steps(h: &Harness, from_s: u64, to_s: u64) {
    for s in (from_s..=to_s).step_by(10) {
        h.step_to(T0_MS + s * 1000);
    }
}

#[test]
fn afterok_waits_saying_why_and_starts_once_the_job_succeeded() {
    let h = harness();
    let first = job(&h, "a", "", 60, 0).expect("accepted");
    let second = job(&h, "a", &after("afterok", first), 60, 0).expect("accepted");
    steps(&h, 0, 30);
    assert_eq!(
        h.job(second).state.name(),
        "queued",
        "the GPUs are free, but it waits"
    );
    assert_eq!(
        h.job(second).pending_reason.as_deref(),
        Some(format!("waiting for job {first} (afterok)").as_str())
    );
    steps(&h, 40, 100);
    assert_eq!(h.job(first).state.name(), "succeeded");
    assert_ne!(
        h.job(second).state.name(),
        "queued",
        "{:?}",
        h.job(second).pending_reason
    );
}

#[test]
fn a_dependency_that_can_never_hold_fails_the_job_saying_which() {
    let h = harness();
    let failing = job(&h, "a", "", 20, 3).expect("accepted");
    let ok_after = job(&h, "a", &after("afterok", failing), 60, 0).expect("accepted");
    let notok_after = job(&h, "a", &after("afternotok", failing), 20, 0).expect("accepted");
    let any_after = job(&h, "a", &after("afterany", failing), 20, 0).expect("accepted");
    steps(&h, 0, 120);
    assert_eq!(h.job(failing).state.name(), "failed");
    let failed = h.job(ok_after);
    assert_eq!(failed.state.name(), "failed");
    let why = &failed.history.last().expect("a transition").why;
    assert_eq!(
        why,
        &format!("DependencyNeverSatisfied: job {failing} failed (afterok:{failing})")
    );
    assert_eq!(failed.runs, 0);
    assert_eq!(h.job(notok_after).state.name(), "succeeded");
    assert_eq!(h.job(any_after).state.name(), "succeeded");
    // afternotok on a job that succeeded, afterok on one cancelled: never.
    let fine = job(&h, "a", "", 10, 0).expect("accepted");
    let notok = job(&h, "a", &after("afternotok", fine), 10, 0).expect("accepted");
    let doomed = job(&h, "a", "", 1_000, 0).expect("accepted");
    let ok_on_cancelled = job(&h, "a", &after("afterok", doomed), 10, 0).expect("accepted");
    h.daemon.cancel(doomed, Some("a")).expect("cancelled");
    steps(&h, 130, 200);
    assert_eq!(h.job(notok).state.name(), "failed");
    assert!(
        h.job(notok)
            .history
            .last()
            .expect("why")
            .why
            .contains(&format!("job {fine} succeeded"))
    );
    assert!(
        h.job(ok_on_cancelled)
            .history
            .last()
            .expect("why")
            .why
            .contains(&format!("job {doomed} was cancelled"))
    );
}

#[test]
fn after_starts_once_the_job_started() {
    let h = harness();
    let long = job(&h, "a", "", 600, 0).expect("accepted");
    let follower = job(&h, "a", &after("after", long), 60, 0).expect("accepted");
    steps(&h, 0, 20);
    assert_eq!(h.job(long).state.name(), "running");
    assert_eq!(h.job(follower).state.name(), "running");
}

#[test]
fn singleton_runs_one_job_of_a_name_at_a_time() {
    let h = harness();
    let named = |h: &Harness| {
        job(
            h,
            "a",
            r#", "name": "nightly", "dependency": "singleton""#,
            50,
            0,
        )
        .expect("accepted")
    };
    let (one, two) = (named(&h), named(&h));
    steps(&h, 0, 30);
    assert_eq!(
        (h.job(one).state.name(), h.job(two).state.name()),
        ("running", "queued")
    );
    assert!(
        h.job(two)
            .pending_reason
            .unwrap_or_default()
            .contains(&format!(
                "job {one}, an earlier job of the same name (singleton)"
            ))
    );
    steps(&h, 40, 90);
    assert_eq!(h.job(one).state.name(), "succeeded");
    assert_ne!(h.job(two).state.name(), "queued");
    let refused = job(&h, "a", r#", "dependency": "singleton""#, 10, 0);
    assert!(
        matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "dependency" && e.reason.contains("--name")),
        "{refused:?}"
    );
}

#[test]
fn another_tenants_job_is_not_found_like_one_that_does_not_exist() {
    let h = harness();
    let theirs = job(&h, "b", "", 60, 0).expect("accepted");
    for on in [theirs, 999] {
        let refused = job(&h, "a", &after("afterok", on), 60, 0);
        assert!(
            matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "dependency" && e.reason == format!("job {on} not found (afterok:{on})")),
            "{refused:?}"
        );
    }
    for bad in ["afterok", "before:1", "afterok:1?afterany:2", "afterok:x;y"] {
        let refused = job(&h, "a", &format!(r#", "dependency": "{bad}""#), 60, 0);
        assert!(
            matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "dependency"),
            "{bad}: {refused:?}"
        );
    }
    assert!(
        h.daemon
            .with_state(|s| s.jobs.iter().all(|j| j.tenant == "b")),
        "nothing of a's was queued"
    );
}

#[test]
fn a_waiting_dependency_survives_a_restart() {
    let h = harness();
    let first = job(&h, "a", "", 60, 0).expect("accepted");
    let second = job(&h, "a", &after("afterok", first), 60, 0).expect("accepted");
    steps(&h, 0, 20);
    let h = h.restart();
    steps(&h, 30, 50);
    assert_eq!(h.job(second).state.name(), "queued");
    assert_eq!(
        h.job(second).pending_reason.as_deref(),
        Some(format!("waiting for job {first} (afterok)").as_str())
    );
    steps(&h, 60, 140);
    assert_eq!(h.job(first).state.name(), "succeeded");
    assert_ne!(h.job(second).state.name(), "queued");
}
