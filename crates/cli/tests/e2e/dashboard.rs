//! The dashboard: the page and its assets are served from the binary with a strict policy, and
//! `/v1/dashboard` follows the API's rules — a tenant sees its own jobs, another tenant's only
//! as the GPUs they hold. (The browser tests drive the page itself: `tests/browser.rs`.)

use crate::common::{Daemon, Options, state_of, submit, wait_for};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;

/// `GET path` without a token; the whole response (headers and body).
fn get_raw(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("writes");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("reads");
    out
}

#[test]
fn the_page_is_served_whole_from_the_binary_with_a_strict_policy() {
    let dir = tempfile::tempdir().expect("dir");
    let config = "allow_shared_identity = true\n";
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "2xa100"],
            config: Some(config),
            uid: None,
        },
    );
    let mut weight = 0;
    for (path, kind) in [
        ("/", "text/html"),
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/app.css", "text/css"),
    ] {
        let response = get_raw(&daemon.addr, path);
        let (head, body) = response.split_once("\r\n\r\n").expect("a response");
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        assert!(
            head.contains(&format!("content-type: {kind}")),
            "{path}: {head}"
        );
        assert!(
            head.contains("content-security-policy: default-src 'none'; script-src 'self'"),
            "{path}: {head}"
        );
        assert!(
            head.contains("x-content-type-options: nosniff")
                && head.contains("x-frame-options: deny"),
            "{path}: {head}"
        );
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} names another origin"
        );
        weight += body.len();
    }
    assert!(weight < 300 * 1024, "page weight {weight} bytes");
    let page = get_raw(&daemon.addr, "/");
    assert!(
        !page.contains("<script>") && page.contains("<script src=\"/dashboard/app.js\""),
        "no inline script"
    );
    // The data needs a token.
    assert!(get_raw(&daemon.addr, "/v1/dashboard").starts_with("HTTP/1.1 401"));
    // The assets are embedded: no path reaches the data directory.
    let admin_token = daemon.admin_token();
    for path in [
        "/dashboard/../admin.token",
        "/dashboard/%2e%2e/admin.token",
        "/dashboard/..%2fadmin.token",
        "/admin.token",
        "/dashboard/",
    ] {
        let response = get_raw(&daemon.addr, path);
        assert!(
            response.starts_with("HTTP/1.1 404") || response.starts_with("HTTP/1.1 400"),
            "{path}: {response}"
        );
        assert!(
            !response.contains(&admin_token),
            "{path} served the admin token"
        );
    }
}

#[test]
fn a_dashboard_snapshot_shows_a_tenant_only_its_own_jobs() {
    let dir = tempfile::tempdir().expect("dir");
    let config = "allow_shared_identity = true\n";
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1"],
            config: Some(config),
            uid: None,
        },
    );
    let admin = daemon.admin();
    let alice = daemon.tenant("alice");
    let bob = daemon.tenant("bob");
    let a_running = submit(
        &alice,
        json!({ "command": "sleep 60", "name": "alice-secret-run", "gpus": 2, "grace_s": 1 }),
    );
    let b_running = submit(
        &bob,
        json!({ "command": "sleep 60", "name": "bob-run", "gpus": 2, "grace_s": 1 }),
    );
    wait_for("both jobs to run", 30, || {
        state_of(&alice, a_running) == "running" && state_of(&bob, b_running) == "running"
    });
    let a_queued = submit(
        &alice,
        json!({ "command": "true", "name": "alice-secret-queued", "gpus": 4 }),
    );
    wait_for("a pending reason", 30, || {
        alice.get(&format!("/v1/jobs/{a_queued}")).expect("job")["pending_reason"].is_string()
    });

    let all: Value = admin.get("/v1/dashboard").expect("admin snapshot");
    assert_eq!(all["viewer"], "admin");
    assert_eq!(
        (all["gpus_total"].as_u64(), all["gpus_held"].as_u64()),
        (Some(4), Some(4))
    );
    let holders: Vec<&Value> = all["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| n["jobs"].as_array().expect("jobs"))
        .collect();
    let ids: Vec<u64> = holders.iter().filter_map(|h| h["id"].as_u64()).collect();
    assert!(
        ids.contains(&a_running) && ids.contains(&b_running),
        "{all}"
    );
    assert_eq!(all["queue"][0]["id"].as_u64(), Some(a_queued));
    assert!(
        all["queue"][0]["pending_reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );
    assert_eq!(all["tenants"].as_array().map(Vec::len), Some(2));
    assert!(
        all["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["job"].as_u64() == Some(b_running) && e["to"] == "running")
    );

    let text = bob.get_text("/v1/dashboard").expect("bob's snapshot");
    let mine: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(mine["viewer"], "tenant bob");
    // Alice's job is GPUs held by another tenant: no id, name or tenant.
    for forbidden in [
        "alice",
        &format!("\"id\":{a_running}"),
        &format!("\"job\":{a_running}"),
        &format!("\"id\":{a_queued}"),
    ] {
        assert!(
            !text.contains(forbidden),
            "bob's snapshot shows `{forbidden}`: {text}"
        );
    }
    let holders: Vec<&Value> = mine["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|n| n["jobs"].as_array().expect("jobs"))
        .collect();
    assert_eq!(
        holders
            .iter()
            .filter(|h| h["other_tenant"] == true)
            .map(|h| h["gpus"].as_array().map_or(0, Vec::len))
            .sum::<usize>(),
        2
    );
    assert!(
        holders
            .iter()
            .any(|h| h["id"].as_u64() == Some(b_running) && h["name"] == "bob-run")
    );
    // His own entries first, then the others (by GPUs): Alice's job, older than his, is not
    // listed before it (its place would tell its id's range).
    let first_other = holders
        .iter()
        .position(|h| h["other_tenant"] == true)
        .expect("another tenant's entry");
    assert!(
        holders[..first_other].iter().all(|h| h["id"].is_number())
            && holders[first_other..]
                .iter()
                .all(|h| h["other_tenant"] == true),
        "{holders:?}"
    );
    assert_eq!(mine["queue"].as_array().map(Vec::len), Some(0));
    assert_eq!(
        (
            mine["queued_visible"].as_u64(),
            mine["queued_total"].as_u64()
        ),
        (Some(0), Some(1))
    );
    assert_eq!(
        mine["tenants"]
            .as_array()
            .map(|t| t.iter().map(|t| t["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("bob")])
    );
    assert!(
        mine["events"]
            .as_array()
            .expect("events")
            .iter()
            .all(|e| e["tenant"] == "bob")
    );
    // And a tenant cannot open another's job page.
    assert!(bob.get(&format!("/v1/jobs/{a_running}")).is_err());
}

#[test]
fn pending_reasons_names_and_headers_tell_a_tenant_nothing_of_another() {
    let dir = tempfile::tempdir().expect("dir");
    let config = "allow_shared_identity = true\n";
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1", "--policy", "srtf"],
            config: Some(config),
            uid: None,
        },
    );
    let (alice_token, alice) = daemon.tenant_with_token("alice");
    let (mallory_token, mallory) = daemon.tenant_with_token("mallory");
    let _ = alice_token;
    // Alice's long job is protected by its minimum run time; Mallory's short one waits for it.
    let protected = submit(
        &alice,
        json!({ "command": "sleep 120", "gpus": 4, "min_run_time_s": 300, "expected_run_time_s": 100000, "grace_s": 1 }),
    );
    wait_for("alice's job to run", 30, || {
        state_of(&alice, protected) == "running"
    });
    let waiting = submit(
        &mallory,
        json!({ "command": "true", "gpus": 4, "expected_run_time_s": 10 }),
    );
    wait_for("a pending reason", 30, || {
        mallory.get(&format!("/v1/jobs/{waiting}")).expect("job")["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("minimum run time"))
    });
    let reason = mallory.get(&format!("/v1/jobs/{waiting}")).expect("job")["pending_reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("another tenant's job")
            && !reason.contains(&format!("job {protected}"))
            && !reason.contains(" s left"),
        "{reason}"
    );

    // Names cannot carry control or direction characters (forged lines in the admin's view).
    for name in [
        "x\ny",
        "prod\u{202e}niart",
        "tab\there",
        "x\u{2028}y",
        "ar\u{61c}b",
        "zero\u{200b}width",
        "\u{feff}bom",
    ] {
        let refused = mallory.post("/v1/jobs", &json!({ "command": "true", "name": name }));
        assert!(refused.is_err(), "{name:?} accepted");
    }

    // Answers are not cached or sniffed; a tenant gets no fair share (it would tell the others'
    // total weight).
    let mut stream = TcpStream::connect(&daemon.addr).expect("connects");
    write!(stream, "GET /v1/dashboard HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {mallory_token}\r\nConnection: close\r\n\r\n").expect("writes");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("reads");
    let head = response
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        head.contains("cache-control: no-store")
            && head.contains("x-content-type-options: nosniff"),
        "{head}"
    );
    let body: Value = mallory.get("/v1/dashboard").expect("snapshot");
    assert!(body["tenants"][0]["share"].is_null(), "{body}");
    // srtf ignores weights: no share for the admin either (`fair_shares_...` below).
    assert!(daemon.admin().get("/v1/dashboard").expect("admin")["tenants"][0]["share"].is_null());
}

/// The README's quick start (issue 33): tenants `team-a` (weight 2) and `team-b` on 4 GPUs.
/// Returns the daemon and a client with team-b's token.
fn quick_start(
    dir: &std::path::Path,
    policy: &str,
) -> (Daemon, arbiter_daemon::api::client::Client) {
    let config = "allow_shared_identity = true\n";
    let daemon = Daemon::start_with(
        &dir.join(policy),
        Options {
            args: &["--gpus", "4xa100", "--policy", policy],
            config: Some(config),
            uid: None,
        },
    );
    let admin = daemon.admin();
    admin
        .post("/v1/tenants", &json!({ "name": "team-a", "weight": 2 }))
        .expect("team-a");
    let added = admin
        .post("/v1/tenants", &json!({ "name": "team-b" }))
        .expect("team-b");
    let team_b = arbiter_daemon::api::client::Client::new(
        &daemon.url,
        added["token"].as_str().expect("a token"),
    );
    (daemon, team_b)
}

#[test]
fn fair_shares_show_only_where_the_policy_uses_weights_and_tenants_get_their_own_colours() {
    let dir = tempfile::tempdir().expect("dir");
    let (daemon, team_b) = quick_start(dir.path(), "las");
    let las: Value = daemon.admin().get("/v1/dashboard").expect("admin snapshot");
    assert_eq!(las["weights_used"], false, "{las}");
    assert!(
        las["weights_note"]
            .as_str()
            .is_some_and(|n| n.starts_with("the policy (las) does not use weights")),
        "{las}"
    );
    let tenants = las["tenants"].as_array().expect("tenants");
    assert!(
        tenants.iter().all(|t| t["share"].is_null()),
        "a share from weights under las: {las}"
    );
    // team-a and team-b got near-identical purples from a hash of their names.
    let (a, b) = (&tenants[0]["color"], &tenants[1]["color"]);
    assert!(a.is_string() && b.is_string() && a != b, "{a} vs {b}");
    assert_eq!(las["tenant_colors"]["team-a"], *a);
    // A tenant sees its own colour, nothing of the others'.
    let own: Value = team_b.get("/v1/dashboard").expect("team-b's snapshot");
    assert_eq!(
        own["tenant_colors"]
            .as_object()
            .map(|c| c.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["team-b".to_string()]),
        "{own}"
    );
    drop(daemon);

    let (daemon, _) = quick_start(dir.path(), "hierarchical");
    let hierarchical: Value = daemon.admin().get("/v1/dashboard").expect("admin snapshot");
    assert_eq!(hierarchical["weights_used"], true);
    assert!(hierarchical["weights_note"].is_null());
    let share = hierarchical["tenants"][0]["share"]
        .as_f64()
        .expect("team-a's share");
    assert!((share - 2.0 / 3.0).abs() < 1e-9, "{hierarchical}");
}

/// A tree for the quota tests: `ml-org` (4 a100) over the siblings `atlas` (3 guaranteed, may
/// borrow 1, lends 3, over-quota weight 7: numbers no other group has) and `vega` (1, may
/// borrow 2). `atlas` sorts first, so a reason naming the first group names it.
fn set_quota_tree(admin: &arbiter_daemon::api::client::Client) {
    for (name, body) in [
        ("ml-org", json!({ "gpus": { "a100": { "guaranteed": 4 } } })),
        (
            "atlas",
            json!({ "parent": "ml-org", "over_quota_weight": 7, "gpus": { "a100": { "guaranteed": 3, "borrowing_limit": 1, "lending_limit": 3 } } }),
        ),
        (
            "vega",
            json!({ "parent": "ml-org", "gpus": { "a100": { "guaranteed": 1, "borrowing_limit": 2 } } }),
        ),
    ] {
        admin
            .put(&format!("/v1/quotas/{name}"), &body)
            .expect("a quota group");
    }
}

/// The quota section's groups as (name, depth).
fn quota_groups(snapshot: &Value) -> Vec<(String, u64)> {
    snapshot["quotas"]["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .map(|n| {
                    (
                        n["name"].as_str().unwrap_or_default().to_string(),
                        n["depth"].as_u64().unwrap_or(u64::MAX),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Group `name`'s entry in a snapshot's quota section.
fn quota_group<'a>(snapshot: &'a Value, name: &str) -> &'a Value {
    snapshot["quotas"]["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|n| n["name"] == name))
        .unwrap_or_else(|| panic!("no group {name}: {snapshot}"))
}

#[test]
fn the_quota_tree_shows_guaranteed_held_and_borrowed_and_a_tenant_only_its_own_path() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "4xa100", "--round-s", "1"],
            config: Some("allow_shared_identity = true\n"),
            uid: None,
        },
    );
    let admin = daemon.admin();
    let atlas = daemon.tenant("atlas");
    let vega = daemon.tenant("vega");
    let zed = daemon.tenant("zed");
    // No tree: no quota section.
    for client in [&admin, &vega] {
        let snapshot: Value = client.get("/v1/dashboard").expect("snapshot");
        assert!(snapshot["quotas"].is_null(), "{snapshot}");
    }
    set_quota_tree(&admin);

    // atlas runs on its 3 guaranteed GPUs and borrows vega's idle one.
    let jobs: Vec<u64> = (0..4)
        .map(|_| submit(&atlas, json!({ "command": "sleep 120", "grace_s": 1 })))
        .collect();
    wait_for("atlas's four jobs to run", 30, || {
        jobs.iter().all(|&j| state_of(&atlas, j) == "running")
    });
    wait_for("one of atlas's jobs shown as borrowing", 20, || {
        let all: Value = admin.get("/v1/dashboard").expect("snapshot");
        all["quotas"]["groups"].as_array().is_some_and(|g| {
            g.iter().any(|n| {
                n["name"] == "atlas" && n["borrowing_jobs"].as_array().is_some_and(|j| j.len() == 1)
            })
        })
    });
    let all: Value = admin.get("/v1/dashboard").expect("admin snapshot");
    let quotas = &all["quotas"];
    assert_eq!(
        (&quotas["enforced"], &quotas["error"], &quotas["scope"]),
        (&json!(true), &Value::Null, &json!("all")),
        "{quotas}"
    );
    // Each group right under its parent (siblings in the tree's order).
    let groups = quota_groups(&all);
    let at = groups
        .iter()
        .position(|(n, _)| n == "ml-org")
        .expect("ml-org");
    assert_eq!(groups[at].1, 0, "{groups:?}");
    let mut under: Vec<(String, u64)> = groups[at + 1..at + 3].to_vec();
    under.sort();
    assert_eq!(
        under,
        [("atlas".to_string(), 1), ("vega".to_string(), 1)],
        "{groups:?}"
    );
    let a100 = |name: &str| quota_group(&all, name)["gpus"]["a100"].clone();
    let (org, a, v) = (a100("ml-org"), a100("atlas"), a100("vega"));
    assert_eq!(
        (&org["guaranteed"], &org["held"], &org["borrowed"]),
        (&json!(4), &json!(4), &json!(0)),
        "{org}"
    );
    assert_eq!(
        (&a["guaranteed"], &a["held"], &a["borrowed"]),
        (&json!(3), &json!(4), &json!(1)),
        "{a}"
    );
    assert_eq!(
        (&a["borrowing_limit"], &a["lending_limit"]),
        (&json!(1), &json!(3))
    );
    assert!(a["fair_share"].is_number(), "{a}");
    assert_eq!(
        (&v["guaranteed"], &v["held"], &v["borrowed"]),
        (&json!(1), &json!(0), &json!(0)),
        "{v}"
    );
    let borrower = quota_group(&all, "atlas")["borrowing_jobs"][0]
        .as_u64()
        .expect("a job");
    assert!(jobs.contains(&borrower));

    // vega, atlas's sibling, sees its own group and its parent's totals: not atlas's name, quotas,
    // weight or jobs.
    let text = vega.get_text("/v1/dashboard").expect("vega's snapshot");
    assert!(
        !text.contains("atlas"),
        "vega's snapshot names atlas: {text}"
    );
    let mine: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        quota_groups(&mine),
        [("ml-org".to_string(), 0), ("vega".to_string(), 1)],
        "{mine}"
    );
    let quotas = &mine["quotas"];
    assert_eq!(quotas["scope"], "own path");
    assert!(
        quotas["reclaimed_last_round"].is_null(),
        "the cluster's reclaims"
    );
    for group in quotas["groups"].as_array().expect("groups") {
        let q = &group["gpus"]["a100"];
        let theirs = &all["quotas"]["groups"]
            .as_array()
            .and_then(|g| g.iter().find(|n| n["name"] == group["name"]))
            .expect("the admin's")["gpus"]["a100"];
        for field in [
            "guaranteed",
            "held",
            "borrowed",
            "borrowing_limit",
            "lending_limit",
        ] {
            assert_eq!(q[field], theirs[field], "{field} of {group}");
        }
        assert_ne!(group["over_quota_weight"].as_f64(), Some(7.0), "{group}");
        assert_ne!(q["lending_limit"], 3, "{group}");
        assert_ne!(q["guaranteed"], 3, "{group}");
        assert_eq!(group["borrowing_jobs"], json!([]), "{group}");
    }
    // A tenant the tree does not name sees the shared leaf of such tenants only.
    let text = zed.get_text("/v1/dashboard").expect("zed's snapshot");
    let theirs: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        quota_groups(&theirs),
        [("(other tenants)".to_string(), 0)],
        "{theirs}"
    );
    for name in ["atlas", "vega", "ml-org"] {
        assert!(!text.contains(name), "zed's snapshot names {name}: {text}");
    }

    // vega's job within its guaranteed quota reclaims atlas's borrower; vega's dashboard shows
    // its GPU held.
    let owner = submit(&vega, json!({ "command": "sleep 120", "grace_s": 1 }));
    wait_for("vega's job to run", 30, || {
        state_of(&vega, owner) == "running"
    });
    wait_for("vega's dashboard to show its GPU held", 20, || {
        let mine: Value = vega.get("/v1/dashboard").expect("snapshot");
        quota_group(&mine, "vega")["gpus"]["a100"]["held"] == 1
    });
    wait_for("one of atlas's jobs reclaimed", 20, || {
        jobs.iter()
            .filter(|&&j| state_of(&atlas, j) == "running")
            .count()
            == 3
    });
}

#[test]
fn a_quota_tree_that_does_not_fit_is_said_to_the_admin_with_why_and_to_a_tenant_without() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let options = |args| Options {
        args,
        config: Some("allow_shared_identity = true\n"),
        uid: None,
    };
    let daemon = Daemon::start_with(&data, options(&["--gpus", "4xa100"]));
    let (vega_token, _) = daemon.tenant_with_token("vega");
    daemon.tenant("atlas");
    set_quota_tree(&daemon.admin());
    drop(daemon);
    // The cluster changed under the stored tree: it names a GPU type the cluster has no more.
    let daemon = Daemon::start_with(&data, options(&["--gpus", "4xh100"]));
    let all: Value = daemon.admin().get("/v1/dashboard").expect("admin snapshot");
    let quotas = &all["quotas"];
    assert_eq!(quotas["enforced"], false, "{quotas}");
    let error = quotas["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("`atlas`") && error.contains("unknown GPU type `a100`"),
        "{error}"
    );
    // The admin sees the groups as defined, with no use.
    let mut groups = quota_groups(&all);
    groups.sort();
    assert_eq!(
        groups,
        [
            ("atlas".to_string(), 1),
            ("ml-org".to_string(), 0),
            ("vega".to_string(), 1)
        ]
    );
    assert_eq!(quota_groups(&all)[0].0, "ml-org", "the parent first");
    let atlas = &quota_group(&all, "atlas")["gpus"]["a100"];
    assert_eq!(atlas["guaranteed"], 3);
    assert!(atlas["held"].is_null());

    // vega is told the tree is not enforced, not the reason (it names its sibling).
    let vega = arbiter_daemon::api::client::Client::new(&daemon.url, &vega_token);
    let text = vega.get_text("/v1/dashboard").expect("vega's snapshot");
    assert!(!text.contains("atlas"), "{text}");
    let mine: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(mine["quotas"]["enforced"], false);
    assert!(mine["quotas"]["error"].is_string(), "{mine}");
    assert_eq!(mine["quotas"]["groups"], json!([]));
}
