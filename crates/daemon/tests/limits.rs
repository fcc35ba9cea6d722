//! `max_queued_per_tenant`: a tenant's jobs queued, running or stopping count against it; a job
//! that ends for good (succeeded, failed, cancelled) frees its place; the count survives a
//! restart. (The daemon keeps the count per tenant rather than counting every job at each
//! submission.)

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::job::{JobState, SubmitRequest};
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn try_submit(h: &Harness, tenant: &str) -> Result<u32, RequestError> {
    let request: SubmitRequest =
        serde_json::from_str(r#"{"command": "train", "max_retries": 0}"#).expect("valid request");
    h.daemon.submit(tenant, request).map(|s| s.id)
}

fn refused(h: &Harness, tenant: &str) -> bool {
    matches!(try_submit(h, tenant), Err(RequestError::TooMany(_)))
}

#[test]
fn the_queued_limit_counts_live_jobs_and_frees_a_place_when_one_ends_for_good() {
    let h = Harness::new(PolicyKind::Fifo, nodes("n", "a100", 1, 2), 1.0)
        .restart_with_settings(|s| s.max_queued_per_tenant = 3);
    let ids: Vec<u32> = (0..3)
        .map(|_| try_submit(&h, "t").expect("under the limit"))
        .collect();
    assert!(refused(&h, "t"), "three live jobs: the fourth is refused");
    let other = try_submit(&h, "u").expect("another tenant has its own count");
    h.daemon.cancel(other, Some("u")).expect("cancels");
    h.fake.set_work(ids[0], 5.0, 0);
    h.fake.set_work(ids[1], 5.0, 1);
    h.step_to(T0_MS);
    assert!(
        matches!(h.job(ids[0]).state, JobState::Running { .. })
            && matches!(h.job(ids[1]).state, JobState::Running { .. })
    );
    assert!(refused(&h, "t"), "running jobs count");
    // Cancelled while queued: a place frees.
    h.daemon.cancel(ids[2], Some("t")).expect("cancels");
    let fourth = try_submit(&h, "t").expect("a place was freed");
    assert!(refused(&h, "t"));
    // One run succeeds and one fails (no retries): two places free.
    h.step_to(T0_MS + 6_000);
    assert_eq!(
        (h.job(ids[0]).state, h.job(ids[1]).state),
        (JobState::Succeeded, JobState::Failed)
    );
    let fifth = try_submit(&h, "t").expect("a place was freed");
    h.step_to(T0_MS + 7_000);
    assert!(
        matches!(h.job(fourth).state, JobState::Running { .. })
            && matches!(h.job(fifth).state, JobState::Running { .. })
    );
    let sixth = try_submit(&h, "t").expect("two running, one queued");
    assert!(refused(&h, "t"));
    // Cancelled while running: the place frees once the run has ended.
    h.daemon.cancel(fourth, Some("t")).expect("cancels");
    h.step_to(T0_MS + 8_000);
    assert_eq!(h.job(fourth).state, JobState::Cancelled);
    try_submit(&h, "t").expect("a place was freed");
    assert!(refused(&h, "t"));
    // A restart counts again: still three live jobs (fifth, sixth and the last).
    let h = h.restart();
    assert!(refused(&h, "t"), "the count survives a restart");
    h.daemon.cancel(sixth, Some("t")).expect("cancels");
    assert!(refused(&h, "t"), "stopping still counts");
    h.step_to(T0_MS + 9_000);
    assert_eq!(h.job(sixth).state, JobState::Cancelled);
    try_submit(&h, "t").expect("a place was freed");
}
