//! Tenants' webhooks (issue 29, item 5) against a receiver on loopback: one signed POST per state
//! change, in order, to the job's own tenant only; retried, then declared dead; bounded; kept
//! across a restart and sent again at most once more; never in a round's way.

mod loop_harness;
mod webhook_receiver;

use arbiter_daemon::clock::Clock;
use arbiter_daemon::config::WebhookConfig;
use arbiter_daemon::records::outbox::WebhookTarget;
use arbiter_daemon::security::webhook::{self, AddressPolicy, Secret};
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use webhook_receiver::{Answer, Receiver};

fn config(max_failures: u32, queue_per_tenant: usize) -> WebhookConfig {
    // Retries after a virtual millisecond: the tests move the clock on.
    WebhookConfig {
        allow_private: true,
        max_failures,
        queue_per_tenant,
        timeout_s: 5.0,
        retry_initial_s: 0.001,
        retry_max_s: 0.001,
    }
}

fn harness(gpus: u32, config: WebhookConfig) -> Harness {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, gpus), 30.0);
    h.daemon.configure_webhooks(
        config,
        AddressPolicy {
            allow_private: true,
            own: vec![],
            own_host_port: None,
        },
    );
    h
}

/// Points `tenant`'s webhook at `receiver`; returns the secret.
fn hook(h: &Harness, tenant: &str, receiver: &Receiver, generation: u64) -> Secret {
    let secret = Secret::generate();
    h.daemon
        .set_webhook(
            tenant,
            Some(WebhookTarget {
                url: receiver.url.clone(),
                secret: secret.clone(),
                generation,
            }),
        )
        .expect("webhook set");
    secret
}

fn dispatcher(h: &Harness) -> tokio::runtime::Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.spawn(h.daemon.clone().run_webhooks());
    runtime
}

/// Moves the virtual clock on (so that retries fall due) until `done`, for up to 20 s.
fn wait_until(h: &Harness, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        h.clock.set(h.clock.now_ms() + 10);
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn submit(h: &Harness, tenant: &str, request: &str) -> u32 {
    h.submit_as(tenant, request).expect("accepted")
}

#[test]
fn each_state_change_is_posted_once_in_order_signed_and_only_to_its_own_tenant() {
    let h = harness(2, config(10, 100));
    let (to_a, to_b) = (
        Receiver::start(Answer::Status(200)),
        Receiver::start(Answer::Status(204)),
    );
    let (secret_a, secret_b) = (hook(&h, "a", &to_a, 1), hook(&h, "b", &to_b, 1));
    let _runtime = dispatcher(&h);
    let ok = submit(
        &h,
        "a",
        r#"{"command": "secret-cmd --key=hunter2", "name": "ok", "env": {"TOKEN": "s3cret"}}"#,
    );
    let bad = submit(&h, "a", r#"{"command": "x", "max_retries": 0}"#);
    let cancelled = submit(&h, "b", r#"{"command": "x"}"#);
    h.fake.set_work(ok, 10.0, 0);
    h.fake.set_work(bad, 5.0, 3);
    h.step_to(T0_MS + 1_000);
    h.daemon
        .cancel(cancelled, Some("b"))
        .expect("cancelled while queued");
    h.step_to(T0_MS + 6_000);
    h.step_to(T0_MS + 11_000);
    let got_a = to_a.wait_for(4, 20);
    let got_b = to_b.wait_for(1, 20);
    let now_s = (h.clock.now_ms() / 1000) as i64;
    for (got, secret, tenant) in [(&got_a, &secret_a, "a"), (&got_b, &secret_b, "b")] {
        for r in got {
            let signature = r.headers.get("arbiter-signature").expect("signed");
            assert_eq!(
                webhook::verify(secret.expose(), signature, r.body.as_bytes(), now_s, 300),
                Ok(()),
                "{r:?}"
            );
            assert_eq!(
                r.json()["tenant"],
                tenant,
                "a webhook carries its own tenant's jobs only: {r:?}"
            );
            assert_eq!(
                r.headers.get("arbiter-webhook-id").map(String::as_str),
                r.json()["id"].as_str()
            );
            assert!(
                !r.body.contains("hunter2")
                    && !r.body.contains("s3cret")
                    && !r.body.contains("secret-cmd"),
                "{}",
                r.body
            );
        }
    }
    let events = |got: &[webhook_receiver::Received], job: u32| {
        got.iter()
            .map(|r| r.json())
            .filter(|e| e["job_id"] == job)
            .map(|e| e["event"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(events(&got_a, ok), ["started", "succeeded"]);
    assert_eq!(events(&got_a, bad), ["started", "failed"]);
    assert_eq!(events(&got_b, cancelled), ["cancelled"]);
    let failed = got_a
        .iter()
        .map(|r| r.json())
        .find(|e| e["event"] == "failed")
        .expect("failed");
    assert_eq!(
        (
            failed["from"].as_str(),
            failed["to"].as_str(),
            failed["exit_code"].as_i64(),
            failed["version"].as_u64()
        ),
        (Some("running"), Some("failed"), Some(3), Some(1)),
        "{failed}"
    );
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("exit code 3")),
        "{failed}"
    );
    let ids: BTreeSet<String> = got_a
        .iter()
        .chain(&got_b)
        .map(|r| r.json()["id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(ids.len(), 5, "five distinct events, each once");
    wait_until(&h, "the outbox to empty", || {
        h.daemon
            .webhook("a")
            .is_some_and(|(_, health, pending)| pending == 0 && health.delivered == 4)
    });
}

#[test]
fn a_receiver_that_keeps_failing_is_declared_dead_with_its_last_error_and_revived_by_setting_it_again()
 {
    let h = harness(2, config(3, 100));
    let receiver = Receiver::start(Answer::Status(503));
    hook(&h, "a", &receiver, 1);
    let _runtime = dispatcher(&h);
    submit(&h, "a", r#"{"command": "x"}"#);
    h.step_to(T0_MS + 1_000);
    wait_until(&h, "the receiver to be declared dead", || {
        h.daemon
            .webhook("a")
            .is_some_and(|(_, health, _)| health.dead_since_unix_s.is_some())
    });
    let (_, health, pending) = h.daemon.webhook("a").expect("webhook");
    assert_eq!(
        (
            health.consecutive_failures,
            health.last_error.as_deref(),
            pending,
            health.dropped
        ),
        (3, Some("HTTP 503"), 0, 1)
    );
    assert_eq!(
        receiver.received().len(),
        3,
        "tried max_failures times, then no more"
    );
    // Dead: nothing more is recorded for it.
    submit(&h, "a", r#"{"command": "x"}"#);
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(0)
    );
    // Set again (a new generation): alive, and the next change is delivered.
    receiver.answer(Answer::Status(200));
    hook(&h, "a", &receiver, 2);
    let (_, health, _) = h.daemon.webhook("a").expect("webhook");
    assert_eq!(
        (
            health.dead_since_unix_s,
            health.consecutive_failures,
            health.dropped
        ),
        (None, 0, 1),
        "a clean slate; the count of dropped events stays"
    );
    let third = submit(&h, "a", r#"{"command": "x"}"#);
    h.daemon.cancel(third, Some("a")).expect("cancelled");
    let got = receiver.wait_for(4, 20);
    assert_eq!(got[3].json()["event"], "cancelled");
}

#[test]
fn a_full_outbox_drops_new_events_and_counts_them_while_every_job_still_starts() {
    let h = harness(4, config(10, 2));
    let receiver = Receiver::start(Answer::Status(200));
    hook(&h, "a", &receiver, 1);
    // No dispatcher: nothing leaves the outbox.
    for _ in 0..4 {
        submit(&h, "a", r#"{"command": "x"}"#);
    }
    h.step_to(T0_MS + 1_000);
    assert_eq!(h.fake.live().len(), 4, "the round started every job");
    let (_, health, pending) = h.daemon.webhook("a").expect("webhook");
    assert_eq!((pending, health.dropped), (2, 2));
    // Another tenant's outbox is its own.
    let other = Receiver::start(Answer::Status(200));
    hook(&h, "b", &other, 1);
    let id = submit(&h, "b", r#"{"command": "x"}"#);
    h.daemon.cancel(id, Some("b")).expect("cancelled");
    assert_eq!(
        h.daemon
            .webhook("b")
            .map(|(_, health, pending)| (pending, health.dropped)),
        Some((1, 0))
    );
}

#[test]
fn undelivered_events_survive_a_restart_and_are_sent_once_and_a_restart_records_none_again() {
    let h = harness(2, config(10, 100));
    let receiver = Receiver::start(Answer::Status(200));
    let secret = hook(&h, "a", &receiver, 1);
    for _ in 0..2 {
        submit(&h, "a", r#"{"command": "x"}"#);
    }
    h.step_to(T0_MS + 1_000);
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(2)
    );
    // The daemon dies before delivering; another starts on the same store (runs re-adopted).
    let h = h.restart();
    h.daemon.configure_webhooks(
        config(10, 100),
        AddressPolicy {
            allow_private: true,
            own: vec![],
            own_host_port: None,
        },
    );
    let (target, _, pending) = h.daemon.webhook("a").expect("the webhook is kept");
    assert_eq!(
        (pending, target.secret == secret),
        (2, true),
        "the events and the secret are kept; re-adopting the runs made no new event"
    );
    let _runtime = dispatcher(&h);
    let got = receiver.wait_for(2, 20);
    wait_until(&h, "the outbox to empty", || {
        h.daemon
            .webhook("a")
            .is_some_and(|(_, _, pending)| pending == 0)
    });
    let ids: BTreeSet<String> = got
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    drop(_runtime);
    let h = h.restart();
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(0),
        "delivered events are not sent again"
    );
}

#[test]
fn a_receiver_that_never_answers_holds_up_no_round() {
    let h = harness(1, config(10, 100));
    let receiver = Receiver::start(Answer::Hang);
    hook(&h, "a", &receiver, 1);
    let _runtime = dispatcher(&h);
    let first = submit(&h, "a", r#"{"command": "x"}"#);
    let second = submit(&h, "a", r#"{"command": "x"}"#);
    h.fake.set_work(first, 1.0, 0);
    h.fake.set_work(second, 1.0, 0);
    h.step_to(T0_MS + 1_000);
    receiver.wait_for(1, 20);
    // The first delivery hangs; rounds go on and both jobs run to their end.
    h.step_to(T0_MS + 2_500);
    h.step_to(T0_MS + 4_000);
    assert!(h.job(first).state.is_terminal() && h.job(second).state.is_terminal());
    assert_eq!(
        receiver.received().len(),
        1,
        "one delivery at a time per tenant: the rest wait behind it"
    );
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(4)
    );
}

#[test]
fn a_webhook_set_later_sends_only_what_happens_after_and_removing_it_drops_what_waits() {
    let h = harness(2, config(10, 100));
    let receiver = Receiver::start(Answer::Status(200));
    let id = submit(&h, "a", r#"{"command": "x"}"#);
    h.step_to(T0_MS + 1_000);
    hook(&h, "a", &receiver, 1);
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(0),
        "the start before it is not sent"
    );
    h.daemon.cancel(id, Some("a")).expect("cancel");
    h.fake.exit(id, None);
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        h.daemon.webhook("a").map(|(_, _, pending)| pending),
        Some(1),
        "the cancel only"
    );
    h.daemon.set_webhook("a", None).expect("removed");
    assert!(h.daemon.webhook("a").is_none());
    // Removing the tenant removes its webhook too.
    hook(&h, "u", &receiver, 1);
    h.daemon
        .remove_tenant("u")
        .expect("removed")
        .expect("existed");
    assert!(h.daemon.webhook("u").is_none());
    assert!(
        h.daemon.set_webhook("u", None).is_err(),
        "no webhook for a tenant that does not exist"
    );
}

#[test]
fn a_preemption_is_posted_when_the_run_is_asked_to_give_up_its_gpus() {
    let h = harness(1, config(10, 100));
    let receiver = Receiver::start(Answer::Status(200));
    hook(&h, "a", &receiver, 1);
    let _runtime = dispatcher(&h);
    // An opportunistic job yields its GPU to the first job the policy places there.
    let guest = submit(&h, "a", r#"{"command": "x", "opportunistic": true}"#);
    h.step_to(T0_MS + 1_000);
    submit(&h, "b", r#"{"command": "x"}"#);
    h.step_to(T0_MS + 2_000);
    h.step_to(T0_MS + 3_000);
    let got = receiver.wait_for(2, 20);
    let preempted = got[1].json();
    assert_eq!(
        (
            preempted["event"].as_str(),
            preempted["job_id"].as_u64(),
            preempted["from"].as_str(),
            preempted["to"].as_str()
        ),
        (
            Some("preempted"),
            Some(u64::from(guest)),
            Some("running"),
            Some("stopping")
        ),
        "{preempted}"
    );
    assert_eq!(
        h.job(guest).state.name(),
        "queued",
        "back in the queue, with no event of its own"
    );
    assert!(
        got.iter().all(|r| r.json()["tenant"] == "a"),
        "tenant b's job is not on a's webhook"
    );
}
