//! Nodes that take no new runs (Slurm's down or drained nodes, as the executor reports them):
//! nothing new is placed there, runs already there keep their GPUs, and the node is used again
//! once it comes back. Stepped by hand on the fake executor.

mod loop_harness;

use arbiter_daemon::executor::fake::Call;
use arbiter_daemon::records::job::JobState;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

/// The nodes job `id`'s launches went to, in order.
fn launched_on(h: &Harness, id: u32) -> Vec<String> {
    h.fake
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Launch { job, nodes, .. } if *job == id => Some(
                nodes
                    .iter()
                    .map(|n| n.node.clone())
                    .collect::<Vec<_>>()
                    .join("+"),
            ),
            _ => None,
        })
        .collect()
}

#[test]
fn nothing_new_lands_on_a_node_that_takes_no_new_runs_and_its_runs_keep_their_gpus() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "v100", 2, 2), 10.0);
    // A job on n0, then n0 is drained: it keeps running there.
    let first = h.submit(r#"{"command": "train", "gpus": 1}"#);
    h.step_to(T0_MS + 1_000);
    assert_eq!(launched_on(&h, first), ["n0"]);
    h.fake.set_unavailable(&["n0"]);
    // Three more one-GPU jobs: only n1's two GPUs take them; the third waits although n0 has a
    // free GPU.
    let more: Vec<u32> = (0..3)
        .map(|_| h.submit(r#"{"command": "train", "gpus": 1}"#))
        .collect();
    h.step_to(T0_MS + 2_000);
    assert_eq!(launched_on(&h, more[0]), ["n1"]);
    assert_eq!(launched_on(&h, more[1]), ["n1"]);
    assert!(
        launched_on(&h, more[2]).is_empty(),
        "nothing new on the drained n0"
    );
    assert!(
        matches!(h.job(first).state, JobState::Running { .. }),
        "the run on n0 goes on"
    );
    assert!(matches!(h.job(more[2]).state, JobState::Queued));
    // n0 comes back: the waiting job starts there.
    h.fake.set_unavailable(&[]);
    h.step_to(T0_MS + 3_000);
    assert_eq!(launched_on(&h, more[2]), ["n0"]);
}

#[test]
fn with_every_node_unavailable_jobs_wait_and_say_why() {
    let h = Harness::new(PolicyKind::Las, nodes("n", "a100", 2, 4), 10.0);
    h.fake.set_unavailable(&["n0", "n1"]);
    let id = h.submit(r#"{"command": "train", "gpus": 2}"#);
    h.step_to(T0_MS + 1_000);
    assert!(launched_on(&h, id).is_empty());
    let reason = h.job(id).pending_reason.unwrap_or_default();
    assert!(reason.contains("no node takes new runs"), "{reason}");
    h.fake.set_unavailable(&["n0"]);
    h.step_to(T0_MS + 2_000);
    assert_eq!(launched_on(&h, id), ["n1"]);
}
