//! Priority classes in the daemon (issue 29, item 1): a higher class is served first and may
//! preempt a lower, preemptible one; a class not granted to a tenant is refused naming the
//! field; the class a job got survives a restart.

mod loop_harness;

use arbiter_daemon::config::{PriorityClassConfig, PriorityClasses};
use arbiter_daemon::daemon::RequestError;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn classes() -> PriorityClasses {
    let class = |name: &str, value: i32, preemptible: bool, tenants: Option<Vec<&str>>| {
        PriorityClassConfig {
            name: name.into(),
            value,
            preemptible,
            tenants: tenants.map(|ts| ts.into_iter().map(String::from).collect()),
        }
    };
    PriorityClasses::new(
        vec![
            class("high", 100, true, Some(vec!["a"])),
            class("normal", 50, true, None),
            class("steady", 40, false, None),
            class("low", 10, true, None),
        ],
        None,
    )
    .expect("valid classes")
}

fn harness(policy: PolicyKind) -> Harness {
    Harness::with_settings(policy, nodes("n", "a100", 1, 4), 30.0, |s| {
        s.priority_classes = classes()
    })
}

fn job(h: &Harness, tenant: &str, class: Option<&str>, gpus: u32, run_s: u64) -> u32 {
    let class = class.map_or(String::new(), |c| format!(r#", "priority_class": "{c}""#));
    let id = h
        .submit_as(
            tenant,
            &format!(
                r#"{{"command": "train", "gpus": {gpus}, "expected_run_time_s": {run_s}{class}}}"#
            ),
        )
        .expect("accepted");
    h.fake.set_work(id, run_s as f64, 0);
    id
}

#[test]
fn a_higher_class_preempts_a_lower_preemptible_one_under_a_policy_that_never_preempts() {
    let h = harness(PolicyKind::Fifo);
    let low = job(&h, "b", Some("low"), 4, 3_600);
    h.step_to(T0_MS);
    assert_eq!(h.job(low).state.name(), "running");
    let high = job(&h, "a", Some("high"), 2, 60);
    h.step_to(T0_MS + 1_000);
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        h.job(high).state.name(),
        "running",
        "{:?}",
        h.job(high).pending_reason
    );
    assert!(
        h.job(low).preemptions >= 1 || h.job(low).state.name() != "running",
        "{:?}",
        h.job(low).state
    );
    assert_eq!(h.job(low).request.priority_class.as_deref(), Some("low"));
}

#[test]
fn a_lower_class_that_is_not_preemptible_keeps_its_gpus() {
    let h = harness(PolicyKind::Srtf);
    let steady = job(&h, "b", Some("steady"), 4, 3_600);
    h.step_to(T0_MS);
    let high = job(&h, "a", Some("high"), 2, 60);
    for s in 1..5 {
        h.step_to(T0_MS + s * 1_000);
        assert_eq!(h.job(steady).state.name(), "running");
        assert_eq!(h.job(high).state.name(), "queued");
    }
}

#[test]
fn jobs_without_a_class_get_the_default_and_keep_it_across_a_restart() {
    let h = harness(PolicyKind::Fifo);
    let plain = job(&h, "b", None, 1, 60);
    assert_eq!(
        h.job(plain).request.priority_class.as_deref(),
        Some("normal")
    );
    h.step_to(T0_MS);
    assert_eq!(h.job(plain).state.name(), "running");
    // After a restart the job is still `normal`, below `high`: a high job takes the GPU.
    let h = h.restart();
    assert_eq!(
        h.job(plain).request.priority_class.as_deref(),
        Some("normal")
    );
    let filler = job(&h, "a", Some("high"), 3, 600);
    let high = job(&h, "a", Some("high"), 1, 600);
    h.step_to(T0_MS + 1_000);
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        (h.job(filler).state.name(), h.job(high).state.name()),
        ("running", "running")
    );
    assert_ne!(h.job(plain).state.name(), "running");
}

#[test]
fn a_class_not_granted_or_unknown_is_refused_naming_the_field() {
    let h = harness(PolicyKind::Fifo);
    let refused = h.submit_as(
        "b",
        r#"{"command": "train", "gpus": 1, "priority_class": "high"}"#,
    );
    assert!(
        matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "priority_class" && e.reason.contains("may not use")),
        "{refused:?}"
    );
    let refused = h.submit_as(
        "b",
        r#"{"command": "train", "gpus": 1, "priority_class": "urgent"}"#,
    );
    assert!(
        matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "priority_class" && e.reason.contains("not a priority class")),
        "{refused:?}"
    );
    // The admin may use every class.
    assert!(
        h.submit_as(
            "admin",
            r#"{"command": "train", "gpus": 1, "priority_class": "high"}"#
        )
        .is_ok()
    );
    assert!(
        h.daemon
            .with_state(|s| s.jobs.iter().all(|j| j.tenant == "admin"))
    );
}

#[test]
fn without_classes_a_class_is_refused_and_jobs_have_none() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 30.0);
    let refused = h.submit_as(
        "b",
        r#"{"command": "train", "gpus": 1, "priority_class": "high"}"#,
    );
    assert!(
        matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "priority_class" && e.reason.contains("no priority classes are configured")),
        "{refused:?}"
    );
    let id = h
        .submit_as("b", r#"{"command": "train", "gpus": 1}"#)
        .expect("accepted");
    assert_eq!(h.job(id).request.priority_class, None);
}
