//! The adversarial suite: two tenants, one hostile, attacking through the API and from inside
//! its jobs (issue 9, items 1–3, 10, 16; the connection, log and query attacks of items 6, 9
//! and 16 are in `daemon_api.rs`). As root the daemon gives each tenant its own uid and the
//! attacks must fail for real; without root the daemon must say that tenants are not isolated
//! and refuse a second tenant unless that is acknowledged.

use crate::common::{
    Daemon, Options, checkpoint_dir, is_root, refused, state_of, submit, wait_for,
};
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// What the hostile job tries, each attempt's output prefixed with its name.
const HOSTILE: &str = r#"
area=$(dirname "$ARBITER_CHECKPOINT_DIR"); root=$(dirname "$area"); data=$(dirname "$root")
echo "uid=$(id -u)"
cat "$data/admin.token" 2>&1 | sed 's/^/token: /'
cat "$VICTIM_CKPT/secret" 2>&1 | sed 's/^/ckpt: /'
ls "$root/victim" 2>&1 | sed 's/^/area: /'
cat "$data/logs/$VICTIM_ID.log" 2>&1 | sed 's/^/log: /'
for p in /proc/[0-9]*; do cat "$p/environ" 2>/dev/null | tr '\0' '\n' | grep -a VICTIM_SECRET; done | sed 's/^/environ: /'
if cat "$data/arbiter.redb" > /dev/null 2>&1; then echo "store: READ"; else echo "store: denied"; fi
/bin/kill -s TERM -- "-$VICTIM_PGID" 2>&1 | sed 's/^/kill: /'
echo done
"#;

#[test]
fn a_tenants_job_cannot_reach_the_admin_token_or_another_tenants_files_environment_logs_or_processes()
 {
    if !is_root() {
        // Without root there is no isolation to attack; the daemon must say so (checked in
        // `without_the_privilege_to_switch_users_the_daemon_warns_and_serves_one_tenant`).
        let dir = tempfile::tempdir().expect("dir");
        let daemon = Daemon::start(&dir.path().join("data"), &["--gpus", "2xa100"]);
        let cluster = daemon.admin().get("/v1/cluster").expect("cluster");
        assert_eq!(cluster["tenants_isolated"], false, "{cluster}");
        assert!(
            daemon.stderr().contains("NOT isolated"),
            "{}",
            daemon.stderr()
        );
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let daemon = Daemon::start(&data, &["--gpus", "2xa100", "--round-s", "1"]);
    let (victim, hostile) = (daemon.tenant("victim"), daemon.tenant("hostile"));
    let victim_job = submit(
        &victim,
        json!({
            "command": "echo b-ckpt-secret > \"$ARBITER_CHECKPOINT_DIR/secret\"; echo b-log-secret; echo ready; sleep 60",
            "env": { "VICTIM_SECRET": "b-env-secret" }, "grace_s": 1,
        }),
    );
    wait_for("the victim's job to run", 20, || {
        victim
            .get_text(&format!("/v1/jobs/{victim_job}/logs"))
            .is_ok_and(|l| l.contains("ready"))
    });
    let victim_ckpt = checkpoint_dir(&victim, victim_job);
    let victim_pgid = daemon
        .admin()
        .get(&format!("/v1/jobs/{victim_job}"))
        .expect("job")["state"]["pid"]
        .as_u64()
        .expect("pid");
    let attack = submit(
        &hostile,
        json!({
            "command": HOSTILE,
            "env": { "VICTIM_CKPT": victim_ckpt.display().to_string(), "VICTIM_ID": victim_job.to_string(), "VICTIM_PGID": victim_pgid.to_string() },
        }),
    );
    wait_for("the attack to finish", 20, || {
        state_of(&hostile, attack) == "succeeded"
    });
    let log = hostile
        .get_text(&format!("/v1/jobs/{attack}/logs"))
        .expect("log");
    eprintln!("hostile job log:\n{log}");
    let admin_token = std::fs::read_to_string(data.join("admin.token")).expect("token");
    assert!(log.contains("done"), "{log}");
    assert!(
        !log.contains(admin_token.trim()),
        "the admin token leaked: {log}"
    );
    for secret in ["b-ckpt-secret", "b-log-secret", "b-env-secret"] {
        assert!(!log.contains(secret), "{secret} leaked: {log}");
    }
    assert!(log.contains("store: denied"), "{log}");
    assert!(
        log.contains("token: cat:")
            && log.contains("ckpt: cat:")
            && log.contains("area: ls:")
            && log.contains("log: cat:"),
        "each read is refused: {log}"
    );
    // Refused: another uid's group, or — in the run's own PID namespace, where the daemon is
    // root — a group that does not even exist there.
    assert!(
        log.contains("kill:") && (log.contains("not permitted") || log.contains("No such process")),
        "signalling the victim is refused: {log}"
    );
    // Each tenant runs as its own, non-root uid.
    let uid = |log: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix("uid="))
            .and_then(|u| u.trim().parse::<u32>().ok())
            .expect("uid")
    };
    let hostile_uid = uid(&log);
    let victim_uid = std::fs::metadata(&victim_ckpt)
        .expect("victim's checkpoint dir")
        .uid();
    assert!(
        hostile_uid != 0 && victim_uid != 0 && hostile_uid != victim_uid,
        "hostile {hostile_uid}, victim {victim_uid}"
    );
    // The victim's job survived the kill attempt.
    assert_eq!(state_of(&victim, victim_job), "running");
    // Modes: nothing private is world-readable; each tenant's area is its own.
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o711);
    for private in ["arbiter.redb", "admin.token", "lock", "store.id"] {
        assert_eq!(mode(&data.join(private)), 0o600, "{private}");
    }
    for private in ["logs", "runs"] {
        assert_eq!(mode(&data.join(private)), 0o700, "{private}");
    }
    assert_eq!(mode(&data.join(format!("logs/{victim_job}.log"))), 0o600);
    let area = victim_ckpt.parent().expect("area");
    assert_eq!(
        (mode(area), std::fs::metadata(area).expect("stat").uid()),
        (0o700, victim_uid)
    );
    assert_eq!(mode(&victim_ckpt), 0o700);
    victim
        .post(&format!("/v1/jobs/{victim_job}/cancel"), &json!({}))
        .expect("cancel");
}

#[test]
fn without_the_privilege_to_switch_users_the_daemon_warns_and_serves_one_tenant() {
    let dir = tempfile::tempdir().expect("dir");
    // As root, the daemon runs as `nobody`, which cannot switch users.
    let (data, uid) = crate::common::unprivileged_data_dir(dir.path());
    let daemon = Daemon::start_with(
        &data,
        Options {
            args: &["--gpus", "1xa100"],
            config: Some("# no allow_shared_identity\n"),
            uid,
        },
    );
    assert!(
        daemon.stderr().contains("WARNING") && daemon.stderr().contains("NOT isolated"),
        "{}",
        daemon.stderr()
    );
    let admin = daemon.admin();
    let cluster = admin.get("/v1/cluster").expect("cluster");
    assert_eq!(cluster["tenants_isolated"], false);
    assert!(
        cluster["tenant_isolation"]
            .as_str()
            .expect("text")
            .contains("NOT isolated"),
        "{cluster}"
    );
    admin
        .post("/v1/tenants", &json!({ "name": "first" }))
        .expect("one tenant is fine");
    let (status, message) = refused(admin.post("/v1/tenants", &json!({ "name": "second" })));
    assert!(
        status == 409 && message.contains("allow_shared_identity"),
        "{status} {message}"
    );
    drop(daemon);
    // Acknowledged: a second tenant is accepted (and the warning stays).
    let daemon = Daemon::start_with(
        &data,
        Options {
            args: &["--gpus", "1xa100"],
            config: Some("allow_shared_identity = true\n"),
            uid,
        },
    );
    daemon
        .admin()
        .post("/v1/tenants", &json!({ "name": "second" }))
        .expect("acknowledged");
    assert!(daemon.stderr().matches("NOT isolated").count() >= 2);
}

#[test]
fn checkpoint_dir_outside_the_tenants_area_is_refused_with_400() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let (a, b) = (daemon.tenant("a"), daemon.tenant("b"));
    let b_job = submit(
        &b,
        json!({ "command": "echo secret > \"$ARBITER_CHECKPOINT_DIR/secret\"" }),
    );
    wait_for("b's job", 20, || state_of(&b, b_job) == "succeeded");
    let b_ckpt = checkpoint_dir(&b, b_job);
    // a's own job, to learn (and create) its area; it plants a symlink to b's area there.
    let b_area = b_ckpt.parent().expect("b's area").to_path_buf();
    let a_job = submit(
        &a,
        json!({ "command": format!("ln -s {} \"$(dirname \"$ARBITER_CHECKPOINT_DIR\")/link\"", b_area.display()) }),
    );
    wait_for("a's job", 20, || state_of(&a, a_job) == "succeeded");
    let a_area = checkpoint_dir(&a, a_job)
        .parent()
        .expect("a's area")
        .to_path_buf();
    let root = a_area.parent().expect("root").to_path_buf();
    for (path, why) in [
        (b_ckpt.display().to_string(), "outside"),
        (
            format!(
                "{}/a/../b/{}",
                root.display(),
                b_ckpt.file_name().and_then(|n| n.to_str()).expect("name")
            ),
            "normalised",
        ),
        (format!("{}/link/stolen", a_area.display()), "symlink"),
        ("/etc/arbiter-owned".to_string(), "outside"),
        ("relative".to_string(), "absolute"),
    ] {
        let (status, message) = refused(a.post(
            "/v1/jobs",
            &json!({ "command": "true", "checkpoint_dir": path }),
        ));
        assert!(
            status == 400 && message.starts_with("checkpoint_dir") && message.contains(why),
            "{path}: {status} {message}"
        );
    }
    assert!(!Path::new("/etc/arbiter-owned").exists());
    // Inside its own area: accepted.
    submit(
        &a,
        json!({ "command": "true", "checkpoint_dir": format!("{}/mine", a_area.display()) }),
    );
}

#[test]
fn a_jobs_environment_cannot_replace_the_wrapper_and_owned_variables_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // A fake `sh` (and mkdir) that claim success.
    let fake = dir.path().join("fake-bin");
    std::fs::create_dir(&fake).expect("mkdir");
    for tool in ["sh", "mkdir", "chmod"] {
        std::fs::write(fake.join(tool), "#!/bin/sh\nexit 0\n").expect("write");
        std::fs::set_permissions(fake.join(tool), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let a = daemon.tenant("a");
    let id = submit(
        &a,
        json!({
            "command": "exit 3", "max_retries": 0,
            "env": { "PATH": fake.display().to_string(), "LD_PRELOAD": "/nonexistent/evil.so" },
        }),
    );
    wait_for("the job to end", 20, || {
        matches!(state_of(&a, id).as_str(), "failed" | "succeeded")
    });
    let job = a.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        (job["state"]["state"].as_str(), job["exit_code"].as_i64()),
        (Some("failed"), Some(3)),
        "{job}"
    );
    // Including the elastic run's own count and its previous one (a faked ARBITER_PREVIOUS_GPUS
    // would make a job think it was resized).
    for key in [
        "ARBITER_JOB_ID",
        "ARBITER_ANYTHING",
        "ARBITER_GPUS",
        "ARBITER_PREVIOUS_GPUS",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
    ] {
        let (status, message) = refused(a.post(
            "/v1/jobs",
            &json!({ "command": "true", "env": { key: "0" } }),
        ));
        assert!(
            status == 400 && message.starts_with("env") && message.contains(key),
            "{key}: {status} {message}"
        );
    }
    // Malformed or impossible elastic ranges and deadlines are refused, never stored.
    for bad in [
        json!({ "max_gpus": "2" }),
        json!({ "max_gpus": -1 }),
        json!({ "max_gpus": 4_294_967_295u64 }),
        json!({ "max_gpus": 2, "opportunistic": true }),
        json!({ "deadline_unix_s": -5 }),
    ] {
        let mut body = json!({ "command": "true" });
        for (k, v) in bad.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (status, message) = refused(a.post("/v1/jobs", &body));
        assert_eq!(status, 400, "{body}: {message}");
    }
    assert_eq!(
        a.get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "only the first job was stored"
    );
}

#[test]
fn never_runnable_submissions_and_reused_idempotency_keys_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&dir.path().join("data"), &["--gpus", "2xa100"]);
    let (a, b) = (daemon.tenant("a"), daemon.tenant("b"));
    for (body, field) in [
        (
            json!({ "command": "true", "gpu_types": ["h100"] }),
            "gpu_types",
        ),
        (json!({ "command": "true", "gpus": 3 }), "gpus"),
        (
            json!({ "command": "true", "working_dir": "/no/such/dir" }),
            "working_dir",
        ),
        (json!({ "command": "tr\u{0}ue" }), "command"),
        (
            json!({ "command": "true", "env": { "X": "a\u{0}b" } }),
            "env",
        ),
        (
            json!({ "command": "true", "max_run_time_s": u64::MAX }),
            "max_run_time_s",
        ),
        (
            json!({ "command": "true", "expected_run_time_s": 0 }),
            "expected_run_time_s",
        ),
        (json!({ "command": "true", "cpus": 100_000 }), "cpus"),
        (
            json!({ "command": "true", "max_retries": 1_000_000 }),
            "max_retries",
        ),
    ] {
        let (status, message) = refused(a.post("/v1/jobs", &body));
        assert!(
            status == 400 && message.starts_with(field),
            "{body}: {status} {message}"
        );
    }
    // One key, one job; the same key with another request is a conflict; keys are per tenant.
    let first = a
        .post(
            "/v1/jobs",
            &json!({ "command": "sleep 1", "client_request_id": "k1" }),
        )
        .expect("new");
    let again = a
        .post(
            "/v1/jobs",
            &json!({ "command": "sleep 1", "client_request_id": "k1" }),
        )
        .expect("duplicate");
    assert_eq!(
        (first["id"].clone(), again["duplicate"].clone()),
        (again["id"].clone(), json!(true))
    );
    let (status, _) = refused(a.post(
        "/v1/jobs",
        &json!({ "command": "sleep 2", "client_request_id": "k1" }),
    ));
    assert_eq!(status, 409);
    let other = b
        .post(
            "/v1/jobs",
            &json!({ "command": "sleep 1", "client_request_id": "k1" }),
        )
        .expect("b's own");
    assert_ne!(other["id"], first["id"]);
}

#[test]
fn a_job_cannot_join_another_runs_process_group_and_hold_its_gpus() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "2xa100", "--round-s", "1"],
    );
    let (victim, hostile) = (daemon.tenant("victim"), daemon.tenant("hostile"));
    let victim_job = submit(&victim, json!({ "command": "echo ready; sleep 2" }));
    wait_for("the victim's job to run", 20, || {
        victim
            .get_text(&format!("/v1/jobs/{victim_job}/logs"))
            .is_ok_and(|l| l.contains("ready"))
    });
    let pgid = daemon
        .admin()
        .get(&format!("/v1/jobs/{victim_job}"))
        .expect("job")["state"]["pid"]
        .as_u64()
        .expect("pid");
    let attack = submit(
        &hostile,
        json!({
            "command": "perl -e 'if (setpgrp(0, $ENV{VICTIM_PGID})) { print \"joined\\n\"; sleep 60 } else { print \"refused: $!\\n\" }'",
            "env": { "VICTIM_PGID": pgid.to_string() },
        }),
    );
    wait_for("the attack to end", 20, || {
        state_of(&hostile, attack) == "succeeded"
    });
    let log = hostile
        .get_text(&format!("/v1/jobs/{attack}/logs"))
        .expect("log");
    assert!(
        log.contains("refused"),
        "each run is its own session, so setpgid into another run fails: {log}"
    );
    // The victim ends on time and frees its GPU.
    wait_for("the victim's job to finish on time", 10, || {
        state_of(&victim, victim_job) == "succeeded"
    });
}

#[test]
fn a_process_that_leaves_its_run_is_killed_when_tenants_have_their_own_uids() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let hostile = daemon.tenant("hostile");
    let id = submit(
        &hostile,
        json!({ "command": "id -u; setsid sleep 300 </dev/null >/dev/null 2>&1 & sleep 0.2; echo escaped" }),
    );
    wait_for("the job to end", 20, || {
        state_of(&hostile, id) == "succeeded"
    });
    let log = hostile
        .get_text(&format!("/v1/jobs/{id}/logs"))
        .expect("log");
    assert!(log.contains("escaped"), "{log}");
    let uid: u32 = log
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("uid");
    let sleeping = || {
        std::fs::read_dir("/proc")
            .expect("proc")
            .flatten()
            .any(|e| {
                std::fs::metadata(e.path()).is_ok_and(|m| m.uid() == uid)
                    && std::fs::read_to_string(e.path().join("cmdline"))
                        .is_ok_and(|c| c.starts_with("sleep\x00300"))
            })
    };
    if is_root() {
        // The job's GPU went to others while its escaped process would still run: killed.
        wait_for("the escaped process to be killed", 10, || !sleeping());
    } else {
        // Without per-tenant uids nothing can tell an escaped process from the daemon's own: the
        // docs/security.md says so. Clean up.
        let _ = std::process::Command::new("pkill")
            .args(["-f", "^sleep 300$"])
            .status();
    }
}

/// Needs root (per-tenant uids); `.ci/run` runs it as root. Without root the chain would run on
/// as the test's own user.
#[test]
#[ignore = "needs root: per-tenant uids (run with --ignored as root; .ci/run does)"]
fn root_a_fork_chain_faster_than_a_process_scan_does_not_outlive_its_run() {
    assert!(is_root(), "needs root");
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Each generation notes itself, starts the next in a new session and exits at once: no
    // process lives long enough for a scan of /proc to find it reliably (nor for this test: it
    // watches the notes instead).
    let chain = dir.path().join("chain.sh");
    std::fs::write(&chain, "echo $$ >> \"$ARBITER_CHECKPOINT_DIR/generations\"\nsetsid /bin/sh \"$0\" </dev/null >/dev/null 2>&1 &\nexit 0\n").expect("write");
    std::fs::set_permissions(&chain, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let hostile = daemon.tenant("hostile");
    let id = submit(
        &hostile,
        json!({ "command": format!("/bin/sh {}; sleep 0.5; echo launched", chain.display()), "max_retries": 0 }),
    );
    wait_for("the job to end", 20, || {
        state_of(&hostile, id) == "succeeded"
    });
    let notes = checkpoint_dir(&hostile, id).join("generations");
    let generations = || {
        std::fs::read_to_string(&notes)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    assert!(
        generations() > 10,
        "the chain ran while the job did: {} generations",
        generations()
    );
    // Stopped for good: no new generation for a whole second.
    let mut last = generations();
    wait_for("the chain to be killed", 20, || {
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let now = generations();
        let stopped = now == last;
        last = now;
        stopped
    });
    // Stop it in any case (so that a failure does not leave it running): the next generation
    // reads an empty script.
    std::fs::write(&chain, "exit 0\n").expect("write");
    assert!(
        daemon
            .stderr()
            .contains("killing every process of a tenant with no live run"),
        "{}",
        daemon.stderr()
    );
}

#[test]
fn a_job_inherits_no_descriptor_beyond_stdin_stdout_and_stderr() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let a = daemon.tenant("a");
    // (Tested one number at a time: a glob over /proc/$$/fd would list its own directory's fd.)
    let id = submit(
        &a,
        json!({ "command": "i=0; while [ $i -lt 1024 ]; do [ -e /proc/$$/fd/$i ] && echo \"fd $i\"; i=$((i+1)); done" }),
    );
    wait_for("the job to end", 20, || state_of(&a, id) == "succeeded");
    let log = a.get_text(&format!("/v1/jobs/{id}/logs")).expect("log");
    let fds: Vec<&str> = log.lines().filter_map(|l| l.strip_prefix("fd ")).collect();
    assert_eq!(fds, vec!["0", "1", "2"], "{log}");
}
