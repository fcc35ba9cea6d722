//! A tenant's life against its submissions (issue 26, items 2 and 10): a removed tenant gets no
//! job, not even from a submission authenticated before the removal; a job that could never run
//! as its tenant's identity is refused at submission, not queued forever.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::security::identity::Isolation;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, nodes};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn one_gpu() -> SubmitRequest {
    serde_json::from_str(r#"{"command": "train", "gpus": 1}"#).expect("valid request")
}

#[test]
fn a_submission_for_a_removed_tenant_is_refused_although_it_was_authenticated_before() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 2), 30.0);
    // The API resolved the caller's token to tenant `a`; then `a` is removed; then the
    // submission reaches the daemon.
    h.daemon
        .remove_tenant("a")
        .expect("removed")
        .expect("it existed");
    let refused = h.daemon.submit("a", one_gpu());
    assert!(
        matches!(&refused, Err(RequestError::Conflict(m)) if m.contains("does not exist")),
        "{refused:?}"
    );
    assert!(h.daemon.with_state(|s| s.jobs.is_empty()));
}

#[test]
fn removal_and_submissions_racing_never_leave_a_job_for_the_removed_tenant() {
    let h = Arc::new(Harness::new(
        PolicyKind::Fifo,
        nodes("n", "a100", 1, 2),
        30.0,
    ));
    let removed = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (h, removed) = (h.clone(), removed.clone());
        std::thread::spawn(move || {
            let mut after_removal = Vec::new();
            for _ in 0..2_000 {
                let was_removed = removed.load(Ordering::SeqCst);
                if let Ok(s) = h.daemon.submit("b", one_gpu()) {
                    if was_removed {
                        after_removal.push(s.id);
                    }
                    // Cancelled at once: `b` has no live job between two submissions, when a
                    // removal may succeed.
                    let _ = h.daemon.cancel(s.id, Some("b"));
                }
                if was_removed {
                    break;
                }
            }
            after_removal
        })
    };
    let mut tries = 0;
    while !matches!(h.daemon.remove_tenant("b"), Ok(Some(_))) {
        tries += 1;
        assert!(
            tries < 1_000_000,
            "the removal never found b without live jobs"
        );
        std::thread::yield_now();
    }
    removed.store(true, Ordering::SeqCst);
    let after = submitter.join().expect("submitter");
    assert!(
        after.is_empty(),
        "jobs {after:?} were created for b after its removal"
    );
    assert!(h.daemon.with_state(|s| {
        s.jobs
            .iter()
            .filter(|j| j.tenant == "b")
            .all(|j| j.state.is_terminal())
    }));
}

#[test]
fn a_job_that_cannot_run_as_its_tenants_identity_is_refused_at_submission() {
    // As under Slurm: existing users only, and no `tenant_users` entry for the admin.
    let h = Harness::with_settings(PolicyKind::Fifo, nodes("n", "a100", 1, 2), 30.0, |s| {
        s.isolation = Isolation::PerTenant {
            uid_range: [1_900_000_000, 1_900_065_535],
            users: Default::default(),
        };
    });
    let slurm = arbiter_daemon::config::ExecutorKind::Slurm.capabilities();
    assert!(!slurm.automatic_uids);
    h.fake.set_capabilities(slurm);
    let refused = h.daemon.submit("admin", one_gpu());
    assert!(
        matches!(&refused, Err(RequestError::Conflict(m)) if m.contains("tenant_users") && m.contains("admin")),
        "{refused:?}"
    );
    assert!(h.daemon.with_state(|s| s.jobs.is_empty()), "nothing queued");
}

/// A weight an admin changes while the daemon runs counts under every policy that reads weights
/// (`vtc` kept the weights it was built with until a restart): with a's weight at 4, a's jobs
/// get clearly more of the GPUs than b's, at the same demand.
#[test]
fn a_weight_changed_while_the_daemon_runs_counts_under_every_policy_that_uses_weights() {
    for kind in PolicyKind::ALL
        .into_iter()
        .filter(|k| k.uses_tenant_weights())
    {
        let h = Harness::new(kind, nodes("n", "a100", 1, 2), 60.0);
        h.set_weight("a", 4.0);
        let mut jobs = Vec::new();
        for i in 0..40 {
            let tenant = if i % 2 == 0 { "a" } else { "b" };
            let id = h
                .submit_as(
                    tenant,
                    r#"{"command": "train", "gpus": 1, "expected_run_time_s": 60}"#,
                )
                .expect("accepted");
            h.fake.set_work(id, 60.0, 0);
            jobs.push((tenant, id));
        }
        let mut now = loop_harness::T0_MS;
        while now <= loop_harness::T0_MS + 900_000 {
            h.step_to(now);
            now += 10_000;
        }
        let done = |t: &str| {
            jobs.iter()
                .filter(|(tenant, id)| *tenant == t && h.job(*id).state.name() == "succeeded")
                .count()
        };
        assert!(
            done("a") >= 2 * done("b") && done("b") > 0,
            "{kind}: a (weight 4) finished {}, b (weight 1) {}",
            done("a"),
            done("b")
        );
    }
}
