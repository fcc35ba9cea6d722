//! Job arrays (issue 29, item 3), Slurm's syntax: one submission, one job per task with its
//! index in the environment, at most `%N` running, cancelled whole (`12`) or by task (`12_7`),
//! idempotent, bounded, and a tenant's own.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn harness() -> Harness {
    Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 30.0)
}

fn request(extra: &str) -> SubmitRequest {
    serde_json::from_str(&format!(
        r#"{{"command": "train", "gpus": 1, "expected_run_time_s": 60{extra}}}"#
    ))
    .expect("valid")
}

fn submit_array(
    h: &Harness,
    tenant: &str,
    array: &str,
) -> Result<(u32, Option<u32>), RequestError> {
    let s = h
        .daemon
        .submit(tenant, request(&format!(r#", "array": "{array}""#)))?;
    Ok((s.id, s.tasks))
}

fn states(h: &Harness, ids: std::ops::Range<u32>) -> Vec<&'static str> {
    ids.map(|id| h.job(id).state.name()).collect()
}

#[test]
fn an_array_is_one_submission_of_a_job_per_task_with_its_index_and_at_most_n_running() {
    let h = harness();
    let (first, tasks) = submit_array(&h, "a", "0-9%2").expect("accepted");
    assert_eq!(tasks, Some(10));
    for id in first..first + 10 {
        h.fake.set_work(id, 60.0, 0);
    }
    h.step_to(T0_MS);
    let running = states(&h, first..first + 10)
        .iter()
        .filter(|s| **s == "running")
        .count();
    assert_eq!(running, 2, "%2, though four GPUs are free");
    let waiting = h.job(first + 2).pending_reason.unwrap_or_default();
    assert_eq!(
        waiting,
        format!("array {first} has 2 tasks running, its limit (%2)")
    );
    let env = h.fake.env(first + 1).expect("launched");
    assert_eq!(
        env.get("ARBITER_ARRAY_JOB_ID").map(String::as_str),
        Some(first.to_string().as_str())
    );
    assert_eq!(
        env.get("ARBITER_ARRAY_TASK_ID").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        env.get("ARBITER_ARRAY_TASK_COUNT").map(String::as_str),
        Some("10")
    );
    assert_eq!(
        env.get("SLURM_ARRAY_TASK_ID"),
        None,
        "Slurm's names only under the Slurm executor"
    );
    // The limit holds across a restart; all tasks get through.
    let h = h.restart();
    for s in 1..=60 {
        h.step_to(T0_MS + s * 10_000);
        let running = states(&h, first..first + 10)
            .iter()
            .filter(|s| **s == "running")
            .count();
        assert!(running <= 2, "{running} running at {s}");
    }
    assert!(
        states(&h, first..first + 10)
            .iter()
            .all(|s| *s == "succeeded"),
        "{:?}",
        states(&h, first..first + 10)
    );
}

#[test]
fn cancelling_the_array_cancels_every_task_and_a_task_id_one() {
    let h = harness();
    let (first, _) = submit_array(&h, "a", "1,3,5-7").expect("accepted");
    for id in first..first + 5 {
        h.fake.set_work(id, 600.0, 0);
    }
    h.step_to(T0_MS);
    let task6 = h.daemon.job_ref(&format!("{first}_6")).expect("task 6");
    assert_eq!(
        (task6, h.job(task6).array.map(|a| a.index)),
        (first + 3, Some(6))
    );
    assert!(
        matches!(
            h.daemon.job_ref(&format!("{first}_2")),
            Err(RequestError::NotFound(_))
        ),
        "no task 2"
    );
    h.daemon.cancel(task6, Some("a")).expect("one task");
    // Another tenant cannot cancel the array.
    assert!(matches!(
        h.daemon.cancel_array(first, Some("b")),
        Err(RequestError::Forbidden(_))
    ));
    let cancelled = h.daemon.cancel_array(first, Some("a")).expect("the array");
    assert_eq!(
        cancelled, 5,
        "every task not ended yet (task 6 is still stopping)"
    );
    h.step_to(T0_MS + 60_000);
    assert!(
        states(&h, first..first + 5)
            .iter()
            .all(|s| *s == "cancelled"),
        "{:?}",
        states(&h, first..first + 5)
    );
}

#[test]
fn a_repeated_array_submission_creates_nothing_more() {
    let h = harness();
    let req = request(r#", "array": "0-99", "client_request_id": "sweep-1""#);
    let a = h.daemon.submit("a", req.clone()).expect("accepted");
    let b = h.daemon.submit("a", req).expect("accepted again");
    assert_eq!(
        (a.id, a.tasks, b.id, b.tasks, b.duplicate),
        (a.id, Some(100), a.id, Some(100), true)
    );
    assert_eq!(h.daemon.with_state(|s| s.jobs.len()), 100);
}

#[test]
fn arrays_are_bounded_and_counted_against_the_queue() {
    let h = Harness::with_settings(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 30.0, |s| {
        s.max_array_size = 50;
        s.max_queued_per_tenant = 60;
    });
    let too_big = submit_array(&h, "a", "0-50");
    assert!(
        matches!(&too_big, Err(RequestError::Invalid(e)) if e.field == "array" && e.reason.contains("more than 50 tasks")),
        "{too_big:?}"
    );
    submit_array(&h, "a", "0-49").expect("50 tasks");
    let over = submit_array(&h, "a", "0-10");
    assert!(
        matches!(&over, Err(RequestError::TooMany(m)) if m.contains("this array would add 11")),
        "{over:?}"
    );
    for bad in ["5-1", "0-9%0", "x", "1,1"] {
        assert!(
            matches!(submit_array(&h, "a", bad), Err(RequestError::Invalid(e)) if e.field == "array"),
            "{bad}"
        );
    }
    assert_eq!(
        h.daemon.with_state(|s| s.jobs.len()),
        50,
        "nothing else was queued"
    );
}

#[test]
fn a_dependency_on_an_array_waits_for_every_task_and_another_tenants_task_is_not_found() {
    let h = harness();
    let (first, _) = submit_array(&h, "a", "0-3").expect("accepted");
    for (k, id) in (first..first + 4).enumerate() {
        h.fake.set_work(id, 30.0 * (k + 1) as f64, 0);
    }
    let after_all = h
        .daemon
        .submit(
            "a",
            request(&format!(r#", "dependency": "afterok:{first}""#)),
        )
        .expect("accepted")
        .id;
    let after_one = h
        .daemon
        .submit(
            "a",
            request(&format!(r#", "dependency": "afterok:{first}_0""#)),
        )
        .expect("accepted")
        .id;
    h.fake.set_work(after_all, 10.0, 0);
    h.fake.set_work(after_one, 10.0, 0);
    for s in 0..=5 {
        h.step_to(T0_MS + s * 10_000);
    }
    assert_ne!(h.job(after_one).state.name(), "queued", "task 0 took 30 s");
    assert_eq!(
        h.job(after_all).state.name(),
        "queued",
        "task 3 takes 120 s"
    );
    for s in 6..=20 {
        h.step_to(T0_MS + s * 10_000);
    }
    assert_ne!(h.job(after_all).state.name(), "queued");
    let refused = h.daemon.submit(
        "b",
        request(&format!(r#", "dependency": "afterok:{first}_1""#)),
    );
    assert!(
        matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "dependency" && e.reason.contains("not found")),
        "{refused:?}"
    );
}
