//! End-to-end tests of production mode: a real `arbiter serve` process, real job processes that
//! checkpoint on the preemption signal and resume, a daemon killed with SIGKILL and restarted,
//! tenant isolation, malformed submissions, and many concurrent submissions.

use arbiter_daemon::api::client::{Client, ClientError};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

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

use crate::common::{
    Daemon, Options, checkpoint_dir, is_root, refused, state_of, submit, wait_for,
};

fn train(total: u32, step_s: f64, gpus: u32, expected_s: u64) -> Value {
    json!({
        "command": TRAIN, "gpus": gpus, "expected_run_time_s": expected_s, "grace_s": 10,
        "env": { "TOTAL": total.to_string(), "STEP_S": step_s.to_string() },
    })
}

#[test]
fn jobs_run_on_their_gpus_and_a_preempted_job_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "2xa100", "--policy", "srtf", "--round-s", "1"],
    );
    let admin = daemon.admin();
    // A long job on both GPUs...
    let long = submit(&admin, train(40, 0.1, 2, 1000));
    let long_dir = checkpoint_dir(&admin, long);
    wait_for("the long job to make progress", 20, || {
        std::fs::read_to_string(long_dir.join("step.progress"))
            .is_ok_and(|s| s.trim().parse::<u32>().unwrap_or(0) >= 3)
    });
    // ...is preempted by a much shorter one (SRTF), which runs and finishes...
    let short = submit(&admin, train(3, 0.1, 2, 5));
    wait_for("the short job to finish", 30, || {
        state_of(&admin, short) == "succeeded"
    });
    // ...and the long one resumes from its checkpoint and finishes.
    wait_for("the long job to finish", 60, || {
        state_of(&admin, long) == "succeeded"
    });
    let job = admin.get(&format!("/v1/jobs/{long}")).expect("job");
    assert_eq!(job["preemptions"], 1, "{job}");
    assert_eq!(job["runs"], 2);
    let log = admin
        .get_text(&format!("/v1/jobs/{long}/logs"))
        .expect("logs");
    assert!(log.contains("gpus=0,1 run=1"), "{log}");
    assert!(log.contains("checkpointed at"), "{log}");
    let resumed: u32 = log
        .lines()
        .find_map(|l| l.strip_prefix("resumed at "))
        .and_then(|n| n.trim().parse().ok())
        .expect("resumed");
    assert!(
        resumed >= 3,
        "resumed from its checkpoint, not from 0: {log}"
    );
    assert!(log.contains("finished at 40"), "{log}");
    let short_log = admin
        .get_text(&format!("/v1/jobs/{short}/logs"))
        .expect("logs");
    assert!(short_log.contains("gpus=0,1"), "{short_log}");
    // The history records every transition.
    let states: Vec<&str> = job["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|t| t["to"].as_str())
        .collect();
    assert_eq!(
        states,
        vec![
            "queued",
            "running",
            "stopping",
            "queued",
            "running",
            "succeeded"
        ]
    );
}

/// Issue 33, with real processes: a job its tenant's quota holds back neither blocks another
/// tenant's job beside free GPUs (las) nor gets other tenants' jobs preempted for it (srtf).
/// Every policy the daemon runs is held to the same in the daemon's loop tests (`quota.rs`).
#[test]
fn a_job_its_quota_holds_back_blocks_no_other_tenant_and_preempts_nobody() {
    for policy in ["las", "srtf"] {
        let dir = tempfile::tempdir().expect("dir");
        let daemon = Daemon::start(
            &dir.path().join("data"),
            &["--gpus", "4xa100", "--policy", policy, "--round-s", "1"],
        );
        let admin = daemon.admin();
        let token = |name: &str| {
            admin
                .post("/v1/tenants", &json!({ "name": name }))
                .expect("created")["token"]
                .as_str()
                .expect("token")
                .to_string()
        };
        let (a, b) = (
            Client::new(&daemon.url, &token("team-a")),
            Client::new(&daemon.url, &token("team-b")),
        );
        let quota = |q: u32| {
            admin
                .patch("/v1/tenants/team-a", &json!({ "gpu_quota": q }))
                .expect("updated")["held_by_quota"]
                .clone()
        };
        let pending = |c: &Client, id: u64| {
            c.get(&format!("/v1/jobs/{id}")).expect("job")["pending_reason"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        // A 4-GPU job queued behind a full cluster, then its tenant's quota lowered to 2.
        let full = submit(
            &b,
            json!({ "command": "sleep 60", "gpus": 4, "grace_s": 1 }),
        );
        wait_for("team-b's job to fill the cluster", 20, || {
            state_of(&b, full) == "running"
        });
        let big = submit(
            &a,
            json!({ "command": "sleep 60", "gpus": 4, "grace_s": 1 }),
        );
        assert_eq!(
            quota(2),
            json!([big]),
            "{policy}: the admin is told which queued jobs the new quota holds"
        );
        b.post(&format!("/v1/jobs/{full}/cancel"), &json!({}))
            .expect("cancels");
        let small = submit(
            &b,
            json!({ "command": "sleep 60", "gpus": 1, "grace_s": 1 }),
        );
        wait_for(
            "team-b's 1-GPU job to start beside the held job",
            20,
            || state_of(&b, small) == "running",
        );
        assert!(
            pending(&a, big).contains("held until the quota is raised"),
            "{policy}: {}",
            pending(&a, big)
        );
        assert_eq!(
            refused(a.post("/v1/jobs", &json!({ "command": "true", "gpus": 4 }))).0,
            400,
            "{policy}"
        );
        a.post(&format!("/v1/jobs/{big}/cancel"), &json!({}))
            .expect("cancels");
        // team-a at its quota submits a short job: team-b's running jobs are left alone.
        let own = submit(
            &a,
            json!({ "command": "sleep 60", "gpus": 2, "expected_run_time_s": 60, "grace_s": 1 }),
        );
        wait_for("team-a's job to run", 20, || state_of(&a, own) == "running");
        let short = submit(
            &a,
            json!({ "command": "true", "gpus": 2, "expected_run_time_s": 1, "grace_s": 1 }),
        );
        wait_for("the short job to say its quota holds it", 20, || {
            pending(&a, short).contains("at its GPU quota")
        });
        std::thread::sleep(Duration::from_secs(3));
        let small_job = b.get(&format!("/v1/jobs/{small}")).expect("job");
        assert_eq!(
            (
                small_job["state"]["state"].as_str(),
                small_job["runs"].as_u64()
            ),
            (Some("running"), Some(1)),
            "{policy}: {small_job}"
        );
        assert_eq!(state_of(&a, short), "queued", "{policy}");
        let metrics = admin.get_text("/metrics").expect("metrics");
        assert!(
            metrics.contains("arbiter_preemptions_total 0"),
            "{policy}: {metrics}"
        );
    }
}

#[test]
fn a_daemon_killed_with_sigkill_loses_nothing_and_readopts_running_jobs() {
    let dir = tempfile::tempdir().expect("dir");
    let mut daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let running = submit(&admin, train(30, 0.1, 1, 10));
    let queued = submit(&admin, train(2, 0.05, 1, 10));
    wait_for("the first job to run", 20, || {
        state_of(&admin, running) == "running"
    });
    daemon.kill9();
    std::thread::sleep(Duration::from_millis(300));
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"],
    );
    let admin = daemon.admin();
    // The running job was re-adopted (not restarted): it finishes in its first run.
    wait_for("the re-adopted job to finish", 30, || {
        state_of(&admin, running) == "succeeded"
    });
    let job = admin.get(&format!("/v1/jobs/{running}")).expect("job");
    assert_eq!(job["runs"], 1, "{job}");
    assert!(
        job["history"]
            .as_array()
            .expect("history")
            .iter()
            .any(|t| t["why"].as_str().is_some_and(|w| w.contains("re-adopted")))
    );
    // The queued one was kept and runs after it.
    wait_for("the queued job to finish", 30, || {
        state_of(&admin, queued) == "succeeded"
    });
}

#[test]
fn tenants_are_isolated_and_bad_submissions_name_the_field() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(&dir.path().join("data"), &["--gpus", "2xa100"]);
    let admin = daemon.admin();
    let token_a = admin
        .post("/v1/tenants", &json!({ "name": "team-a", "weight": 2 }))
        .expect("created")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let token_b = admin
        .post("/v1/tenants", &json!({ "name": "team-b" }))
        .expect("created")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let (a, b) = (
        Client::new(&daemon.url, &token_a),
        Client::new(&daemon.url, &token_b),
    );
    let id = submit(&a, json!({ "command": "sleep 30", "grace_s": 1 }));
    let status = refused;
    assert_eq!(status(b.get(&format!("/v1/jobs/{id}"))).0, 403);
    assert_eq!(
        status(b.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))).0,
        403
    );
    assert!(matches!(
        b.get_text(&format!("/v1/jobs/{id}/logs")),
        Err(ClientError::Status { status: 403, .. })
    ));
    assert_eq!(
        b.get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .expect("jobs")
            .len(),
        0,
        "team-b sees none of team-a's jobs"
    );
    assert_eq!(
        a.get("/v1/jobs").expect("list")["jobs"]
            .as_array()
            .expect("jobs")
            .len(),
        1
    );
    assert_eq!(status(a.get("/v1/tenants")).0, 403, "admin only");
    assert_eq!(
        status(Client::new(&daemon.url, "wrong").get("/v1/jobs")).0,
        401
    );
    // Malformed submissions: 400 naming the field.
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": 0 })));
    assert_eq!(
        (code, message.starts_with("gpus:")),
        (400, true),
        "{message}"
    );
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": 3 })));
    assert!(code == 400 && message.contains("gpus"), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpu": 1 })));
    assert!(code == 400 && message.contains("gpu"), "{message}");
    let (code, message) = status(a.post("/v1/jobs", &json!({ "command": "true", "gpus": "two" })));
    assert!(code == 400 && message.contains("gpus"), "{message}");
    let (code, message) = status(a.post(
        "/v1/jobs",
        &json!({ "command": "true", "checkpoint_signal": "KILL" }),
    ));
    assert!(
        code == 400 && message.starts_with("checkpoint_signal"),
        "{message}"
    );
    let (code, _) = status(a.post("/v1/jobs", &json!({ "command": "x".repeat(100_000) })));
    assert_eq!(code, 413);
    // The owner can cancel.
    a.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .expect("cancels");
    wait_for("the cancelled job to end", 20, || {
        state_of(&a, id) == "cancelled"
    });
    // GPU quotas: team-q may hold one GPU; its second job waits although a GPU is free.
    let token_q = admin
        .post("/v1/tenants", &json!({ "name": "team-q", "gpu_quota": 1 }))
        .expect("created")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let q = Client::new(&daemon.url, &token_q);
    let first = submit(&q, json!({ "command": "sleep 20", "grace_s": 1 }));
    let second = submit(&q, json!({ "command": "sleep 20", "grace_s": 1 }));
    wait_for("team-q's first job to run", 20, || {
        state_of(&q, first) == "running"
    });
    wait_for("the quota to be reported", 20, || {
        q.get(&format!("/v1/jobs/{second}")).expect("job")["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("quota"))
    });
    assert_eq!(state_of(&q, second), "queued");
    q.post(&format!("/v1/jobs/{first}/cancel"), &json!({}))
        .expect("cancels");
    wait_for("the second job to start within the quota", 20, || {
        state_of(&q, second) == "running"
    });
    q.post(&format!("/v1/jobs/{second}/cancel"), &json!({}))
        .expect("cancels");
    // What the quota can never allow is refused at once, naming it.
    let (code, message) = status(q.post("/v1/jobs", &json!({ "command": "true", "gpus": 2 })));
    assert!(
        code == 400 && message.starts_with("gpus:") && message.contains("quota is 1"),
        "{message}"
    );
    // OpenAPI and metrics are served.
    let openapi = admin.get("/v1/openapi.json").expect("openapi");
    assert!(openapi["paths"]["/v1/jobs"]["post"].is_object());
    let metrics = admin.get_text("/metrics").expect("metrics");
    let cancelled: u32 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("arbiter_jobs{state=\"cancelled\"} "))
        .and_then(|v| v.parse().ok())
        .expect("metric");
    assert!(cancelled >= 1, "{metrics}");
    assert!(metrics.contains("arbiter_submissions_total 3"), "{metrics}");
}

#[test]
fn a_thousand_concurrent_submissions_are_all_accepted_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "fifo"],
    );
    let admin = daemon.admin();
    // Hold the only GPU so that every submission stays queued.
    let blocker = submit(&admin, json!({ "command": "sleep 20", "grace_s": 1 }));
    wait_for("the blocker to run", 20, || {
        state_of(&admin, blocker) == "running"
    });
    let url = daemon.url.clone();
    let token = std::fs::read_to_string(dir.path().join("data/admin.token")).expect("token");
    let threads: Vec<_> = (0..20)
        .map(|_| {
            let (url, token) = (url.clone(), token.clone());
            std::thread::spawn(move || {
                let client = Client::new(&url, &token);
                (0..50)
                    .map(|_| submit(&client, json!({ "command": "true" })))
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut ids: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1000, "every submission got its own id");
    let jobs = admin.get("/v1/jobs?state=queued").expect("list")["jobs"]
        .as_array()
        .expect("jobs")
        .len();
    assert_eq!(jobs, 1000);
}

#[test]
fn failing_runs_are_retried_then_failed_with_their_exit_code() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let id = submit(
        &admin,
        json!({ "command": "echo attempt $ARBITER_RUN; exit 3", "max_retries": 1 }),
    );
    wait_for("the job to fail for good", 30, || {
        state_of(&admin, id) == "failed"
    });
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        (
            job["runs"].as_u64(),
            job["failures"].as_u64(),
            job["exit_code"].as_i64()
        ),
        (Some(2), Some(2), Some(3)),
        "{job}"
    );
    let log = admin
        .get_text(&format!("/v1/jobs/{id}/logs"))
        .expect("logs");
    assert_eq!(log, "attempt 1\nattempt 2\n");
    // A run over its time limit is stopped and fails.
    let slow = submit(
        &admin,
        json!({ "command": "sleep 30", "max_run_time_s": 1, "grace_s": 1 }),
    );
    wait_for("the slow job to time out", 30, || {
        state_of(&admin, slow) == "failed"
    });
}

#[test]
fn a_deleted_store_is_refused_at_start_and_job_ids_are_never_reused() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let mut daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let id = submit(&admin, json!({ "command": "echo secret-of-job-0" }));
    wait_for("the job to finish", 20, || {
        state_of(&admin, id) == "succeeded"
    });
    daemon.kill9();
    // Deleted: refused, saying what was found and how to recover.
    std::fs::rename(data.join("arbiter.redb"), dir.path().join("backup.redb")).expect("move");
    let stderr = Daemon::try_start(
        &data,
        Options {
            args: &["--gpus", "1xa100"],
            ..Default::default()
        },
    )
    .err()
    .expect("refused");
    assert!(
        stderr.contains("is missing (deleted)")
            && stderr.contains("restore")
            && stderr.contains(".old"),
        "{stderr}"
    );
    // Truncated to nothing: refused too.
    std::fs::write(data.join("arbiter.redb"), b"").expect("truncate");
    let stderr = Daemon::try_start(
        &data,
        Options {
            args: &["--gpus", "1xa100"],
            ..Default::default()
        },
    )
    .err()
    .expect("refused");
    assert!(
        stderr.contains("store.id") || stderr.contains("job files"),
        "{stderr}"
    );
    // Restored from the backup: starts, and the next job gets a new id and a fresh log.
    std::fs::rename(dir.path().join("backup.redb"), data.join("arbiter.redb")).expect("restore");
    let daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let next = submit(&admin, json!({ "command": "echo job-1" }));
    assert_eq!(next, id + 1);
    wait_for("the next job to finish", 20, || {
        state_of(&admin, next) == "succeeded"
    });
    let log = admin
        .get_text(&format!("/v1/jobs/{next}/logs"))
        .expect("log");
    assert_eq!(
        log, "job-1\n",
        "the new job's log holds only its own output"
    );
}

#[test]
fn a_run_that_fails_while_the_daemon_is_down_uses_up_its_retries() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let mut daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let id = submit(
        &admin,
        json!({ "command": "sleep 1; exit 7", "max_retries": 0 }),
    );
    wait_for("the job to run", 20, || state_of(&admin, id) == "running");
    daemon.kill9();
    std::thread::sleep(Duration::from_millis(1500));
    let daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    wait_for("the job to be concluded", 20, || {
        state_of(&admin, id) == "failed"
    });
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        (job["runs"].as_u64(), job["exit_code"].as_i64()),
        (Some(1), Some(7)),
        "max_retries 0: never run again: {job}"
    );
}

#[test]
fn a_checkpoint_signal_lost_in_a_crash_is_sent_again_on_readoption() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    let mut daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let id = submit(
        &admin,
        json!({
            "command": "trap 'echo checkpointed > \"$ARBITER_CHECKPOINT_DIR/saved\"; exit 0' TERM; echo ready; while true; do sleep 0.05; done",
            "grace_s": 30,
        }),
    );
    wait_for("the job to run", 20, || {
        state_of(&admin, id) == "running"
            && admin
                .get_text(&format!("/v1/jobs/{id}/logs"))
                .is_ok_and(|l| l.contains("ready"))
    });
    let ckpt = checkpoint_dir(&admin, id);
    daemon.kill9();
    // What a daemon killed between persisting `stopping` and signalling leaves behind: the store
    // says stopping (cancelled), the process never got the signal.
    {
        let store =
            arbiter_daemon::records::store::Store::open(&data.join("arbiter.redb")).expect("store");
        let mut job = store
            .jobs()
            .expect("jobs")
            .into_iter()
            .find(|j| j.id == id as u32)
            .expect("job");
        let arbiter_daemon::records::job::JobState::Running { gpus, pid, .. } = job.state.clone()
        else {
            panic!("running: {:?}", job.state)
        };
        job.transition(
            arbiter_daemon::records::job::JobState::Stopping {
                gpus,
                pid,
                reason: arbiter_daemon::records::job::StopReason::Cancelled,
                since_unix_s: 0,
                signal_sent: false,
            },
            "cancelled",
            0,
        );
        store.put_jobs(&[&job]).expect("write");
    }
    assert!(!ckpt.join("saved").exists());
    let daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    wait_for("the job to end as cancelled", 20, || {
        state_of(&admin, id) == "cancelled"
    });
    assert!(
        ckpt.join("saved").exists(),
        "the re-adopted run got its checkpoint signal and saved"
    );
}

#[test]
fn gavel_policies_start_a_new_job_within_one_round_of_the_daemon() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &[
            "--gpus",
            "2xa100",
            "--policy",
            "max-min-fairness",
            "--round-s",
            "1",
        ],
    );
    let admin = daemon.admin();
    let id = submit(&admin, json!({ "command": "sleep 5", "grace_s": 1 }));
    // Gavel's defaults (360 s rounds, recompute every 1,920 s) made this wait 32 minutes.
    wait_for("the job to start on the idle cluster", 10, || {
        state_of(&admin, id) == "running"
    });
}

#[test]
fn a_started_run_is_not_preempted_before_its_minimum_run_time() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "srtf", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let long = submit(
        &admin,
        json!({ "command": "sleep 60", "expected_run_time_s": 1000, "min_run_time_s": 4, "grace_s": 1 }),
    );
    wait_for("the long job to run", 20, || {
        state_of(&admin, long) == "running"
    });
    let short = submit(
        &admin,
        json!({ "command": "true", "expected_run_time_s": 1 }),
    );
    wait_for("the short job to wait for the minimum run time", 10, || {
        admin.get(&format!("/v1/jobs/{short}")).expect("job")["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("minimum run time"))
    });
    assert_eq!(state_of(&admin, long), "running");
    // Once the protection ends, SRTF preempts the long job for the short one.
    wait_for("the short job to finish", 30, || {
        state_of(&admin, short) == "succeeded"
    });
    let job = admin.get(&format!("/v1/jobs/{long}")).expect("job");
    let ran_s = job["history"]
        .as_array()
        .expect("history")
        .iter()
        .find(|t| t["to"] == "stopping")
        .and_then(|t| t["at_unix_s"].as_i64())
        .expect("stopped")
        - job["history"]
            .as_array()
            .expect("history")
            .iter()
            .find(|t| t["to"] == "running")
            .and_then(|t| t["at_unix_s"].as_i64())
            .expect("ran");
    assert!(ran_s >= 3, "ran {ran_s} s before being preempted");
    admin
        .post(&format!("/v1/jobs/{long}/cancel"), &json!({}))
        .ok();
}

#[test]
fn a_finished_runs_token_is_refused_for_progress() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let admin = daemon.admin();
    let id = submit(
        &admin,
        json!({ "command": "echo \"$ARBITER_JOB_TOKEN\" > \"$ARBITER_CHECKPOINT_DIR/token\"; echo \"order=$CUDA_DEVICE_ORDER\"" }),
    );
    wait_for("the job to finish", 20, || {
        state_of(&admin, id) == "succeeded"
    });
    let token = std::fs::read_to_string(checkpoint_dir(&admin, id).join("token")).expect("token");
    let job = Client::new(&daemon.url, token.trim());
    let (status, _) = refused(job.post(&format!("/v1/jobs/{id}/progress"), &json!({ "steps": 5 })));
    assert_eq!(status, 409, "a run that is over cannot report progress");
    let log = admin.get_text(&format!("/v1/jobs/{id}/logs")).expect("log");
    assert!(
        log.contains("order=PCI_BUS_ID"),
        "GPU indices follow nvidia-smi's PCI order: {log}"
    );
    // The daemon logs what happened to the job.
    let stderr = daemon.stderr();
    assert!(
        stderr.contains("submitted") && stderr.contains("started") && stderr.contains("run ended"),
        "{stderr}"
    );
}

/// Needs root (it mounts a 4 MiB tmpfs as the data directory); `.ci/run` runs it as root.
#[test]
#[ignore = "needs root: mounts a small tmpfs (run with --ignored as root; .ci/run does)"]
fn root_a_full_disk_refuses_changes_with_503_and_recovers_by_itself() {
    assert!(is_root(), "this test mounts a tmpfs and must run as root");
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&data)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(data.clone());
    let daemon = Daemon::start(&data, &["--gpus", "1xa100", "--round-s", "1"]);
    let admin = daemon.admin();
    let first = submit(&admin, json!({ "command": "true" }));
    wait_for("the first job", 20, || {
        state_of(&admin, first) == "succeeded"
    });
    // Fill the disk.
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", data.join("filler").display()))
        .stderr(Stdio::null())
        .status();
    let mut refused_once = false;
    for _ in 0..50 {
        match admin.post(
            "/v1/jobs",
            &json!({ "command": "true", "name": "x".repeat(200) }),
        ) {
            Err(ClientError::Status {
                status: 503,
                message,
            }) => {
                assert!(
                    message.contains("read-only") || message.contains("unavailable"),
                    "{message}"
                );
                refused_once = true;
                break;
            }
            Ok(_) => continue, // redb may still have room in pages it already owns
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    assert!(refused_once, "a full disk is refused with 503");
    let metrics = admin.get_text("/metrics").expect("metrics");
    assert!(metrics.contains("arbiter_store_degraded 1"), "{metrics}");
    // Space returns: the daemon recovers by itself; the next submission is kept and runs.
    std::fs::remove_file(data.join("filler")).expect("rm filler");
    let mut id = None;
    wait_for("submissions to be accepted again", 20, || {
        id = admin
            .post("/v1/jobs", &json!({ "command": "echo after" }))
            .ok()
            .and_then(|r| r["id"].as_u64());
        id.is_some()
    });
    let id = id.expect("id");
    wait_for("the job after recovery", 20, || {
        state_of(&admin, id) == "succeeded"
    });
    assert!(
        admin
            .get_text("/metrics")
            .expect("metrics")
            .contains("arbiter_store_degraded 0")
    );
    // No job is left half-started: every job is queued or ended, none running without a process.
    let jobs = admin.get("/v1/jobs").expect("jobs");
    for job in jobs["jobs"].as_array().expect("jobs") {
        let state = job["state"]["state"].as_str().expect("state");
        assert!(matches!(state, "queued" | "succeeded" | "running"), "{job}");
    }
}

#[test]
fn round_based_policies_do_not_swap_jobs_between_rounds() {
    // Synergy's and Gavel's policies decide per round; called at every event they used to
    // re-rank and swap short jobs all the time (hundreds of preemptions for eight 3-s jobs).
    let dir = tempfile::tempdir().expect("dir");
    let config = if is_root() {
        "min_run_s = 0\n"
    } else {
        "min_run_s = 0\nallow_shared_identity = true\n"
    };
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &[
                "--gpus",
                "2xa100",
                "--policy",
                "las+greedy",
                "--round-s",
                "30",
            ],
            config: Some(config),
            uid: None,
        },
    );
    let admin = daemon.admin();
    let ids: Vec<u64> = (0..4)
        .map(|_| {
            submit(
                &admin,
                json!({ "command": "sleep 1", "expected_run_time_s": 1 }),
            )
        })
        .collect();
    wait_for("all four jobs to finish", 40, || {
        ids.iter().all(|&id| state_of(&admin, id) == "succeeded")
    });
    let metrics = admin.get_text("/metrics").expect("metrics");
    assert!(metrics.contains("arbiter_preemptions_total 0"), "{metrics}");
}

#[test]
fn a_runs_output_beyond_max_log_bytes_is_dropped_and_the_log_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let config = if is_root() {
        "max_log_bytes = 1000\n"
    } else {
        "max_log_bytes = 1000\nallow_shared_identity = true\n"
    };
    let daemon = Daemon::start_with(
        &dir.path().join("data"),
        Options {
            args: &["--gpus", "1xa100", "--round-s", "1"],
            config: Some(config),
            uid: None,
        },
    );
    let admin = daemon.admin();
    let id = submit(
        &admin,
        json!({ "command": "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo after the flood; exit 4", "max_retries": 0 }),
    );
    wait_for("the job to end", 30, || state_of(&admin, id) == "failed");
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        job["exit_code"].as_i64(),
        Some(4),
        "the job's own exit code, not the wrapper's: {job}"
    );
    let log = admin.get_text(&format!("/v1/jobs/{id}/logs")).expect("log");
    assert!(
        log.len() < 2000 && log.starts_with(&"x".repeat(1000)),
        "{} bytes",
        log.len()
    );
    assert!(log.contains("reached max_log_bytes (1000 bytes)"), "{log}");
}

#[test]
fn the_job_list_comes_in_pages() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "fifo"],
    );
    let admin = daemon.admin();
    let ids: Vec<u64> = (0..5)
        .map(|_| submit(&admin, json!({ "command": "sleep 30", "grace_s": 1 })))
        .collect();
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?limit=2".to_string();
    loop {
        let page = admin.get(&path).expect("page");
        let jobs = page["jobs"].as_array().expect("jobs");
        assert!(jobs.len() <= 2);
        seen.extend(jobs.iter().map(|j| j["id"].as_u64().expect("id")));
        match page["next_after"].as_u64() {
            Some(after) => path = format!("/v1/jobs?limit=2&after={after}"),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every job once, in id order");
    let (status, message) = refused(admin.get("/v1/jobs?limit=0"));
    assert!(status == 400 && message.starts_with("limit"), "{message}");
    for id in ids {
        let _ = admin.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    }
}

#[test]
fn the_checkpoint_signal_arrives_once_and_the_jobs_own_exit_code_is_recorded() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--round-s", "1"],
    );
    let admin = daemon.admin();
    // The job is a program under the wrapper's shell (not the shell itself): it checkpoints on
    // SIGTERM and exits 0; the shell must neither die with 143 nor run the next command.
    let id = submit(
        &admin,
        json!({
            "command": "sh -c 'trap \"echo got-term; sleep 0.3; echo saved; exit 0\" TERM; echo ready; while :; do sleep 0.05; done'\necho should-not-run",
            "grace_s": 10,
        }),
    );
    wait_for("the job to run", 20, || {
        admin
            .get_text(&format!("/v1/jobs/{id}/logs"))
            .is_ok_and(|l| l.contains("ready"))
    });
    admin
        .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
        .expect("cancel");
    wait_for("the job to end", 20, || state_of(&admin, id) == "cancelled");
    let log = admin.get_text(&format!("/v1/jobs/{id}/logs")).expect("log");
    assert_eq!(
        log.matches("got-term").count(),
        1,
        "one signal, one checkpoint: {log}"
    );
    assert!(
        log.contains("saved") && !log.contains("should-not-run"),
        "{log}"
    );
    let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
    assert_eq!(
        job["exit_code"].as_i64(),
        Some(0),
        "the job's exit code, not its shell's 143: {job}"
    );
}

#[test]
fn an_opportunistic_job_yields_within_its_short_grace_when_a_placed_job_arrives() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "fifo", "--round-s", "1"],
    );
    let admin = daemon.admin();
    // It ignores its checkpoint signal, and asks for a minute of grace: an opportunistic job
    // gets at most 5 s, then it is killed.
    let soak = submit(
        &admin,
        json!({ "command": "trap '' TERM; echo soaking; sleep 300", "opportunistic": true, "grace_s": 60 }),
    );
    // Its shell must have set its trap before the signal comes.
    wait_for("the opportunistic job to run", 20, || {
        admin
            .get_text(&format!("/v1/jobs/{soak}/logs"))
            .is_ok_and(|l| l.contains("soaking"))
    });
    let asked = std::time::Instant::now();
    let placed = submit(&admin, json!({ "command": "echo placed", "grace_s": 1 }));
    wait_for("the placed job to finish", 30, || {
        state_of(&admin, placed) == "succeeded"
    });
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(15),
        "the placed job waited {waited:?}: the 5-s grace, not 60: {} {}",
        admin.get(&format!("/v1/jobs/{soak}")).expect("job"),
        daemon.stderr()
    );
    let job = admin.get(&format!("/v1/jobs/{soak}")).expect("job");
    assert_eq!(
        (job["preemptions"].as_u64(), job["failures"].as_u64()),
        (Some(1), Some(0)),
        "{job}"
    );
    assert_eq!(job["request"]["opportunistic"], true);
    // The GPU is idle again: it runs again.
    wait_for("the opportunistic job to run again", 20, || {
        admin.get(&format!("/v1/jobs/{soak}")).expect("job")["runs"] == 2
    });
    admin
        .post(&format!("/v1/jobs/{soak}/cancel"), &json!({}))
        .expect("cancel");
}

#[test]
fn an_elastic_job_is_resized_by_afs_and_resumes_with_its_progress() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "2xa100", "--policy", "afs", "--round-s", "1"],
    );
    let admin = daemon.admin();
    // Alone, the elastic job (1..2 GPUs) gets both.
    let mut body = train(60, 0.1, 1, 1000);
    body["max_gpus"] = json!(2);
    body["command"] = json!(format!(
        "echo \"count=$ARBITER_GPUS previous=${{ARBITER_PREVIOUS_GPUS:-none}}\"\n{TRAIN}"
    ));
    let elastic = submit(&admin, body);
    let ckpt = checkpoint_dir(&admin, elastic);
    wait_for("the elastic job to make progress on two GPUs", 20, || {
        std::fs::read_to_string(ckpt.join("step.progress"))
            .is_ok_and(|s| s.trim().parse::<u32>().unwrap_or(0) >= 3)
    });
    // A rigid 1-GPU job arrives: AFS gives each job one GPU, so the elastic one is checkpointed
    // and restarted on one GPU, resuming where it stopped.
    let short = submit(&admin, train(3, 0.1, 1, 5));
    wait_for("the short job to finish", 30, || {
        state_of(&admin, short) == "succeeded"
    });
    wait_for("the elastic job to finish", 60, || {
        state_of(&admin, elastic) == "succeeded"
    });
    let log = admin
        .get_text(&format!("/v1/jobs/{elastic}/logs"))
        .expect("logs");
    assert!(
        log.contains("count=2 previous=none\ngpus=0,1 run=1"),
        "{log}"
    );
    assert!(
        log.contains("count=1 previous=2"),
        "shrunk to one GPU: {log}"
    );
    let resumed: u32 = log
        .lines()
        .find_map(|l| l.strip_prefix("resumed at "))
        .and_then(|n| n.trim().parse().ok())
        .expect("resumed");
    assert!(
        resumed >= 3,
        "resumed from its checkpoint, not from 0: {log}"
    );
    assert!(log.contains("finished at 60"), "{log}");
    let job = admin.get(&format!("/v1/jobs/{elastic}")).expect("job");
    assert!(job["runs"].as_u64().unwrap_or(0) >= 2, "{job}");
    // A tenant's quota bounds its elastic job: with a quota of one GPU it runs on one (the other
    // stays free), rather than asking for two and waiting.
    let token_q = admin
        .post("/v1/tenants", &json!({ "name": "team-q", "gpu_quota": 1 }))
        .expect("created")["token"]
        .as_str()
        .expect("token")
        .to_string();
    let q = Client::new(&daemon.url, &token_q);
    let mut greedy = train(20, 0.1, 1, 1000);
    greedy["max_gpus"] = json!(2);
    let greedy = submit(&q, greedy);
    wait_for("the quota-bound elastic job to finish", 30, || {
        state_of(&q, greedy) == "succeeded"
    });
    let log = q
        .get_text(&format!("/v1/jobs/{greedy}/logs"))
        .expect("logs");
    assert!(
        log.contains("gpus=0 run=1") || log.contains("gpus=1 run=1"),
        "one GPU within the quota: {log}"
    );
    // Out of range and malformed ranges are refused naming the field.
    let mut bad = train(1, 0.1, 2, 5);
    bad["max_gpus"] = json!(1);
    let (status, message) = refused(admin.post("/v1/jobs", &bad));
    assert_eq!(status, 400);
    assert!(
        message.contains("max_gpus") && message.contains("fewer than gpus"),
        "{message}"
    );
    bad["max_gpus"] = json!(3);
    let (_, message) = refused(admin.post("/v1/jobs", &bad));
    assert!(
        message.contains("max_gpus") && message.contains("at most 2"),
        "{message}"
    );
}

#[test]
fn an_external_agent_decides_in_the_daemon_and_a_crashing_one_is_restarted() {
    let agent = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/examples/sjf_agent.py"
    );
    let dir = tempfile::tempdir().expect("dir");
    let cmd = format!("python3 {agent}");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &[
            "--gpus",
            "1xa100",
            "--policy",
            "external",
            "--policy-cmd",
            &cmd,
            "--round-s",
            "1",
        ],
    );
    let admin = daemon.admin();
    // One GPU: a first job runs; two more wait, the longer submitted first. The agent orders by
    // expected run time (SJF), so the shorter one starts next.
    let first = submit(&admin, train(15, 0.1, 1, 100));
    wait_for("the first job to start", 20, || {
        state_of(&admin, first) == "running"
    });
    let long = submit(&admin, train(2, 0.1, 1, 500));
    let short = submit(&admin, train(2, 0.1, 1, 10));
    wait_for("all jobs to finish", 60, || {
        state_of(&admin, long) == "succeeded"
    });
    let started = |id: u64| -> i64 {
        let job = admin.get(&format!("/v1/jobs/{id}")).expect("job");
        job["history"]
            .as_array()
            .expect("history")
            .iter()
            .find(|t| t["to"] == "running")
            .and_then(|t| t["at_unix_s"].as_i64())
            .expect("started")
    };
    assert_eq!(state_of(&admin, short), "succeeded");
    assert!(
        started(short) <= started(long),
        "SJF through the agent: the short job first"
    );
    drop(daemon);

    // An agent that dies at once: each round it fails is decided by policy_fallback (fifo), so
    // jobs still run; the failure is logged and counted; a fresh agent is asked the next round.
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &[
            "--gpus",
            "1xa100",
            "--policy",
            "external",
            "--policy-cmd",
            "exit 3",
            "--round-s",
            "1",
        ],
    );
    let admin = daemon.admin();
    let job = submit(&admin, train(1, 0.1, 1, 10));
    wait_for("the job to run to its end under the fallback", 30, || {
        state_of(&admin, job) == "succeeded"
    });
    assert!(
        daemon.stderr().contains("the policy agent failed")
            && daemon
                .stderr()
                .contains("policy_fallback (fifo) decides this round"),
        "{}",
        daemon.stderr()
    );
    let metrics = admin.get_text("/metrics").expect("metrics");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("arbiter_fallback_rounds_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    // Without an agent the daemon does not start, naming the key.
    let dir = tempfile::tempdir().expect("dir");
    let Err(err) = Daemon::try_start(
        &dir.path().join("data"),
        crate::common::Options {
            args: &["--gpus", "1xa100", "--policy", "external"],
            config: None,
            uid: None,
        },
    ) else {
        panic!("started without an agent")
    };
    assert!(err.contains("policy_cmd"), "{err}");
}

#[test]
fn a_deadline_submission_gets_an_admission_answer_under_chronus() {
    let dir = tempfile::tempdir().expect("dir");
    let daemon = Daemon::start(
        &dir.path().join("data"),
        &["--gpus", "1xa100", "--policy", "chronus", "--round-s", "1"],
    );
    let token = daemon.admin_token();
    // A minute of work due in two hours: a 20-minute lease before then is free.
    let out = crate::common::cli_ok(
        &daemon,
        &token,
        &[
            "submit",
            "--deadline",
            "2h",
            "--expected-run-time-s",
            "60",
            "--",
            "sleep",
            "1",
        ],
    );
    assert!(out.contains("deadline guaranteed"), "{out}");
    // Three hours of work due in one: no lease plan finishes it.
    let out = crate::common::cli_ok(
        &daemon,
        &token,
        &[
            "submit",
            "--deadline",
            "1h",
            "--expected-run-time-s",
            "10800",
            "--",
            "sleep",
            "1",
        ],
    );
    assert!(out.contains("deadline NOT guaranteed"), "{out}");
    // The answer stays with the job.
    let admin = daemon.admin();
    let jobs = admin.get("/v1/jobs").expect("jobs");
    let answers: Vec<Option<bool>> = jobs["jobs"]
        .as_array()
        .expect("list")
        .iter()
        .map(|j| j["deadline_admitted"].as_bool())
        .collect();
    assert_eq!(answers, vec![Some(true), Some(false)]);
}
