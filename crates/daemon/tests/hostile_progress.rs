//! Attacks through the one input a job's own process sends the daemon — its progress report —
//! and through the external policy agent that sees what tenants submit (issue 26, item 1).
//!
//! Once, a report of `{"steps":0,"throughput":5e-324,"total_steps":18446744073709551615}` made a
//! job's remaining time infinite; the agent received `null`, crashed at every round, and every
//! other tenant's jobs stayed queued beside free GPUs. An agent that hung held the state lock
//! through its timeout, so the API waited too.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::records::progress::{
    MAX_STEPS, MAX_THROUGHPUT, MIN_THROUGHPUT, ProgressReport,
};
use arbiter_policy::PolicyKind;
use arbiter_policy::external::ExternalConfig;
use loop_harness::{Harness, T0_MS, nodes};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn one_gpu() -> SubmitRequest {
    serde_json::from_str(r#"{"command": "train", "gpus": 1, "expected_run_time_s": 600}"#)
        .expect("valid request")
}

/// A harness under `external` whose agent is `script` (Python), answering within `timeout`.
fn with_agent(script: &str, timeout: Duration) -> Harness {
    let command = format!("python3 -c '{script}'");
    Harness::with_settings(PolicyKind::External, nodes("n", "a100", 1, 2), 30.0, |s| {
        s.external = Some(ExternalConfig { command, timeout })
    })
}

fn report(
    h: &Harness,
    id: u32,
    steps: u64,
    throughput: f64,
    total_steps: u64,
) -> Result<(), RequestError> {
    let token = h.fake.token(id).expect("the job has run");
    h.daemon.report_progress(
        id,
        &token,
        ProgressReport {
            steps,
            throughput: Some(throughput),
            total_steps: Some(total_steps),
        },
    )
}

fn state_of(h: &Harness, id: u32) -> &'static str {
    h.job(id).state.name()
}

#[test]
fn the_report_that_froze_scheduling_is_refused_and_the_most_extreme_allowed_one_stops_nothing() {
    // The bundled example agent (SJF) sorts by `duration_s`: a `null` there crashes it.
    let h = Harness::new(PolicyKind::External, nodes("n", "a100", 1, 2), 30.0);
    let a = h.daemon.submit("a", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS);
    assert_eq!(state_of(&h, a), "running");
    let refused = report(&h, a, 0, 5e-324, u64::MAX);
    assert!(
        matches!(&refused, Err(RequestError::Invalid(f)) if f.field == "total_steps"),
        "{refused:?}"
    );
    // The most extreme report the bounds allow, both ways.
    report(&h, a, 0, MIN_THROUGHPUT, MAX_STEPS).expect("in bounds");
    let b = h.daemon.submit("b", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS + 1_000);
    assert_eq!(
        state_of(&h, b),
        "running",
        "another tenant's job starts beside the reporting one: {:?}",
        h.job(b).pending_reason
    );
    report(&h, a, MAX_STEPS, MAX_THROUGHPUT, MAX_STEPS).expect("in bounds");
    let c = h.daemon.submit("c", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS + 2_000);
    assert_eq!(
        h.daemon.with_state(|s| s.counters.fallback_rounds),
        0,
        "the agent never failed"
    );
    assert_eq!(state_of(&h, c), "queued", "two GPUs, both held");
}

#[test]
fn a_crashing_agent_costs_one_round_of_its_decisions_and_the_fallback_decides_it() {
    // Reads the start message and the first observation, then exits.
    let h = with_agent(
        "import sys; sys.stdin.readline(); sys.stdin.readline(); sys.exit(3)",
        Duration::from_secs(10),
    );
    let a = h.daemon.submit("a", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS);
    assert_eq!(
        state_of(&h, a),
        "running",
        "fifo (policy_fallback) started it in the round the agent failed"
    );
    assert_eq!(h.daemon.with_state(|s| s.counters.fallback_rounds), 1);
    // The next round asks a fresh agent (which fails again): still scheduled.
    let b = h.daemon.submit("b", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS + 1_000);
    assert_eq!(state_of(&h, b), "running");
    assert_eq!(h.daemon.with_state(|s| s.counters.fallback_rounds), 2);
}

#[test]
fn the_api_answers_while_a_hung_agent_is_waited_for() {
    // Never answers; the round waits for it up to its timeout.
    let h = Arc::new(with_agent(
        "import time; time.sleep(120)",
        Duration::from_secs(6),
    ));
    let a = h.daemon.submit("a", one_gpu()).expect("accepted").id;
    let round_over = Arc::new(AtomicBool::new(false));
    let round = {
        let (h, over) = (h.clone(), round_over.clone());
        std::thread::spawn(move || {
            h.daemon.tick().expect("round");
            over.store(true, Ordering::SeqCst);
        })
    };
    // Give the round time to reach the agent (a wait, not a measurement).
    std::thread::sleep(Duration::from_millis(1_500));
    // With the state locked through the agent's timeout these would wait for the round.
    let b = h
        .daemon
        .submit("b", one_gpu())
        .expect("a submission is taken while the agent thinks")
        .id;
    let cluster_gpus = h.daemon.with_state(|s| s.topology().total_gpus());
    assert_eq!(cluster_gpus, 2);
    assert!(
        !round_over.load(Ordering::SeqCst),
        "the round was still waiting for the agent when the API answered"
    );
    round.join().expect("round thread");
    // The agent timed out: the fallback decided, on the state as it was then (b included).
    assert_eq!(h.daemon.with_state(|s| s.counters.fallback_rounds), 1);
    assert_eq!(state_of(&h, a), "running");
    assert_eq!(state_of(&h, b), "running");
}

#[test]
fn a_decision_on_jobs_that_moved_meanwhile_is_not_applied() {
    // SJF, answering each observation after 2 s.
    let agent = [
        "import json, sys, time",
        "for line in sys.stdin:",
        "    m = json.loads(line)",
        "    if m[\"type\"] == \"observation\":",
        "        time.sleep(2)",
        "        print(json.dumps({\"order\": [j[\"id\"] for j in m[\"jobs\"]]}), flush=True)",
    ]
    .join("\n");
    let h = Arc::new(with_agent(&agent, Duration::from_secs(20)));
    let a = h.daemon.submit("a", one_gpu()).expect("accepted").id;
    let round = {
        let h = h.clone();
        std::thread::spawn(move || h.daemon.tick().expect("round"))
    };
    std::thread::sleep(Duration::from_millis(800));
    // Cancelled while the agent decides to start it.
    h.daemon.cancel(a, None).expect("cancelled");
    round.join().expect("round thread");
    assert_eq!(state_of(&h, a), "cancelled");
    assert!(
        h.fake.calls().is_empty(),
        "nothing was launched from the stale decision: {:?}",
        h.fake.calls()
    );
    assert_eq!(h.daemon.with_state(|s| s.counters.fallback_rounds), 0);
    // The next round decides on the state as it is.
    let b = h.daemon.submit("b", one_gpu()).expect("accepted").id;
    h.step_to(T0_MS + 1_000);
    assert_eq!(state_of(&h, b), "running");
}

/// Every policy the daemon runs, with jobs reporting the most extreme progress the bounds allow
/// (slowest and fastest rates, most steps, nothing done and all done) at every step: every round
/// succeeds without the fallback, and every job ends.
#[test]
fn every_policy_takes_extreme_progress_reports_in_its_stride() {
    let local = arbiter_daemon::config::ExecutorKind::Local.capabilities();
    let extremes = [
        (0, MIN_THROUGHPUT, MAX_STEPS),
        (MAX_STEPS, MAX_THROUGHPUT, MAX_STEPS),
        (0, MAX_THROUGHPUT, 1),
        (MAX_STEPS, MIN_THROUGHPUT, 1),
        (7, 0.0, MAX_STEPS),
    ];
    for kind in PolicyKind::ALL {
        if arbiter_daemon::daemon::policy_support::unsupported(kind, local).is_some() {
            continue;
        }
        let h = Harness::new(kind, nodes("n", "a100", 2, 4), 60.0);
        let mut now = T0_MS;
        for i in 0..10u32 {
            now = T0_MS + u64::from(i) * 10_000;
            let gpus = [1, 2, 4][i as usize % 3];
            let request: SubmitRequest = serde_json::from_str(&format!(
                r#"{{"command": "t", "gpus": {gpus}, "expected_run_time_s": {}}}"#,
                60 + i * 40
            ))
            .expect("valid");
            let id = h
                .daemon
                .submit(["a", "b"][i as usize % 2], request)
                .expect("accepted")
                .id;
            h.fake.set_work(id, f64::from(60 + i * 40), 0);
            h.step_to(now);
            for (j, job) in h.daemon.with_state(|s| s.jobs.clone()).iter().enumerate() {
                if job.state.name() == "running" {
                    let (steps, rate, total) = extremes[(i as usize + j) % extremes.len()];
                    report(&h, job.id, steps, rate, total).expect("in bounds");
                }
            }
        }
        for _ in 0..10_000 {
            let Some(t) = [
                h.fake.next_end_ms(),
                h.daemon.next_wake_ms().filter(|w| *w > now),
            ]
            .into_iter()
            .flatten()
            .min() else {
                break;
            };
            now = t;
            h.step_to(now);
        }
        assert_eq!(
            h.daemon.with_state(|s| s.counters.fallback_rounds),
            0,
            "{kind}: a round fell back"
        );
        for id in 0..10 {
            assert_eq!(
                state_of(&h, id),
                "succeeded",
                "{kind}: job {id}: {:?}",
                h.job(id).pending_reason
            );
        }
    }
}
