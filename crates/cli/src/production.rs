//! The production commands: `arbiter serve` and the client commands that talk to it.

use anyhow::{Context, Result, bail};
use arbiter_daemon::api::client::Client;
use arbiter_daemon::config::ServeConfig;
use clap::Subcommand;
use serde_json::{Value, json};
use std::path::PathBuf;

pub(crate) mod history;
mod quota;
pub use quota::QuotaCommand;
mod render;
use render::*;
mod terminal;

/// `arbiter serve` options. Each overrides the config file's key of the same name; the defaults
/// shown apply when neither gives one.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Stopping: SIGTERM or SIGINT (Ctrl-C) stops the daemon cleanly: it stops accepting connections, lets requests in flight finish (5 s at most), logs how many runs it leaves running, and exits 0. Runs keep running and are re-adopted at the next start.\n\nTenant isolation: as root (or with CAP_SETUID/CAP_SETGID) each tenant's jobs run as its own unix user (tenant_uid_range, tenant_users); otherwise tenants are NOT isolated from each other, the daemon says so, and it serves a second tenant only with allow_shared_identity = true. As root, give it a data directory other users can traverse (e.g. /var/lib/arbiter).\n\nConfig keys (every one optional; arbiter.example.toml lists them with their defaults): data_dir, listen, policy, round_s, min_run_s, gpus, cpus, memory_gib, admin_token_file, max_request_bytes, public_url, header_timeout_s (10), idle_timeout_s (60), request_timeout_s (30), max_connections (1024), max_connections_per_client (256), max_connections_per_tenant (64), max_requests_in_flight_per_tenant (16), max_queued_per_tenant (10000), max_array_size (10000), default_max_run_time_s (unset; for reservations), [[priority_classes]] (name, value, preemptible, tenants) and default_priority_class (normal), keep_finished_per_tenant (10000), keep_finished_mib_per_tenant (64), keep_finished_days (365), submissions_per_s_per_tenant (1), submission_burst_per_tenant (1000), max_log_bytes (1 GiB per run), max_processes_per_tenant (unset: a quarter of min(pid_max, threads-max); 0: none), tenant_uid_range, tenant_users, checkpoint_roots, allow_shared_identity, fairshare (false; hierarchical and vtc weigh tenants by decayed usage), fairshare_half_life (7d), metrics_token_file (a scrape token for /metrics' per-tenant series), gittins_prior, policy_cmd and policy_timeout_s (10; with policy external), policy_fallback (fifo; decides a round the policy could not), executor (local), [slurm] partition (arbiter), bin_dir, command_timeout_s (10), poll_s (1), share_gpus (false: with true every job runs as a step of an allocation holding its GPUs, so that jobs the policy co-locates share them), [webhooks] allow_private (false), max_failures (10), queue_per_tenant (1000), timeout_s (10), retry_initial_s (1), retry_max_s (300) (docs/webhooks.md)."
)]
pub struct ServeArgs {
    /// TOML config (keys: see docs/production.md, "Configuration"); every key optional.
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
    /// With --policy external: the agent program deciding every round (`sh -c`, as the daemon's
    /// user; protocol in docs/policies.md, "External policies"); config key policy_cmd
    #[arg(long)]
    pub policy_cmd: Option<String>,
    /// With --policy external: seconds the agent may take per answer; config key
    /// policy_timeout_s [default: 10]
    #[arg(long)]
    pub policy_timeout_s: Option<f64>,
    /// The built-in policy that decides a round the policy could not (an agent that crashed,
    /// hung past --policy-timeout-s or answered nonsense; it is restarted for the next round);
    /// config key policy_fallback [default: fifo]
    #[arg(long)]
    pub policy_fallback: Option<String>,
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
    Submit(SubmitArgs),
    /// List jobs (yours; the admin sees all).
    ///
    /// A job array is one line, its tasks counted by state (`--expand` lists every task);
    /// `--json` always lists every task.
    Jobs {
        /// Only jobs in this state: queued, running, stopping, succeeded, failed, cancelled.
        #[arg(long)]
        state: Option<String>,
        /// List each task of a job array on its own line.
        #[arg(long)]
        expand: bool,
    },
    /// Show one job: state, GPUs, progress, history, why it waits.
    Show {
        /// Job id, or `12_7` for task 7 of array 12.
        #[arg(value_parser = parse_job_ref)]
        id: String,
    },
    /// Cancel a job; an array's id (`12`) cancels every task of it, `12_7` task 7 only.
    Cancel {
        /// Job id, or `12_7` for task 7 of array 12.
        #[arg(value_parser = parse_job_ref)]
        id: String,
    },
    /// Print a job's output (at most 16 MiB per call; `--offset` pages through longer logs).
    ///
    /// On a terminal, what would act on it rather than be shown (escape sequences, carriage
    /// returns, direction controls: a job's output could otherwise write the clipboard or forge
    /// lines) is shown escaped, `\u{1b}`, and bytes that are not UTF-8 as `\xff`; newlines and
    /// tabs are kept. Into a pipe or a file, and with `--raw`, the bytes are written unchanged.
    Logs {
        /// Job id, or `12_7` for task 7 of array 12.
        #[arg(value_parser = parse_job_ref)]
        id: String,
        /// Only the last N bytes.
        #[arg(long, conflicts_with = "offset")]
        tail_bytes: Option<u64>,
        /// Start at this byte.
        #[arg(long)]
        offset: Option<u64>,
        /// Write the bytes unchanged on a terminal too (its escape sequences then act on it).
        #[arg(long)]
        raw: bool,
    },
    /// GPUs, free GPUs, running jobs.
    Cluster,
    /// What the daemon learned of job types sharing GPUs: each type's speed next to another
    /// type over its speed alone (yours; the admin sees all).
    Pairs,
    /// Reserve nodes from a start for a duration (admin), for one tenant or, without
    /// `--tenant`, for maintenance, as Slurm's `scontrol create reservation`: no run that could
    /// still be running at the start (by its --max-run-time-s, or the daemon's
    /// default_max_run_time_s) is placed there; at the start, runs there that the reservation
    /// does not admit are preempted (checkpoint signal, then the grace period).
    ///
    /// Example: `arbiter reserve --nodes n1,n2 --start "2026-12-01 08:00" --duration 4h --reason "driver upgrade"`.
    Reserve {
        /// Nodes, comma-separated (`arbiter cluster` lists them).
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        /// When it starts: `now`, `+2h` (from now), `YYYY-MM-DD HH:MM[:SS]` (UTC), or Unix seconds.
        #[arg(long, value_parser = parse_start)]
        start: StartAt,
        /// How long: seconds, or a number with s, m, h or d (`4h`).
        #[arg(long, value_parser = parse_duration_s)]
        duration: u64,
        /// For this tenant only (its jobs run there; no one else's); unset: maintenance.
        #[arg(long)]
        tenant: Option<String>,
        /// Why: shown to everyone it keeps off the nodes.
        #[arg(long)]
        reason: String,
    },
    /// Reservations and maintenance windows not over yet (another tenant's shows as such);
    /// `--delete ID` removes one (admin).
    Reservations {
        /// Delete this reservation.
        #[arg(long, value_name = "ID")]
        delete: Option<u32>,
    },
    /// What runs used, like Slurm's `sreport`/`sacct`: GPU-hours (by GPU type), CPU core-hours
    /// and memory GiB-hours reserved, summed by tenant, user, GPU type or day over a window.
    ///
    /// Every run is recorded when it ends; runs going on count up to now. A tenant sees its own
    /// usage; the admin everyone's (`--tenant` for one). `user` is the login name `arbiter
    /// submit` sent (a tenant's members share its token: a label, not an identity).
    /// Examples: `arbiter usage --since 30d --by tenant,gpu-type`, `arbiter usage --by day
    /// --csv > usage.csv`.
    Usage {
        /// Start of the window: a duration back from now (`90m`, `36h`, `7d`, `2w`), a UTC date
        /// (`2025-01-31`), or `all`.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Sum by these, comma-separated: tenant, user, gpu-type, day (UTC; a run over midnight
        /// counts in both days for its part).
        #[arg(long, default_value = "tenant")]
        by: String,
        /// Admin only: one tenant's usage.
        #[arg(long)]
        tenant: Option<String>,
        /// Print CSV (one header line, then a row per group; seconds, not hours).
        #[arg(long)]
        csv: bool,
    },
    /// The daemon's finished and running jobs as a native trace (admin), to replay them under
    /// another policy or configuration: `arbiter history export --since 30d --out hist.csv`, then
    /// `arbiter whatif hist.csv --config arbiter.toml --policy las` (what happened beside what
    /// the policy would have done), or `arbiter simulate --trace hist.csv --policy X`.
    ///
    /// Each job that ran: its submission (seconds from the first one exported), tenant, user,
    /// name, job type, GPUs and GPU types, measured run time (seconds it held GPUs; a running
    /// job's so far plus what its progress says is left), steps, priority, deadline, class and
    /// dependencies; and what happened: its first start, its end, its measured progress rate, its
    /// array and task index. No command, environment, directory or log content.
    History {
        /// What to do.
        #[command(subcommand)]
        action: HistoryCommand,
    },
    /// The quota tree (Kueue's and KAI-Scheduler's quotas): groups and tenants, each with a
    /// guaranteed quota per GPU type, borrowing and lending limits and an over-quota weight.
    /// Without an action, show it (a tenant sees its own node and its parents' totals). See
    /// docs/quotas.md.
    Quota {
        /// What to do; without one, show the tree.
        #[command(subcommand)]
        action: Option<QuotaCommand>,
    },
    /// List tenants, or manage them (admin): `arbiter tenants add NAME --weight 2`.
    Tenants {
        /// What to do; without one, list the tenants.
        #[command(subcommand)]
        action: Option<TenantsCommand>,
    },
}

/// `arbiter history ...` (admin only).
#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// Write the jobs that ran as a native trace (CSV) to standard output or `--out`.
    Export {
        /// Only jobs submitted within this long before now (`30d`, `12h`; s, m, h, d); default: all.
        #[arg(long, value_parser = parse_duration_s)]
        since: Option<u64>,
        /// Write here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
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
        /// Fair-share weight. Only the tenant-level policies read it — hierarchical (GPUs split
        /// between tenants by weight) and vtc (service counted per unit of weight); under every
        /// other policy (fifo, las, srtf, ...) jobs are ordered without regard to tenants and the
        /// weight changes nothing.
        #[arg(long, default_value_t = 1.0)]
        weight: f64,
        /// Most GPUs its jobs may hold at once (default: no limit).
        #[arg(long)]
        gpu_quota: Option<u32>,
        /// The quota group it belongs to (`arbiter quota set` makes groups; docs/quotas.md).
        #[arg(long)]
        parent: Option<String>,
    },
    /// Change a tenant's weight, GPU quota or webhook; its token stays.
    ///
    /// A webhook receives one signed POST per state change of the tenant's jobs (started,
    /// preempted, succeeded, failed, cancelled); its secret is shown once, when made. See
    /// docs/webhooks.md for the body and how to verify the signature.
    Update {
        /// Tenant.
        name: String,
        /// New fair-share weight (read by hierarchical and vtc only; see `tenants add --help`).
        #[arg(long)]
        weight: Option<f64>,
        /// New GPU quota.
        #[arg(long, conflicts_with = "no_gpu_quota")]
        gpu_quota: Option<u32>,
        /// Remove the GPU quota.
        #[arg(long)]
        no_gpu_quota: bool,
        /// POST the tenant's job state changes to this http(s) URL (set again to revive a
        /// receiver declared dead). Loopback and private addresses need `[webhooks]
        /// allow_private = true`; the daemon's own address and link-local ones are refused.
        #[arg(long, value_name = "URL", conflicts_with = "no_webhook")]
        webhook: Option<String>,
        /// Remove the webhook (events waiting for it are dropped).
        #[arg(long)]
        no_webhook: bool,
        /// Make a new webhook secret (shown once); the old one no longer signs.
        #[arg(long, conflicts_with = "no_webhook")]
        rotate_webhook_secret: bool,
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
    if let Some(v) = args.policy_cmd {
        config.policy_cmd = Some(v);
    }
    if let Some(v) = args.policy_timeout_s {
        config.policy_timeout_s = v;
    }
    if let Some(v) = args.policy_fallback {
        config.policy_fallback = v;
    }
    if let Some(v) = args.gpus {
        config.gpus = v;
    }
    if let Some(v) = args.round_s {
        config.round_s = v;
    }
    if let Some(v) = args.executor {
        config.executor = v
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--executor: {e}"))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime
        .block_on(arbiter_daemon::start::serve(config))
        .map_err(|e| anyhow::anyhow!("{e}"));
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
                bail!(
                    "--log-level `{l}`: not one of {} (or a filter such as `info,arbiter_daemon=debug`)",
                    LEVELS.join(", ")
                );
            }
            EnvFilter::try_new(l).with_context(|| format!("--log-level `{l}`"))?
        }
        None => match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => {
                EnvFilter::try_new(&v).with_context(|| format!("RUST_LOG `{v}`"))?
            }
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
        (_, Some(path)) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        (Ok(t), None) => t,
        (Err(_), None) => bail!(
            "set ARBITER_TOKEN (a tenant's token, or the admin token from <data_dir>/admin.token), or pass --token-file"
        ),
    };
    Ok(Client::new(&url, &token))
}

/// `arbiter submit`'s options (see [`ClientCommand::Submit`]).
#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// GPUs: a count (`4`), or a range for an elastic job (`2..8`): policies that resize jobs
    /// (afs, optimus) run it on any count in the range, learning its speed-up from the
    /// throughput it reports at each; a resize is a checkpoint and a restart, and the run
    /// reads its count from ARBITER_GPUS (the previous run's from ARBITER_PREVIOUS_GPUS).
    #[arg(long, default_value = "1", value_parser = parse_gpu_range)]
    gpus: (u32, Option<u32>),
    /// Allowed GPU types (comma-separated; default any).
    #[arg(long, value_delimiter = ',')]
    gpu_types: Vec<String>,
    /// Priority (larger first where the policy honours it).
    #[arg(long, default_value_t = 0)]
    priority: i32,
    /// Priority class, as the admin defined them (`arbiter cluster` lists them): a higher class
    /// is served first and may preempt a lower, preemptible one (checkpoint signal, then the
    /// grace period); the policy orders jobs within a class. Default: the configured default.
    #[arg(long, value_name = "NAME")]
    priority_class: Option<String>,
    /// A job array, in Slurm's syntax: `0-99` (100 tasks), `1,3,5-7`, `0-15:4` (every 4th),
    /// `%8` at the end for at most 8 running at once. Each task is a job of its own, told
    /// ARBITER_ARRAY_JOB_ID, ARBITER_ARRAY_TASK_ID and ARBITER_ARRAY_TASK_COUNT (and SLURM_ARRAY_*
    /// under the Slurm executor); `arbiter cancel ID` cancels them all, `ID_7` task 7.
    #[arg(long, value_name = "INDICES[%MAX_RUNNING]")]
    array: Option<String>,
    /// Start only after other jobs of yours, in Slurm's syntax: `afterok:12:13` (once 12 and 13
    /// succeeded; the job fails if either does not), `afternotok:12` (once 12 failed or was
    /// cancelled), `afterany:12` (once 12 ended), `after:12` (once 12 started), `singleton` (once
    /// your earlier jobs of the same --name ended); items separated by `,` all hold.
    #[arg(long, short = 'd', value_name = "TYPE:ID[:ID...][,...]")]
    dependency: Option<String>,
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
    /// Expected run time, seconds (for SRTF/SJF-like policies, and the deadline admission).
    #[arg(long)]
    expected_run_time_s: Option<u64>,
    /// Finish within this long from now (`90m`, `2h`, `1d`, `3600` seconds). Under a policy
    /// that admits deadlines (`chronus`) the answer comes at once: guaranteed (GPUs reserved
    /// before it), or not (it runs on spare GPUs and may be late). Give
    /// --expected-run-time-s: the guarantee is computed from it.
    #[arg(long, value_parser = parse_duration_s)]
    deadline: Option<u64>,
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
    /// different resources may share the same GPUs, taking turns within each iteration;
    /// `horus` predicts the job's GPU utilization from them (the GPU stage's share). Without
    /// it the job runs alone under them; other policies ignore it.
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
}

/// Runs a client command.
pub fn run_client(
    command: ClientCommand,
    token_file: Option<&PathBuf>,
    json_out: bool,
) -> Result<()> {
    let client = client(token_file)?;
    let out = Output { json: json_out };
    match command {
        ClientCommand::Submit(args) => submit(&client, args, json_out),
        ClientCommand::Jobs { state, expand } => out
            .show(&all_jobs(&client, state.as_deref())?, |r| {
                listed(r, "jobs", |jobs| jobs_table(jobs, expand))
            }),
        ClientCommand::Show { id } => out.show(&client.get(&format!("/v1/jobs/{id}"))?, |job| {
            printable(&job_text(job))
        }),
        ClientCommand::Cancel { id } => out.show(
            &client.post(&format!("/v1/jobs/{id}/cancel"), &json!({}))?,
            |reply| match reply["array_tasks_cancelled"].as_u64() {
                Some(n) => format!(
                    "cancelling array {id}: {n} task{} not ended yet\n",
                    if n == 1 { "" } else { "s" }
                ),
                None => format!("cancelling job {id}\n"),
            },
        ),
        ClientCommand::Logs {
            id,
            tail_bytes,
            offset,
            raw,
        } => logs(&client, id, tail_bytes, offset, raw),
        ClientCommand::Cluster => out.show(&client.get("/v1/cluster")?, |cluster| {
            printable(&cluster_text(cluster))
        }),
        ClientCommand::Pairs => out.show(&client.get("/v1/pairs")?, |r| {
            listed(r, "pairs", pairs_table)
        }),
        ClientCommand::Reserve {
            nodes,
            start,
            duration,
            tenant,
            reason,
        } => {
            let body = json!({ "nodes": nodes, "start_unix_s": start.unix_s(), "duration_s": duration, "tenant": tenant, "reason": reason });
            out.show(&client.post("/v1/reservations", &body)?, |r| {
                format!("reserved: {}", reservation_line(r))
            })
        }
        ClientCommand::Reservations { delete: Some(id) } => out
            .show(&client.delete(&format!("/v1/reservations/{id}"))?, |_| {
                format!("deleted reservation {id}\n")
            }),
        ClientCommand::History {
            action: HistoryCommand::Export { since, out: path },
        } => history_export(&client, since, path.as_deref()),
        ClientCommand::Reservations { delete: None } => out
            .show(&client.get("/v1/reservations")?, |r| {
                listed(r, "reservations", reservations_table)
            }),
        ClientCommand::Usage {
            since,
            by,
            tenant,
            csv,
        } => usage(&client, &since, &by, tenant.as_deref(), csv, out),
        ClientCommand::Quota { action } => {
            quota::quota(&client, action.unwrap_or(QuotaCommand::Show), out)
        }
        ClientCommand::Tenants { action } => {
            tenants(&client, action.unwrap_or(TenantsCommand::List), out)
        }
    }
}

/// `arbiter usage`: the window and groupings checked here first (the daemon checks them too),
/// then the daemon's report as a table, CSV or JSON.
fn usage(
    client: &Client,
    since: &str,
    by: &str,
    tenant: Option<&str>,
    csv: bool,
    out: Output,
) -> Result<()> {
    use arbiter_daemon::records::usage::{GroupBy, parse_since};
    if csv && out.json {
        bail!("--csv and --json: pick one");
    }
    parse_since(since, 0).map_err(|e| anyhow::anyhow!("--since {e}"))?;
    GroupBy::parse_list(by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
    let mut path = format!(
        "/v1/usage?since={}&by={}",
        url_component(since),
        url_component(by)
    );
    if let Some(t) = tenant {
        path.push_str(&format!("&tenant={}", url_component(t)));
    }
    let reply = client.get(&path)?;
    if csv {
        crate::out!("{}", usage_csv(&reply));
        return Ok(());
    }
    out.show(&reply, |r| printable(&usage_table(r)))
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn url_component(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// How a client command prints the daemon's answer: its JSON with --json, else words or a table.
#[derive(Clone, Copy)]
struct Output {
    json: bool,
}

impl Output {
    fn show(self, reply: &Value, words: impl FnOnce(&Value) -> String) -> Result<()> {
        if self.json {
            crate::outln!("{}", serde_json::to_string_pretty(reply)?);
        } else {
            crate::out!("{}", words(reply));
        }
        Ok(())
    }
}

/// The list under `key` of a reply, as `table` lays it out.
fn listed(reply: &Value, key: &str, table: impl FnOnce(&[Value]) -> String) -> String {
    printable(&table(reply[key].as_array().map_or(&[][..], Vec::as_slice)))
}

/// `arbiter submit`: the job as the daemon takes it, submitted once (the retries reuse one
/// idempotency key), and, with a deadline, the admission answer.
fn submit(client: &Client, args: SubmitArgs, json_out: bool) -> Result<()> {
    let deadline = args.deadline;
    let body = submit_body(args)?;
    let mut reply = client.submit(&body, &arbiter_daemon::security::auth::new_token())?;
    let answer = match (deadline, reply["id"].as_u64()) {
        (Some(_), Some(id)) => admission_answer(client, id)?,
        _ => None,
    };
    if let Some(a) = answer {
        reply["deadline_admitted"] = json!(a);
    }
    if json_out {
        crate::outln!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(());
    }
    match reply["array_tasks"].as_u64() {
        Some(tasks) => crate::outln!(
            "submitted array {} ({tasks} tasks: {}_INDEX)",
            reply["id"],
            reply["id"]
        ),
        None => crate::outln!("submitted job {}", reply["id"]),
    }
    match (deadline, answer) {
        (Some(_), Some(true)) => {
            crate::outln!("deadline guaranteed: GPUs are reserved to finish it in time")
        }
        (Some(_), Some(false)) => {
            crate::outln!("deadline NOT guaranteed: it runs on spare GPUs and may finish late")
        }
        (Some(_), None) => crate::outln!(
            "no admission answer: the daemon's policy does not guarantee deadlines (`chronus` does); it will try"
        ),
        _ => {}
    }
    Ok(())
}

/// `arbiter history export`: the admin's view of every job, as a native trace with what the
/// daemon observed (`history::export`).
fn history_export(
    client: &Client,
    since_s: Option<u64>,
    out: Option<&std::path::Path>,
) -> Result<()> {
    // The admin's only: a tenant's token lists its own jobs, but the history of a cluster is
    // the admin's to hand out.
    if client.get("/v1/tenants").is_err() {
        bail!("history export needs the admin token (ARBITER_TOKEN or --token-file)");
    }
    // Page by page from `GET /v1/history`, which holds what a replay needs and nothing else
    // (no command, environment, directory or log).
    let mut jobs = Vec::new();
    let mut after: Option<u32> = None;
    loop {
        let mut path = format!(
            "/v1/history?limit={}",
            arbiter_daemon::api::history::MAX_HISTORY_PAGE
        );
        if let Some(s) = since_s {
            path.push_str(&format!("&since={s}"));
        }
        if let Some(a) = after {
            path.push_str(&format!("&after={a}"));
        }
        let page: arbiter_daemon::records::history::HistoryPage = serde_json::from_str(
            &client.get_text(&path)?,
        )
        .context(
            "the daemon's history is not the JSON this client reads (a daemon of another version?)",
        )?;
        jobs.extend(page.jobs);
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let history = history::export(&jobs);
    let mut text = Vec::new();
    history.write(&mut text)?;
    match out {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?
        }
        None => std::io::Write::write_all(&mut std::io::stdout(), &text)?,
    }
    let first = history.origin_unix_s.map_or_else(
        || "no job".to_string(),
        |t| format!("times from {} UTC", utc(t)),
    );
    eprintln!("{} jobs exported ({first})", history.jobs.len());
    Ok(())
}

/// A job reference as the daemon takes it: `12`, or `12_7` (task 7 of array 12).
fn parse_job_ref(text: &str) -> std::result::Result<String, String> {
    let number = |t: &str| !t.is_empty() && t.len() <= 10 && t.chars().all(|c| c.is_ascii_digit());
    let ok = match text.split_once('_') {
        Some((array, task)) => number(array) && number(task),
        None => number(text),
    };
    if ok {
        Ok(text.to_string())
    } else {
        Err(format!(
            "`{text}` is not a job id (12, or 12_7 for task 7 of array 12)"
        ))
    }
}

/// The submission's JSON body from the command line (and this shell's environment and directory).
fn submit_body(args: SubmitArgs) -> Result<Value> {
    let env_map = job_env(&args.export, &args.env, std::env::vars_os())?;
    let cwd = match args.working_dir {
        Some(d) => {
            std::fs::canonicalize(&d).with_context(|| format!("--working-dir {}", d.display()))?
        }
        None => std::env::current_dir()?,
    };
    let command_line = args
        .command
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let (gpus, max_gpus) = args.gpus;
    let mut body = json!({
        "command": command_line, "gpus": gpus, "priority": args.priority, "working_dir": cwd.display().to_string(),
        "env": env_map, "checkpoint_signal": args.checkpoint_signal, "grace_s": args.grace_s, "max_retries": args.max_retries,
    });
    if !args.gpu_types.is_empty() {
        body["gpu_types"] = json!(args.gpu_types);
    }
    if let Some(d) = args.checkpoint_dir {
        body["checkpoint_dir"] = json!(std::path::absolute(&d)?.display().to_string());
    }
    if let Some(text) = args.stages {
        body["iteration_stages"] = parse_stages(&text)?;
    }
    if let Some(within) = args.deadline {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        body["deadline_unix_s"] = json!(now + within);
    }
    let optional = [
        ("max_gpus", max_gpus.map(|v| json!(v))),
        ("max_run_time_s", args.max_run_time_s.map(|v| json!(v))),
        (
            "expected_run_time_s",
            args.expected_run_time_s.map(|v| json!(v)),
        ),
        ("cpus", args.cpus.map(|v| json!(v))),
        ("memory_gib", args.memory_gib.map(|v| json!(v))),
        ("min_run_time_s", args.min_run_time_s.map(|v| json!(v))),
        ("name", args.name.map(|v| json!(v))),
        ("opportunistic", args.opportunistic.then_some(json!(true))),
        ("job_type", args.job_type.map(|v| json!(v))),
        ("priority_class", args.priority_class.map(|v| json!(v))),
        ("dependency", args.dependency.map(|v| json!(v))),
        ("array", args.array.map(|v| json!(v))),
        ("user", login_name().map(|v| json!(v))),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    Ok(body)
}

/// Who submits, for `arbiter usage --by user`: `$USER` (else `$LOGNAME`) when it is a plain
/// name the daemon takes (letters, digits, `. _ - @`, at most 64 bytes); none otherwise.
fn login_name() -> Option<String> {
    let name = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()?;
    (!name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c)))
    .then_some(name)
}

/// The admission answer for a job with a deadline: it comes with the first scheduling point after
/// the submission (the daemon runs one at every submit), so wait a moment for it.
fn admission_answer(client: &Client, id: u64) -> Result<Option<bool>> {
    let started = std::time::Instant::now();
    loop {
        let job = client.get(&format!("/v1/jobs/{id}"))?;
        if let Some(a) = job["deadline_admitted"].as_bool() {
            return Ok(Some(a));
        }
        if started.elapsed() > std::time::Duration::from_secs(5) {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Every job the caller may see, in `state` if given: every page (the daemon answers 1,000 jobs
/// at a time).
fn all_jobs(client: &Client, state: Option<&str>) -> Result<Value> {
    let mut all = Vec::new();
    let mut after: Option<u64> = None;
    loop {
        let mut path = format!("/v1/jobs?limit={}", arbiter_daemon::api::MAX_JOBS_PAGE);
        if let Some(s) = state {
            path.push_str(&format!("&state={s}"));
        }
        if let Some(a) = after {
            path.push_str(&format!("&after={a}"));
        }
        let page = client.get(&path)?;
        all.extend(page["jobs"].as_array().cloned().unwrap_or_default());
        match page["next_after"].as_u64() {
            Some(next) => after = Some(next),
            None => return Ok(json!({ "jobs": all })),
        }
    }
}

/// `arbiter logs`: the log (or its tail, or from an offset), saying where the daemon cut it.
fn logs(
    client: &Client,
    id: String,
    tail_bytes: Option<u64>,
    offset: Option<u64>,
    raw: bool,
) -> Result<()> {
    let path = match (tail_bytes, offset) {
        (Some(n), _) => format!("/v1/jobs/{id}/logs?tail_bytes={n}"),
        (None, Some(n)) => format!("/v1/jobs/{id}/logs?offset={n}"),
        (None, None) => format!("/v1/jobs/{id}/logs"),
    };
    let part = match write_log(client, &path, raw) {
        Err(arbiter_daemon::api::client::ClientError::Output(e))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            return Ok(());
        }
        other => other?,
    };
    if part.truncated {
        let next = part.start + part.len;
        if tail_bytes.is_some() {
            eprintln!(
                "arbiter: only the last {} bytes of {} were sent (the daemon's per-response cap)",
                part.len, part.size
            );
        } else {
            eprintln!(
                "arbiter: output cut at byte {next} of {}; continue with `arbiter logs {id} --offset {next}`",
                part.size
            );
        }
    }
    Ok(())
}

/// `arbiter tenants` (admin): list, add, update, remove, rotate a token.
fn tenants(client: &Client, action: TenantsCommand, out: Output) -> Result<()> {
    match action {
        TenantsCommand::List => out.show(&client.get("/v1/tenants")?, |r| {
            listed(r, "tenants", tenants_table)
        }),
        TenantsCommand::Add {
            name,
            weight,
            gpu_quota,
            parent,
        } => {
            let reply = client.post(
                "/v1/tenants",
                &json!({ "name": name, "weight": weight, "gpu_quota": gpu_quota, "parent": parent }),
            )?;
            out.show(&reply, |r| {
                format!(
                    "tenant {name} created; its token (shown once): {}\n",
                    r["token"].as_str().unwrap_or("")
                )
            })
        }
        TenantsCommand::Update {
            name,
            weight,
            gpu_quota,
            no_gpu_quota,
            webhook,
            no_webhook,
            rotate_webhook_secret,
        } => {
            let mut body = serde_json::Map::new();
            if let Some(w) = weight {
                body.insert("weight".into(), json!(w));
            }
            if no_gpu_quota {
                body.insert("gpu_quota".into(), Value::Null);
            } else if let Some(q) = gpu_quota {
                body.insert("gpu_quota".into(), json!(q));
            }
            if no_webhook {
                body.insert("webhook".into(), Value::Null);
            } else if let Some(url) = webhook {
                body.insert("webhook".into(), json!(url));
            }
            if rotate_webhook_secret {
                body.insert("rotate_webhook_secret".into(), json!(true));
            }
            if body.is_empty() {
                bail!(
                    "nothing to change: give --weight, --gpu-quota, --no-gpu-quota, --webhook, --no-webhook or --rotate-webhook-secret"
                );
            }
            out.show(
                &client.patch(&format!("/v1/tenants/{name}"), &Value::Object(body))?,
                |r| updated_tenant_text(&name, r),
            )
        }
        TenantsCommand::Remove { name } => out
            .show(&client.delete(&format!("/v1/tenants/{name}"))?, |_| {
                format!("tenant {name} removed; its token no longer works\n")
            }),
        TenantsCommand::RotateToken { name } => {
            let reply = client.post(&format!("/v1/tenants/{name}/token"), &json!({}))?;
            out.show(&reply, |r| {
                format!(
                    "tenant {name}: new token (shown once; the old one no longer works): {}\n",
                    r["token"].as_str().unwrap_or("")
                )
            })
        }
    }
}

/// What `arbiter tenants update` says: the tenant as it now is, and the queued jobs its new quota
/// holds.
fn updated_tenant_text(name: &str, reply: &Value) -> String {
    let mut text = format!(
        "tenant {name}: weight {}, GPU quota {}\n",
        number(&reply["weight"]),
        quota(&reply["gpu_quota"])
    );
    let held: Vec<String> = reply["held_by_quota"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect();
    if !held.is_empty() {
        text.push_str(&format!(
            "held until the quota is raised (they ask for more GPUs than it): job {}\n",
            held.join(", ")
        ));
    }
    match reply["webhook"]["url"].as_str() {
        Some(url) => text.push_str(&format!(
            "webhook: {url} ({})\n",
            render::webhook_state(&reply["webhook"])
        )),
        None => text.push_str("webhook: none\n"),
    }
    if let Some(secret) = reply["webhook_secret"].as_str() {
        text.push_str(&format!("webhook secret (shown once; receivers verify the Arbiter-Signature header with it): {secret}\n"));
    }
    text
}

/// Streams the log at `path` to standard output: escaped on a terminal, where a job's escape
/// sequences would act (`terminal.rs`), unless `raw`; unchanged into a pipe or a file, whose
/// reader asked for the bytes.
fn write_log(
    client: &Client,
    path: &str,
    raw: bool,
) -> Result<arbiter_daemon::api::client::LogPart, arbiter_daemon::api::client::ClientError> {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    if raw || !stdout.is_terminal() {
        return client.get_log(path, &mut stdout.lock());
    }
    let mut shown = terminal::Escaping::new(stdout.lock());
    let part = client.get_log(path, &mut shown)?;
    shown
        .finish()
        .map(drop)
        .map_err(arbiter_daemon::api::client::ClientError::Output)?;
    Ok(part)
}

/// Whether Arbiter sets `key` for every run itself (a submission may not).
fn arbiter_owned(key: &str) -> bool {
    key.starts_with("ARBITER_") || key == "CUDA_VISIBLE_DEVICES" || key == "CUDA_DEVICE_ORDER"
}

/// The job's environment from `--export` (applied to `environment`, the submitter's) and
/// `--env` on top, without the variables Arbiter owns (dropped from the export, refused in
/// `--env` and in an explicit export list).
fn job_env(
    export: &str,
    env: &[String],
    environment: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<std::collections::BTreeMap<String, String>> {
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
                    bail!(
                        "--export {key}: Arbiter sets {key} for each run itself (ARBITER_*, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER cannot be passed)"
                    );
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
            eprintln!(
                "arbiter: not exporting {}: not UTF-8",
                key.to_string_lossy()
            );
            continue;
        };
        if (all || named.iter().any(|n| n == key)) && !arbiter_owned(key) {
            out.insert(key.to_string(), value.to_string());
        }
    }
    out.extend(set);
    for pair in env {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--env `{pair}` is not KEY=VALUE"))?;
        if key.is_empty() {
            bail!("--env `{pair}`: empty name");
        }
        if arbiter_owned(key) {
            bail!(
                "--env {key}: Arbiter sets {key} for each run itself (ARBITER_*, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER cannot be set)"
            );
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

/// `--stages IO,CPU,GPU`: three finite, non-negative numbers of seconds, as the API's
/// `iteration_stages` (the daemon checks the rest: their sum, the upper bounds).
fn parse_stages(text: &str) -> Result<Value> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let numbers: Option<Vec<f64>> = parts
        .iter()
        .map(|p| p.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
        .collect();
    match numbers.as_deref() {
        Some(&[io_s, cpu_s, gpu_s]) => Ok(json!({ "io_s": io_s, "cpu_s": cpu_s, "gpu_s": gpu_s })),
        _ => bail!(
            "--stages {text}: expected three numbers of seconds (finite, >= 0) per iteration, IO,CPU,GPU (e.g. 0.05,0.1,0.35)"
        ),
    }
}

/// Quotes an argument for `sh -c` when it needs it.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;

/// `--gpus`: `N`, or `MIN..MAX` for an elastic job.
fn parse_gpu_range(text: &str) -> std::result::Result<(u32, Option<u32>), String> {
    let count = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("`{s}` is not a GPU count; write N or MIN..MAX (e.g. 2..8)"))
    };
    match text.split_once("..") {
        None => Ok((count(text)?, None)),
        Some((least, most)) => {
            let (least, most) = (count(least)?, count(most)?);
            if least == 0 || most < least {
                return Err(format!("`{text}`: an elastic range needs 1 <= MIN <= MAX"));
            }
            Ok((least, (most > least).then_some(most)))
        }
    }
}

/// When a reservation starts: now, a time from now, or a moment.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StartAt {
    /// Seconds from now.
    In(u64),
    /// Unix seconds.
    At(i64),
}

impl StartAt {
    fn unix_s(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        match self {
            StartAt::In(s) => now + *s as i64,
            StartAt::At(t) => *t,
        }
    }
}

/// `--start`: `now`, `+2h`, `YYYY-MM-DD HH:MM[:SS]` (UTC) or Unix seconds.
fn parse_start(text: &str) -> std::result::Result<StartAt, String> {
    let text = text.trim();
    if text == "now" {
        return Ok(StartAt::In(0));
    }
    if let Some(rest) = text.strip_prefix('+') {
        return parse_duration_s(rest).map(StartAt::In);
    }
    if let Ok(unix) = text.parse::<i64>() {
        return Ok(StartAt::At(unix));
    }
    let parsed = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M"));
    parsed
        .map(|t| StartAt::At(t.and_utc().timestamp()))
        .map_err(|_| format!("`{text}`: use now, +2h, YYYY-MM-DD HH:MM (UTC) or Unix seconds"))
}

/// A duration (`--deadline`, `--duration`, `--since`): seconds, or a number with `s`, `m`, `h`
/// or `d`, from 1 s to ten years.
fn parse_duration_s(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86_400.0,
        _ => {
            return Err(format!(
                "`{text}`: use seconds or a number with s, m, h or d (e.g. 90m)"
            ));
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 3600, 90m, 2h)"))?;
    let seconds = value * scale;
    if !(seconds.is_finite() && (1.0..=3650.0 * 86_400.0).contains(&seconds)) {
        return Err(format!("`{text}`: from 1 s to ten years"));
    }
    Ok(seconds.round() as u64)
}
