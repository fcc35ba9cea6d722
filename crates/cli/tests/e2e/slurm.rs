//! `arbiter serve --executor slurm` against the real Slurm lab cluster `scripts/slurm-up.sh`
//! starts (partition `arbiter`: n1, n2 with four `v100` each, n3, n4 with four `a100` each).
//!
//! Every test here is named `slurm_*`, needs root (`sbatch --uid`, users to map tenants to) and
//! the cluster, and is `#[ignore]`d: `.ci/run` brings the cluster up and runs them with
//! `cargo test -p arbiter-cli --test e2e -- --ignored slurm_`; where Slurm cannot be installed
//! they stay counted as ignored. They share one cluster, so they take turns (`LAB`), and each
//! starts from an empty partition.

use crate::common::{Daemon, Options, refused, state_of, submit, wait_for};
use arbiter_daemon::api::client::Client;
use arbiter_daemon::executor::slurm::cli::{SlurmCli, SlurmJob, SlurmJobState};
use serde_json::{Value, json};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One test at a time on the lab cluster: each daemon takes the whole partition as its own.
static LAB: Mutex<()> = Mutex::new(());

/// The unix users the two test tenants run as.
const USERS: [(&str, &str); 2] = [("alice", "arbiter-e2e-a"), ("bob", "arbiter-e2e-b")];

/// A "training" job: counts steps, checkpoints the count on the checkpoint signal (TERM) and
/// exits 0, resumes from the checkpoint; appends one line per run to `runs` in its checkpoint
/// directory (which node, from which step) — the job's own record of how often it ran.
const TRAIN: &str = r#"
ckpt="$ARBITER_CHECKPOINT_DIR/step"
step=0
if [ -f "$ckpt" ]; then step=$(cat "$ckpt"); fi
echo "run $ARBITER_RUN on $SLURMD_NODENAME from $step gpus=$CUDA_VISIBLE_DEVICES uid=$(id -u)" >> "$ARBITER_CHECKPOINT_DIR/runs"
trap 'echo $step > "$ckpt"; echo "checkpointed at $step"; exit 0' TERM
while [ "$step" -lt "$TOTAL" ]; do sleep "$STEP_S"; step=$((step + 1)); echo $step > "$ckpt.progress"; done
echo $step > "$ckpt"
echo "finished at $step"
"#;

/// The lab: the partition emptied, the tenants' users created, a daemon on Slurm.
struct Lab {
    _turn: MutexGuard<'static, ()>,
    dir: PathBuf,
    daemon: Daemon,
    slurm: SlurmCli,
    /// Slurm job ids up to this one were there before the test (the names of finished jobs
    /// Slurm still lists may repeat this test's).
    first_slurm_id: u64,
}

fn sh(line: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", line])
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "`{line}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn uid_of(user: &str) -> u32 {
    sh(&format!("id -u {user}")).trim().parse().expect("uid")
}

impl Lab {
    fn start(args: &[&str]) -> Lab {
        Self::start_with(args, "")
    }

    /// [`Lab::start`] with more lines of daemon configuration.
    fn start_with(args: &[&str], extra_config: &str) -> Lab {
        let turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            crate::common::is_root(),
            "the Slurm tests need root (sbatch --uid)"
        );
        let slurm = SlurmCli::new("arbiter");
        let nodes = slurm
            .nodes()
            .unwrap_or_else(|e| panic!("no lab cluster (run scripts/slurm-up.sh as root): {e}"));
        assert_eq!(nodes.len(), 4, "the lab cluster has four nodes: {nodes:?}");
        // An empty partition: what an earlier test left is cancelled.
        sh("scancel --partition=arbiter");
        wait_for("the partition to be empty", 120, || {
            slurm
                .jobs()
                .expect("squeue")
                .iter()
                .all(|j| j.state.is_finished())
        });
        for (_, user) in USERS {
            sh(&format!(
                "id -u {user} >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh {user}"
            ));
        }
        // Under Slurm, jobs open their logs as their tenant: the data dir's parents must be
        // traversable (the daemon refuses to start otherwise), and so must the working dirs.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "arbiter-slurm-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["", "ckpt", "work"] {
            std::fs::create_dir_all(dir.join(sub)).expect("dir");
            std::fs::set_permissions(dir.join(sub), std::fs::Permissions::from_mode(0o755))
                .expect("mode");
        }
        let config = format!(
            "executor = \"slurm\"\ntenant_users = {{ {} }}\ncheckpoint_roots = [\"{}\"]\nslurm.poll_s = 0.2\n{extra_config}",
            USERS
                .iter()
                .map(|(t, u)| format!("{t} = \"{u}\""))
                .collect::<Vec<_>>()
                .join(", "),
            dir.join("ckpt").display()
        );
        let daemon = Daemon::start_with(
            &dir.join("data"),
            Options {
                args,
                config: Some(&config),
                uid: None,
            },
        );
        let first_slurm_id = slurm
            .jobs()
            .expect("squeue")
            .iter()
            .map(|j| j.id + 1)
            .max()
            .unwrap_or(0);
        let lab = Lab {
            _turn: turn,
            dir,
            daemon,
            slurm,
            first_slurm_id,
        };
        for (tenant, _) in USERS {
            lab.daemon
                .admin()
                .post("/v1/tenants", &json!({ "name": tenant }))
                .expect("tenant");
        }
        lab
    }

    /// A client for `tenant` (a fresh token each call).
    fn tenant(&self, tenant: &str) -> Client {
        let token = self
            .daemon
            .admin()
            .post(&format!("/v1/tenants/{tenant}/token"), &json!({}))
            .expect("token")["token"]
            .as_str()
            .expect("token")
            .to_string();
        Client::new(&self.daemon.url, &token)
    }

    /// Restarts the daemon on the same data dir (after `kill9`).
    fn restart(&mut self, args: &[&str]) {
        let config = std::fs::read_to_string(self.dir.join("data.toml")).expect("config");
        let config = config
            .lines()
            .filter(|l| !l.starts_with("tenant_uid_range"))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
        self.daemon = Daemon::start_with(
            &self.dir.join("data"),
            Options {
                args,
                config: Some(&config),
                uid: None,
            },
        );
    }

    /// The Slurm jobs of Arbiter job `id`, oldest run first.
    fn runs_of(&self, id: u64) -> Vec<SlurmJob> {
        let prefix = format!("arbiter-{id}.");
        let mut runs: Vec<SlurmJob> = self
            .slurm
            .jobs()
            .expect("squeue")
            .into_iter()
            .filter(|j| j.name.starts_with(&prefix) && j.id >= self.first_slurm_id)
            .collect();
        runs.sort_by_key(|j| j.id);
        runs
    }

    fn job(&self, client: &Client, id: u64) -> Value {
        client.get(&format!("/v1/jobs/{id}")).expect("job")
    }

    /// The lines the job wrote to `runs` in its checkpoint dir.
    fn runs_file(&self, client: &Client, id: u64) -> Vec<String> {
        let dir = PathBuf::from(
            self.job(client, id)["checkpoint_dir"]
                .as_str()
                .expect("checkpoint_dir"),
        );
        std::fs::read_to_string(dir.join("runs"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn work(&self) -> String {
        self.dir.join("work").display().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.daemon.kill9();
        let _ = Command::new("scancel").arg("--partition=arbiter").status();
        if std::thread::panicking() {
            eprintln!(
                "kept for a look: {} (the daemon's stderr in data.stderr)",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn train(lab: &Lab, total: u32, step_s: f64, gpus: u32, expected_s: u64) -> Value {
    json!({
        "command": TRAIN, "gpus": gpus, "expected_run_time_s": expected_s, "grace_s": 20, "working_dir": lab.work(),
        "env": { "TOTAL": total.to_string(), "STEP_S": step_s.to_string() },
    })
}

fn wait_state(client: &Client, id: u64, want: &str, timeout_s: u64) {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let state = state_of(client, id);
        if state == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} is {state}, not {want}, after {timeout_s} s: {}",
            client.get(&format!("/v1/jobs/{id}")).expect("job")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_jobs_run_on_the_gpu_type_the_policy_chose_as_their_tenant_and_a_gang_spans_two_nodes() {
    let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
    let alice = lab.tenant("alice");
    // A gang of 8 a100s: both a100 nodes. Its command runs once on the first node and starts a
    // process per node with srun; the Python helper reads each one's place in the gang.
    let python = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../python/job")
        .canonicalize()
        .expect("python/job dir");
    let gang = submit(
        &alice,
        json!({
            "command": "srun sh -c 'echo node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES'; srun python3 -c 'from arbiter_job import Job; j = Job(); print(\"rank\", j.rank, \"of\", j.world_size, \"on\", j.nodes, \"master\", j.dist_env()[\"MASTER_ADDR\"])'",
            "gpus": 8, "gpu_types": ["a100"], "working_dir": lab.work(), "env": { "PYTHONPATH": python.display().to_string() },
        }),
    );
    let v100 = submit(
        &alice,
        json!({ "command": "echo node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES uid=$(id -u)", "gpus": 2, "gpu_types": ["v100"], "working_dir": lab.work() }),
    );
    for id in [gang, v100] {
        wait_state(&alice, id, "succeeded", 60);
    }
    let gang_runs = lab.runs_of(gang);
    assert_eq!(gang_runs.len(), 1, "{gang_runs:?}");
    assert_eq!(
        gang_runs[0].nodes,
        ["n3", "n4"],
        "the a100 nodes: {gang_runs:?}"
    );
    let log = alice
        .get_text(&format!("/v1/jobs/{gang}/logs"))
        .expect("log");
    for line in [
        "node=n3 gpus=0,1,2,3",
        "node=n4 gpus=0,1,2,3",
        "rank 0 of 2 on ['n3', 'n4'] master n3",
        "rank 1 of 2 on ['n3', 'n4'] master n3",
    ] {
        assert!(log.contains(line), "no {line:?} in the gang's log:\n{log}");
    }
    let v100_runs = lab.runs_of(v100);
    assert!(
        v100_runs.len() == 1 && ["n1", "n2"].contains(&v100_runs[0].nodes[0].as_str()),
        "{v100_runs:?}"
    );
    // It ran as alice's unix user, on the two GPUs Arbiter chose, and its log is alice's alone.
    let uid = uid_of(USERS[0].1);
    assert_eq!(v100_runs[0].user_id, Some(uid));
    let log = alice
        .get_text(&format!("/v1/jobs/{v100}/logs"))
        .expect("log");
    assert!(
        log.contains(&format!(
            "node={} gpus=0,1 uid={uid}",
            v100_runs[0].nodes[0]
        )),
        "{log}"
    );
    let meta = std::fs::metadata(lab.dir.join(format!("data/logs/{v100}.log"))).expect("log file");
    assert_eq!((meta.uid(), meta.mode() & 0o777), (uid, 0o600));
    // `arbiter cluster` sees the Slurm nodes.
    let cluster = lab.daemon.admin().get("/v1/cluster").expect("cluster");
    assert_eq!(cluster["executor"], "slurm");
    let nodes: Vec<(&str, &str)> = cluster["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap_or(""),
                n["gpu_type"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        nodes,
        [
            ("n1", "v100"),
            ("n2", "v100"),
            ("n3", "a100"),
            ("n4", "a100")
        ]
    );
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_a_preempted_job_checkpoints_and_resumes_on_another_node_with_its_progress() {
    let lab = Lab::start(&["--policy", "srtf", "--round-s", "1"]);
    let alice = lab.tenant("alice");
    let on_v100 = |mut body: Value| {
        body["gpu_types"] = json!(["v100"]);
        body
    };
    // The long job takes one v100 node, a medium one the other.
    let long = submit(&alice, on_v100(train(&lab, 60, 0.25, 4, 1000)));
    wait_for("the long job to make progress", 30, || {
        lab.runs_file(&alice, long).len() == 1
    });
    let medium = submit(&alice, on_v100(train(&lab, 24, 0.25, 4, 100)));
    wait_for("the medium job to run", 30, || {
        lab.runs_file(&alice, medium).len() == 1
    });
    // A short job arrives: SRTF preempts the long one (checkpoint signal, then requeue) and
    // gives the short one its node. The medium job ends first, so the long one resumes there.
    let short = submit(&alice, on_v100(train(&lab, 40, 0.25, 4, 20)));
    for id in [short, medium, long] {
        wait_state(&alice, id, "succeeded", 90);
    }
    let runs = lab.runs_file(&alice, long);
    assert_eq!(runs.len(), 2, "two runs: {runs:?}");
    let node = |line: &str| line.split_whitespace().nth(3).unwrap_or("").to_string();
    let from = |line: &str| {
        line.split_whitespace()
            .nth(5)
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0)
    };
    assert!(
        runs[0].starts_with("run 1 on ") && from(&runs[0]) == 0,
        "{runs:?}"
    );
    assert!(
        runs[1].starts_with("run 2 on ") && from(&runs[1]) > 0,
        "the second run resumed from the checkpoint: {runs:?}"
    );
    assert_ne!(
        node(&runs[0]),
        node(&runs[1]),
        "resumed on the other node: {runs:?}"
    );
    let job = lab.job(&alice, long);
    assert_eq!(
        (job["preemptions"].as_u64(), job["runs"].as_u64()),
        (Some(1), Some(2)),
        "{job}"
    );
    let log = alice
        .get_text(&format!("/v1/jobs/{long}/logs"))
        .expect("log");
    assert!(
        log.contains("checkpointed at") && log.contains("finished at 60"),
        "{log}"
    );
    // Two Slurm jobs, the first ended by the checkpoint signal (exit 0 after the trap).
    let slurm_runs = lab.runs_of(long);
    assert_eq!(slurm_runs.len(), 2, "{slurm_runs:?}");
    assert_ne!(slurm_runs[0].nodes, slurm_runs[1].nodes);
    assert_eq!(lab.runs_file(&alice, short).len(), 1);
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_cancel_failures_retries_and_exit_codes() {
    let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
    let alice = lab.tenant("alice");
    let failing = submit(
        &alice,
        json!({ "command": "echo try $ARBITER_RUN; exit 3", "max_retries": 1, "working_dir": lab.work() }),
    );
    let long = submit(
        &alice,
        json!({ "command": "echo started; sleep 300", "grace_s": 1, "working_dir": lab.work() }),
    );
    wait_state(&alice, failing, "failed", 60);
    let job = lab.job(&alice, failing);
    assert_eq!(
        (job["runs"].as_u64(), job["exit_code"].as_i64()),
        (Some(2), Some(3)),
        "{job}"
    );
    let runs = lab.runs_of(failing);
    assert_eq!(
        runs.iter()
            .map(|j| (&j.state, j.exit_code))
            .collect::<Vec<_>>(),
        [
            (&SlurmJobState::Failed, Some(3)),
            (&SlurmJobState::Failed, Some(3))
        ]
    );
    let log = alice
        .get_text(&format!("/v1/jobs/{failing}/logs"))
        .expect("log");
    assert!(log.contains("try 1") && log.contains("try 2"), "{log}");

    wait_for("the long job's script to run", 30, || {
        alice
            .get_text(&format!("/v1/jobs/{long}/logs"))
            .is_ok_and(|l| l.contains("started"))
    });
    alice
        .post(&format!("/v1/jobs/{long}/cancel"), &json!({}))
        .expect("cancelled");
    wait_state(&alice, long, "cancelled", 30);
    wait_for("Slurm to end the run", 30, || {
        lab.runs_of(long).iter().all(|j| j.state.is_finished())
    });
    assert_eq!(lab.runs_of(long).len(), 1);
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_a_daemon_killed_mid_run_reconciles_and_every_job_runs_exactly_once() {
    let args = ["--policy", "fifo", "--round-s", "1"];
    let mut lab = Lab::start(&args);
    let bob = lab.tenant("bob");
    // 20 one-GPU jobs on 16 GPUs: 16 run, 4 wait.
    let ids: Vec<u64> = (0..20)
        .map(|_| submit(&bob, train(&lab, 16, 0.25, 1, 10)))
        .collect();
    wait_for("16 jobs to run", 60, || {
        ids.iter()
            .filter(|id| lab.runs_file(&bob, **id).len() == 1)
            .count()
            == 16
    });
    lab.daemon.kill9();
    std::thread::sleep(Duration::from_secs(1));
    lab.restart(&args);
    let bob = lab.tenant("bob");
    for id in &ids {
        wait_state(&bob, *id, "succeeded", 120);
    }
    for id in &ids {
        let runs = lab.runs_file(&bob, *id);
        assert_eq!(runs.len(), 1, "job {id} ran once: {runs:?}");
        assert_eq!(lab.runs_of(*id).len(), 1, "job {id}: one Slurm job");
        assert_eq!(lab.job(&bob, *id)["runs"].as_u64(), Some(1));
    }
    assert!(
        lab.daemon.stderr().contains("re-adopted"),
        "{}",
        lab.daemon.stderr()
    );
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_a_tenant_cannot_see_or_cancel_another_tenants_jobs() {
    let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
    let (alice, bob) = (lab.tenant("alice"), lab.tenant("bob"));
    let secret = submit(
        &alice,
        json!({ "command": "echo alice-secret; sleep 300", "grace_s": 1, "working_dir": lab.work(), "env": { "SECRET": "s3cr3t" } }),
    );
    wait_for("alice's job to log", 30, || {
        alice
            .get_text(&format!("/v1/jobs/{secret}/logs"))
            .is_ok_and(|l| l.contains("alice-secret"))
    });
    for path in [
        format!("/v1/jobs/{secret}"),
        format!("/v1/jobs/{secret}/logs"),
    ] {
        let (status, _) = refused(bob.get(&path));
        assert!(
            status == 403 || status == 404,
            "bob got {status} for {path}"
        );
    }
    let (status, _) = refused(bob.post(&format!("/v1/jobs/{secret}/cancel"), &json!({})));
    assert!(status == 403 || status == 404, "bob's cancel got {status}");
    assert!(
        !bob.get("/v1/jobs")
            .expect("list")
            .to_string()
            .contains("alice-secret"),
        "bob's list shows alice's job"
    );
    assert_eq!(state_of(&alice, secret), "running");
    assert!(
        lab.runs_of(secret).iter().all(|j| !j.state.is_finished()),
        "still running in Slurm"
    );
    // The Slurm job runs as alice's user; its log is hers alone (bob's user cannot open it).
    assert_eq!(lab.runs_of(secret)[0].user_id, Some(uid_of(USERS[0].1)));
    let log = lab.dir.join(format!("data/logs/{secret}.log"));
    let as_bob = Command::new("runuser")
        .args(["-u", USERS[1].1, "--", "cat"])
        .arg(&log)
        .output()
        .expect("runuser");
    assert!(
        !as_bob.status.success()
            && !String::from_utf8_lossy(&as_bob.stdout).contains("alice-secret")
    );
    alice
        .post(&format!("/v1/jobs/{secret}/cancel"), &json!({}))
        .expect("cancel");
    wait_state(&alice, secret, "cancelled", 30);
}

/// Runs jobs of `gpus` GPUs under fifo, all submitted while blockers hold every GPU, and returns the
/// order in which the daemon started them.
fn fifo_start_order(daemon: &Daemon, client: &Client, work: &str, gpus: &[u32]) -> Vec<u64> {
    // Two blockers, one per GPU type (a job takes one type).
    let blockers: Vec<u64> = ["v100", "a100"].iter().map(|t| submit(client, json!({ "command": "sleep 300", "gpus": 8, "gpu_types": [t], "grace_s": 1, "working_dir": work }))).collect();
    for blocker in &blockers {
        wait_state(client, *blocker, "running", 30);
    }
    let ids: Vec<u64> = gpus
        .iter()
        .map(|g| {
            submit(
                client,
                json!({ "command": "sleep 1", "gpus": g, "working_dir": work }),
            )
        })
        .collect();
    // One blocker at a time, each until its run has ended: cancelled together, whichever run
    // ends first (Slurm's scancel is slower than a local kill, and not always in order) would
    // free its node first, and FIFO would start the jobs that fit there ahead of the head.
    for blocker in blockers {
        client
            .post(&format!("/v1/jobs/{blocker}/cancel"), &json!({}))
            .expect("cancel");
        wait_state(client, blocker, "cancelled", 60);
    }
    for id in &ids {
        wait_state(client, *id, "succeeded", 120);
    }
    let stderr = daemon.stderr();
    let mut order = Vec::new();
    for line in stderr.lines().filter(|l| l.contains(" started")) {
        let id = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("job="))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(id) = id.filter(|id| ids.contains(id) && !order.contains(id)) {
            order.push(id);
        }
    }
    order.iter().map(|id| id - ids[0]).collect()
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_fifo_starts_the_same_jobs_in_the_same_order_as_the_local_executor() {
    let gpus: Vec<u32> = (0..20).map(|i| [1, 2, 4, 1, 3][i % 5]).collect();
    let slurm_order = {
        let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
        fifo_start_order(&lab.daemon, &lab.tenant("alice"), &lab.work(), &gpus)
    };
    let local_order = {
        let dir = tempfile::tempdir().expect("dir");
        let daemon = Daemon::start(
            &dir.path().join("data"),
            &[
                "--gpus",
                "8xv100,8xa100",
                "--policy",
                "fifo",
                "--round-s",
                "1",
            ],
        );
        let admin = daemon.admin();
        fifo_start_order(&daemon, &admin, "/tmp", &gpus)
    };
    assert_eq!(slurm_order.len(), 20, "{slurm_order:?}");
    assert_eq!(slurm_order, local_order);
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_a_drained_node_gets_no_new_runs_until_it_is_resumed() {
    let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
    let alice = lab.tenant("alice");
    /// Resumes n1 however the test ends.
    struct Resume;
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = Command::new("scontrol")
                .args(["update", "nodename=n1", "state=resume"])
                .status();
        }
    }
    sh("scontrol update nodename=n1 state=drain reason=arbiter-e2e");
    let resume = Resume;
    // The daemon learns it from sinfo within a few seconds, and says so in `arbiter cluster`.
    wait_for("the daemon to see n1 drained", 20, || {
        lab.daemon.admin().get("/v1/cluster").expect("cluster")["nodes"][0]["takes_new_runs"]
            == false
    });
    // Six one-GPU v100 jobs: four fit on n2; none goes to n1.
    let ids: Vec<u64> = (0..6).map(|_| submit(&alice, json!({ "command": "sleep 30", "gpu_types": ["v100"], "grace_s": 1, "working_dir": lab.work() }))).collect();
    wait_for("four jobs to run", 30, || {
        ids.iter()
            .filter(|id| state_of(&alice, **id) == "running")
            .count()
            == 4
    });
    std::thread::sleep(Duration::from_secs(2));
    let on: Vec<String> = ids
        .iter()
        .flat_map(|id| lab.runs_of(*id))
        .flat_map(|j| j.nodes)
        .collect();
    assert!(on.iter().all(|n| n == "n2"), "only n2: {on:?}");
    assert_eq!(
        ids.iter()
            .filter(|id| state_of(&alice, **id) == "queued")
            .count(),
        2
    );
    drop(resume);
    // Back: the two waiting jobs start on n1.
    wait_for("the waiting jobs to start on n1", 30, || {
        ids.iter()
            .filter(|id| state_of(&alice, **id) == "running")
            .count()
            == 6
    });
    // Slurm lists a pinned job's node once it has allocated it (up to a second after sbatch).
    let on_n1 = || {
        ids.iter()
            .flat_map(|id| lab.runs_of(*id))
            .filter(|j| j.nodes == ["n1"])
            .count()
    };
    wait_for("Slurm to run them on n1", 15, || on_n1() >= 2);
    assert_eq!(on_n1(), 2);
}

/// Writes where it runs (Slurm job, node, GPUs, user) into its checkpoint directory, notes a
/// checkpoint signal there and exits 0 on it. For its first 6 s it also looks, as a hostile
/// tenant would, for any job's secret (`SECRET`) on the machine's command lines, and notes it.
const REPORT_WHERE: &str = r#"trap 'echo term >> "$ARBITER_CHECKPOINT_DIR/signals"; exit 0' TERM
( for i in $(seq 60); do if cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -q 'arbiter-secre[t]-'; then echo found >> "$ARBITER_CHECKPOINT_DIR/leak"; fi; sleep 0.1; done ) &
echo "$SLURM_JOB_ID $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $(id -un)" > "$ARBITER_CHECKPOINT_DIR/where"
sleep 300 & wait"#;

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_co_located_jobs_share_gpus_as_steps_of_one_allocation_across_a_daemon_restart() {
    let mut lab = Lab::start_with(
        &["--policy", "muri-s", "--round-s", "1"],
        "slurm.share_gpus = true\n",
    );
    let clients = [lab.tenant("alice"), lab.tenant("bob")];
    // Five 4-GPU jobs of two kinds on 16 GPUs: Muri interleaves two of them on one node.
    let stages = [
        json!({ "io_s": 0.02, "cpu_s": 0.08, "gpu_s": 0.4 }),
        json!({ "io_s": 0.3, "cpu_s": 0.15, "gpu_s": 0.05 }),
    ];
    let jobs: Vec<(usize, u64)> = (0..5)
        .map(|i| {
            let t = i % 2;
            let env = json!({ "SECRET": format!("arbiter-secret-{}", USERS[t].0) });
            (t, submit(&clients[t], json!({ "command": REPORT_WHERE, "gpus": 4, "iteration_stages": stages[i % 2], "grace_s": 5, "env": env, "working_dir": lab.work() })))
        })
        .collect();
    let file = |lab: &Lab, client: &Client, id: u64, name: &str| -> Option<String> {
        let dir = PathBuf::from(
            lab.job(client, id)["checkpoint_dir"]
                .as_str()
                .expect("checkpoint_dir"),
        );
        std::fs::read_to_string(dir.join(name))
            .ok()
            .filter(|s| s.ends_with('\n'))
            .map(|s| s.trim().to_string())
    };
    // Muri regroups as the jobs arrive (one started alone may be moved next to another): wait
    // for the plan of all five, then for it to hold.
    let seen = |lab: &Lab, clients: &[Client; 2]| -> Vec<Vec<String>> {
        jobs.iter()
            .map(|(t, id)| {
                file(lab, &clients[*t], *id, "where")
                    .unwrap_or_default()
                    .split(' ')
                    .map(str::to_string)
                    .collect()
            })
            .collect()
    };
    let shared = |seen: &[Vec<String>]| -> Vec<(usize, usize)> {
        (0..5)
            .flat_map(|a| (a + 1..5).map(move |b| (a, b)))
            .filter(|(a, b)| seen[*a][0] == seen[*b][0])
            .collect()
    };
    let settled = |lab: &Lab, clients: &[Client; 2]| {
        jobs.iter().all(|(t, id)| {
            state_of(&clients[*t], *id) == "running"
                && file(lab, &clients[*t], *id, "where").is_some()
        }) && shared(&seen(lab, clients)).len() == 1
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !settled(&lab, &clients) {
        let admin = lab.daemon.admin();
        let states: Vec<String> = jobs
            .iter()
            .map(|(_, id)| {
                format!(
                    "{id}: {} {}",
                    lab.job(&admin, *id)["state"],
                    lab.job(&admin, *id)["pending_reason"]
                )
            })
            .collect();
        assert!(
            Instant::now() < deadline,
            "all five jobs to run, two of them together: {states:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(settled(&lab, &clients));
    let seen = seen(&lab, &clients);
    for ((t, id), w) in jobs.iter().zip(&seen) {
        assert_eq!(w.len(), 4, "job {id}: {w:?}");
        assert_eq!(
            w[3], USERS[*t].1,
            "job {id} runs as its tenant's user: {w:?}"
        );
        assert_eq!(w[2].split(',').count(), 4, "job {id} sees four GPUs: {w:?}");
    }
    // Exactly one pair shares an allocation, and with it the node and the GPUs; the API says so.
    let pairs = shared(&seen);
    let [(a, b)] = pairs.as_slice() else {
        panic!("one shared allocation: {seen:?}")
    };
    assert_eq!(seen[*a][1..3], seen[*b][1..3], "same node and GPUs");
    let ((ta, ja), (_, jb)) = (jobs[*a], jobs[*b]);
    assert_eq!(
        lab.job(&lab.daemon.admin(), ja)["shares_gpus_with"][0]["id"],
        json!(jb)
    );
    // No job's environment was ever on a command line another tenant could read.
    std::thread::sleep(Duration::from_secs(4));
    for (t, id) in &jobs {
        assert_eq!(
            file(&lab, &clients[*t], *id, "leak"),
            None,
            "job {id} saw a secret on a command line"
        );
    }
    // Every run is a step: the only Slurm jobs are the four allocations holding GPUs. (An
    // allocation already cancelled and COMPLETING is leaving: under CI's load one lab slurmd
    // took 66 s to complete a cancelled one, slurmctld's log shows, so it is not counted.)
    let holders = |lab: &Lab| -> Vec<String> {
        lab.slurm
            .jobs()
            .expect("squeue")
            .into_iter()
            .filter(|j| {
                j.id >= lab.first_slurm_id
                    && !j.state.is_finished()
                    && j.state != SlurmJobState::Completing
            })
            .map(|j| j.name)
            .collect()
    };
    // (An allocation of a run Muri regrouped before the plan settled ends only once its run has
    // had its grace period: wait for those to leave squeue.)
    let four_allocations = |names: &[String]| {
        names.len() == 4 && names.iter().all(|n| n.starts_with("arbiter-share-"))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut names = holders(&lab);
    while !four_allocations(&names) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        names = holders(&lab);
    }
    assert!(four_allocations(&names), "{names:?}");
    // The daemon dies and comes back: it finds every run again, the pair included (Muri may
    // then regroup: its list order is rebuilt from the arrivals).
    lab.daemon.kill9();
    lab.restart(&["--policy", "muri-s", "--round-s", "1"]);
    let clients = [lab.tenant("alice"), lab.tenant("bob")];
    for (t, id) in &jobs {
        let job = lab.job(&clients[*t], *id);
        let adopted = job["history"].as_array().expect("history").iter().any(|h| {
            h["why"]
                .as_str()
                .is_some_and(|w| w.starts_with("re-adopted run"))
        });
        assert!(adopted, "job {id}'s run found again: {job}");
    }
    // One member is cancelled: its tasks get the checkpoint signal (the step, not srun, gets
    // it: the job exits 0 on its own), the other keeps the allocation.
    clients[ta]
        .post(&format!("/v1/jobs/{ja}/cancel"), &json!({}))
        .expect("cancel");
    wait_state(&clients[ta], ja, "cancelled", 30);
    let signals = file(&lab, &clients[ta], ja, "signals");
    assert!(
        signals.as_deref().is_some_and(|s| s.ends_with("term")),
        "{signals:?}"
    );
    let log = clients[ta]
        .get_text(&format!("/v1/jobs/{ja}/logs"))
        .expect("log");
    assert!(!log.contains("forcing job termination"), "{log}");
    // All cancelled: every allocation is released.
    for (t, id) in jobs.iter().filter(|(_, id)| *id != ja) {
        clients[*t]
            .post(&format!("/v1/jobs/{id}/cancel"), &json!({}))
            .expect("cancel");
    }
    for (t, id) in &jobs {
        wait_state(&clients[*t], *id, "cancelled", 30);
    }
    // Cancelled at once, but a loaded node may take Slurm's KillWait to end a killed step.
    wait_for("the allocations to be released", 120, || {
        holders(&lab).is_empty()
    });
    // Attack: bob's job asks to work in alice's private checkpoint directory. Its step is
    // started by the allocation's owner (root); the job enters the directory only as bob, so
    // it cannot, and fails without listing it.
    let private = lab.job(&clients[0], jobs[0].1)["checkpoint_dir"]
        .as_str()
        .expect("checkpoint_dir")
        .to_string();
    let mut body = json!({ "command": "ls > \"$ARBITER_CHECKPOINT_DIR/stolen\"", "gpus": 1, "max_retries": 0, "working_dir": private });
    body["iteration_stages"] = stages[0].clone();
    if let Ok(answer) = clients[1].post("/v1/jobs", &body) {
        let id = answer["id"].as_u64().expect("id");
        wait_state(&clients[1], id, "failed", 60);
        let ckpt = PathBuf::from(
            lab.job(&clients[1], id)["checkpoint_dir"]
                .as_str()
                .expect("checkpoint_dir"),
        );
        assert!(
            !ckpt.join("stolen").exists(),
            "bob listed alice's directory"
        );
    }
}

#[test]
#[ignore = "needs root and the lab Slurm cluster (scripts/slurm-up.sh); .ci/run runs it"]
fn slurm_an_array_task_sees_slurms_array_variables_and_a_dependency_waits_under_slurm() {
    let lab = Lab::start(&["--policy", "fifo", "--round-s", "1"]);
    let alice = lab.tenant("alice");
    let array = alice
        .post("/v1/jobs", &json!({ "command": "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID count $SLURM_ARRAY_TASK_COUNT arbiter $ARBITER_ARRAY_TASK_ID", "array": "3,5", "working_dir": lab.work() }))
        .expect("array")["id"]
        .as_u64()
        .expect("id");
    let after = submit(
        &alice,
        json!({ "command": "echo after", "dependency": format!("afterok:{array}"), "working_dir": lab.work() }),
    );
    for (k, index) in [(0, 3), (1, 5)] {
        wait_state(&alice, array + k, "succeeded", 60);
        let log = alice
            .get_text(&format!("/v1/jobs/{array}_{index}/logs"))
            .expect("log");
        assert!(
            log.contains(&format!("task {index} of {array} count 2 arbiter {index}")),
            "{log}"
        );
    }
    wait_state(&alice, after, "succeeded", 60);
    let started = |id: u64| {
        lab.job(&alice, id)["history"]
            .as_array()
            .and_then(|h| {
                h.iter()
                    .find(|t| t["to"] == "running")
                    .and_then(|t| t["at_unix_s"].as_i64())
            })
            .expect("started")
    };
    let ended = |id: u64| {
        lab.job(&alice, id)["history"]
            .as_array()
            .and_then(|h| {
                h.iter()
                    .rev()
                    .find(|t| t["to"] == "succeeded")
                    .and_then(|t| t["at_unix_s"].as_i64())
            })
            .expect("ended")
    };
    assert!(
        started(after) >= ended(array).max(ended(array + 1)),
        "the dependent job started after both tasks ended"
    );
}
