//! The production commands: `arbiter serve` and the client commands that talk to it.

use anyhow::{bail, Context, Result};
use arbiter_daemon::client::Client;
use arbiter_daemon::config::ServeConfig;
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::PathBuf;

/// `arbiter serve` options. Each overrides the config file's key of the same name; the defaults
/// shown apply when neither gives one.
#[derive(clap::Args, Debug)]
#[command(after_help = "Stopping: SIGTERM or SIGINT (Ctrl-C) stops the daemon cleanly: it stops accepting connections, lets requests in flight finish (5 s at most), logs how many runs it leaves running, and exits 0. Runs keep running and are re-adopted at the next start.\n\nTenant isolation: as root (or with CAP_SETUID/CAP_SETGID) each tenant's jobs run as its own unix user (tenant_uid_range, tenant_users); otherwise tenants are NOT isolated from each other, the daemon says so, and it serves a second tenant only with allow_shared_identity = true. As root, give it a data directory other users can traverse (e.g. /var/lib/arbiter).\n\nConfig keys (every one optional; arbiter.example.toml lists them with their defaults): data_dir, listen, policy, round_s, min_run_s, gpus, cpus, memory_gib, admin_token_file, max_request_bytes, public_url, header_timeout_s (10), idle_timeout_s (60), request_timeout_s (30), max_connections (1024), max_queued_per_tenant (10000), max_log_bytes (1 GiB per run), max_processes_per_tenant (32768), tenant_uid_range, tenant_users, checkpoint_roots, allow_shared_identity, gittins_prior, executor (local), [slurm] partition (arbiter), bin_dir, command_timeout_s (10), poll_s (1).")]
pub struct ServeArgs {
    /// TOML config (keys: see README "Production mode"); every key optional.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data directory (store, logs, checkpoints, admin token) [default: arbiter-data]
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7070]
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Policy (any simulator policy: fifo, las, srtf, max-min-fairness, ...) [default: fifo]
    #[arg(long)]
    pub policy: Option<String>,
    /// GPUs: `auto` (nvidia-smi) or declared, e.g. 4xa100, 2xv100,2xk80 [default: auto]
    #[arg(long)]
    pub gpus: Option<String>,
    /// Seconds between scheduling rounds (the policy also runs at every submit and job end)
    /// [default: 30]
    #[arg(long)]
    pub round_s: Option<f64>,
    /// Who runs the jobs: `local` (process sessions on this machine) or `slurm` (batch jobs
    /// pinned to the nodes the policy chose, in the partition of `[slurm] partition`, default
    /// `arbiter`; the cluster is read with `sinfo`) [default: local]
    #[arg(long)]
    pub executor: Option<String>,
    /// Log level (error, warn, info, debug, trace) or a filter such as
    /// `info,arbiter_daemon=debug`; logs go to stderr [default: $RUST_LOG, else info]
    #[arg(long)]
    pub log_level: Option<String>,
}

/// Client commands; the daemon is found with `ARBITER_URL` (default http://127.0.0.1:7070) and
/// the caller identified by `ARBITER_TOKEN` (or `--token-file`).
#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process: its size does not matter
pub enum ClientCommand {
    /// Submit a job: `arbiter submit --gpus 2 -- python train.py --epochs 10`.
    ///
    /// Environment: like Slurm's `--export`, the job gets the environment `arbiter submit` runs
    /// in (`--export ALL`, the default), none of it (`--export NONE`), or only the variables
    /// listed (`--export PATH,HOME`; `NAME=VALUE` items set a value, and `ALL,NAME=VALUE` adds to
    /// the whole environment); `--env KEY=VALUE` then adds or overrides. Variables Arbiter sets
    /// for each run are never passed: `ARBITER_*` (your `ARBITER_TOKEN` included),
    /// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`; `--env` refuses them.
    ///
    /// The submission carries a random idempotency key and is retried a few times if the daemon
    /// cannot be reached: a retry never creates a second job.
    Submit {
        /// GPUs.
        #[arg(long, default_value_t = 1)]
        gpus: u32,
        /// Allowed GPU types (comma-separated; default any).
        #[arg(long, value_delimiter = ',')]
        gpu_types: Vec<String>,
        /// Priority (larger first where the policy honours it).
        #[arg(long, default_value_t = 0)]
        priority: i32,
        /// Working directory (default: the current one).
        #[arg(long)]
        working_dir: Option<PathBuf>,
        /// Which of this shell's environment variables the job gets: ALL, NONE, or a list
        /// (NAME or NAME=VALUE items, comma-separated, optionally after ALL or NONE).
        #[arg(long, default_value = "ALL", value_name = "ALL|NONE|NAME,...")]
        export: String,
        /// Environment variables for the job, KEY=VALUE (repeatable), on top of --export.
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// Checkpoint directory (default: one per job in the daemon's data directory).
        #[arg(long)]
        checkpoint_dir: Option<PathBuf>,
        /// Signal asking the job to checkpoint and exit.
        #[arg(long, default_value = "TERM")]
        checkpoint_signal: String,
        /// Seconds between that signal and SIGKILL.
        #[arg(long, default_value_t = 30)]
        grace_s: u64,
        /// Wall-clock limit of a run, seconds.
        #[arg(long)]
        max_run_time_s: Option<u64>,
        /// Expected run time, seconds (for SRTF/SJF-like policies).
        #[arg(long)]
        expected_run_time_s: Option<u64>,
        /// Retries after failed runs (at most 100; they back off 1, 2, 4, ... s).
        #[arg(long, default_value_t = 2)]
        max_retries: u32,
        /// CPU cores (default: the policy's share, else the GPU-proportional share).
        #[arg(long)]
        cpus: Option<u32>,
        /// Memory, GiB (default: the policy's share, else the GPU-proportional share).
        #[arg(long)]
        memory_gib: Option<u32>,
        /// Seconds a started run is protected from preemption (default: the daemon's min_run_s).
        #[arg(long)]
        min_run_time_s: Option<u64>,
        /// Opportunistic (AntMan): run only on GPUs other jobs leave idle, outside the policy,
        /// quotas and fair shares; yield at once (checkpoint signal, at most 5 s) when a job the
        /// policy placed needs the GPUs.
        #[arg(long)]
        opportunistic: bool,
        /// Seconds one training iteration spends reading input (storage I/O), on the CPU
        /// (preprocessing) and on the GPU, e.g. `--stages 0.05,0.1,0.35`. Muri's policies
        /// (`muri-s`, `muri-l`) use them to decide which jobs interleave well: jobs stressing
        /// different resources may share the same GPUs, taking turns within each iteration.
        /// Without it the job runs alone under them; other policies ignore it.
        #[arg(long, value_name = "IO,CPU,GPU")]
        stages: Option<String>,
        /// What kind of job this is (`resnet50`, `bert-bs32`; letters, digits, `. _ - + : /`),
        /// within your tenant. The daemon learns from progress reports how fast each type runs
        /// next to each other type on the same GPUs (`arbiter pairs`), and `gandiva`,
        /// `max-min-fairness-packed` and `horus` pair jobs by it.
        #[arg(long)]
        job_type: Option<String>,
        /// Name.
        #[arg(long)]
        name: Option<String>,
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// List jobs (yours; the admin sees all).
    Jobs {
        /// Only jobs in this state: queued, running, stopping, succeeded, failed, cancelled.
        #[arg(long)]
        state: Option<String>,
    },
    /// Show one job: state, GPUs, progress, history, why it waits.
    Show {
        /// Job id.
        id: u32,
    },
    /// Cancel a job.
    Cancel {
        /// Job id.
        id: u32,
    },
    /// Print a job's output (at most 16 MiB per call; `--offset` pages through longer logs).
    Logs {
        /// Job id.
        id: u32,
        /// Only the last N bytes.
        #[arg(long, conflicts_with = "offset")]
        tail_bytes: Option<u64>,
        /// Start at this byte.
        #[arg(long)]
        offset: Option<u64>,
    },
    /// GPUs, free GPUs, running jobs.
    Cluster,
    /// What the daemon learned of job types sharing GPUs: each type's speed next to another
    /// type over its speed alone (yours; the admin sees all).
    Pairs,
    /// List tenants, or manage them (admin): `arbiter tenants add NAME --weight 2`.
    Tenants {
        /// What to do; without one, list the tenants.
        #[command(subcommand)]
        action: Option<TenantsCommand>,
    },
}

/// `arbiter tenants ...` (admin only).
#[derive(Subcommand, Debug)]
pub enum TenantsCommand {
    /// List the tenants.
    List,
    /// Create a tenant and print its token (shown once). An existing tenant is refused.
    Add {
        /// Name: 1-64 of [A-Za-z0-9_-].
        name: String,
        /// Fair-share weight (hierarchical policies).
        #[arg(long, default_value_t = 1.0)]
        weight: f64,
        /// Most GPUs its jobs may hold at once (default: no limit).
        #[arg(long)]
        gpu_quota: Option<u32>,
    },
    /// Change a tenant's weight or GPU quota; its token stays.
    Update {
        /// Tenant.
        name: String,
        /// New fair-share weight.
        #[arg(long)]
        weight: Option<f64>,
        /// New GPU quota.
        #[arg(long, conflicts_with = "no_gpu_quota")]
        gpu_quota: Option<u32>,
        /// Remove the GPU quota.
        #[arg(long)]
        no_gpu_quota: bool,
    },
    /// Remove a tenant (its token stops working). Refused while it has queued or running jobs.
    Remove {
        /// Tenant.
        name: String,
    },
    /// Give a tenant a new token (shown once); the old one stops working at once.
    RotateToken {
        /// Tenant.
        name: String,
    },
}

/// Runs `arbiter serve`.
pub fn serve(args: ServeArgs) -> Result<()> {
    init_logging(args.log_level.as_deref())?;
    let mut config = match &args.config {
        Some(path) => ServeConfig::read(path)?,
        None => ServeConfig::default(),
    };
    if let Some(v) = args.data_dir {
        config.data_dir = v;
    }
    if let Some(v) = args.listen {
        config.listen = v;
    }
    if let Some(v) = args.policy {
        config.policy = v;
    }
    if let Some(v) = args.gpus {
        config.gpus = v;
    }
    if let Some(v) = args.round_s {
        config.round_s = v;
    }
    if let Some(v) = args.executor {
        config.executor = v.parse().map_err(|e: String| anyhow::anyhow!("--executor: {e}"))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(arbiter_daemon::serve(config)).map_err(|e| anyhow::anyhow!("{e}"));
    // Blocking tasks (store writes) get a moment to finish; runs are not ours to wait for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    result
}

/// Logs to stderr at `level` (else `RUST_LOG`, else `info`).
fn init_logging(level: Option<&str>) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let filter = match level {
        Some(l) => {
            // A bare word that is not a level would silently be read as a target name.
            if !l.contains(['=', ',']) && !LEVELS.contains(&l.to_ascii_lowercase().as_str()) {
                bail!("--log-level `{l}`: not one of {} (or a filter such as `info,arbiter_daemon=debug`)", LEVELS.join(", "));
            }
            EnvFilter::try_new(l).with_context(|| format!("--log-level `{l}`"))?
        }
        None => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).with_context(|| format!("RUST_LOG `{v}`"))?,
            _ => EnvFilter::new("info"),
        },
    };
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| anyhow::anyhow!("logging: {e}"))
}

fn client(token_file: Option<&PathBuf>) -> Result<Client> {
    let url = std::env::var("ARBITER_URL").unwrap_or_else(|_| "http://127.0.0.1:7070".into());
    let token = match (std::env::var("ARBITER_TOKEN"), token_file) {
        (_, Some(path)) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        (Ok(t), None) => t,
        (Err(_), None) => bail!("set ARBITER_TOKEN (a tenant's token, or the admin token from <data_dir>/admin.token), or pass --token-file"),
    };
    Ok(Client::new(&url, &token))
}

/// Runs a client command.
pub fn run_client(command: ClientCommand, token_file: Option<&PathBuf>, json_out: bool) -> Result<()> {
    let client = client(token_file)?;
    let print = |v: &Value| -> Result<()> {
        crate::outln!("{}", serde_json::to_string_pretty(v)?);
        Ok(())
    };
    match command {
        ClientCommand::Submit {
            gpus,
            gpu_types,
            priority,
            working_dir,
            export,
            env,
            checkpoint_dir,
            checkpoint_signal,
            grace_s,
            max_run_time_s,
            expected_run_time_s,
            max_retries,
            cpus,
            memory_gib,
            min_run_time_s,
            opportunistic,
            stages,
            job_type,
            name,
            command,
        } => {
            let env_map = job_env(&export, &env, std::env::vars_os())?;
            let cwd = match working_dir {
                Some(d) => std::fs::canonicalize(&d).with_context(|| format!("--working-dir {}", d.display()))?,
                None => std::env::current_dir()?,
            };
            let command_line = command.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
            let mut body = json!({
                "command": command_line, "gpus": gpus, "priority": priority, "working_dir": cwd.display().to_string(),
                "env": env_map, "checkpoint_signal": checkpoint_signal, "grace_s": grace_s, "max_retries": max_retries,
            });
            if !gpu_types.is_empty() {
                body["gpu_types"] = json!(gpu_types);
            }
            if let Some(d) = checkpoint_dir {
                body["checkpoint_dir"] = json!(std::path::absolute(&d)?.display().to_string());
            }
            if let Some(v) = max_run_time_s {
                body["max_run_time_s"] = json!(v);
            }
            if let Some(v) = expected_run_time_s {
                body["expected_run_time_s"] = json!(v);
            }
            if let Some(v) = cpus {
                body["cpus"] = json!(v);
            }
            if let Some(v) = memory_gib {
                body["memory_gib"] = json!(v);
            }
            if let Some(v) = min_run_time_s {
                body["min_run_time_s"] = json!(v);
            }
            if let Some(v) = name {
                body["name"] = json!(v);
            }
            if opportunistic {
                body["opportunistic"] = json!(true);
            }
            if let Some(text) = stages {
                body["iteration_stages"] = parse_stages(&text)?;
            }
            if let Some(t) = job_type {
                body["job_type"] = json!(t);
            }
            // One key per invocation: the retries inside `submit` reuse it.
            let reply = client.submit(&body, &arbiter_daemon::auth::new_token())?;
            if json_out {
                print(&reply)?;
            } else {
                crate::outln!("submitted job {}", reply["id"]);
            }
        }
        ClientCommand::Jobs { state } => {
            // Every page (the daemon answers 1,000 jobs at a time).
            let mut all = Vec::new();
            let mut after: Option<u64> = None;
            loop {
                let mut path = format!("/v1/jobs?limit={}", arbiter_daemon::api::MAX_JOBS_PAGE);
                if let Some(s) = &state {
                    path.push_str(&format!("&state={s}"));
                }
                if let Some(a) = after {
                    path.push_str(&format!("&after={a}"));
                }
                let page = client.get(&path)?;
                all.extend(page["jobs"].as_array().cloned().unwrap_or_default());
                match page["next_after"].as_u64() {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            let reply = json!({ "jobs": all });
            if json_out {
                print(&reply)?;
            } else {
                crate::out!("{}", printable(&jobs_table(reply["jobs"].as_array().map_or(&[][..], Vec::as_slice))));
            }
        }
        ClientCommand::Show { id } => {
            let job = client.get(&format!("/v1/jobs/{id}"))?;
            if json_out {
                print(&job)?;
            } else {
                crate::out!("{}", printable(&job_text(&job)));
            }
        }
        ClientCommand::Cancel { id } => {
            let reply = client.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))?;
            if json_out {
                print(&reply)?;
            } else {
                crate::outln!("cancelling job {id}");
            }
        }
        ClientCommand::Logs { id, tail_bytes, offset } => {
            let path = match (tail_bytes, offset) {
                (Some(n), _) => format!("/v1/jobs/{id}/logs?tail_bytes={n}"),
                (None, Some(n)) => format!("/v1/jobs/{id}/logs?offset={n}"),
                (None, None) => format!("/v1/jobs/{id}/logs"),
            };
            let part = match client.get_log(&path, &mut std::io::stdout().lock()) {
                Err(arbiter_daemon::client::ClientError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                other => other?,
            };
            if part.truncated {
                let next = part.start + part.len;
                if tail_bytes.is_some() {
                    eprintln!("arbiter: only the last {} bytes of {} were sent (the daemon's per-response cap)", part.len, part.size);
                } else {
                    eprintln!("arbiter: output cut at byte {next} of {}; continue with `arbiter logs {id} --offset {next}`", part.size);
                }
            }
        }
        ClientCommand::Cluster => {
            let cluster = client.get("/v1/cluster")?;
            if json_out {
                print(&cluster)?;
            } else {
                crate::out!("{}", printable(&cluster_text(&cluster)));
            }
        }
        ClientCommand::Pairs => {
            let reply = client.get("/v1/pairs")?;
            if json_out {
                print(&reply)?;
            } else {
                crate::out!("{}", printable(&pairs_table(reply["pairs"].as_array().map_or(&[][..], Vec::as_slice))));
            }
        }
        ClientCommand::Tenants { action } => match action.unwrap_or(TenantsCommand::List) {
            TenantsCommand::List => {
                let reply = client.get("/v1/tenants")?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::out!("{}", printable(&tenants_table(reply["tenants"].as_array().map_or(&[][..], Vec::as_slice))));
                }
            }
            TenantsCommand::Add { name, weight, gpu_quota } => {
                let reply = client.post("/v1/tenants", &json!({ "name": name, "weight": weight, "gpu_quota": gpu_quota }))?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::outln!("tenant {name} created; its token (shown once): {}", reply["token"].as_str().unwrap_or(""));
                }
            }
            TenantsCommand::Update { name, weight, gpu_quota, no_gpu_quota } => {
                let mut body = serde_json::Map::new();
                if let Some(w) = weight {
                    body.insert("weight".into(), json!(w));
                }
                if no_gpu_quota {
                    body.insert("gpu_quota".into(), Value::Null);
                } else if let Some(q) = gpu_quota {
                    body.insert("gpu_quota".into(), json!(q));
                }
                if body.is_empty() {
                    bail!("nothing to change: give --weight, --gpu-quota or --no-gpu-quota");
                }
                let reply = client.patch(&format!("/v1/tenants/{name}"), &Value::Object(body))?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::outln!("tenant {name}: weight {}, GPU quota {}", number(&reply["weight"]), quota(&reply["gpu_quota"]));
                }
            }
            TenantsCommand::Remove { name } => {
                let reply = client.delete(&format!("/v1/tenants/{name}"))?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::outln!("tenant {name} removed; its token no longer works");
                }
            }
            TenantsCommand::RotateToken { name } => {
                let reply = client.post(&format!("/v1/tenants/{name}/token"), &json!({}))?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::outln!("tenant {name}: new token (shown once; the old one no longer works): {}", reply["token"].as_str().unwrap_or(""));
                }
            }
        },
    }
    Ok(())
}

/// Whether Arbiter sets `key` for every run itself (a submission may not).
fn arbiter_owned(key: &str) -> bool {
    key.starts_with("ARBITER_") || key == "CUDA_VISIBLE_DEVICES" || key == "CUDA_DEVICE_ORDER"
}

/// The job's environment from `--export` (applied to `environment`, the submitter's) and
/// `--env` on top, without the variables Arbiter owns (dropped from the export, refused in
/// `--env` and in an explicit export list).
fn job_env(export: &str, env: &[String], environment: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Result<std::collections::BTreeMap<String, String>> {
    let mut all = false;
    let mut named = Vec::new();
    let mut set = Vec::new();
    for item in export.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "ALL" => all = true,
            "NONE" => {}
            _ => {
                let (key, value) = match item.split_once('=') {
                    Some((k, v)) => (k, Some(v)),
                    None => (item, None),
                };
                if arbiter_owned(key) {
                    bail!("--export {key}: Arbiter sets {key} for each run itself (ARBITER_*, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER cannot be passed)");
                }
                match value {
                    Some(v) => set.push((key.to_string(), v.to_string())),
                    None => named.push(key.to_string()),
                }
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for (key, value) in environment {
        let (Some(key), Some(value)) = (key.to_str(), value.to_str()) else {
            eprintln!("arbiter: not exporting {}: not UTF-8", key.to_string_lossy());
            continue;
        };
        if (all || named.iter().any(|n| n == key)) && !arbiter_owned(key) {
            out.insert(key.to_string(), value.to_string());
        }
    }
    out.extend(set);
    for pair in env {
        let (key, value) = pair.split_once('=').with_context(|| format!("--env `{pair}` is not KEY=VALUE"))?;
        if key.is_empty() {
            bail!("--env `{pair}`: empty name");
        }
        if arbiter_owned(key) {
            bail!("--env {key}: Arbiter sets {key} for each run itself (ARBITER_*, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER cannot be set)");
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

/// `text` on one line, at most `width` characters: cut at a word boundary, with `…`.
/// Text a tenant wrote (job names, commands, reasons) made safe for a terminal: control
/// characters other than newlines are shown escaped (`\u{1b}`), so a name cannot carry escape
/// sequences that rewrite the admin's screen or clipboard.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() && c != '\n' { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

fn cut_words(text: &str, width: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= width {
        return flat;
    }
    let mut out = String::new();
    for word in flat.split(' ') {
        let extra = word.chars().count() + usize::from(!out.is_empty());
        if out.chars().count() + extra > width - 1 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        // One word longer than the column: no boundary to cut at.
        out = flat.chars().take(width - 1).collect();
    }
    out.push('…');
    out
}

/// Pads `text` (already at most `width` characters) to `width` characters.
fn pad(text: &str, width: usize) -> String {
    format!("{text}{}", " ".repeat(width.saturating_sub(text.chars().count())))
}

fn gpu_list(v: &Value) -> Option<String> {
    v.as_array().map(|g| g.iter().map(Value::to_string).collect::<Vec<_>>().join(","))
}

fn number(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn quota(v: &Value) -> String {
    if v.is_null() { "none".into() } else { v.to_string() }
}

/// The `arbiter jobs` table: `gpus` is how many the job asked for, `on` the GPU indices it holds
/// (marked `*` when another job holds them too); the reason it waits only for queued jobs.
fn jobs_table(jobs: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{:>5}  {:<12} {:<16} {:<10} {:>4} {:<8} {:<40} waiting because", "id", "tenant", "name", "state", "gpus", "on", "command");
    let mut shared = false;
    for job in jobs {
        let state = job["state"]["state"].as_str().unwrap_or("");
        let mut on = gpu_list(&job["state"]["gpus"]).unwrap_or_else(|| "-".into());
        if job["shares_gpus_with"].as_array().is_some_and(|s| !s.is_empty()) {
            on.push('*');
            shared = true;
        }
        let waiting = if state == "queued" { job["pending_reason"].as_str().unwrap_or("") } else { "" };
        let line = format!(
            "{:>5}  {} {} {} {:>4} {} {} {}",
            job["id"].as_u64().unwrap_or(0),
            pad(&cut_words(job["tenant"].as_str().unwrap_or(""), 12), 12),
            pad(&cut_words(job["request"]["name"].as_str().unwrap_or("-"), 16), 16),
            pad(state, 10),
            number(&job["request"]["gpus"]),
            pad(&cut_words(&on, 8), 8),
            pad(&cut_words(job["request"]["command"].as_str().unwrap_or(""), 40), 40),
            waiting
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if shared {
        let _ = writeln!(out, "* shares its GPUs with another job (the policy interleaves them; `arbiter show ID` says which)");
    }
    out
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
fn utc(unix_s: i64) -> String {
    // Howard Hinnant's civil_from_days.
    let (days, secs) = (unix_s.div_euclid(86_400), unix_s.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

/// `arbiter show ID` as text.
fn job_text(job: &Value) -> String {
    use std::fmt::Write;
    let r = &job["request"];
    let st = &job["state"];
    let state = st["state"].as_str().unwrap_or("?");
    let mut out = String::new();
    let name = r["name"].as_str().map(|n| format!(" ({n})")).unwrap_or_default();
    let _ = writeln!(out, "job {}{name}, tenant {}", number(&job["id"]), job["tenant"].as_str().unwrap_or("?"));
    let mut state_line = state.to_string();
    if let Some(gpus) = gpu_list(&st["gpus"]) {
        let _ = write!(state_line, " on GPUs {gpus}");
    }
    if let Some(pid) = st["pid"].as_u64().filter(|p| *p > 0) {
        let _ = write!(state_line, ", process group {pid}");
    }
    if let Some(t) = st["started_unix_s"].as_i64() {
        let _ = write!(state_line, ", since {} UTC", utc(t));
    }
    if let Some(reason) = st["reason"].as_str() {
        let _ = write!(state_line, " ({reason})");
    }
    let _ = writeln!(out, "  state:      {state_line}");
    if let Some(shares) = sharing_text(&job["shares_gpus_with"]) {
        let _ = writeln!(out, "  shares:     {shares} (the policy interleaves them)");
    }
    if state == "queued"
        && let Some(reason) = job["pending_reason"].as_str() {
            let _ = writeln!(out, "  waiting:    {reason}");
        }
    let _ = writeln!(out, "  command:    {}", r["command"].as_str().unwrap_or("").trim());
    if let Some(dir) = r["working_dir"].as_str() {
        let _ = writeln!(out, "  directory:  {dir}");
    }
    let types = r["gpu_types"].as_array().filter(|t| !t.is_empty()).map(|t| format!(" of type {}", t.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("/"))).unwrap_or_default();
    let plural = if r["gpus"].as_u64() == Some(1) { "" } else { "s" };
    let kind = if r["opportunistic"] == true { ", opportunistic (idle GPUs only; yields at once)" } else { "" };
    let _ = writeln!(out, "  asks for:   {} GPU{plural}{types}, priority {}{kind}", number(&r["gpus"]), number(&r["priority"]));
    if let Some(t) = r["job_type"].as_str() {
        let _ = writeln!(out, "  job type:   {t}");
    }
    if let Some(st) = r["iteration_stages"].as_object() {
        let s = |k: &str| st.get(k).and_then(Value::as_f64).map_or_else(|| "?".to_string(), |v| format!("{v}"));
        let _ = writeln!(out, "  iteration:  I/O {} s, CPU {} s, GPU {} s", s("io_s"), s("cpu_s"), s("gpu_s"));
    }
    if let Some(t) = job["submitted_unix_s"].as_i64() {
        let _ = writeln!(out, "  submitted:  {} UTC", utc(t));
    }
    let exit = job["exit_code"].as_i64().map_or_else(|| "-".to_string(), |c| c.to_string());
    let _ = writeln!(
        out,
        "  runs:       {} (failures {} of {} allowed retries, preemptions {}), {:.0} s on GPUs, last exit code {exit}",
        number(&job["runs"]),
        number(&job["failures"]),
        number(&r["max_retries"]),
        number(&job["preemptions"]),
        job["executed_s"].as_f64().unwrap_or(0.0)
    );
    if job["progress"].is_object() {
        let p = &job["progress"];
        let total = job["total_steps"].as_u64().map(|t| format!(" of {t}")).unwrap_or_default();
        let rate = p["throughput"].as_f64().map(|t| format!(" at {t:.2} steps/s")).unwrap_or_default();
        let _ = writeln!(out, "  progress:   {} steps{total}{rate}", number(&p["steps"]));
    }
    if let Some(history) = job["history"].as_array() {
        let _ = writeln!(out, "  history:");
        for t in history {
            let _ = writeln!(out, "    {} UTC  {:<10} {}", utc(t["at_unix_s"].as_i64().unwrap_or(0)), t["to"].as_str().unwrap_or(""), t["why"].as_str().unwrap_or(""));
        }
    }
    out
}

/// `arbiter cluster` as text. Keys this client does not know are printed as they come, so that
/// what a newer daemon adds (warnings above all) is not hidden.
fn cluster_text(c: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "policy {}, a round every {} s, {} executor", c["policy"].as_str().unwrap_or("?"), number(&c["round_s"]), c["executor"].as_str().unwrap_or("local"));
    let groups: Vec<String> = c["gpus"].as_array().into_iter().flatten().map(|g| format!("{}x{}", number(&g["count"]), g["type"].as_str().unwrap_or("?"))).collect();
    let total: u64 = c["gpus"].as_array().into_iter().flatten().filter_map(|g| g["count"].as_u64()).sum();
    let free = gpu_list(&c["free_gpus"]).unwrap_or_default();
    let free_count = c["free_gpus"].as_array().map_or(0, Vec::len);
    let _ = writeln!(
        out,
        "GPUs: {total} ({}), {free_count} free{}",
        if groups.is_empty() { "none".into() } else { groups.join(", ") },
        if free.is_empty() { String::new() } else { format!(": {free}") }
    );
    let _ = writeln!(out, "CPUs: {}, memory: {} GiB; CPU/memory limits {}", number(&c["cpus"]), number(&c["memory_gib"]), c["cpu_memory_limits"].as_str().unwrap_or("?"));
    if let Some(nodes) = c["nodes"].as_array().filter(|n| !n.is_empty()) {
        let _ = writeln!(out, "nodes:");
        let _ = writeln!(out, "  {:<16} {:<8} {:>4} {:>5} {:>7}  {:<8} jobs (GPU ids)", "node", "type", "GPUs", "CPUs", "mem GiB", "rack");
        for n in nodes {
            let jobs: Vec<String> = n["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| {
                    let gpus = gpu_list(&j["gpus"]).unwrap_or_default();
                    if j["id"].is_null() { format!("(another tenant's): {gpus}") } else { format!("{}: {gpus}", number(&j["id"])) }
                })
                .collect();
            // A node that takes no new runs (down or drained in Slurm) says so after its name.
            let name = n["name"].as_str().unwrap_or("?");
            let name = if n["takes_new_runs"] == false { format!("{name} (no new)") } else { name.to_string() };
            let line = format!(
                "  {} {} {:>4} {:>5} {:>7}  {} {}",
                pad(&cut_words(&name, 16), 16),
                pad(n["gpu_type"].as_str().unwrap_or("?"), 8),
                n["gpu_ids"].as_array().map_or(0, Vec::len),
                number(&n["cpus"]),
                number(&n["memory_gib"]),
                pad(n["rack"].as_str().unwrap_or("?"), 8),
                if jobs.is_empty() { "-".to_string() } else { jobs.join("; ") }
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    let running = c["running"].as_array().map_or(&[][..], Vec::as_slice);
    if running.is_empty() {
        let _ = writeln!(out, "running: none");
    } else {
        let _ = writeln!(out, "running:");
        let _ = writeln!(out, "  {:>5}  {:<12} {:<16} {:<10} on GPUs", "id", "tenant", "name", "state");
        for job in running {
            let gpus = gpu_list(&job["gpus"]).unwrap_or_default();
            if job["id"].is_null() {
                let _ = writeln!(out, "  {:>5}  {:<12} {:<16} {:<10} {gpus}", "-", "(another)", "-", "-");
            } else {
                let line = format!(
                    "  {:>5}  {} {} {} {gpus}",
                    number(&job["id"]),
                    pad(&cut_words(job["tenant"].as_str().unwrap_or(""), 12), 12),
                    pad(&cut_words(job["name"].as_str().unwrap_or("-"), 16), 16),
                    pad(job["state"].as_str().unwrap_or("running"), 10)
                );
                let _ = writeln!(out, "{line}");
            }
        }
    }
    match (c["queued"].as_u64(), c["queued_total"].as_u64()) {
        (Some(mine), Some(total)) if mine != total => {
            let _ = writeln!(out, "queued: {mine} of yours, {total} in all");
        }
        (Some(n), _) => {
            let _ = writeln!(out, "queued: {n}");
        }
        _ => {}
    }
    if let Some(isolation) = c["tenant_isolation"].as_str() {
        let warning = if c["tenants_isolated"] == false { "WARNING: " } else { "" };
        let _ = writeln!(out, "tenants: {warning}{isolation}");
    }
    const SHOWN: [&str; 14] = ["policy", "executor", "nodes", "round_s", "gpus", "free_gpus", "cpus", "memory_gib", "cpu_memory_limits", "running", "queued", "queued_total", "tenants_isolated", "tenant_isolation"];
    for (key, value) in c.as_object().into_iter().flatten().filter(|(k, _)| !SHOWN.contains(&k.as_str())) {
        let shown = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(out, "{}: {shown}", key.replace('_', " "));
    }
    out
}

/// `arbiter tenants` as a table.
fn tenants_table(tenants: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{:<24} {:>8} {:>9}", "tenant", "weight", "GPU quota");
    for t in tenants {
        let _ = writeln!(out, "{:<24} {:>8} {:>9}", t["name"].as_str().unwrap_or(""), number(&t["weight"]), quota(&t["gpu_quota"]));
    }
    out
}

/// The learned co-location table (`GET /v1/pairs`): one line per job type and partner type.
fn pairs_table(rows: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if rows.is_empty() {
        let _ = writeln!(out, "nothing learned yet (jobs submitted with --job-type that share GPUs and report progress teach it)");
        return out;
    }
    let _ = writeln!(out, "{:<32} {:<32} {:>4} {:<8} {:>6} {:>7}", "job type", "next to", "GPUs", "GPU type", "speed", "samples");
    for r in rows {
        let me = format!("{}/{}", r["tenant"].as_str().unwrap_or("?"), r["job_type"].as_str().unwrap_or("?"));
        let partner = if r["partner_other_tenant"] == true {
            "another tenant's type".to_string()
        } else {
            format!("{}/{}", r["partner_tenant"].as_str().unwrap_or("?"), r["partner_job_type"].as_str().unwrap_or("?"))
        };
        let speed = r["normalized_speed"].as_f64().map_or_else(|| "?".into(), |v| format!("{v:.2}"));
        let _ = writeln!(out, "{me:<32} {partner:<32} {:>4} {:<8} {speed:>6} {:>7}", number(&r["gpus"]), r["gpu_type"].as_str().unwrap_or("?"), number(&r["samples"]));
    }
    let _ = writeln!(out, "speed: throughput sharing the GPUs over throughput alone (1 = no slowdown)");
    out
}

/// `--stages IO,CPU,GPU`: three finite, non-negative numbers of seconds, as the API's
/// `iteration_stages` (the daemon checks the rest: their sum, the upper bounds).
fn parse_stages(text: &str) -> Result<Value> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let numbers: Option<Vec<f64>> = parts.iter().map(|p| p.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)).collect();
    match numbers.as_deref() {
        Some(&[io_s, cpu_s, gpu_s]) => Ok(json!({ "io_s": io_s, "cpu_s": cpu_s, "gpu_s": gpu_s })),
        _ => bail!("--stages {text}: expected three numbers of seconds (finite, >= 0) per iteration, IO,CPU,GPU (e.g. 0.05,0.1,0.35)"),
    }
}

/// The other jobs on a running job's GPUs (`shares_gpus_with`), as `GPUs 0 with job 7; GPUs 1
/// with another tenant's job`; `None` when it shares none.
fn sharing_text(shares: &Value) -> Option<String> {
    let items: Vec<String> = shares
        .as_array()?
        .iter()
        .map(|s| {
            let gpus = gpu_list(&s["gpus"]).unwrap_or_default();
            let plural = if s["gpus"].as_array().is_some_and(|g| g.len() == 1) { "" } else { "s" };
            match s["id"].as_u64() {
                Some(id) => format!("GPU{plural} {gpus} with job {id}"),
                None => format!("GPU{plural} {gpus} with another tenant's job"),
            }
        })
        .collect();
    (!items.is_empty()).then(|| items.join("; "))
}

/// Quotes an argument for `sh -c` when it needs it.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod colocation_tests {
    use super::*;

    #[test]
    fn stages_are_three_numbers_of_seconds() {
        assert_eq!(parse_stages("0.05, 0.1,0.35").expect("valid"), json!({ "io_s": 0.05, "cpu_s": 0.1, "gpu_s": 0.35 }));
        for bad in ["", "1,2", "1,2,3,4", "a,b,c", "1;2;3", "nan,0,1", "inf,0,1", "-1,0,1"] {
            let e = parse_stages(bad).expect_err("refused").to_string();
            assert!(e.contains("--stages") && e.contains("IO,CPU,GPU"), "{e}");
        }
    }

    #[test]
    fn show_says_which_jobs_share_the_gpus_and_jobs_marks_them() {
        let job = json!({
            "id": 3, "tenant": "a", "request": { "command": "train", "gpus": 1, "iteration_stages": { "io_s": 0.3, "cpu_s": 0.15, "gpu_s": 0.05 } },
            "state": { "state": "running", "gpus": [0], "pid": 10, "started_unix_s": 0 },
            "shares_gpus_with": [{ "id": 7, "gpus": [0] }, { "gpus": [0], "other_tenant": true }],
        });
        let text = job_text(&job);
        assert!(text.contains("  shares:     GPU 0 with job 7; GPU 0 with another tenant's job"), "{text}");
        assert!(text.contains("  iteration:  I/O 0.3 s, CPU 0.15 s, GPU 0.05 s"), "{text}");
        let table = jobs_table(&[job]);
        assert!(table.lines().nth(1).is_some_and(|l| l.contains(" 0* ")), "{table}");
        assert!(table.lines().last().is_some_and(|l| l.starts_with("* shares its GPUs")), "{table}");
        let alone = json!({ "id": 4, "request": { "command": "x", "gpus": 1 }, "state": { "state": "running", "gpus": [1] }, "shares_gpus_with": [] });
        assert!(!job_text(&alone).contains("shares:"));
        assert!(!jobs_table(&[alone]).contains('*'));
    }
}
