//! The daemon offers its policy the present (`SchedulerView::current`) after a round whose
//! decision was carried out whole, as the engine does at every event (issue 31, item 5): an
//! ordered policy then decides by changes — only what starts — and the planner checks that
//! against the present. Nothing else changes: the same jobs start in the same order.

mod loop_harness;

use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

/// Eight one-GPU jobs of 60 s and two of two GPUs on four GPUs, run to the end in 10-second
/// rounds; returns the job ids in the order they first started, and the rounds decided by
/// changes.
fn run(kind: PolicyKind) -> (Vec<u32>, u64) {
    let h = Harness::new(kind, nodes("n", "a100", 1, 4), 60.0);
    let mut ids = Vec::new();
    for i in 0..10u32 {
        let gpus = if i % 5 == 4 { 2 } else { 1 };
        let id = h.submit(&format!(
            r#"{{"command": "train", "gpus": {gpus}, "expected_run_time_s": 60}}"#
        ));
        h.fake.set_work(id, 60.0, 0);
        ids.push(id);
    }
    let mut now = T0_MS;
    while ids.iter().any(|&id| h.job(id).state.name() != "succeeded") {
        assert!(now < T0_MS + 3_600_000, "{kind}: jobs did not finish");
        h.step_to(now);
        now += 10_000;
    }
    let mut started: Vec<(i64, u32)> = ids
        .iter()
        .map(|&id| {
            (
                loop_harness::start_end_s(&h.job(id)).0.expect("started"),
                id,
            )
        })
        .collect();
    started.sort();
    let by_changes = h.daemon.with_state(|s| s.counters.rounds_by_changes);
    (started.into_iter().map(|(_, id)| id).collect(), by_changes)
}

#[test]
fn an_ordered_policy_decides_by_changes_in_the_daemon_and_starts_the_same_jobs_in_order() {
    let (order, by_changes) = run(PolicyKind::Fifo);
    assert!(by_changes > 0, "no round was decided by changes");
    // FIFO: first come, first started (the two-GPU jobs wait for two GPUs in their turn).
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "started out of order");
}

#[test]
fn a_policy_that_allocates_the_whole_cluster_each_round_is_not_counted_by_changes() {
    // Gavel's max-min fairness is offered the present too, but answers with its whole
    // allocation at every round.
    let (_, by_changes) = run(PolicyKind::MaxMinFairness);
    assert_eq!(by_changes, 0);
}
