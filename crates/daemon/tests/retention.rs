//! What a tenant keeps (issue 26, item 4): ended jobs are pruned by count, size and age, per
//! tenant; submissions are rate-limited; a page of the job list is bounded in bytes.

mod loop_harness;

use arbiter_daemon::daemon::RequestError;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::records::retention::Retention;
use arbiter_policy::PolicyKind;
use loop_harness::{Harness, T0_MS, nodes};

fn with_retention(retention: Retention) -> Harness {
    Harness::with_settings(PolicyKind::Fifo, nodes("n", "a100", 1, 4), 30.0, |s| {
        s.retention = retention
    })
}

/// A one-GPU job whose environment carries `env_bytes` of text.
fn job(env_bytes: usize) -> SubmitRequest {
    let mut request: SubmitRequest =
        serde_json::from_str(r#"{"command": "train", "gpus": 1}"#).expect("valid");
    if env_bytes > 0 {
        request.env.insert("PAYLOAD".into(), "x".repeat(env_bytes));
    }
    request
}

/// Submits `n` jobs for `tenant` and runs them to their end, one round each.
fn run_to_end(h: &Harness, tenant: &str, n: usize, env_bytes: usize, at_ms: &mut u64) -> Vec<u32> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = h
            .daemon
            .submit(tenant, job(env_bytes))
            .expect("accepted")
            .id;
        h.fake.set_work(id, 1.0, 0);
        ids.push(id);
    }
    for _ in 0..n {
        *at_ms += 2_000;
        h.step_to(*at_ms);
    }
    ids
}

fn on_record(h: &Harness, ids: &[u32]) -> Vec<u32> {
    ids.iter()
        .copied()
        .filter(|id| h.daemon.job(*id, None).is_ok())
        .collect()
}

#[test]
fn a_tenant_keeps_its_latest_ended_jobs_up_to_the_count_and_the_others_keep_theirs() {
    let h = with_retention(Retention {
        keep_finished_per_tenant: 5,
        submission_burst: u32::MAX,
        ..Retention::default()
    });
    let mut now = T0_MS;
    let theirs = run_to_end(&h, "b", 3, 0, &mut now);
    let mine = run_to_end(&h, "a", 20, 0, &mut now);
    assert!(
        mine.iter()
            .all(|id| h.daemon.job(*id, None).is_err() || h.job(*id).state.name() == "succeeded")
    );
    h.step_to(now + 1_000);
    assert_eq!(
        on_record(&h, &mine),
        mine[15..].to_vec(),
        "the five that ended last"
    );
    assert_eq!(
        on_record(&h, &theirs),
        theirs,
        "another tenant's jobs are its own business"
    );
    assert!(matches!(
        h.daemon.job(mine[0], None),
        Err(RequestError::NotFound(_))
    ));
    // The policy's view of a job is still that job's after others were pruned.
    let mut four: SubmitRequest =
        serde_json::from_str(r#"{"command": "train", "gpus": 4}"#).expect("valid");
    four.name = Some("four".into());
    let wide = h.daemon.submit("b", four).expect("accepted").id;
    h.step_to(now + 2_000);
    assert_eq!(
        h.job(wide).state.gpus().map(<[u32]>::len),
        Some(4),
        "{:?}",
        h.job(wide).state
    );
    // Pruned from the store too, and ids are never given out again.
    let h = h.restart();
    assert_eq!(on_record(&h, &mine), mine[15..].to_vec());
    let next = h.daemon.submit("a", job(0)).expect("accepted").id;
    assert_eq!(
        next,
        theirs.len() as u32 + mine.len() as u32 + 1,
        "the next id follows the last one given out"
    );
}

#[test]
fn large_records_are_pruned_by_size_and_old_ones_by_age() {
    let h = with_retention(Retention {
        keep_finished_bytes_per_tenant: 1 << 20,
        keep_finished_s: 3_600,
        submission_burst: u32::MAX,
        ..Retention::default()
    });
    let mut now = T0_MS;
    // 40 jobs of 60 KB: about 16 fit in 1 MiB.
    let big = run_to_end(&h, "a", 40, 60_000, &mut now);
    h.step_to(now + 1_000);
    let kept = on_record(&h, &big);
    assert!((10..=17).contains(&kept.len()), "{} kept", kept.len());
    assert_eq!(
        kept,
        big[big.len() - kept.len()..].to_vec(),
        "the latest ones"
    );
    let small = run_to_end(&h, "b", 3, 0, &mut now);
    assert_eq!(on_record(&h, &small), small);
    // Two hours later, all of them are too old.
    now += 2 * 3_600_000;
    h.step_to(now);
    assert!(on_record(&h, &big).is_empty() && on_record(&h, &small).is_empty());
}

#[test]
fn submissions_beyond_the_tenants_budget_are_refused_until_it_refills() {
    let h = with_retention(Retention {
        submissions_per_s: 1.0,
        submission_burst: 3,
        ..Retention::default()
    });
    for _ in 0..3 {
        h.daemon.submit("a", job(0)).expect("within the burst");
    }
    let refused = h.daemon.submit("a", job(0));
    assert!(
        matches!(&refused, Err(RequestError::TooMany(m)) if m.contains("submissions_per_s_per_tenant")),
        "{refused:?}"
    );
    h.daemon
        .submit("b", job(0))
        .expect("another tenant has its own budget");
    h.clock.set(T0_MS + 1_000);
    h.daemon
        .submit("a", job(0))
        .expect("refilled after a second");
    // A retry with the same idempotency key costs nothing: it creates nothing.
    let mut keyed = job(0);
    keyed.client_request_id = Some("k".into());
    h.clock.set(T0_MS + 2_000);
    let first = h.daemon.submit("a", keyed.clone()).expect("accepted").id;
    for _ in 0..5 {
        assert_eq!(
            h.daemon
                .submit("a", keyed.clone())
                .expect("the same job")
                .id,
            first
        );
    }
}

#[test]
fn a_page_of_the_job_list_is_bounded_in_bytes_and_the_next_page_follows() {
    let h = with_retention(Retention {
        submission_burst: u32::MAX,
        ..Retention::default()
    });
    let ids: Vec<u32> = (0..100)
        .map(|_| h.daemon.submit("a", job(60_000)).expect("accepted").id)
        .collect();
    let (page, more) = h.daemon.jobs_page(Some("a"), None, None, 10_000, 1 << 20);
    assert!(
        more && (10..=17).contains(&page.len()),
        "{} jobs, more: {more}",
        page.len()
    );
    let (rest, _) = h
        .daemon
        .jobs_page(Some("a"), None, page.last().map(|j| j.id), 10_000, 1 << 20);
    assert_eq!(
        rest.first().map(|j| j.id),
        Some(page.len() as u32),
        "the next page starts where this one stopped"
    );
    // A single record larger than the budget still comes, alone.
    let (one, more) = h.daemon.jobs_page(Some("a"), None, None, 10_000, 10);
    assert_eq!((one.len(), more), (1, true));
    assert_eq!(ids.len(), 100);
}
