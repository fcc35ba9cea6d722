//! The daemon learns which job types interfere (issue 11, item 8: Gandiva's introspection with
//! real data), stepped by hand on the fake executor: two co-located jobs report their speeds,
//! the co-location table gets their speed sharing over their speed alone, Gandiva dissolves a
//! pair measured below 1, the table survives a restart, and one tenant's reports neither change
//! nor reveal another tenant's entries.

mod loop_harness;

use arbiter_daemon::clock::Clock;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::records::pairs::SETTLE_S;
use arbiter_daemon::records::progress::{
    MAX_STEPS, MAX_THROUGHPUT, MIN_THROUGHPUT, ProgressReport,
};
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};
use serde_json::Value;

fn typed(job_type: &str) -> SubmitRequest {
    serde_json::from_str(&format!(r#"{{"command": "train", "gpus": 1, "expected_run_time_s": 3600, "job_type": "{job_type}"}}"#)).expect("valid")
}

fn gpus(h: &Harness, id: u32) -> Option<Vec<u32>> {
    h.job(id).state.gpus().map(<[u32]>::to_vec)
}

/// The entry for `tenant/job_type` next to `partner` as `viewer` sees the table.
fn entry(
    h: &Harness,
    viewer: Option<&str>,
    tenant: &str,
    job_type: &str,
    partner: &str,
) -> Option<Value> {
    h.daemon.pair_rows(viewer).into_iter().find(|r| {
        r["tenant"] == tenant && r["job_type"] == job_type && r["partner_job_type"] == partner
    })
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
    assert_eq!(
        h.job(lm).measurements.solo.get("a100"),
        Some(&100.0),
        "the unsettled report did not count"
    );
    // A second job: the GPU is over-subscribed, Gandiva pairs the two (a pair it has not
    // measured counts as good as taking turns) and both run on GPU 0.
    let cnn = h.daemon.submit("t", typed("cnn")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!(
        (gpus(&h, lm), gpus(&h, cnn)),
        (Some(vec![0]), Some(vec![0])),
        "{:?}",
        h.job(cnn).pending_reason
    );
    // Sharing, `lm` runs at 30 steps/s: 0.3 of its speed alone. Reports right after the partner
    // arrived do not count.
    h.clock.set(T0_MS + 21 * S);
    h.report(lm, 2100, 5.0).expect("recorded");
    assert!(
        entry(&h, None, "t", "lm", "cnn").is_none(),
        "not settled yet"
    );
    h.clock.set(T0_MS + (20 + SETTLE_S + 1) * S);
    h.report(lm, 2500, 30.0).expect("recorded");
    h.report(lm, 2600, 30.0).expect("recorded");
    let row = entry(&h, None, "t", "lm", "cnn").expect("an entry for lm next to cnn");
    assert!((speed(&row) - 0.3).abs() < 1e-9, "{row}");
    assert_eq!(
        (
            row["samples"].as_u64(),
            row["gpus"].as_u64(),
            row["gpu_type"].as_str()
        ),
        (Some(2), Some(1), Some("a100"))
    );
    // `cnn` never ran alone: its shared speed waits for its solo speed.
    h.report(cnn, 100, 40.0).expect("recorded");
    assert!(entry(&h, None, "t", "cnn", "lm").is_none());
    assert_eq!(h.job(cnn).measurements.pending.len(), 1);
    // Introspection: 0.3 + 0.5 (cnn's, not measured) = 0.8 < 1 — the pair is dissolved and not
    // formed again; the two take turns on the GPU (the running pair is split at the end of its
    // round: Gandiva decides by rounds of 10 s).
    for t in 32..=60 {
        h.step_to(T0_MS + t * S);
        assert!(
            gpus(&h, lm).is_none() || gpus(&h, cnn).is_none() || t < 42,
            "at {t} s both still share GPU 0"
        );
    }
    assert!(
        h.fake
            .calls()
            .iter()
            .any(|c| matches!(c, arbiter_daemon::executor::fake::Call::Signal { .. })),
        "one of them was preempted"
    );
    // Once `cnn` runs alone and reports, its waiting shared speed becomes an entry (40 / 80).
    let alone = if gpus(&h, cnn).is_some() {
        cnn
    } else {
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
    let stages = |job_type: &str, gpu: f64| {
        format!(
            r#"{{"command": "train", "job_type": "{job_type}", "iteration_stages": {{"io_s": {}, "cpu_s": 0.05, "gpu_s": {gpu}}}}}"#,
            0.5 - gpu
        )
    };
    let a = h
        .daemon
        .submit(
            "t",
            serde_json::from_str(&stages("gpu-heavy", 0.4)).expect("valid"),
        )
        .expect("accepted")
        .id;
    h.step_to(T0_MS + S);
    h.clock.set(T0_MS + (1 + SETTLE_S) * S);
    h.report(a, 100, 10.0).expect("recorded");
    let b = h
        .daemon
        .submit(
            "t",
            serde_json::from_str(&stages("input-heavy", 0.05)).expect("valid"),
        )
        .expect("accepted")
        .id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!(
        (gpus(&h, a), gpus(&h, b)),
        (Some(vec![0]), Some(vec![0])),
        "Muri-S interleaves them"
    );
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    h.report(a, 200, 9.0).expect("recorded");
    h.report(b, 50, 8.0)
        .expect("recorded (waits for b's solo speed)");
    // `a` ends; `b` runs alone and its solo speed turns its shared report into an entry.
    h.fake.exit(a, Some(0));
    h.step_to(T0_MS + 40 * S);
    assert!(gpus(&h, b).is_some());
    h.clock.set(T0_MS + (41 + SETTLE_S) * S);
    h.report(b, 500, 10.0).expect("recorded");
    let before = h.daemon.pair_rows(None);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(
        (speed(&entry(&h, None, "t", "gpu-heavy", "input-heavy").expect("a's")) - 0.9).abs() < 1e-9
    );
    assert!(
        (speed(&entry(&h, None, "t", "input-heavy", "gpu-heavy").expect("b's")) - 0.8).abs() < 1e-9
    );
    h.fake.exit(b, Some(0));
    h.step_to(T0_MS + 60 * S);
    // A restart keeps the table; the packed program now pairs these two types (each keeps more
    // than half its speed) but not two types it has not measured.
    let h = h.restart_with(PolicyKind::MaxMinFairnessPacked);
    assert_eq!(h.daemon.pair_rows(None), before, "kept across the restart");
    let job = |job_type: &str| {
        serde_json::from_str::<SubmitRequest>(&format!(
            r#"{{"command": "train", "expected_run_time_s": 3600, "job_type": "{job_type}"}}"#
        ))
        .expect("valid")
    };
    let (c, d) = (
        h.daemon.submit("t", job("gpu-heavy")).expect("ok").id,
        h.daemon.submit("t", job("input-heavy")).expect("ok").id,
    );
    h.step_to(T0_MS + 70 * S);
    h.step_to(T0_MS + 71 * S);
    assert_eq!(
        (gpus(&h, c), gpus(&h, d)),
        (Some(vec![0]), Some(vec![0])),
        "a measured pair shares the GPU: {:?}",
        h.job(d).pending_reason
    );
    h.fake.exit(c, Some(0));
    h.fake.exit(d, Some(0));
    let (e, f) = (
        h.daemon.submit("t", job("new-1")).expect("ok").id,
        h.daemon.submit("t", job("new-2")).expect("ok").id,
    );
    for t in 72..100 {
        h.step_to(T0_MS + t * S);
        assert!(
            gpus(&h, e).is_none() || gpus(&h, f).is_none(),
            "unmeasured types never share"
        );
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
    assert_eq!(
        (gpus(&h, mine), gpus(&h, theirs)),
        (Some(vec![0]), Some(vec![0])),
        "paired across tenants"
    );
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    h.report(mine, 1100, 90.0).expect("recorded");
    let honest = h.daemon.pair_rows(None);
    // Tenant b lies as hard as it can, as often as it likes: a huge speed alone, a tiny one
    // shared, then the reverse.
    for (i, tput) in [MAX_THROUGHPUT, MIN_THROUGHPUT, 0.0, MAX_THROUGHPUT]
        .into_iter()
        .enumerate()
    {
        h.report(theirs, i as u64, tput).expect("recorded");
    }
    // It cannot report for a's job: the token is the run's own.
    let b_token = h.fake.token(theirs).expect("ran");
    assert!(
        h.daemon
            .report_progress(
                mine,
                &b_token,
                ProgressReport {
                    steps: 5,
                    throughput: Some(1.0),
                    total_steps: None
                }
            )
            .is_err()
    );
    let after = h.daemon.pair_rows(None);
    let of_a = |rows: &[Value]| {
        rows.iter()
            .filter(|r| r["tenant"] == "a")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of_a(&after),
        of_a(&honest),
        "b's reports changed none of a's entries"
    );
    assert_eq!(of_a(&after).len(), 1);
    assert!((speed(&of_a(&after)[0]) - 0.9).abs() < 1e-9);
    // What b's own entries are is b's business: its samples are clamped to [0, 1].
    assert!(
        after
            .iter()
            .filter(|r| r["tenant"] == "b")
            .all(|r| (0.0..=1.0).contains(&speed(r)))
    );
    // The policy sees two types, `a/x` and `b/x`.
    let models: Vec<Option<String>> = h.daemon.with_state(|s| {
        [mine, theirs]
            .iter()
            .map(|id| {
                arbiter_daemon::records::view::spec_of(
                    &s.jobs[*id as usize],
                    s.cluster(),
                    &Default::default(),
                )
                .model
            })
            .collect()
    });
    assert_eq!(
        models,
        vec![Some("a/x".to_string()), Some("b/x".to_string())]
    );
    // b sees none of a's rows, and a's type only as "another tenant's".
    let for_b = h.daemon.pair_rows(Some("b"));
    assert!(for_b.iter().all(|r| r["tenant"] == "b"), "{for_b:?}");
    assert!(
        for_b.iter().all(|r| r["partner_other_tenant"] == true
            && r.get("partner_job_type").is_none()
            && r.get("partner_tenant").is_none()),
        "{for_b:?}"
    );
    let for_a = h.daemon.pair_rows(Some("a"));
    assert_eq!(for_a.len(), 1);
    assert_eq!(for_a[0]["partner_other_tenant"], true);
}

/// Attack: tenant `a`'s job claims to lose nothing next to tenant `b`'s type (a normalized speed
/// of 1) while `b`'s job, by its own reports, gets a tenth of its speed next to `a`'s. Gandiva
/// keeps a pair whose two fractions sum to at least 1, so taken as reported the lie (1 + 0.1)
/// would keep `b`'s job paired with `a`'s however much it suffers — even `b` reporting 0 would
/// leave the sum at 1. Across tenants the policy takes the lower of the two fractions: the pair
/// is not formed again, and the two take turns.
#[test]
fn a_tenant_cannot_keep_another_tenants_job_in_a_pair_that_starves_it_by_claiming_to_lose_nothing()
{
    let h = Harness::new(PolicyKind::Gandiva, nodes("n", "a100", 1, 1), 10.0);
    // a's hog runs alone and reports 100 steps/s.
    let hog = h.daemon.submit("a", typed("hog")).expect("accepted").id;
    h.step_to(T0_MS + S);
    h.clock.set(T0_MS + (1 + SETTLE_S) * S);
    h.report(hog, 100, 100.0).expect("recorded");
    // b's victim joins it on the GPU (an unmeasured pair is tried).
    let victim = h.daemon.submit("b", typed("victim")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!(
        (gpus(&h, hog), gpus(&h, victim)),
        (Some(vec![0]), Some(vec![0])),
        "paired across tenants"
    );
    // Settled: the hog says it runs at full speed (a lie: 1.0 after clamping); the victim
    // measures 10 steps/s (it has no solo speed yet: the sample waits).
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    for i in 0..5 {
        h.report(hog, 200 + i, 1e9).expect("recorded");
    }
    h.report(victim, 10, 10.0).expect("recorded");
    // The hog ends; the victim runs alone and its solo speed (100) makes its entry: 0.1.
    h.fake.exit(hog, Some(0));
    h.step_to(T0_MS + 40 * S);
    assert_eq!(gpus(&h, victim), Some(vec![0]));
    h.clock.set(T0_MS + (41 + SETTLE_S) * S);
    h.report(victim, 500, 100.0).expect("recorded");
    let lie = h.daemon.pair_rows(Some("a"));
    assert_eq!(lie.len(), 1);
    assert_eq!(speed(&lie[0]), 1.0, "a's claim, clamped: {lie:?}");
    let honest = h.daemon.pair_rows(Some("b"));
    assert_eq!(honest.len(), 1);
    assert!((speed(&honest[0]) - 0.1).abs() < 1e-9, "{honest:?}");
    // A new hog of the same type arrives: the GPU is over-subscribed again. By a's claim the pair
    // is worth 1 + 0.1 = 1.1 and would be formed; by the lower fraction it is 0.2 and is not.
    let hog2 = h.daemon.submit("a", typed("hog")).expect("accepted").id;
    for t in 55..=120 {
        h.step_to(T0_MS + t * S);
        assert!(
            gpus(&h, hog2).is_none() || gpus(&h, victim).is_none(),
            "at {t} s a's claim paired b's job with its hog again"
        );
    }
    // What the policy is given for the pair: the lower fraction, in both directions.
    let speeds = h
        .daemon
        .with_state(|s| s.pairs().speeds(&s.cluster().gpu_type_names, Some(0.5)));
    let (a_hog, b_victim) = (("a/hog".to_string(), 1), ("b/victim".to_string(), 1));
    let (x, y) = speeds
        .speeds(&a_hog, &b_victim, 0, (1.0, 1.0))
        .expect("measured");
    assert!((x - 0.1).abs() < 1e-9 && (y - 0.1).abs() < 1e-9, "{x} {y}");
}

/// A report of `throughput`: taken when it is within the bounds (`progress::validate`), else
/// refused naming the field.
fn lie(h: &Harness, id: u32, steps: u64, throughput: f64) {
    let bounded = throughput == 0.0
        || arbiter_daemon::records::progress::usable_throughput(throughput).is_some();
    match h.report(id, steps, throughput) {
        Ok(()) => assert!(bounded, "{throughput} was taken"),
        Err(arbiter_daemon::daemon::RequestError::Invalid(f)) => {
            assert!(!bounded && f.field == "throughput", "{throughput}: {f}")
        }
        Err(e) => panic!("{throughput}: {e}"),
    }
}

/// Attack: a job process lies with every value a report can carry, reports before and after it
/// settles, after its run ended, and with another job's token. Nothing panics, every entry stays
/// within [0, 1], the table and the job records survive a restart (a value JSON cannot hold
/// would make the store unreadable), and the ended run's and the foreign token's reports are
/// refused.
#[test]
fn hostile_reports_neither_crash_the_daemon_nor_corrupt_the_table_or_the_store() {
    let h = Harness::new(PolicyKind::Gandiva, nodes("n", "a100", 1, 1), 10.0);
    // Path-like and odd-but-valid types are only names.
    let a = h.daemon.submit("t", typed("../x")).expect("accepted").id;
    h.step_to(T0_MS + S);
    let values = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.0,
        0.0,
        -0.0,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        1e-300,
        1e300,
        MIN_THROUGHPUT,
        1.0,
        MAX_THROUGHPUT,
    ];
    // Rapid-fire, before settling: nothing learned.
    for (i, v) in values.iter().enumerate() {
        lie(&h, a, i as u64, *v);
    }
    assert!(
        h.job(a).measurements.is_empty(),
        "{:?}",
        h.job(a).measurements
    );
    h.clock.set(T0_MS + (1 + SETTLE_S) * S);
    for (i, v) in values.iter().enumerate() {
        lie(&h, a, i as u64, *v);
    }
    let solo = h
        .job(a)
        .measurements
        .solo
        .get("a100")
        .copied()
        .expect("a solo speed");
    assert!(solo.is_finite() && solo > 0.0, "{solo}");
    let b = h.daemon.submit("t", typed("a/b")).expect("accepted").id;
    h.step_to(T0_MS + 20 * S);
    assert_eq!((gpus(&h, a), gpus(&h, b)), (Some(vec![0]), Some(vec![0])));
    h.clock.set(T0_MS + (21 + SETTLE_S) * S);
    for _ in 0..3 {
        for (i, v) in values.iter().enumerate() {
            lie(&h, a, i as u64, *v);
            lie(&h, b, i as u64, *v);
        }
    }
    let rows = h.daemon.pair_rows(None);
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| (0.0..=1.0).contains(&speed(r))),
        "{rows:?}"
    );
    let speeds = h
        .daemon
        .with_state(|s| s.pairs().speeds(&s.cluster().gpu_type_names, Some(0.5)));
    let x = speeds
        .speeds(
            &("t/../x".to_string(), 1),
            &("t/a/b".to_string(), 1),
            0,
            (1.0, 1.0),
        )
        .expect("known");
    assert!(x.0.is_finite() && x.1.is_finite(), "{x:?}");
    // Another job's token is refused; so is a run's token once its run is over.
    let b_token = h.fake.token(b).expect("ran");
    let a_token = h.fake.token(a).expect("ran");
    assert!(matches!(
        h.daemon.report_progress(
            a,
            &b_token,
            ProgressReport {
                steps: 1,
                throughput: Some(1.0),
                total_steps: None
            }
        ),
        Err(arbiter_daemon::daemon::RequestError::WrongJobToken(_))
    ));
    h.daemon.cancel(a, Some("t")).expect("cancels");
    for t in 45..60 {
        h.step_to(T0_MS + t * S);
    }
    assert!(h.job(a).state.is_terminal(), "{:?}", h.job(a).state);
    let before = h.daemon.pair_rows(None);
    assert!(
        h.daemon
            .report_progress(
                a,
                &a_token,
                ProgressReport {
                    steps: 1,
                    throughput: Some(1e9),
                    total_steps: None
                }
            )
            .is_err(),
        "an ended run's token reports nothing"
    );
    assert_eq!(h.daemon.pair_rows(None), before);
    // The store reads back.
    let jobs_before: Vec<_> = [a, b].iter().map(|id| h.job(*id).measurements).collect();
    let h = h.restart();
    assert_eq!(
        h.daemon.pair_rows(None),
        before,
        "the table survives a restart"
    );
    assert_eq!(
        [a, b]
            .iter()
            .map(|id| h.job(*id).measurements)
            .collect::<Vec<_>>(),
        jobs_before
    );
    // Types that are not plain names are refused at submission.
    for bad in ["", "a b", "x\n", "x\u{1b}[31m", "é", "x\0"] {
        let request: Result<SubmitRequest, _> =
            serde_json::from_value(serde_json::json!({ "command": "train", "job_type": bad }));
        let refused = request.map_or(true, |r| h.daemon.submit("t", r).is_err());
        assert!(refused, "{bad:?}");
    }
    let long: SubmitRequest = serde_json::from_value(
        serde_json::json!({ "command": "train", "job_type": "x".repeat(129) }),
    )
    .expect("parses");
    assert!(h.daemon.submit("t", long).is_err());
}

/// Attack: two tenants' typed jobs report the most extreme values the API accepts (the smallest and
/// largest throughputs, the most steps), over and
/// over, under each policy that reads the table; every round still succeeds (no panic, no
/// refused decision) and the table stays within [0, 1].
#[test]
fn the_co_locating_policies_survive_extreme_reports_from_every_job() {
    for kind in [
        PolicyKind::Gandiva,
        PolicyKind::Horus,
        PolicyKind::MaxMinFairnessPacked,
    ] {
        let mut n = nodes("a", "a100", 1, 2);
        n.extend(nodes("v", "v100", 1, 2));
        let h = Harness::new(kind, n, 10.0);
        let mut ids = Vec::new();
        let values = [MIN_THROUGHPUT, MAX_THROUGHPUT, 1e-3, 1e6, 0.0, 1.0];
        for t in 1..=120u64 {
            // Four jobs run alone first (their solo speeds), four more arrive and share.
            if t == 1 || t == 15 {
                for (i, tenant) in ["a", "b", "a", "b"].into_iter().enumerate() {
                    ids.push(
                        h.daemon
                            .submit(tenant, typed(&format!("t{}", (i + t as usize) % 3)))
                            .expect("accepted")
                            .id,
                    );
                }
            }
            h.step_to(T0_MS + t * S);
            for (i, id) in ids.iter().enumerate() {
                if gpus(&h, *id).is_none() {
                    continue;
                }
                let token = h.fake.token(*id).expect("ran");
                let v = values[(i + t as usize) % values.len()];
                h.daemon
                    .report_progress(
                        *id,
                        &token,
                        ProgressReport {
                            steps: t,
                            throughput: Some(v),
                            total_steps: Some(MAX_STEPS),
                        },
                    )
                    .expect("recorded");
            }
        }
        let rows = h.daemon.pair_rows(None);
        assert!(
            kind != PolicyKind::Gandiva || !rows.is_empty(),
            "{kind}: the jobs that shared taught the table"
        );
        assert!(
            rows.iter().all(|r| (0.0..=1.0).contains(&speed(r))),
            "{kind}: {rows:?}"
        );
    }
}
