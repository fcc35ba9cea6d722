//! Usage accounting and `/metrics` (issue 29, items 4 and 7) through the binary: runs recorded
//! when they end and kept across `kill -9`, `GET /v1/usage` and `arbiter usage` scoped to the
//! caller's tenant, bad `--since`/`--by` refused naming them, and `/metrics`' per-tenant series
//! readable with the admin or the scrape token only — never with a tenant's.

use crate::common::{Daemon, Options, cli, cli_ok, refused, state_of, submit, wait_for};
use arbiter_daemon::api::client::Client;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const SCRAPE_TOKEN: &str = "scrape-token-0123456789abcdef";

fn start(data_dir: &std::path::Path, metrics_token_file: &std::path::Path) -> Daemon {
    let config = format!(
        "allow_shared_identity = true\nmetrics_token_file = \"{}\"\n",
        metrics_token_file.display()
    );
    Daemon::start_with(
        data_dir,
        Options {
            args: &["--gpus", "2xa100", "--round-s", "1"],
            config: Some(&config),
            uid: None,
        },
    )
}

fn tenants_in(rows: &serde_json::Value) -> Vec<String> {
    rows["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["key"]["tenant"].as_str().expect("tenant").to_string())
        .collect()
}

#[test]
fn usage_is_recorded_scoped_to_its_tenant_kept_across_kill_9_and_metrics_leak_nothing_to_tenants() {
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("metrics.token");
    std::fs::write(&token_file, format!("{SCRAPE_TOKEN}\n")).expect("token");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let data = dir.path().join("data");
    let mut daemon = start(&data, &token_file);
    let (a_token, a) = daemon.tenant_with_token("team-a");
    let (_, b) = daemon.tenant_with_token("team-b");
    let ja = submit(&a, json!({ "command": "sleep 1", "user": "ann" }));
    let jb = submit(&b, json!({ "command": "sleep 1" }));
    wait_for("both jobs to end", 30, || {
        state_of(&a, ja) == "succeeded" && state_of(&b, jb) == "succeeded"
    });

    // A tenant sees its own usage; another tenant's is 403; the admin sees both.
    let mine = a.get("/v1/usage?since=1d&by=tenant,user").expect("usage");
    assert_eq!(tenants_in(&mine), ["team-a"], "{mine}");
    assert_eq!(mine["rows"][0]["key"]["user"], "ann");
    assert!(
        mine["rows"][0]["gpu_s"].as_f64().expect("gpu_s") >= 1.0,
        "{mine}"
    );
    assert_eq!(refused(a.get("/v1/usage?tenant=team-b")).0, 403);
    let all = daemon.admin().get("/v1/usage?since=all").expect("usage");
    assert_eq!(tenants_in(&all), ["team-a", "team-b"], "{all}");
    // Bad parameters: 400 naming them.
    for (query, field) in [
        ("since=7y", "since"),
        ("since=-1d", "since"),
        ("by=account", "by"),
        ("by=day,day", "by"),
    ] {
        let (status, message) = refused(a.get(&format!("/v1/usage?{query}")));
        assert!(
            status == 400 && message.starts_with(&format!("{field}:")),
            "{query}: {status} {message}"
        );
    }
    assert_eq!(
        refused(a.get("/v1/usage?limit=5")).0,
        400,
        "unknown parameters are refused"
    );

    // /metrics: counts for anyone; per-tenant series with the admin or the scrape token only.
    let series = "arbiter_tenant_gpu_seconds_total";
    let public = Client::new(&daemon.url, "")
        .get_text("/metrics")
        .expect("public metrics");
    assert!(
        public.contains("arbiter_jobs{state=\"succeeded\"} 2")
            && !public.contains(series)
            && !public.contains("team-a"),
        "{public}"
    );
    assert_eq!(
        refused(a.get_text("/metrics").map(serde_json::Value::String)).0,
        403,
        "a tenant token reads no per-tenant series"
    );
    assert_eq!(
        refused(
            Client::new(&daemon.url, "guessed")
                .get_text("/metrics")
                .map(serde_json::Value::String)
        )
        .0,
        401
    );
    for token in [daemon.admin_token(), SCRAPE_TOKEN.to_string()] {
        let private = Client::new(&daemon.url, &token)
            .get_text("/metrics")
            .expect("private metrics");
        assert!(
            private.contains(&format!("{series}{{tenant=\"team-a\",gpu_type=\"a100\"}}"))
                && private.contains("tenant=\"team-b\""),
            "{private}"
        );
    }
    // The scrape token only reads metrics.
    assert_eq!(
        refused(Client::new(&daemon.url, SCRAPE_TOKEN).get("/v1/usage")).0,
        401
    );

    // The command: a table, CSV; bad options name themselves before any request.
    let table = cli_ok(
        &daemon,
        &a_token,
        &["usage", "--since", "1d", "--by", "tenant,gpu-type"],
    );
    assert!(
        table.contains("team-a")
            && table.contains("a100")
            && table.contains("GPU-hours")
            && !table.contains("team-b"),
        "{table}"
    );
    let csv = cli_ok(
        &daemon,
        &daemon.admin_token(),
        &["usage", "--by", "tenant", "--csv"],
    );
    assert!(
        csv.starts_with("tenant,runs,running,gpu_s,cpu_s,memory_gib_s\n")
            && csv.lines().count() == 3,
        "{csv}"
    );
    for (args, words) in [
        (&["usage", "--since", "7y"][..], "--since"),
        (&["usage", "--by", "team"][..], "--by"),
    ] {
        let out = cli(&daemon, &a_token, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(words),
            "{args:?}: {stderr}"
        );
    }

    // kill -9, restart: the same usage, counted once.
    let before = all["total"]["gpu_s"].as_f64().expect("total");
    daemon.kill9();
    let daemon = start(&data, &token_file);
    let after = daemon.admin().get("/v1/usage?since=all").expect("usage");
    assert_eq!(after["total"]["gpu_s"].as_f64(), Some(before), "{after}");
    assert!(
        !daemon.stderr().contains(SCRAPE_TOKEN),
        "the scrape token is never logged"
    );
}

#[test]
fn a_scrape_token_file_others_can_read_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("metrics.token");
    std::fs::write(&token_file, format!("{SCRAPE_TOKEN}\n")).expect("token");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let config = format!(
        "allow_shared_identity = true\nmetrics_token_file = \"{}\"\n",
        token_file.display()
    );
    let stderr = Daemon::try_start(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "1xa100"],
            config: Some(&config),
            uid: None,
        },
    )
    .err()
    .expect("refused");
    assert!(
        stderr.contains("metrics_token_file")
            && stderr.contains("chmod 600")
            && !stderr.contains(SCRAPE_TOKEN),
        "{stderr}"
    );
}
