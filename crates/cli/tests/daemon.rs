//! End-to-end tests of production mode: a real `arbiter serve` process, real job processes that
//! checkpoint on the preemption signal and resume, a daemon killed with SIGKILL and restarted,
//! tenant isolation, malformed submissions, and many concurrent submissions.

use arbiter_daemon::client::{Client, ClientError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A "training" job: counts steps, checkpoints the count on SIGTERM and exits 0, resumes from
/// the checkpoint, reports which GPUs it saw.
const TRAIN: &str = r#"
ckpt="$ARBITER_CHECKPOINT_DIR/step"
step=0
if [ -f "$ckpt" ]; then step=$(cat "$ckpt"); echo "resumed at $step"; fi
echo "gpus=$CUDA_VISIBLE_DEVICES run=$ARBITER_RUN"
trap 'echo $step > "$ckpt"; echo "checkpointed at $step"; exit 0' TERM
while [ "$step" -lt "$TOTAL" ]; do sleep "$STEP_S"; step=$((step + 1)); echo $step > "$ckpt.progress"; done
echo $step > "$ckpt"
echo "finished at $step"
"#;

struct Daemon {
    child: Child,
    url: String,
    data_dir: PathBuf,
}

impl Daemon {
    /// Starts `arbiter serve` on a port the OS picks; the daemon writes it to `daemon.addr`.
    fn start(data_dir: &Path, args: &[&str]) -> Daemon {
        let addr_file = data_dir.join("daemon.addr");
        let _ = std::fs::remove_file(&addr_file);
        let child = Command::new(env!("CARGO_BIN_EXE_arbiter"))
            .args(["serve", "--data-dir", data_dir.to_str().expect("utf-8"), "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("daemon starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let listen = loop {
            if let Ok(addr) = std::fs::read_to_string(&addr_file)
                && addr.ends_with('\n') {
                    break addr.trim().to_string();
                }
            assert!(Instant::now() < deadline, "daemon did not start listening");
            std::thread::sleep(Duration::from_millis(20));
        };
        Daemon { child, url: format!("http://{listen}"), data_dir: data_dir.to_path_buf() }
    }

    fn admin(&self) -> Client {
        let token = std::fs::read_to_string(self.data_dir.join("admin.token")).expect("admin token");
        Client::new(&self.url, &token)
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn submit(client: &Client, body: Value) -> u64 {
    client.post("/v1/jobs", &body).expect("accepted")["id"].as_u64().expect("id")
}

fn train(total: u32, step_s: f64, gpus: u32, expected_s: u64) -> Value {
    json!({
        "command": TRAIN, "gpus": gpus, "expected_run_time_s": expected_s, "grace_s": 10,
        "env": { "TOTAL": total.to_string(), "STEP_S": step_s.to_string() },
    })
}

fn state_of(client: &Client, id: u64) -> String {
    client.get(&format!("/v1/jobs/{id}")).expect("job")["state"]["state"].as_str().expect("state").to_string()
}

fn wait_for(what: &str, timeout_s: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn jobs_run_on_their_gpus_and_a_preempted_job_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path(), &["--gpus", "2xa100", "--policy", "srtf", "--round-s", "1"]);
    let admin = daemon.admin();
    // A long job on both GPUs...
    let long = submit(&admin, train(40, 0.1, 2, 1000));
    wait_for("the long job to make progress", 20, || {
        std::fs::read_to_string(dir.path().join(format!("checkpoints/{long}/step.progress"))).is_ok_and(|s| s.trim().parse::<u32>().unwrap_or(0) >= 3)
    });
    // ...is preempted by a much shorter one (SRTF), which runs and finishes...
    let short = submit(&admin, train(3, 0.1, 2, 5));
    wait_for("the short job to finish", 30, || state_of(&admin, short) == "succeeded");
    // ...and the long one resumes from its checkpoint and finishes.
    wait_for("the long job to finish", 60, || state_of(&admin, long) == "succeeded");
    let job = admin.get(&format!("/v1/jobs/{long}")).expect("job");
    assert_eq!(job["preemptions"], 1, "{job}");
    assert_eq!(job["runs"], 2);
    let log = admin.get_text(&format!("/v1/jobs/{long}/logs")).expect("logs");
    assert!(log.contains("gpus=0,1 run=1"), "{log}");
    assert!(log.contains("checkpointed at"), "{log}");
    let resumed: u32 = log.lines().find_map(|l| l.strip_prefix("resumed at ")).and_then(|n| n.trim().parse().ok()).expect("resumed");
    assert!(resumed >= 3, "resumed from its checkpoint, not from 0: {log}");
    assert!(log.contains("finished at 40"), "{log}");
    let short_log = admin.get_text(&format!("/v1/jobs/{short}/logs")).expect("logs");
    assert!(short_log.contains("gpus=0,1"), "{short_log}");
    // The history records every transition.
    let states: Vec<&str> = job["history"].as_array().expect("history").iter().filter_map(|t| t["to"].as_str()).collect();
    assert_eq!(states, vec!["queued", "running", "stopping", "queued", "running", "succeeded"]);
}

#[test]
fn a_daemon_killed_with_sigkill_loses_nothing_and_readopts_running_jobs() {
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = Daemon::start(dir.path(), &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"]);
    let admin = daemon.admin();
    let running = submit(&admin, train(30, 0.1, 1, 10));
    let queued = submit(&admin, train(2, 0.05, 1, 10));
    wait_for("the first job to run", 20, || state_of(&admin, running) == "running");
    daemon.kill9();
    std::thread::sleep(Duration::from_millis(300));
    let daemon = Daemon::start(dir.path(), &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"]);
    let admin = daemon.admin();
    // The running job was re-adopted (not restarted): it finishes in its first run.
    wait_for("the re-adopted job to finish", 30, || state_of(&admin, running) == "succeeded");
    let job = admin.get(&format!("/v1/jobs/{running}")).expect("job");
    assert_eq!(job["runs"], 1, "{job}");
    assert!(job["history"].as_array().expect("history").iter().any(|t| t["why"].as_str().is_some_and(|w| w.contains("re-adopted"))));
    // The queued one was kept and runs after it.
    wait_for("the queued job to finish", 30, || state_of(&admin, queued) == "succeeded");
}

#[test]
fn tenants_are_isolated_and_bad_submissions_name_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path(), &["--gpus", "2xa100"]);
    let admin = daemon.admin();
    let token_a = admin.post("/v1/tenants", &json!({ "name": "team-a", "weight": 2 })).expect("created")["token"].as_str().expect("token").to_string();
    let token_b = admin.post("/v1/tenants", &json!({ "name": "team-b" })).expect("created")["token"].as_str().expect("token").to_string();
    let (a, b) = (Client::new(&daemon.url, &token_a), Client::new(&daemon.url, &token_b));
    let id = submit(&a, json!({ "command": "sleep 30", "grace_s": 1 }));
    let status = |r: Result<Value, ClientError>| match r {
        Err(ClientError::Status { status, message }) => (status, message),
        other => panic!("expected an error status, got {other:?}"),
    };
    assert_eq!(status(b.get(&format!("/v1/jobs/{id}"))).0, 403);
    assert_eq!(status(b.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))).0, 403);
    assert!(matches!(b.get_text(&format!("/v1/jobs/{id}/logs")), Err(ClientError::Status { status: 403, .. })));
    assert_eq!(b.get("/v1/jobs").expect("list")["jobs"].as_array().expect("jobs").len(), 0, "team-b sees none of team-a's jobs");
    assert_eq!(a.get("/v1/jobs").expect("list")["jobs"].as_array().expect("jobs").len(), 1);
    assert_eq!(status(a.get("/v1/tenants")).0, 403, "admin only");
    assert_eq!(status(Client::new(&daemon.url, "wrong").get("/v1/jobs")).0, 401);
    // Malformed submissions: 400 naming the field.
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": 0 })));
    assert_eq!((code, message.starts_with("gpus:")), (400, true), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": 3 })));
    assert!(code == 400 && message.contains("gpus"), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpu": 1 })));
    assert!(code == 400 && message.contains("gpu"), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": "two" })));
    assert!(code == 400 && message.contains("gpus"), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "checkpoint_signal": "KILL" })));
    assert!(code == 400 && message.starts_with("checkpoint_signal"), "{message}");
    let (code, _) = status(a.post("/v1/jobs", &json!({ "command": "x".repeat(100_000) })));
    assert_eq!(code, 413);
    // The owner can cancel.
    a.post(&format!("/v1/jobs/{id}/cancel"), &json!({})).expect("cancels");
    wait_for("the cancelled job to end", 20, || state_of(&a, id) == "cancelled");
    // GPU quotas: team-q may hold one GPU; its second job waits although a GPU is free.
    let token_q = admin.post("/v1/tenants", &json!({ "name": "team-q", "gpu_quota": 1 })).expect("created")["token"].as_str().expect("token").to_string();
    let q = Client::new(&daemon.url, &token_q);
    let first = submit(&q, json!({ "command": "sleep 20", "grace_s": 1 }));
    let second = submit(&q, json!({ "command": "sleep 20", "grace_s": 1 }));
    wait_for("team-q's first job to run", 20, || state_of(&q, first) == "running");
    wait_for("the quota to be reported", 20, || {
        q.get(&format!("/v1/jobs/{second}")).expect("job")["pending_reason"].as_str().is_some_and(|r| r.contains("quota"))
    });
    assert_eq!(state_of(&q, second), "queued");
    q.post(&format!("/v1/jobs/{first}/cancel"), &json!({})).expect("cancels");
    wait_for("the second job to start within the quota", 20, || state_of(&q, second) == "running");
    q.post(&format!("/v1/jobs/{second}/cancel"), &json!({})).expect("cancels");
    // OpenAPI and metrics are served.
    let openapi = admin.get("/v1/openapi.json").expect("openapi");
    assert!(openapi["paths"]["/v1/jobs"]["post"].is_object());
    let metrics = admin.get_text("/metrics").expect("metrics");
    let cancelled: u32 = metrics.lines().find_map(|l| l.strip_prefix("arbiter_jobs{state=\"cancelled\"} ")).and_then(|v| v.parse().ok()).expect("metric");
    assert!(cancelled >= 1, "{metrics}");
    assert!(metrics.contains("arbiter_submissions_total 3"), "{metrics}");
}

#[test]
fn a_thousand_concurrent_submissions_are_all_accepted_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path(), &["--gpus", "1xa100", "--policy", "fifo"]);
    let admin = daemon.admin();
    // Hold the only GPU so that every submission stays queued.
    let blocker = submit(&admin, json!({ "command": "sleep 20", "grace_s": 1 }));
    wait_for("the blocker to run", 20, || state_of(&admin, blocker) == "running");
    let url = daemon.url.clone();
    let token = std::fs::read_to_string(dir.path().join("admin.token")).expect("token");
    let threads: Vec<_> = (0..20)
        .map(|_| {
            let (url, token) = (url.clone(), token.clone());
            std::thread::spawn(move || {
                let client = Client::new(&url, &token);
                (0..50).map(|_| submit(&client, json!({ "command": "true" }))).collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut ids: Vec<u64> = threads.into_iter().flat_map(|t| t.join().expect("thread")).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1000, "every submission got its own id");
    let jobs = admin.get("/v1/jobs?state=queued").expect("list")["jobs"].as_array().expect("jobs").len();
    assert_eq!(jobs, 1000);
}

#[test]
fn failing_runs_are_retried_then_failed_with_their_exit_code() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(dir.path(), &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let id = submit(&admin, json!({ "command": "echo attempt $ARBITER_RUN; exit 3", "max_retries": 1 }));
    wait_for("the job to fail for good", 30, || state_of(&admin, id) == "failed");
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!((job["runs"].as_u64(), job["failures"].as_u64(), job["exit_code"].as_i64()), (Some(2), Some(2), Some(3)), "{job}");
    let log = admin.get_text(&format!("/v1/jobs/{id}/logs")).expect("logs");
    assert_eq!(log, "attempt 1\nattempt 2\n");
    // A run over its time limit is stopped and fails.
    let slow = submit(&admin, json!({ "command": "sleep 30", "max_run_time_s": 1, "grace_s": 1 }));
    wait_for("the slow job to time out", 30, || state_of(&admin, slow) == "failed");
}
