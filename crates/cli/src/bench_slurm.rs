//! `arbiter bench --suite slurm`: the Slurm executor against a real Slurm partition that Arbiter
//! owns (the lab cluster of `scripts/slurm-up.sh`, or an idle partition of your own).
//!
//! 1. Submit → RUNNING for the same one-GPU job, pinned to the same node, through `sbatch`
//!    directly and through Arbiter (`POST /v1/jobs` until Slurm lists the run as RUNNING),
//!    alternating, measured the same way (`squeue` polled every 10 ms): what Arbiter adds.
//! 2. 200 jobs submitted at once while two blockers hold every GPU: submissions per second, and
//!    the daemon's CPU time per scheduling round (`arbiter_rounds_total`) with 200 queued jobs.
//! 3. The blockers cancelled: how long the 200-job burst takes to run through.
//!
//! Needs root (jobs run as `--user` through `sbatch --uid`) and an idle partition.

use crate::bench_util::median;
use anyhow::{Context, Result, bail, ensure};
use arbiter_daemon::api::client::Client;
use arbiter_daemon::executor::slurm::cli::{BatchJob, SlurmCli};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One result row: what, value, unit.
type Row = (String, f64, &'static str);

pub fn run(partition: &str, user: &str, json_out: bool) -> Result<()> {
    ensure!(
        nix::unistd::Uid::effective().is_root(),
        "the Slurm bench needs root: its jobs run as `{user}` (sbatch --uid)"
    );
    let slurm = SlurmCli::new(partition);
    let nodes = slurm.nodes().with_context(|| {
        format!("reading Slurm partition `{partition}` (scripts/slurm-up.sh starts a lab cluster)")
    })?;
    let gpu_nodes: Vec<_> = nodes.iter().filter(|n| n.gpus > 0).collect();
    ensure!(
        !gpu_nodes.is_empty(),
        "Slurm partition `{partition}` has no node with GPUs"
    );
    let busy = slurm
        .jobs()?
        .iter()
        .filter(|j| !j.state.is_finished())
        .count();
    ensure!(
        busy == 0,
        "Slurm partition `{partition}` has {busy} jobs queued or running; the bench needs it idle (Arbiter owns the partition)"
    );
    let (uid, gid) = {
        let found = nix::unistd::User::from_name(user)?
            .with_context(|| format!("no unix user `{user}` (--user)"))?;
        (found.uid.as_raw(), found.gid.as_raw())
    };
    // Jobs open their logs as `user`: every directory above them must be traversable.
    let dir = std::env::temp_dir().join(format!("arbiter-bench-slurm-{}", std::process::id()));
    for sub in ["", "ckpt", "sbatch"] {
        std::fs::create_dir_all(dir.join(sub))?;
        std::fs::set_permissions(
            dir.join(sub),
            std::fs::Permissions::from_mode(if sub == "sbatch" { 0o777 } else { 0o755 }),
        )?;
    }
    let config = dir.join("arbiter.toml");
    std::fs::write(
        &config,
        format!(
            "executor = \"slurm\"\ntenant_users = {{ bench = \"{user}\" }}\ncheckpoint_roots = [\"{}\"]\nmax_queued_per_tenant = 1000\n[slurm]\npartition = \"{partition}\"\npoll_s = 0.2\n",
            dir.join("ckpt").display()
        ),
    )?;
    let mut daemon = Command::new(std::env::current_exe()?)
        .args(["serve", "--data-dir"])
        .arg(dir.join("data"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--policy",
            "fifo",
            "--round-s",
            "1",
            "--config",
        ])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let result = measure(
        &dir,
        &daemon,
        &slurm,
        gpu_nodes[0].name.as_str(),
        gpu_nodes[0].gpu_type.clone(),
        (uid, gid),
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = Command::new("scancel")
        .arg(format!("--partition={partition}"))
        .status();
    let _ = std::fs::remove_dir_all(&dir);
    crate::bench::print_rows("slurm", &result?, 2, json_out)
}

/// Polls `squeue` every 10 ms until the job named `name` (or with id `id`) is RUNNING or done.
fn wait_running(slurm: &SlurmCli, what: &[&str], started: Instant) -> Result<f64> {
    let squeue = slurm
        .bin_dir
        .as_ref()
        .map_or_else(|| PathBuf::from("squeue"), |d| d.join("squeue"));
    loop {
        let out = Command::new(&squeue)
            .args(["-h", "-o", "%T"])
            .args(what)
            .output()?;
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if ["RUNNING", "COMPLETING", "COMPLETED"].contains(&state.as_str()) {
            return Ok(started.elapsed().as_secs_f64());
        }
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "{what:?} not running after 60 s (state `{state}`)"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn measure(
    dir: &Path,
    daemon: &Child,
    slurm: &SlurmCli,
    node: &str,
    gpu_type: Option<String>,
    identity: (u32, u32),
) -> Result<Vec<Row>> {
    let data = dir.join("data");
    let started = Instant::now();
    let addr = loop {
        match std::fs::read_to_string(data.join("daemon.addr")) {
            Ok(a) if a.ends_with('\n') => break a.trim().to_string(),
            _ if started.elapsed() > Duration::from_secs(20) => bail!("the daemon did not start"),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let url = format!("http://{addr}");
    let admin = Client::new(
        &url,
        std::fs::read_to_string(data.join("admin.token"))?.trim(),
    );
    let token = admin.post("/v1/tenants", &json!({ "name": "bench" }))?["token"]
        .as_str()
        .context("token")?
        .to_string();
    let client = Client::new(&url, &token);
    let gpu_types: Vec<String> = gpu_type.iter().cloned().collect();
    let mut rows = Vec::new();

    // 1. Submit → RUNNING, sbatch and Arbiter alternating, one job at a time on the same node.
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for i in 0..10 {
        let job = BatchJob {
            name: format!("bench-sbatch-{i}"),
            nodes: vec![node.to_string()],
            gpu_type: gpu_type.clone(),
            gpus_per_node: 1,
            cpus_per_node: 1,
            memory_mb_per_node: 100,
            output: dir.join("sbatch").join(format!("{i}.log")),
            working_dir: dir.join("sbatch"),
            env: Default::default(),
            command: "sleep 0.2".into(),
            identity: Some(identity),
        };
        let t = Instant::now();
        let id = slurm.submit(&job)?;
        direct.push(wait_running(slurm, &["-j", &id.to_string()], t)?);
        wait_done(slurm, &format!("bench-sbatch-{i}"))?;
        let t = Instant::now();
        let id = client.post("/v1/jobs", &json!({ "command": "sleep 0.2", "gpu_types": gpu_types, "working_dir": dir.join("sbatch") }))?["id"].as_u64().context("id")?;
        through.push(wait_running(slurm, &["-n", &format!("arbiter-{id}.1")], t)?);
        wait_state(&client, id, "succeeded")?;
    }
    let (direct, through) = (median(direct), median(through));
    rows.push((
        "submit → RUNNING with sbatch, median of 10".to_string(),
        direct,
        "s",
    ));
    rows.push((
        "submit → RUNNING through Arbiter, median of 10".to_string(),
        through,
        "s",
    ));
    rows.push((
        "what Arbiter adds (median difference)".to_string(),
        through - direct,
        "s",
    ));

    // 2. 200 jobs submitted while blockers hold every GPU (one per GPU type: a job takes one).
    let cluster = admin.get("/v1/cluster")?;
    let mut per_type: std::collections::BTreeMap<String, u64> = Default::default();
    for node in cluster["nodes"].as_array().context("nodes")? {
        *per_type
            .entry(node["gpu_type"].as_str().unwrap_or("").to_string())
            .or_default() += node["gpu_ids"].as_array().map_or(0, |g| g.len() as u64);
    }
    let mut blockers = Vec::new();
    for (kind, gpus) in &per_type {
        let id = client.post("/v1/jobs", &json!({ "command": "sleep 600", "gpus": gpus, "gpu_types": [kind], "grace_s": 1, "working_dir": dir.join("sbatch") }))?["id"].as_u64().context("id")?;
        wait_state(&client, id, "running")?;
        blockers.push(id);
    }
    let t = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (url, token, work) = (url.clone(), token.clone(), dir.join("sbatch"));
            std::thread::spawn(move || -> Result<Vec<u64>> {
                let client = Client::new(&url, &token);
                (0..25)
                    .map(|_| {
                        client.post(
                            "/v1/jobs",
                            &json!({ "command": "sleep 0.5", "working_dir": work }),
                        )?["id"]
                            .as_u64()
                            .context("id")
                    })
                    .collect()
            })
        })
        .collect();
    let mut burst = Vec::new();
    for thread in threads {
        burst.extend(
            thread
                .join()
                .map_err(|_| anyhow::anyhow!("client thread panicked"))??,
        );
    }
    rows.push((
        "200 submissions per second (8 clients)".to_string(),
        200.0 / t.elapsed().as_secs_f64(),
        "/s",
    ));
    std::thread::sleep(Duration::from_secs(1));
    let (cpu0, (rounds0, round_s0)) = (cpu_s(daemon.id())?, rounds(&admin)?);
    std::thread::sleep(Duration::from_secs(10));
    let (cpu1, (rounds1, round_s1)) = (cpu_s(daemon.id())?, rounds(&admin)?);
    ensure!(rounds1 > rounds0, "no scheduling round in 10 s");
    let nodes = cluster["nodes"].as_array().map_or(0, Vec::len);
    rows.push((
        format!("one scheduling round, 200 queued on {nodes} nodes (wall, inside)"),
        (round_s1 - round_s0) * 1000.0 / (rounds1 - rounds0),
        "ms",
    ));
    rows.push((
        "daemon CPU per round, squeue polls every 0.2 s included".to_string(),
        (cpu1 - cpu0) * 1000.0 / (rounds1 - rounds0),
        "ms",
    ));

    // 3. The burst runs through once the blockers go.
    let t = Instant::now();
    for id in blockers {
        client.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))?;
    }
    for id in &burst {
        wait_state(&client, *id, "succeeded")?;
    }
    let makespan = t.elapsed().as_secs_f64();
    rows.push((
        "200-job burst (0.5 s each): all done after".to_string(),
        makespan,
        "s",
    ));
    rows.push((
        "200-job burst: runs per second".to_string(),
        200.0 / makespan,
        "/s",
    ));
    Ok(rows)
}

fn wait_done(slurm: &SlurmCli, name: &str) -> Result<()> {
    let started = Instant::now();
    while slurm
        .jobs()?
        .iter()
        .any(|j| j.name == name && !j.state.is_finished())
    {
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "{name} did not end in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn wait_state(client: &Client, id: u64, want: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let job = client.get(&format!("/v1/jobs/{id}"))?;
        let state = job["state"]["state"].as_str().unwrap_or("");
        if state == want {
            return Ok(());
        }
        ensure!(
            !matches!(state, "failed" | "cancelled"),
            "job {id} ended {state}: {job}"
        );
        ensure!(
            started.elapsed() < Duration::from_secs(300),
            "job {id} not {want} after 300 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// User + system CPU seconds of process `pid`.
fn cpu_s(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the `(comm)`: state is the 1st, utime the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').context("stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).context("utime")?.parse::<f64>()?
        + fields.get(12).context("stime")?.parse::<f64>()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)?.unwrap_or(100) as f64;
    Ok(ticks / hz)
}

/// Scheduling rounds so far, and seconds spent in them (`/metrics`).
fn rounds(admin: &Client) -> Result<(f64, f64)> {
    let metrics = admin.get_text("/metrics")?;
    let metric = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .with_context(|| format!("{name} in /metrics"))
    };
    Ok((
        metric("arbiter_rounds_total ")?,
        metric("arbiter_round_seconds_total ")?,
    ))
}
