//! Every policy `arbiter policies` lists runs in the daemon's loop — through the fake executor,
//! with the capabilities of the local executor and of Slurm's — or is refused at start-up with
//! its reason. Nothing a policy decides is dropped: each decision passes the shared planner or
//! the round fails loudly (`tick` returns the error, and this test would see it).

mod loop_harness;

use arbiter_daemon::executor::Capabilities;
use arbiter_daemon::executor::fake::Call;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

/// Two V100 nodes and two A100 nodes of 4 GPUs.
fn mixed() -> Vec<arbiter_daemon::records::topology::NodeSpec> {
    let mut n = nodes("v", "v100", 2, 4);
    n.extend(nodes("a", "a100", 2, 4));
    n
}

/// Runs 16 jobs (1 to 4 GPUs, 60 to 600 s of work, arriving over two minutes) to the end;
/// returns the fake's calls. Panics if a round fails or a job does not succeed.
fn run_all(kind: PolicyKind, capabilities: Capabilities) -> Vec<Call> {
    let h = Harness::new(kind, mixed(), 60.0);
    h.fake.set_capabilities(capabilities);
    let mut now = T0_MS;
    for i in 0..16u32 {
        now = T0_MS + u64::from(i) * 8_000;
        h.clock.set(now);
        let gpus = [1, 2, 1, 4][i as usize % 4];
        let work = 60 + (i * 37) % 540;
        let id = h.submit(&format!(
            r#"{{"command": "train", "gpus": {gpus}, "expected_run_time_s": {work}}}"#
        ));
        h.fake.set_work(id, f64::from(work), 0);
        h.step_to(now);
    }
    for _ in 0..100_000 {
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
    for id in 0..16 {
        let job = h.job(id);
        assert_eq!(
            job.state.name(),
            "succeeded",
            "{kind}: job {id} ended {} ({:?})",
            job.state.name(),
            job.history.last()
        );
    }
    h.fake.calls()
}

#[test]
fn every_policy_runs_through_the_daemon_loop_or_is_refused_with_its_reason() {
    let local = arbiter_daemon::config::ExecutorKind::Local.capabilities();
    let slurm = arbiter_daemon::config::ExecutorKind::Slurm.capabilities();
    let mut ran = 0;
    for kind in PolicyKind::ALL {
        for capabilities in [local, slurm] {
            if let Some(reason) =
                arbiter_daemon::daemon::policy_support::unsupported(kind, capabilities)
            {
                assert!(reason.contains(kind.name()), "{reason}");
                continue;
            }
            let calls = run_all(kind, capabilities);
            assert!(
                calls.iter().any(|c| matches!(c, Call::Launch { .. })),
                "{kind}: nothing launched"
            );
            if !capabilities.live_reshare {
                assert!(
                    !calls.iter().any(|c| matches!(c, Call::Reshare { .. })),
                    "{kind}: a live reshare on an executor that cannot"
                );
            }
            ran += 1;
        }
    }
    // Refused: antman on both executors (guests on held GPUs), max-min-fairness-packed on Slurm
    // without share_gpus. (`external` runs the example agent.)
    assert!(
        ran >= 2 * PolicyKind::ALL.len() - 3,
        "only {ran} policy runs"
    );
}

#[test]
fn a_heterogeneity_aware_policy_uses_both_gpu_types() {
    let local = arbiter_daemon::config::ExecutorKind::Local.capabilities();
    let calls = run_all(PolicyKind::MaxMinFairnessHet, local);
    let on = |prefix: char| {
        calls.iter().any(|c| matches!(c, Call::Launch { nodes, .. } if nodes.iter().any(|n| n.node.starts_with(prefix))))
    };
    assert!(
        on('v') && on('a'),
        "max-min-fairness-het placed jobs on one type only"
    );
}
