//! The daemon learns which job types interfere (issue 11, item 8: Gandiva's introspection with
//! real data), stepped by hand on the fake executor: two co-located jobs report their speeds,
//! the co-location table gets their speed sharing over their speed alone, Gandiva dissolves a
//! pair measured below 1, the table survives a restart, and one tenant's reports neither change
//! nor reveal another tenant's entries.

mod loop_harness;

use arbiter_daemon::clock::Clock;
use arbiter_daemon::job::SubmitRequest;
use arbiter_daemon::pairs::SETTLE_S;
use arbiter_policy::PolicyKind;
use loop_harness::{nodes, Harness, T0_MS};
use serde_json::Value;

fn typed(job_type: &str) -> SubmitRequest {
    serde_json::from_str(&format!(r#"{{"command": "train", "gpus": 1, "expected_run_time_s": 3600, "job_type": "{job_type}"}}"#)).expect("valid")
}

fn gpus(h: &Harness, id: u32) -> Option<Vec<u32>> {
    h.job(id).state.gpus().map(<[u32]>::to_vec)
}

/// The entry for `tenant/job_type` next to `partner` as `viewer` sees the table.
fn entry(h: &Harness, viewer: Option<&str>, tenant: &str, job_type: &str, partner: &str) -> Option<Value> {
    h.daemon.pair_rows(viewer).into_iter().find(|r| r["tenant"] == tenant && r["job_type"] == job_type && r["partner_job_type"] == partner)
}

fn speed(row: &Value) -> f64 {
    row["normalized_speed"].as_f64().expect("a number")
}

const S: u64 = 1000;

#[test]
fn gandiva_learns_a_pairs_speeds_from_progress_reports_and_dissolves_a_pair_that_does_not_pay() {
    let h = Harness::new(PolicyKind::Gandiva, nodes("n", "a100", 1, 1), 10.0);
    let lm = h.daemon.submit("t", typed("lm")).expect("accepted").id;
    h.step_to(T0_MS + S);
    assert_eq!(gpus(&h, lm), Some(vec![0]), "alone, it runs at once");
    // Reports from the first seconds after the start are not used ...
    h.clock.set(T0_MS + 2 * S);
    h.report(lm, 10, 500.0).expect("recorded");
    // ... settled ones are: 100 steps/s alone.
    h.clock.set(T0_MS + (2 + SETTLE_S) * S);
    h.report(lm, 2000, 100.0).expect("recorded");
    assert_eq!(h.job(lm).measurements.solo.get("a100"), Some(&100.0), "the unsettled report did not count");
    // A second job: the GPU is over-subscribed, Gandiva pairs the two (a pair it has not
    // measured counts as good as taking turns) and both run on GPU 0.
    let cnn = h.daemon.submit("t", typed("cnn")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!((gpus(&h, lm), gpus(&h, cnn)), (Some(vec![0]), Some(vec![0])), "{:?}", h.job(cnn).pending_reason);
    // Sharing, `lm` runs at 30 steps/s: 0.3 of its speed alone. Reports right after the partner
    // arrived do not count.
    h.clock.set(T0_MS + 21 * S);
    h.report(lm, 2100, 5.0).expect("recorded");
    assert!(entry(&h, None, "t", "lm", "cnn").is_none(), "not settled yet");
    h.clock.set(T0_MS + (20 + SETTLE_S + 1) * S);
    h.report(lm, 2500, 30.0).expect("recorded");
    h.report(lm, 2600, 30.0).expect("recorded");
    let row = entry(&h, None, "t", "lm", "cnn").expect("an entry for lm next to cnn");
    assert!((speed(&row) - 0.3).abs() < 1e-9, "{row}");
    assert_eq!((row["samples"].as_u64(), row["gpus"].as_u64(), row["gpu_type"].as_str()), (Some(2), Some(1), Some("a100")));
    // `cnn` never ran alone: its shared speed waits for its solo speed.
    h.report(cnn, 100, 40.0).expect("recorded");
    assert!(entry(&h, None, "t", "cnn", "lm").is_none());
    assert_eq!(h.job(cnn).measurements.pending.len(), 1);
    // Introspection: 0.3 + 0.5 (cnn's, not measured) = 0.8 < 1 — the pair is dissolved and not
    // formed again; the two take turns on the GPU (the running pair is split at the end of its
    // round: Gandiva decides by rounds of 10 s).
    for t in 32..=60 {
        h.step_to(T0_MS + t * S);
        assert!(gpus(&h, lm).is_none() || gpus(&h, cnn).is_none() || t < 42, "at {t} s both still share GPU 0");
    }
    assert!(h.fake.calls().iter().any(|c| matches!(c, arbiter_daemon::executor::fake::Call::Signal { .. })), "one of them was preempted");
    // Once `cnn` runs alone and reports, its waiting shared speed becomes an entry (40 / 80).
    let alone = if gpus(&h, cnn).is_some() { cnn } else {
        for t in 61..=120 {
            h.step_to(T0_MS + t * S);
            if gpus(&h, cnn).is_some() {
                break;
            }
        }
        cnn
    };
    assert_eq!(gpus(&h, alone), Some(vec![0]), "cnn gets its turn");
    let now = h.clock.now_ms();
    h.clock.set(now + (SETTLE_S + 1) * S);
    h.report(cnn, 500, 80.0).expect("recorded");
    let row = entry(&h, None, "t", "cnn", "lm").expect("cnn next to lm");
    assert!((speed(&row) - 0.5).abs() < 1e-9, "{row}");
}

#[test]
fn the_learned_table_survives_a_restart_and_max_min_fairness_packed_shares_only_measured_pairs() {
    // Learned under Muri-S, which interleaves jobs by their stage times.
    let h = Harness::new(PolicyKind::MuriS, nodes("n", "a100", 1, 1), 10.0);
    let stages = |job_type: &str, gpu: f64| format!(r#"{{"command": "train", "job_type": "{job_type}", "iteration_stages": {{"io_s": {}, "cpu_s": 0.05, "gpu_s": {gpu}}}}}"#, 0.5 - gpu);
    let a = h.daemon.submit("t", serde_json::from_str(&stages("gpu-heavy", 0.4)).expect("valid")).expect("accepted").id;
    h.step_to(T0_MS + S);
    h.clock.set(T0_MS + (1 + SETTLE_S) * S);
    h.report(a, 100, 10.0).expect("recorded");
    let b = h.daemon.submit("t", serde_json::from_str(&stages("input-heavy", 0.05)).expect("valid")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!((gpus(&h, a), gpus(&h, b)), (Some(vec![0]), Some(vec![0])), "Muri-S interleaves them");
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    h.report(a, 200, 9.0).expect("recorded");
    h.report(b, 50, 8.0).expect("recorded (waits for b's solo speed)");
    // `a` ends; `b` runs alone and its solo speed turns its shared report into an entry.
    h.fake.exit(a, Some(0));
    h.step_to(T0_MS + 40 * S);
    assert!(gpus(&h, b).is_some());
    h.clock.set(T0_MS + (41 + SETTLE_S) * S);
    h.report(b, 500, 10.0).expect("recorded");
    let before = h.daemon.pair_rows(None);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!((speed(&entry(&h, None, "t", "gpu-heavy", "input-heavy").expect("a's")) - 0.9).abs() < 1e-9);
    assert!((speed(&entry(&h, None, "t", "input-heavy", "gpu-heavy").expect("b's")) - 0.8).abs() < 1e-9);
    h.fake.exit(b, Some(0));
    h.step_to(T0_MS + 60 * S);
    // A restart keeps the table; the packed program now pairs these two types (each keeps more
    // than half its speed) but not two types it has not measured.
    let h = h.restart_with(PolicyKind::MaxMinFairnessPacked);
    assert_eq!(h.daemon.pair_rows(None), before, "kept across the restart");
    let job = |job_type: &str| serde_json::from_str::<SubmitRequest>(&format!(r#"{{"command": "train", "expected_run_time_s": 3600, "job_type": "{job_type}"}}"#)).expect("valid");
    let (c, d) = (h.daemon.submit("t", job("gpu-heavy")).expect("ok").id, h.daemon.submit("t", job("input-heavy")).expect("ok").id);
    h.step_to(T0_MS + 70 * S);
    h.step_to(T0_MS + 71 * S);
    assert_eq!((gpus(&h, c), gpus(&h, d)), (Some(vec![0]), Some(vec![0])), "a measured pair shares the GPU: {:?}", h.job(d).pending_reason);
    h.fake.exit(c, Some(0));
    h.fake.exit(d, Some(0));
    let (e, f) = (h.daemon.submit("t", job("new-1")).expect("ok").id, h.daemon.submit("t", job("new-2")).expect("ok").id);
    for t in 72..100 {
        h.step_to(T0_MS + t * S);
        assert!(gpus(&h, e).is_none() || gpus(&h, f).is_none(), "unmeasured types never share");
    }
}

#[test]
fn a_tenants_reports_never_change_or_reveal_another_tenants_entries() {
    // Both tenants call their job type `x`: they are two types.
    let h = Harness::new(PolicyKind::Gandiva, nodes("n", "a100", 1, 1), 10.0);
    let mine = h.daemon.submit("a", typed("x")).expect("accepted").id;
    h.step_to(T0_MS + S);
    h.clock.set(T0_MS + (1 + SETTLE_S) * S);
    h.report(mine, 1000, 100.0).expect("recorded");
    let theirs = h.daemon.submit("b", typed("x")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!((gpus(&h, mine), gpus(&h, theirs)), (Some(vec![0]), Some(vec![0])), "paired across tenants");
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    h.report(mine, 1100, 90.0).expect("recorded");
    let honest = h.daemon.pair_rows(None);
    // Tenant b lies as hard as it can, as often as it likes: a huge speed alone, a tiny one
    // shared, then the reverse.
    for (i, tput) in [1e12, 1e-12, 0.0, 1e300].into_iter().enumerate() {
        h.report(theirs, i as u64, tput).expect("recorded");
    }
    // It cannot report for a's job: the token is the run's own.
    let b_token = h.fake.token(theirs).expect("ran");
    assert!(h.daemon.report_progress(mine, &b_token, 5, Some(1.0), None).is_err());
    let after = h.daemon.pair_rows(None);
    let of_a = |rows: &[Value]| rows.iter().filter(|r| r["tenant"] == "a").cloned().collect::<Vec<_>>();
    assert_eq!(of_a(&after), of_a(&honest), "b's reports changed none of a's entries");
    assert_eq!(of_a(&after).len(), 1);
    assert!((speed(&of_a(&after)[0]) - 0.9).abs() < 1e-9);
    // What b's own entries are is b's business: its samples are clamped to [0, 1].
    assert!(after.iter().filter(|r| r["tenant"] == "b").all(|r| (0.0..=1.0).contains(&speed(r))));
    // The policy sees two types, `a/x` and `b/x`.
    let models: Vec<Option<String>> = h.daemon.with_state(|s| [mine, theirs].iter().map(|id| arbiter_daemon::view::spec_of(&s.jobs[*id as usize], s.cluster()).model).collect());
    assert_eq!(models, vec![Some("a/x".to_string()), Some("b/x".to_string())]);
    // b sees none of a's rows, and a's type only as "another tenant's".
    let for_b = h.daemon.pair_rows(Some("b"));
    assert!(for_b.iter().all(|r| r["tenant"] == "b"), "{for_b:?}");
    assert!(for_b.iter().all(|r| r["partner_other_tenant"] == true && r.get("partner_job_type").is_none() && r.get("partner_tenant").is_none()), "{for_b:?}");
    let for_a = h.daemon.pair_rows(Some("a"));
    assert_eq!(for_a.len(), 1);
    assert_eq!(for_a[0]["partner_other_tenant"], true);
}
