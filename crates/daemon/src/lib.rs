//! Arbiter's production mode: the `arbiter serve` daemon and its client.
//!
//! ```text
//!   HTTP /v1 (axum) ──► Daemon (state, one mutex) ──► Store (redb: every transition persisted first)
//!                           │
//!                           └── scheduling loop: snapshot ──► arbiter_policy (the simulator's
//!                               policies, unchanged) ──► diff ──► local executor (process groups)
//! ```
//!
//! Out of the box it schedules one machine: GPUs found by `nvidia-smi` or declared
//! (`gpus = "4xa100"`), jobs run as local process groups with `CUDA_VISIBLE_DEVICES` set.
#![deny(missing_docs)]

pub mod api;
pub mod auth;
pub mod cgroup;
pub mod client;
pub mod config;
pub mod daemon;
pub mod executor;
pub mod job;
pub mod store;

use config::ServeConfig;
use daemon::{Daemon, Settings};

/// Runs the daemon until the process is stopped. Prints where it listens and where the admin
/// token is.
pub async fn serve(config: ServeConfig) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    config.validate()?;
    std::fs::create_dir_all(&config.data_dir)?;
    let data_dir = std::fs::canonicalize(&config.data_dir)?;
    let gpus = match config::parse_gpus(&config.gpus)? {
        Some(declared) => declared,
        None => config::detect_gpus(),
    };
    let (cpus, memory_gib) = config::detect_host();
    let settings = Settings {
        data_dir: data_dir.clone(),
        policy: config.policy_kind()?,
        round_s: config.round_s,
        gpus,
        cpus: if config.cpus > 0 { config.cpus } else { cpus },
        memory_gib: if config.memory_gib > 0 { config.memory_gib } else { memory_gib },
        public_url: config.public_url.clone().unwrap_or_default(),
        cgroups: cgroup::Cgroups::detect(std::path::Path::new("/sys/fs/cgroup")),
    };
    let token_file = config.admin_token_file.clone().unwrap_or_else(|| data_dir.join("admin.token"));
    let admin_token = match std::fs::read_to_string(&token_file) {
        Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => {
            let token = auth::new_token();
            write_private(&token_file, &token)?;
            token
        }
    };
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let mut settings = settings;
    if settings.public_url.is_empty() {
        settings.public_url = format!("http://{}", listener.local_addr()?);
    }
    let daemon = Daemon::start(settings.clone())?;
    // Where it really listens (with `--listen 127.0.0.1:0` the OS picks the port).
    std::fs::write(data_dir.join("daemon.addr"), format!("{}\n", listener.local_addr()?))?;
    let total: u32 = settings.gpus.iter().map(|(_, n)| n).sum();
    eprintln!(
        "arbiter: serving http://{} (policy {}, {} GPUs, {} CPUs, {} GiB; CPU/memory limits {}); admin token in {}",
        listener.local_addr()?,
        settings.policy,
        total,
        settings.cpus,
        settings.memory_gib,
        if settings.cgroups.is_some() { "enforced with cgroup v2" } else { "NOT enforced (no writable cgroup v2 here)" },
        token_file.display()
    );
    let api = api::Api { daemon: daemon.clone(), admin_token_sha256: auth::sha256_hex(&admin_token) };
    tokio::spawn(daemon.run_loop());
    axum::serve(listener, api::router(api, config.max_request_bytes)).await?;
    Ok(())
}

/// Writes a secret readable by the owner only.
fn write_private(path: &std::path::Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(path)?;
    writeln!(f, "{secret}")
}
