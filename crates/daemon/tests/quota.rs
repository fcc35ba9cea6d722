//! GPU quotas act before the policy decides (issue 33): a job its tenant's quota holds back is
//! not offered, so under every policy the daemon runs it neither blocks other tenants' jobs
//! beside free GPUs nor makes the policy preempt them for a start the quota then refuses.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

/// Every policy the daemon runs on the local executor.
fn policies() -> impl Iterator<Item = PolicyKind> {
    let local = arbiter_daemon::config::ExecutorKind::Local.capabilities();
    PolicyKind::ALL
        .into_iter()
        .filter(move |k| arbiter_daemon::daemon::policy_support::unsupported(*k, local).is_none())
}

/// One node of four A100s.
fn four_gpus(kind: PolicyKind) -> Harness {
    Harness::new(kind, nodes("n", "a100", 1, 4), 60.0)
}

/// Steps every `step_s` seconds until `until_s` after the start, checking `each` after each round.
fn run_until(
    h: &Harness,
    from_ms: u64,
    until_s: u64,
    step_s: u64,
    mut each: impl FnMut(&Harness, u64),
) {
    let mut now = from_ms;
    while now <= T0_MS + until_s * 1000 {
        h.step_to(now);
        each(h, now);
        now += step_s * 1000;
    }
}

#[test]
fn a_job_its_quota_can_never_allow_is_refused_or_held_and_blocks_no_other_tenant() {
    for kind in policies() {
        let h = four_gpus(kind);
        h.set_quota("a", Some(2));
        let refused = h.submit_as("a", r#"{"command": "train", "gpus": 4}"#);
        assert!(
            matches!(&refused, Err(RequestError::Invalid(e)) if e.field == "gpus" && e.reason.contains("quota is 2")),
            "{kind}: {refused:?}"
        );
        // Queued before the quota was lowered under it: held with that reason, not offered.
        h.set_quota("a", None);
        let big = h
            .submit_as(
                "a",
                r#"{"command": "train", "gpus": 4, "expected_run_time_s": 600}"#,
            )
            .expect("accepted");
        h.fake.set_work(big, 600.0, 0);
        h.set_quota("a", Some(2));
        let small = h
            .submit_as(
                "b",
                r#"{"command": "train", "gpus": 1, "expected_run_time_s": 60}"#,
            )
            .expect("accepted");
        h.fake.set_work(small, 60.0, 0);
        h.step_to(T0_MS);
        assert_eq!(
            h.job(small).state.name(),
            "running",
            "{kind}: the other tenant's job waits beside free GPUs: {:?}",
            h.job(small).pending_reason
        );
        let reason = h.job(big).pending_reason.unwrap_or_default();
        assert!(
            reason.contains("more than tenant a's GPU quota (2)")
                && reason.contains("until the quota is raised"),
            "{kind}: {reason}"
        );
        run_until(&h, T0_MS + 10_000, 120, 10, |h, _| {
            assert_eq!(
                h.job(big).state.name(),
                "queued",
                "{kind}: started over its quota"
            )
        });
        assert_eq!(h.job(small).state.name(), "succeeded", "{kind}");
        // Raised: it runs.
        h.set_quota("a", Some(4));
        run_until(&h, T0_MS + 130_000, 200, 10, |_, _| {});
        assert_ne!(
            h.job(big).state.name(),
            "queued",
            "{kind}: {:?}",
            h.job(big).pending_reason
        );
    }
}

#[test]
fn a_job_its_quota_holds_back_now_makes_no_policy_preempt_another_tenant() {
    for kind in policies() {
        let h = four_gpus(kind);
        h.set_quota("a", Some(2));
        let own = h
            .submit_as(
                "a",
                r#"{"command": "train", "gpus": 2, "expected_run_time_s": 300}"#,
            )
            .expect("accepted");
        let other = h
            .submit_as(
                "b",
                r#"{"command": "train", "gpus": 2, "expected_run_time_s": 600}"#,
            )
            .expect("accepted");
        h.fake.set_work(own, 300.0, 0);
        h.fake.set_work(other, 600.0, 0);
        h.step_to(T0_MS);
        assert_eq!(
            (h.job(own).state.name(), h.job(other).state.name()),
            ("running", "running"),
            "{kind}"
        );
        // At its quota, the tenant submits a short job: nobody is preempted for it.
        h.clock.set(T0_MS + 10_000);
        let short = h
            .submit_as(
                "a",
                r#"{"command": "train", "gpus": 2, "expected_run_time_s": 10}"#,
            )
            .expect("accepted");
        h.fake.set_work(short, 10.0, 0);
        run_until(&h, T0_MS + 10_000, 250, 5, |h, now| {
            let other = h.job(other);
            assert!(
                other.preemptions == 0 && other.state.name() == "running",
                "{kind}: the other tenant's job was stopped at {} s",
                (now - T0_MS) / 1000
            );
            let short = h.job(short);
            if short.state.name() == "queued" {
                let reason = short.pending_reason.unwrap_or_default();
                assert!(
                    reason.contains("tenant a is at its GPU quota"),
                    "{kind}: {reason}"
                );
            }
        });
        // Once its own job ends, the short one runs; everything ends.
        run_until(&h, T0_MS + 255_000, 1200, 5, |_, _| {});
        for id in [own, other, short] {
            assert_eq!(
                h.job(id).state.name(),
                "succeeded",
                "{kind}: job {id}: {:?}",
                h.job(id).pending_reason
            );
        }
    }
}
