//! Reservations and maintenance windows (issue 29, item 6): nothing that could still run at the
//! start is placed on a reserved node, runs there are preempted at the start, a tenant's
//! reservation is that tenant's alone, and reservations survive a restart.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::reservation::ReservationRequest;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

const T0_S: i64 = (T0_MS / 1000) as i64;

/// Two nodes of two GPUs: `n0`, `n1`.
fn harness() -> Harness {
    Harness::new(PolicyKind::Fifo, nodes("n", "a100", 2, 2), 30.0)
}

fn reserve(h: &Harness, node: &str, start_in_s: i64, duration_s: u64, tenant: Option<&str>) -> u32 {
    let request = ReservationRequest {
        nodes: vec![node.into()],
        start_unix_s: T0_S + start_in_s,
        duration_s,
        tenant: tenant.map(String::from),
        reason: "driver upgrade".into(),
    };
    h.daemon.add_reservation(request).expect("reserved").id
}

fn job(h: &Harness, tenant: &str, gpus: u32, extra: &str, run_s: f64) -> u32 {
    let id = h
        .submit_as(
            tenant,
            &format!(r#"{{"command": "train", "gpus": {gpus}{extra}}}"#),
        )
        .expect("accepted");
    h.fake.set_work(id, run_s, 0);
    id
}

fn node_of(h: &Harness, id: u32) -> Option<String> {
    let gpus = h.job(id).state.gpus()?.to_vec();
    Some(if gpus.iter().all(|g| *g < 2) {
        "n0".into()
    } else {
        "n1".into()
    })
}

#[test]
fn only_runs_that_end_before_a_maintenance_window_are_placed_on_its_nodes_and_runs_there_stop_at_its_start()
 {
    let h = harness();
    reserve(&h, "n0", 600, 3_600, None);
    // Both nodes free. The unbounded job may not go to n0 (it could run into the window).
    let unbounded = job(&h, "a", 2, "", 10_000.0);
    let short = job(&h, "a", 2, r#", "max_run_time_s": 300"#, 200.0);
    let long = job(&h, "a", 2, r#", "max_run_time_s": 3000"#, 2_000.0);
    h.step_to(T0_MS);
    assert_eq!(
        node_of(&h, unbounded).as_deref(),
        Some("n1"),
        "first fit would take n0"
    );
    assert_eq!(
        node_of(&h, short).as_deref(),
        Some("n0"),
        "it ends before the window"
    );
    assert_eq!(h.job(long).state.name(), "queued");
    let reason = h.job(long).pending_reason.unwrap_or_default();
    assert!(
        reason.contains("kept off reserved nodes")
            && reason.contains("maintenance: driver upgrade")
            && reason.contains("n0"),
        "{reason}"
    );
    // The window begins: nothing runs on n0 until it is over.
    for s in (30..=600).step_by(30) {
        h.step_to(T0_MS + s * 1000);
    }
    assert_eq!(h.job(short).state.name(), "succeeded");
    assert_eq!(h.job(long).state.name(), "queued");
    h.step_to(T0_MS + 4_300_000);
    assert_eq!(
        node_of(&h, long).as_deref(),
        Some("n0"),
        "over: n0 takes runs again: {:?}",
        h.job(long).pending_reason
    );
}

#[test]
fn a_run_on_a_node_is_preempted_when_its_window_begins() {
    let h = harness();
    let running = job(&h, "a", 2, "", 10_000.0);
    let other = job(&h, "a", 2, "", 10_000.0);
    h.step_to(T0_MS);
    let on_n0 = if node_of(&h, running).as_deref() == Some("n0") {
        running
    } else {
        other
    };
    reserve(&h, "n0", 60, 600, None);
    h.step_to(T0_MS + 30_000);
    assert_eq!(h.job(on_n0).state.name(), "running", "not before the start");
    h.step_to(T0_MS + 60_000);
    h.step_to(T0_MS + 61_000);
    assert_ne!(h.job(on_n0).state.name(), "running");
    assert!(
        h.job(on_n0).preemptions >= 1
            || h.job(on_n0)
                .history
                .iter()
                .any(|t| t.why.contains("preempted")),
        "{:?}",
        h.job(on_n0).history
    );
}

#[test]
fn a_tenants_reservation_is_that_tenants_alone_and_survives_a_restart() {
    // SRTF lets a later job pass one that waits (FIFO would keep a's job behind b's).
    let h = Harness::new(PolicyKind::Srtf, nodes("n", "a100", 2, 2), 30.0);
    reserve(&h, "n0", 0, 3_600, Some("a"));
    let h = h.restart();
    let b1 = job(&h, "b", 2, "", 100.0);
    let b2 = job(&h, "b", 2, "", 100.0);
    h.step_to(T0_MS);
    assert_eq!(node_of(&h, b1).as_deref(), Some("n1"));
    assert_eq!(h.job(b2).state.name(), "queued", "n0 is a's");
    assert!(
        h.job(b2)
            .pending_reason
            .unwrap_or_default()
            .contains("for another tenant"),
        "whose is not said"
    );
    let a1 = job(&h, "a", 2, "", 100.0);
    h.step_to(T0_MS + 1_000);
    assert_eq!(node_of(&h, a1).as_deref(), Some("n0"));
}

#[test]
fn bad_reservations_are_refused_naming_the_field() {
    let h = harness();
    let base = ReservationRequest {
        nodes: vec!["n0".into()],
        start_unix_s: T0_S,
        duration_s: 60,
        tenant: None,
        reason: "x".into(),
    };
    for (request, field) in [
        (
            ReservationRequest {
                nodes: vec!["n7".into()],
                ..base.clone()
            },
            "nodes",
        ),
        (
            ReservationRequest {
                tenant: Some("nobody".into()),
                ..base.clone()
            },
            "tenant",
        ),
        (
            ReservationRequest {
                duration_s: 0,
                ..base.clone()
            },
            "duration_s",
        ),
    ] {
        let refused = h.daemon.add_reservation(request);
        assert!(
            matches!(&refused, Err(RequestError::Invalid(e)) if e.field == field),
            "{field}: {refused:?}"
        );
    }
    let id = h.daemon.add_reservation(base).expect("added").id;
    h.daemon.delete_reservation(id).expect("deleted");
    assert!(matches!(
        h.daemon.delete_reservation(id),
        Err(RequestError::NotFound(_))
    ));
    assert!(h.daemon.reservations().is_empty());
}
