//! The quota tree (issue 30) through the real daemon, its HTTP API and the `arbiter` client:
//! only the admin changes it, a tree that does not add up is refused with the numbers, a limit
//! holds a job with words that say which, an owner's job reclaims a borrower's GPUs, and a
//! tenant sees its own path in the tree, never a sibling's.

use crate::common::{Daemon, Options, cli, cli_ok, refused, state_of, submit, wait_for};
use serde_json::json;

fn start(dir: &std::path::Path) -> Daemon {
    let shared = if crate::common::is_root() {
        ""
    } else {
        "allow_shared_identity = true\n"
    };
    Daemon::start_with(
        &dir.join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1"],
            config: Some(shared),
            ..Default::default()
        },
    )
}

#[test]
fn quotas_are_the_admins_hold_at_limits_reclaim_for_owners_and_show_each_tenant_its_own_path() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(dir.path());
    let (token_a, a) = daemon.tenant_with_token("a");
    let (token_b, b) = daemon.tenant_with_token("b");
    let admin = daemon.admin_token();

    // Only the admin sets quotas.
    let (status, _) = refused(b.put(
        "/v1/quotas/b",
        &json!({ "gpus": { "a100": { "guaranteed": 4 } } }),
    ));
    assert_eq!(status, 403);
    // The tree: ml-org (2 guaranteed) holds a; b is guaranteed 2 and may not borrow.
    cli_ok(
        &daemon,
        &admin,
        &[
            "quota",
            "set",
            "ml-org",
            "--gpu-type",
            "a100",
            "--guaranteed",
            "2",
        ],
    );
    cli_ok(
        &daemon,
        &admin,
        &[
            "quota",
            "set",
            "a",
            "--parent",
            "ml-org",
            "--gpu-type",
            "a100",
            "--guaranteed",
            "2",
        ],
    );
    cli_ok(
        &daemon,
        &admin,
        &[
            "quota",
            "set",
            "b",
            "--gpu-type",
            "a100",
            "--guaranteed",
            "2",
            "--borrowing-limit",
            "0",
        ],
    );
    // Children above their parent: refused with the numbers, nothing changed.
    let out = cli(
        &daemon,
        &admin,
        &[
            "quota",
            "set",
            "a",
            "--gpu-type",
            "a100",
            "--guaranteed",
            "3",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("a 3 add up to 3, above its parent `ml-org`'s 2"),
        "{err}"
    );
    // A tenant under a group that does not exist: refused, and no tenant made.
    let out = cli(
        &daemon,
        &admin,
        &["tenants", "add", "c", "--parent", "nope"],
    );
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("parent `nope` is not a quota group")
    );
    assert!(!cli_ok(&daemon, &admin, &["tenants"]).contains("\nc "));

    // b is held at its limit, and told so.
    let b_jobs: Vec<u64> = (0..3)
        .map(|_| submit(&b, json!({ "command": "sleep 120", "grace_s": 2 })))
        .collect();
    wait_for("two of b's jobs to run", 20, || {
        b_jobs
            .iter()
            .filter(|&&j| state_of(&b, j) == "running")
            .count()
            == 2
    });
    // (The reason is written at the end of a round: the third job may have come after the one
    // that started the first two.)
    let reason_of = || {
        let held = b.get(&format!("/v1/jobs/{}", b_jobs[2])).expect("job");
        held["pending_reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut reason = reason_of();
    while !reason.contains("borrowing limit") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        reason = reason_of();
    }
    assert!(
        reason.contains("b at its a100 borrowing limit (2: 2 guaranteed + 0 borrowed)"),
        "{reason}"
    );
    // The admin changes b's quota, its limit the same: the held job's words follow the tree
    // (the daemon keeps a hold's words between rounds, and forgets them with the tree).
    cli_ok(
        &daemon,
        &admin,
        &[
            "quota",
            "set",
            "b",
            "--gpu-type",
            "a100",
            "--guaranteed",
            "1",
            "--borrowing-limit",
            "1",
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let changed = "b at its a100 borrowing limit (2: 1 guaranteed + 1 borrowed)";
    while !reason.contains(changed) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        reason = reason_of();
    }
    assert!(reason.contains(changed), "{reason}");
    for j in &b_jobs {
        cli_ok(&daemon, &token_b, &["cancel", &j.to_string()]);
    }
    wait_for("b's jobs to end", 20, || {
        b_jobs.iter().all(|&j| state_of(&b, j) == "cancelled")
    });

    // a borrows b's idle quota: all four GPUs.
    let a_jobs: Vec<u64> = (0..4)
        .map(|_| submit(&a, json!({ "command": "sleep 120", "grace_s": 2 })))
        .collect();
    wait_for("a's four jobs to run", 20, || {
        a_jobs.iter().all(|&j| state_of(&a, j) == "running")
    });
    wait_for("two of a's jobs marked as borrowing", 10, || {
        a.get("/v1/quotas").is_ok_and(|q| {
            q["groups"].as_array().is_some_and(|g| {
                g.iter().any(|n| {
                    n["name"] == "a" && n["borrowing_jobs"].as_array().is_some_and(|j| j.len() == 2)
                })
            })
        })
    });
    // b's guaranteed job reclaims one of a's borrowers, within a round and the grace period.
    let owner = submit(&b, json!({ "command": "sleep 120", "grace_s": 2 }));
    wait_for("b's job to run", 30, || state_of(&b, owner) == "running");
    let running_a = a_jobs
        .iter()
        .filter(|&&j| state_of(&a, j) == "running")
        .count();
    assert_eq!(running_a, 3, "one borrower reclaimed");

    // Each tenant sees its own path: b sees b alone; a sees ml-org and a; the admin sees all.
    let b_view = cli_ok(&daemon, &token_b, &["quota", "--json"]);
    let b_view: serde_json::Value = serde_json::from_str(&b_view).expect("json");
    let names = |v: &serde_json::Value| {
        v["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .map(|n| n["name"].as_str().unwrap_or("").to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(names(&b_view), vec!["b"]);
    assert!(
        b_view["definitions"].as_array().is_some_and(Vec::is_empty),
        "no raw tree for a tenant"
    );
    let a_view: serde_json::Value =
        serde_json::from_str(&cli_ok(&daemon, &token_a, &["quota", "--json"])).expect("json");
    assert_eq!(names(&a_view), vec!["ml-org", "a"]);
    let text = cli_ok(&daemon, &admin, &["quota"]);
    assert!(
        text.contains("ml-org") && text.contains("  a ") && text.contains("b "),
        "{text}"
    );
    let exported = cli_ok(&daemon, &admin, &["quota", "export"]);
    assert!(
        exported.contains("[[quota_groups]]") && exported.contains("parent = \"ml-org\""),
        "{exported}"
    );
    // A group with children cannot go; a leaf can.
    let out = cli(&daemon, &admin, &["quota", "delete", "ml-org"]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("has children (a)")
    );
}
