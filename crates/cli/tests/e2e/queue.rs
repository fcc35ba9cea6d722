//! The everyday features of a shared queue (issue 29) through the real daemon, its HTTP API and
//! the `arbiter` client: priority classes, dependencies and job arrays, with a hostile tenant
//! trying each new field on another tenant's jobs.

use crate::common::{Daemon, Options, cli, cli_ok, refused, state_of, submit, wait_for};
use serde_json::json;

/// Top-level keys only: the harness appends more after them.
const CLASSES: &str = r#"priority_classes = [{ name = "high", value = 100, tenants = ["a"] }, { name = "normal", value = 50 }]
"#;

fn start(dir: &std::path::Path) -> Daemon {
    let shared = if crate::common::is_root() {
        ""
    } else {
        "allow_shared_identity = true\n"
    };
    let config = format!("{shared}{CLASSES}");
    Daemon::start_with(
        &dir.join("data"),
        Options {
            args: &["--gpus", "2xa100", "--round-s", "1"],
            config: Some(&config),
            ..Default::default()
        },
    )
}

#[test]
fn priority_classes_dependencies_and_arrays_work_through_the_cli_and_refuse_another_tenants_jobs() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(dir.path());
    let (token_a, a) = daemon.tenant_with_token("a");
    let (token_b, b) = daemon.tenant_with_token("b");

    // Classes: listed for the caller, refused where not granted (400 naming the field).
    let cluster = cli_ok(&daemon, &token_b, &["cluster"]);
    assert!(
        cluster.contains("priority classes: normal (50, default)") && !cluster.contains("high"),
        "{cluster}"
    );
    let (status, message) = refused(b.post(
        "/v1/jobs",
        &json!({ "command": "true", "priority_class": "high" }),
    ));
    assert!(
        status == 400 && message.starts_with("priority_class") && message.contains("may not use"),
        "{status} {message}"
    );

    // A pipeline: the second stage waits for the first, by the CLI's --dependency.
    let first = submit(
        &a,
        json!({ "command": "sleep 2", "priority_class": "high" }),
    );
    let out = cli_ok(
        &daemon,
        &token_a,
        &[
            "submit",
            "--dependency",
            &format!("afterok:{first}"),
            "--",
            "echo",
            "second",
        ],
    );
    let second: u64 = out
        .trim()
        .trim_start_matches("submitted job ")
        .parse()
        .expect("an id");
    wait_for("the first stage to run", 20, || {
        state_of(&a, first) == "running"
    });
    // (A reason is written at the end of a round: the one after the first stage started.)
    let mut waiting = a.get(&format!("/v1/jobs/{second}")).expect("job");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while waiting["pending_reason"].is_null() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waiting = a.get(&format!("/v1/jobs/{second}")).expect("job");
    }
    assert_eq!(
        waiting["pending_reason"],
        json!(format!("waiting for job {first} (afterok)")),
        "{waiting}"
    );
    wait_for("the second stage to succeed", 30, || {
        state_of(&a, second) == "succeeded"
    });

    // Hostile: b names a's job in a dependency: not found, as a job that does not exist.
    for on in [first, 100_000] {
        let (status, message) = refused(b.post(
            "/v1/jobs",
            &json!({ "command": "true", "dependency": format!("afterany:{on}") }),
        ));
        assert_eq!(
            (status, message),
            (
                400,
                format!("dependency: job {on} not found (afterany:{on})")
            )
        );
    }

    // An array through the CLI: one line in `arbiter jobs`, every task in --json.
    let out = cli_ok(
        &daemon,
        &token_a,
        &[
            "submit",
            "--array",
            "0-5%2",
            "--",
            "sh",
            "-c",
            "echo task $ARBITER_ARRAY_TASK_ID of $ARBITER_ARRAY_JOB_ID; sleep 30",
        ],
    );
    assert!(
        out.starts_with("submitted array ") && out.contains("(6 tasks"),
        "{out}"
    );
    let array: u64 = out
        .trim_start_matches("submitted array ")
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .expect("an id");
    wait_for("two tasks to run", 20, || {
        a.get("/v1/jobs?state=running")
            .is_ok_and(|r| r["jobs"].as_array().is_some_and(|j| j.len() == 2))
    });
    let listed = cli_ok(&daemon, &token_a, &["jobs"]);
    assert!(
        listed.contains(&format!("{array}_[6]"))
            && listed.contains("2 running, 4 queued")
            && listed.contains("its limit (%2)"),
        "{listed}"
    );
    let task1 = a.get(&format!("/v1/jobs/{array}_1")).expect("task 1");
    assert_eq!(task1["array"]["index"], json!(1));
    wait_for("task 1's output", 20, || {
        a.get_text(&format!("/v1/jobs/{array}_1/logs"))
            .is_ok_and(|l| l.contains(&format!("task 1 of {array}")))
    });
    // Hostile: b cannot see, cancel or depend on a's array or its tasks.
    assert_eq!(
        refused(b.get(&format!("/v1/jobs/{array}_1"))).0,
        403,
        "as for any job of another tenant"
    );
    let b_cancel = cli(&daemon, &token_b, &["cancel", &array.to_string()]);
    assert!(!b_cancel.status.success());
    let (status, _) = refused(b.post(
        "/v1/jobs",
        &json!({ "command": "true", "dependency": format!("afterok:{array}_1") }),
    ));
    assert_eq!(status, 400);
    // The dashboard: queued tasks with their class; each tenant sees its own GPU-hours only.
    let dash = a.get("/v1/dashboard").expect("dashboard");
    assert!(
        dash["queue"]
            .as_array()
            .is_some_and(|q| q.iter().any(|j| j["priority_class"] == "normal")),
        "{}",
        dash["queue"]
    );
    let tenants = b.get("/v1/dashboard").expect("dashboard")["tenants"].clone();
    assert_eq!(
        tenants
            .as_array()
            .map(|t| t.iter().map(|x| x["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("b")]),
        "{tenants}"
    );
    assert!(tenants[0]["gpu_hours"].is_number());
    // a cancels the whole array by its id.
    let out = cli_ok(&daemon, &token_a, &["cancel", &array.to_string()]);
    assert!(
        out.contains(&format!("cancelling array {array}: 6 tasks")),
        "{out}"
    );
    wait_for("every task to be cancelled", 30, || {
        (0..6).all(|i| {
            a.get(&format!("/v1/jobs/{array}_{i}"))
                .is_ok_and(|j| j["state"]["state"] == "cancelled")
        })
    });
}

#[test]
fn reservations_are_the_admins_to_make_and_say_whose_only_to_that_tenant() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(dir.path());
    let (token_a, _) = daemon.tenant_with_token("a");
    let (token_b, b) = daemon.tenant_with_token("b");
    let admin = daemon.admin_token();
    let node = daemon.admin().get("/v1/cluster").expect("cluster")["nodes"][0]["name"]
        .as_str()
        .expect("a node")
        .to_string();
    // A tenant may not reserve.
    let (status, _) = refused(b.post("/v1/reservations", &json!({ "nodes": [node], "start_unix_s": 2_000_000_000, "duration_s": 3600, "reason": "mine" })));
    assert_eq!(status, 403);
    let out = cli(
        &daemon,
        &token_b,
        &[
            "reserve",
            "--nodes",
            &node,
            "--start",
            "+1h",
            "--duration",
            "1h",
            "--reason",
            "mine",
        ],
    );
    assert!(!out.status.success());
    // The admin reserves for a; b sees it as another tenant's, a as its own.
    let made = cli_ok(
        &daemon,
        &admin,
        &[
            "reserve",
            "--nodes",
            &node,
            "--start",
            "2030-01-01 08:00",
            "--duration",
            "4h",
            "--tenant",
            "a",
            "--reason",
            "a's deadline",
        ],
    );
    assert!(
        made.contains("2030-01-01 08:00:00 UTC for 4.0 h, for a: a's deadline"),
        "{made}"
    );
    let seen_by_b = cli_ok(&daemon, &token_b, &["reservations"]);
    assert!(
        seen_by_b.contains("for another tenant") && !seen_by_b.contains("for a:"),
        "{seen_by_b}"
    );
    assert!(cli_ok(&daemon, &token_a, &["reservations"]).contains("for a: a's deadline"));
    assert!(
        cli_ok(&daemon, &token_b, &["cluster"]).contains("reservation 1"),
        "arbiter cluster shows it"
    );
    let out = cli(&daemon, &token_b, &["reservations", "--delete", "1"]);
    assert!(!out.status.success(), "b cannot delete it");
    assert!(
        cli_ok(&daemon, &admin, &["reservations", "--delete", "1"])
            .contains("deleted reservation 1")
    );
    assert!(cli_ok(&daemon, &admin, &["reservations"]).contains("no reservations"));
}

#[test]
fn a_daemon_killed_during_an_array_submission_has_all_its_tasks_or_none_and_runs_none_twice() {
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = start(dir.path());
    let (token, _) = daemon.tenant_with_token("a");
    // The submission and the kill race: whichever wins, the store holds the whole array or
    // nothing of it (one transaction), never part.
    let url = daemon.url.clone();
    let submitter = std::thread::spawn(move || {
        let client = arbiter_daemon::api::client::Client::new(&url, &token);
        client.post(
            "/v1/jobs",
            &json!({ "command": "echo ran $ARBITER_ARRAY_TASK_ID", "array": "0-4999" }),
        )
    });
    std::thread::sleep(std::time::Duration::from_millis(30));
    daemon.kill9();
    let answered = submitter.join().expect("thread");
    let daemon = start(dir.path());
    let admin = daemon.admin();
    let jobs = admin.get("/v1/jobs?limit=1000").expect("jobs");
    let listed = jobs["jobs"].as_array().map_or(0, Vec::len);
    match answered {
        Ok(reply) => assert_eq!(
            reply["array_tasks"],
            json!(5000),
            "acknowledged: it was stored whole"
        ),
        Err(_) => assert!(
            listed == 0 || listed == 1000,
            "{listed} tasks: all (a full first page) or none"
        ),
    }
    if listed > 0 {
        let last = admin
            .get("/v1/jobs/0_4999")
            .expect("the last task is there too");
        assert_eq!(last["array"]["index"], json!(4999));
        // Each task that ran, ran once.
        wait_for("some tasks to succeed", 30, || {
            admin
                .get("/v1/jobs?state=succeeded&limit=1")
                .is_ok_and(|r| r["jobs"].as_array().is_some_and(|j| !j.is_empty()))
        });
        let done = admin
            .get("/v1/jobs?state=succeeded&limit=1000")
            .expect("jobs");
        for job in done["jobs"].as_array().into_iter().flatten() {
            assert_eq!(job["runs"], json!(1), "{job}");
        }
    }
}

#[test]
fn history_export_is_the_admins_holds_no_secret_and_replays_in_the_simulator() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(dir.path());
    let (token_a, a) = daemon.tenant_with_token("a");
    let secret = json!({ "command": "echo SECRET-IN-COMMAND; sleep 1", "env": { "API_KEY": "SECRET-IN-ENV" }, "name": "stage-1" });
    let first = submit(&a, secret);
    let second = submit(
        &a,
        json!({ "command": "true", "dependency": format!("afterok:{first}") }),
    );
    wait_for("both to succeed", 30, || {
        state_of(&a, first) == "succeeded" && state_of(&a, second) == "succeeded"
    });
    let refused = cli(&daemon, &token_a, &["history", "export"]);
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("admin"),
        "a tenant may not export"
    );
    let path = dir.path().join("hist.csv");
    let out = cli_ok(
        &daemon,
        &daemon.admin_token(),
        &[
            "history",
            "export",
            "--since",
            "1d",
            "--out",
            path.to_str().expect("utf-8"),
        ],
    );
    assert!(out.is_empty(), "the CSV went to the file: {out}");
    let csv = std::fs::read_to_string(&path).expect("written");
    assert!(
        !csv.contains("SECRET")
            && csv.contains("stage-1")
            && csv.contains(&format!("afterok:{first}")),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 3, "a header and the two jobs: {csv}");
    // The history replays in the simulator, the dependency kept.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_arbiter"))
        .args([
            "simulate",
            "--trace",
            path.to_str().expect("utf-8"),
            "--format",
            "native",
            "--policy",
            "fifo",
            "--cluster",
            "1x2",
            "--json",
        ])
        .output()
        .expect("runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn whatif_replays_an_exported_history_on_the_configurations_cluster_and_sets_it_beside_what_happened()
 {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = start(dir.path());
    let a = daemon.tenant("a");
    let b = daemon.tenant("b");
    // Six one-GPU jobs on two GPUs: four of them wait.
    let mut ids = Vec::new();
    for client in [&a, &b, &a, &b, &a, &b] {
        ids.push((
            client,
            submit(
                client,
                json!({ "command": "sleep 1", "expected_run_time_s": 1 }),
            ),
        ));
    }
    wait_for("every job to succeed", 60, || {
        ids.iter().all(|(c, id)| state_of(c, *id) == "succeeded")
    });
    // The history is the admin's: a tenant's token gets 403 from the API itself.
    let (status, _) = refused(a.get("/v1/history"));
    assert_eq!(status, 403, "a tenant may not read the cluster's history");
    let page = daemon
        .admin()
        .get("/v1/history?limit=4")
        .expect("the admin's");
    assert_eq!(
        (
            page["jobs"].as_array().map(Vec::len),
            page["next_after"].as_u64()
        ),
        (Some(4), page["jobs"][3]["id"].as_u64()),
        "{page}"
    );
    assert!(
        page["jobs"][0].get("command").is_none() && page["jobs"][0]["first_start_unix_s"].is_i64(),
        "{page}"
    );
    let history = dir.path().join("hist.csv");
    cli_ok(
        &daemon,
        &daemon.admin_token(),
        &[
            "history",
            "export",
            "--out",
            history.to_str().expect("utf-8"),
        ],
    );
    let csv = std::fs::read_to_string(&history).expect("written");
    assert!(csv.lines().next().is_some_and(|h| h.ends_with("actual_start_s,actual_end_s,progress_rate,gpu_types,array_id,array_index,array_max_running")), "{csv}");
    // The daemon's cluster and rounds, as its configuration says them.
    let config = dir.path().join("whatif.toml");
    std::fs::write(
        &config,
        format!("policy = \"fifo\"\ngpus = \"2xa100\"\nround_s = 1\n{CLASSES}"),
    )
    .expect("config");
    let whatif = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_arbiter"))
            .arg("whatif")
            .args(args)
            .output()
            .expect("runs")
    };
    let (h, c) = (
        history.to_str().expect("utf-8"),
        config.to_str().expect("utf-8"),
    );
    let jobs_csv = dir.path().join("jobs.csv");
    let out = whatif(&[
        h,
        "--config",
        c,
        "--json",
        "--jobs-csv",
        jobs_csv.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (
            result["jobs"].as_u64(),
            result["compared"].as_u64(),
            result["policy"].as_str()
        ),
        (Some(6), Some(6), Some("fifo")),
        "{result}"
    );
    assert!(
        result["cluster"]
            .as_str()
            .is_some_and(|c| c.contains("2 a100 GPUs") && c.contains("whatif.toml")),
        "{result}"
    );
    let (actual, simulated) = (
        result["actual"]["avg_jct_s"].as_f64().expect("a number"),
        result["simulated"]["avg_jct_s"].as_f64().expect("a number"),
    );
    assert!(
        actual >= 1.0 && simulated >= 1.0 && (simulated - actual).abs() <= actual,
        "actual {actual} s, simulated {simulated} s"
    );
    let tenants: Vec<&str> = result["by_tenant"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(tenants, ["a", "b"]);
    assert_eq!(
        std::fs::read_to_string(&jobs_csv)
            .expect("written")
            .lines()
            .count(),
        7,
        "a header and a line per job"
    );
    // The text: the same numbers, side by side; and again the same (deterministic).
    let text = whatif(&[h, "--config", c, "--policy", "las"]);
    let shown = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.status.success()
            && shown.contains("replayed under las")
            && shown.contains("avg JCT s")
            && shown.contains("by GPUs (averages):"),
        "{shown}"
    );
    assert_eq!(
        shown,
        String::from_utf8_lossy(&whatif(&[h, "--config", c, "--policy", "las"]).stdout)
    );
    // A scenario referencing the history compares the same way.
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, "name = \"s\"\npolicies = [\"fifo\", \"srtf\"]\n[[trace]]\nformat = \"native\"\npath = \"hist.csv\"\n[cluster]\nracks = 1\nnodes_per_rack = 1\ngpus_per_node = 2\n[[priority_classes]]\nname = \"high\"\nvalue = 100\n[[priority_classes]]\nname = \"normal\"\nvalue = 50\n").expect("scenario");
    let out = whatif(&["--scenario", scenario.to_str().expect("utf-8"), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let both: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        both.as_array().map(|r| r
            .iter()
            .filter_map(|c| c["policy"].as_str())
            .collect::<Vec<_>>()),
        Some(vec!["fifo", "srtf"])
    );
    // A malformed history is refused naming the file, the line and the field.
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let mut cells: Vec<String> = lines[2].split(',').map(str::to_string).collect();
    let end = cells.len() - 6;
    cells[end] = "soon".into();
    lines[2] = cells.join(",");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, lines.join("\n")).expect("written");
    let out = whatif(&[bad.to_str().expect("utf-8"), "--config", c]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("bad.csv:3: actual_end_s: `soon`"),
        "{e}"
    );
    let out = whatif(&[h, "--config", c, "--set", "trace.0.max_jobs=2"]);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--scenario"),
        "a trace key is the scenario's to set"
    );
    // The history is never overwritten by the per-job CSV.
    let out = whatif(&[h, "--config", c, "--jobs-csv", h]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("is the history itself"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&history).expect("kept"), csv);
    // A quota file's mistakes name it, its line and column; a tree that does not add up, it.
    let quotas = dir.path().join("q.toml");
    std::fs::write(
        &quotas,
        "[[quota_groups]]\nname = \"a\"\ngpus.a100 = { guaranteed = -1 }\n",
    )
    .expect("written");
    let q = quotas.to_str().expect("utf-8");
    let e = String::from_utf8_lossy(&whatif(&[h, "--config", c, "--quotas", q]).stderr).to_string();
    assert!(e.contains("q.toml: TOML parse error at line 3"), "{e}");
    std::fs::write(
        &quotas,
        "[[quota_groups]]\nname = \"a\"\nparent = \"b\"\n[[quota_groups]]\nname = \"b\"\nparent = \"a\"\n",
    )
    .expect("written");
    let e = String::from_utf8_lossy(&whatif(&[h, "--config", c, "--quotas", q]).stderr).to_string();
    assert!(
        e.contains("q.toml: [[quota_groups]]: quota groups form a cycle"),
        "{e}"
    );
}
