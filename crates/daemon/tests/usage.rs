//! Usage accounting (issue 29, item 4): every run's GPU-seconds, CPU and memory reservation are
//! recorded when it ends, in the same transaction as the record that ends it — so a restart
//! (`kill -9`) loses none and counts none twice — and the runs going on count up to now. The
//! decayed fair share reads the same history, across restarts.

mod loop_harness;

use arbiter_daemon::clock::Clock;
use arbiter_daemon::records::usage::{GroupBy, UsageRow};
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn report(h: &Harness, tenant: Option<&str>, by: &[GroupBy]) -> Vec<UsageRow> {
    h.daemon
        .usage_report(tenant, by.to_vec(), i64::MIN)
        .expect("report")
}

fn gpu_s(h: &Harness, tenant: &str) -> f64 {
    report(h, Some(tenant), &[GroupBy::Tenant])
        .iter()
        .map(|r| r.gpu_s)
        .sum()
}

#[test]
fn a_run_is_accounted_when_it_ends_counted_up_to_now_while_it_runs_and_survives_a_restart() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 60.0);
    let id = h
        .submit_as(
            "a",
            r#"{"command": "train", "gpus": 2, "cpus": 6, "memory_gib": 20, "user": "ann"}"#,
        )
        .expect("accepted");
    h.fake.set_work(id, 600.0, 0);
    h.step_to(T0_MS);
    h.step_to(T0_MS + 300_000);
    let rows = report(
        &h,
        None,
        &[GroupBy::Tenant, GroupBy::User, GroupBy::GpuType],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].gpu_s, rows[0].runs, rows[0].running),
        (600.0, 1, 1),
        "half-way: 2 GPUs × 300 s, going on"
    );
    assert_eq!(
        (
            rows[0].key["tenant"].as_str(),
            rows[0].key["user"].as_str(),
            rows[0].key["gpu_type"].as_str()
        ),
        ("a", "ann", "a100")
    );
    h.step_to(T0_MS + 600_000);
    assert_eq!(h.job(id).state.name(), "succeeded");
    let rows = report(&h, None, &[GroupBy::Tenant]);
    assert_eq!(
        (rows[0].gpu_s, rows[0].runs, rows[0].running),
        (1200.0, 1, 0)
    );
    assert_eq!(
        (rows[0].cpu_s, rows[0].memory_gib_s),
        (6.0 * 600.0, 20.0 * 600.0),
        "what was reserved, for as long"
    );
    assert_eq!(
        h.daemon
            .gpu_seconds_by_tenant()
            .get(&("a".to_string(), "a100".to_string())),
        Some(&1200.0)
    );
    // kill -9 and a restart: the row is there, once.
    let h = h.restart();
    assert_eq!(gpu_s(&h, "a"), 1200.0);
    assert_eq!(
        h.daemon
            .gpu_seconds_by_tenant()
            .get(&("a".to_string(), "a100".to_string())),
        Some(&1200.0),
        "the metrics' totals are rebuilt from the store"
    );
    let h = h.restart();
    assert_eq!(gpu_s(&h, "a"), 1200.0, "restarting again adds nothing");
}

#[test]
fn a_run_that_ended_while_the_daemon_was_down_is_accounted_once() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 60.0);
    let id = h
        .submit_as("b", r#"{"command": "train", "gpus": 1}"#)
        .expect("accepted");
    h.fake.set_work(id, 100.0, 0);
    h.step_to(T0_MS);
    // The daemon dies; the run ends meanwhile; a new daemon concludes it from what the
    // executor says.
    let h = h.restart_with_settings(|_| {});
    h.clock.set(T0_MS + 200_000);
    h.fake.advance();
    let h = h.restart();
    // Killed, as far as the daemon can tell (no exit code): a failed run, retried later.
    assert_eq!((h.job(id).state.name(), h.job(id).failures), ("queued", 1));
    // Ended at the recovery (200 s), not at its real end: what the daemon can know.
    assert_eq!(gpu_s(&h, "b"), 200.0);
    let h = h.restart();
    assert_eq!(gpu_s(&h, "b"), 200.0, "no second row for the same run");
    assert_eq!(h.job(id).runs_accounted, 1);
}

#[test]
fn each_run_of_a_preempted_job_is_its_own_row_and_rows_outlive_pruned_records() {
    let h = Harness::with_settings(PolicyKind::Fifo, nodes("n", "a100", 1, 1), 60.0, |s| {
        s.retention.keep_finished_per_tenant = 1
    });
    let id = h
        .submit_as("a", r#"{"command": "train", "gpus": 1, "max_retries": 3}"#)
        .expect("accepted");
    // Fails once after 50 s, then succeeds after 70 more: two runs, two rows.
    h.fake.set_work(id, 50.0, 1);
    h.step_to(T0_MS);
    h.step_to(T0_MS + 50_000);
    h.fake.set_work(id, 70.0, 0);
    h.step_to(T0_MS + 60_000);
    h.step_to(T0_MS + 130_000);
    assert_eq!(h.job(id).state.name(), "succeeded");
    let rows = report(&h, None, &[GroupBy::Tenant]);
    assert_eq!((rows[0].runs, rows[0].gpu_s), (2, 120.0), "{rows:?}");
    // Two more jobs end: with one ended job kept per tenant, the first is pruned; its usage stays.
    for _ in 0..2 {
        let next = h
            .submit_as("a", r#"{"command": "train", "gpus": 1}"#)
            .expect("accepted");
        h.fake.set_work(next, 10.0, 0);
        let at = h.clock.now_ms();
        h.step_to(at + 1000);
        h.step_to(at + 11_000);
    }
    assert!(
        h.daemon.job(id, None).is_err(),
        "the first job's record was pruned"
    );
    assert_eq!(gpu_s(&h, "a"), 140.0);
}

#[test]
fn a_tenant_sees_only_its_own_usage() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 60.0);
    for tenant in ["a", "b"] {
        let id = h
            .submit_as(tenant, r#"{"command": "train", "gpus": 1}"#)
            .expect("accepted");
        h.fake.set_work(id, 10.0, 0);
    }
    h.step_to(T0_MS);
    h.step_to(T0_MS + 10_000);
    let mine = report(&h, Some("a"), &[GroupBy::Tenant, GroupBy::User]);
    assert_eq!(
        mine.iter()
            .map(|r| r.key["tenant"].as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(report(&h, None, &[GroupBy::Tenant]).len(), 2);
}

/// Decayed fair share through the daemon, and across a restart: tenant a used the only GPU for
/// an hour; then a and b each submit a job at once. With fair share a's hour (decayed by a
/// minute) counts, so b's job runs first, before and after a restart (the usage comes from the
/// store). VTC's own rule lifts b, arriving from idle, to a's counter instead (no banked credit):
/// a tie, which goes by name, to a.
#[test]
fn with_fair_share_the_tenant_that_used_less_runs_first_even_after_a_restart() {
    let run_first = |fairshare: Option<f64>, restart: bool| {
        let h = Harness::with_settings(PolicyKind::Vtc, nodes("n", "a100", 1, 1), 60.0, |s| {
            s.fairshare_half_life_s = fairshare
        });
        let early = h
            .submit_as("a", r#"{"command": "train", "gpus": 1}"#)
            .expect("accepted");
        h.fake.set_work(early, 3600.0, 0);
        h.step_to(T0_MS);
        h.step_to(T0_MS + 3_600_000);
        let h = if restart { h.restart() } else { h };
        let a = h
            .submit_as("a", r#"{"command": "train", "gpus": 1}"#)
            .expect("accepted");
        let b = h
            .submit_as("b", r#"{"command": "train", "gpus": 1}"#)
            .expect("accepted");
        h.step_to(T0_MS + 3_660_000);
        let running: Vec<&str> = [(a, "a"), (b, "b")]
            .into_iter()
            .filter(|(id, _)| h.job(*id).state.name() == "running")
            .map(|(_, t)| t)
            .collect();
        running.join(",")
    };
    assert_eq!(run_first(Some(7.0 * 86_400.0), false), "b");
    assert_eq!(
        run_first(Some(7.0 * 86_400.0), true),
        "b",
        "the history survives a restart"
    );
    assert_eq!(
        run_first(None, false),
        "a",
        "without fair share VTC lifts b to a's counter: a tie, by name"
    );
}
