//! The production commands: `arbiter serve` and the client commands that talk to it.

use anyhow::{bail, Context, Result};
use arbiter_daemon::client::Client;
use arbiter_daemon::config::ServeConfig;
use clap::Subcommand;
use serde_json::{json, Value};
use std::path::PathBuf;

/// `arbiter serve` options (each overrides the config file).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// TOML config (see README "Production mode"); every key optional.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data directory (store, logs, checkpoints, admin token).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:7070.
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Policy (any simulator policy: fifo, las, srtf, max-min-fairness, ...).
    #[arg(long)]
    pub policy: Option<String>,
    /// GPUs: `auto` (nvidia-smi) or declared, e.g. 4xa100, 2xv100,2xk80, 0.
    #[arg(long)]
    pub gpus: Option<String>,
    /// Seconds between scheduling rounds (the policy also runs at every submit and job end).
    #[arg(long)]
    pub round_s: Option<f64>,
}

/// Client commands; the daemon is found with `ARBITER_URL` (default http://127.0.0.1:7070) and
/// the caller identified by `ARBITER_TOKEN` (or `--token-file`).
#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Submit a job: `arbiter submit --gpus 2 -- python train.py --epochs 10`.
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
        /// Environment variables, KEY=VALUE (repeatable).
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
        /// Retries after failed runs.
        #[arg(long, default_value_t = 2)]
        max_retries: u32,
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
    /// Print a job's output.
    Logs {
        /// Job id.
        id: u32,
        /// Only the last N bytes.
        #[arg(long)]
        tail_bytes: Option<u64>,
    },
    /// GPUs, free GPUs, running jobs.
    Cluster,
    /// List tenants, or create one (admin): `arbiter tenants add NAME --weight 2`.
    Tenants {
        /// `add NAME` creates (or replaces) a tenant and prints its token once.
        #[arg(num_args = 0..=2)]
        action: Vec<String>,
        /// Weight for `add`.
        #[arg(long, default_value_t = 1.0)]
        weight: f64,
        /// GPU quota for `add`.
        #[arg(long)]
        gpu_quota: Option<u32>,
    },
}

/// Runs `arbiter serve`.
pub fn serve(args: ServeArgs) -> Result<()> {
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
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(arbiter_daemon::serve(config)).map_err(|e| anyhow::anyhow!("{e}"))
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
            env,
            checkpoint_dir,
            checkpoint_signal,
            grace_s,
            max_run_time_s,
            expected_run_time_s,
            max_retries,
            name,
            command,
        } => {
            let mut env_map = serde_json::Map::new();
            for pair in env {
                let (k, v) = pair.split_once('=').with_context(|| format!("--env `{pair}` is not KEY=VALUE"))?;
                env_map.insert(k.to_string(), json!(v));
            }
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
            if let Some(v) = name {
                body["name"] = json!(v);
            }
            let reply = client.post("/v1/jobs", &body)?;
            if json_out {
                print(&reply)?;
            } else {
                crate::outln!("submitted job {}", reply["id"]);
            }
        }
        ClientCommand::Jobs { state } => {
            let path = match state {
                Some(s) => format!("/v1/jobs?state={s}"),
                None => "/v1/jobs".into(),
            };
            let reply = client.get(&path)?;
            if json_out {
                print(&reply)?;
            } else {
                crate::outln!("{:>5}  {:<12} {:<10} {:<8} {:<40} {}", "id", "tenant", "state", "gpus", "command", "waiting because");
                for job in reply["jobs"].as_array().into_iter().flatten() {
                    let gpus = job["state"]["gpus"].as_array().map(|g| g.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")).unwrap_or_else(|| job["request"]["gpus"].to_string());
                    let command: String = job["request"]["command"].as_str().unwrap_or("").chars().take(40).collect();
                    crate::outln!(
                        "{:>5}  {:<12} {:<10} {:<8} {:<40} {}",
                        job["id"].as_u64().unwrap_or(0),
                        job["tenant"].as_str().unwrap_or(""),
                        job["state"]["state"].as_str().unwrap_or(""),
                        gpus,
                        command,
                        job["pending_reason"].as_str().unwrap_or("")
                    );
                }
            }
        }
        ClientCommand::Show { id } => print(&client.get(&format!("/v1/jobs/{id}"))?)?,
        ClientCommand::Cancel { id } => {
            let reply = client.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))?;
            if json_out {
                print(&reply)?;
            } else {
                crate::outln!("cancelling job {id}");
            }
        }
        ClientCommand::Logs { id, tail_bytes } => {
            let path = match tail_bytes {
                Some(n) => format!("/v1/jobs/{id}/logs?tail_bytes={n}"),
                None => format!("/v1/jobs/{id}/logs"),
            };
            crate::out!("{}", client.get_text(&path)?);
        }
        ClientCommand::Cluster => print(&client.get("/v1/cluster")?)?,
        ClientCommand::Tenants { action, weight, gpu_quota } => match action.as_slice() {
            [] => print(&client.get("/v1/tenants")?)?,
            [verb, name] if verb == "add" => {
                let reply = client.post("/v1/tenants", &json!({ "name": name, "weight": weight, "gpu_quota": gpu_quota }))?;
                if json_out {
                    print(&reply)?;
                } else {
                    crate::outln!("tenant {name} created; its token (shown once): {}", reply["token"].as_str().unwrap_or(""));
                }
            }
            _ => bail!("usage: arbiter tenants [add NAME [--weight W] [--gpu-quota N]]"),
        },
    }
    Ok(())
}

/// Quotes an argument for `sh -c` when it needs it.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}
