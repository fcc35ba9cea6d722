//! Start-up: from the configuration to a serving daemon — the data directory locked, the nodes
//! found (this machine's GPUs or a Slurm partition), isolation and containment probed, runs of
//! the last life re-adopted, the admin token read or created, then the scheduling loop and the
//! API until SIGTERM.

use crate::api;
use crate::clock;
use crate::config::{self, ServeConfig};
use crate::daemon::{Daemon, Settings, policy_support};
use crate::executor::slurm;
use crate::records::topology;
use crate::security::{auth, cgroup, confine, containment, identity};

/// Runs the daemon until the process is stopped. Prints where it listens and where the admin
/// token is.
pub async fn serve(config: ServeConfig) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    config.validate()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                " (another daemon? pick --listen)"
            } else {
                ""
            };
            format!("cannot listen on {}: {e}{hint}", config.listen)
        })?;
    // Installed before the address is published, so a SIGTERM right after start is handled too.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    // Everything the daemon creates is private unless it says otherwise.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let slurm_cli = slurm_cli(&config);
    let settings = settings(
        &config,
        format!("http://{}", listener.local_addr()?),
        slurm_cli.as_ref(),
    )?;
    if settings.gpus.is_empty() {
        return Err(match config.executor {
            config::ExecutorKind::Local => "no GPUs: nvidia-smi found none (or is not installed); declare the machine's GPUs with --gpus, e.g. --gpus 4xa100".into(),
            config::ExecutorKind::Slurm => format!("no GPUs: Slurm partition `{}` has no node with GPUs (gres gpu)", config.slurm.partition).into(),
        });
    }
    let daemon = match slurm_cli {
        Some(cli) => {
            let poll = std::time::Duration::from_secs_f64(config.slurm.poll_s);
            let files = slurm::StepFiles {
                runs_dir: settings.data_dir.join("runs"),
                wrapper_exe: settings.wrapper_exe.clone(),
            };
            let share = config.slurm.share_gpus;
            Daemon::start_with(settings, move |wake| {
                std::sync::Arc::new(slurm::SlurmExecutor::new(cli, poll, wake, files, share))
            })?
        }
        None => Daemon::start(settings)?,
    };
    let settings = daemon.settings.clone();
    let data_dir = settings.data_dir.clone();
    if config.executor == config::ExecutorKind::Slurm {
        slurm::check_traversable(&data_dir.join("logs"))?;
    }
    // Read or created only now, with the data directory locked: two daemons started at once
    // cannot leave a token the survivor does not know.
    let token_file = config
        .admin_token_file
        .clone()
        .unwrap_or_else(|| data_dir.join("admin.token"));
    let admin_token = admin_token(&token_file)?;
    let metrics_token = config
        .metrics_token_file
        .as_deref()
        .map(metrics_token)
        .transpose()?;
    // Where it really listens (with `--listen 127.0.0.1:0` the OS picks the port).
    std::fs::write(
        data_dir.join("daemon.addr"),
        format!("{}\n", listener.local_addr()?),
    )
    .map_err(|e| format!("{}: {e}", data_dir.join("daemon.addr").display()))?;
    let total: u32 = settings.gpus.iter().map(|(_, n)| n).sum();
    eprintln!(
        "arbiter: serving http://{} (policy {}, {} executor, {} nodes, {} GPUs, {} CPUs, {} GiB; CPU/memory limits {}); admin token in {}",
        listener.local_addr()?,
        settings.policy,
        daemon.executor_name(),
        settings.nodes.len(),
        total,
        settings.cpus,
        settings.memory_gib,
        settings.containment.cpu_memory_limits(),
        token_file.display()
    );
    print_isolation(&settings);
    let api = api::Api::new(daemon.clone(), auth::sha256_hex(&admin_token)).with_tenant_limits(
        api::TenantLimits {
            max_connections_per_tenant: config.max_connections_per_tenant,
            max_requests_in_flight_per_tenant: config.max_requests_in_flight_per_tenant,
        },
    );
    let api = match metrics_token {
        Some(token) => api.with_metrics_token_sha256(auth::sha256_hex(&token)),
        None => api,
    };
    tokio::spawn(daemon.clone().run_loop());
    daemon.configure_webhooks(
        config.webhooks.clone(),
        webhook_policy(&config, listener.local_addr()?, &settings.public_url),
    );
    tokio::spawn(daemon.clone().run_webhooks());
    let limits = api::ConnectionLimits {
        header_timeout: std::time::Duration::from_secs_f64(config.header_timeout_s),
        idle_timeout: std::time::Duration::from_secs_f64(config.idle_timeout_s),
        max_connections: config.max_connections,
        max_connections_per_client: config.max_connections_per_client,
        drain: std::time::Duration::from_secs(5),
    };
    // SIGTERM/SIGINT: stop accepting, let requests in flight finish, exit. Runs are left alone
    // (their own process groups) and re-adopted at the next start.
    let shutdown = async {
        let signal = tokio::select! {
            _ = sigterm.recv() => "SIGTERM",
            _ = sigint.recv() => "SIGINT",
        };
        let runs =
            daemon.with_state(|s| s.jobs.iter().filter(|j| j.state.gpus().is_some()).count());
        tracing::info!(
            "shutting down on {signal}; {runs} runs keep running and will be re-adopted at the next start"
        );
    };
    api::serve_connections(
        listener,
        api::router(
            api,
            config.max_request_bytes,
            std::time::Duration::from_secs_f64(config.request_timeout_s),
        ),
        limits,
        shutdown,
    )
    .await;
    tracing::info!("stopped");
    Ok(())
}

/// The start-up lines on tenant isolation and what confines runs (what `/v1/cluster` says too);
/// what leaves tenants exposed is a WARNING.
fn print_isolation(settings: &Settings) {
    let say =
        |ok: bool, line: &str| eprintln!("arbiter: {}{line}", if ok { "" } else { "WARNING: " });
    let isolated = settings.isolation.is_isolated();
    let containment = &settings.containment;
    say(isolated, &settings.isolation.describe());
    say(
        true,
        &format!("processes: {}", containment.processes.describe(isolated)),
    );
    if let Some(warning) = containment.processes.warning() {
        say(false, &warning);
    }
    say(
        containment.visibility.own_namespace(),
        &containment.visibility.describe(),
    );
    say(
        true,
        &format!("memory limits: {}", containment.memory.describe()),
    );
}

/// The Slurm tools, when the daemon runs its jobs through Slurm.
fn slurm_cli(config: &ServeConfig) -> Option<slurm::cli::SlurmCli> {
    (config.executor == config::ExecutorKind::Slurm).then(|| slurm::cli::SlurmCli {
        partition: config.slurm.partition.clone(),
        bin_dir: config.slurm.bin_dir.clone(),
        timeout: std::time::Duration::from_secs_f64(config.slurm.command_timeout_s),
    })
}

/// The daemon's settings from its configuration: the nodes (this machine's GPUs, declared or
/// from `nvidia-smi`, or the Slurm partition's nodes), host size, isolation and what confines runs
/// (process limit, PID namespaces probed with the run wrapper, memory enforcement), checkpoint
/// roots, the run wrapper (this binary) and the Gittins prior.
fn settings(
    config: &ServeConfig,
    default_url: String,
    slurm_cli: Option<&slurm::cli::SlurmCli>,
) -> Result<Settings, String> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("data_dir {}: {e}", config.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&config.data_dir)
        .map_err(|e| format!("data_dir {}: {e}", config.data_dir.display()))?;
    let gpus = match config::parse_gpus(&config.gpus).map_err(|e| e.to_string())? {
        Some(declared) => declared,
        None => config::detect_gpus(),
    };
    let (cpus, memory_gib) = config::detect_host();
    let cpus = if config.cpus > 0 { config.cpus } else { cpus };
    let memory_gib = if config.memory_gib > 0 {
        config.memory_gib
    } else {
        memory_gib
    };
    let nodes = match slurm_cli {
        Some(cli) => slurm::nodes_of(cli)?,
        None => topology::Topology::machine(&host_name(), &gpus, cpus, memory_gib),
    };
    // Submissions are checked against the largest node (a job on one node) and the whole
    // cluster's GPUs per type (a gang over several nodes).
    let (cpus, memory_gib) = match slurm_cli {
        Some(_) => (
            nodes.iter().map(|n| n.cpus).max().unwrap_or(cpus),
            nodes
                .iter()
                .map(|n| n.memory_gib)
                .max()
                .unwrap_or(memory_gib),
        ),
        None => (cpus, memory_gib),
    };
    let isolation = identity::Isolation::detect(
        config.tenant_uid_range,
        config.tenant_users.clone(),
        config.allow_shared_identity,
    );
    if isolation.is_isolated() {
        for (tenant, user) in &config.tenant_users {
            identity::resolve_user(user).map_err(|e| format!("tenant_users: {tenant}: {e}"))?;
        }
    }
    let wrapper_exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program's own path for the run wrapper: {e}"))?;
    let cgroups = cgroup::Cgroups::detect(std::path::Path::new("/sys/fs/cgroup"));
    let containment = containment::Containment {
        processes: containment::ProcessLimit::new(
            config.max_processes_per_tenant,
            containment::PidSpace::of_host(),
        ),
        visibility: containment::ProcessVisibility::probe(
            config.executor,
            isolation.is_isolated(),
            &wrapper_exe,
        ),
        memory: containment::MemoryEnforcement::select(config.executor, cgroups.is_some()),
    };
    let gittins_prior = policy_support::gittins_prior(config.gittins_prior.as_deref())?;
    Ok(Settings {
        checkpoint_roots: confine::CheckpointRoots::new(&config.checkpoint_roots, &data_dir),
        data_dir,
        policy: config.policy_kind().map_err(|e| e.to_string())?,
        fallback: config.fallback_kind().map_err(|e| e.to_string())?,
        external: config.policy_cmd.clone().map(|command| {
            arbiter_policy::external::ExternalConfig {
                command,
                timeout: std::time::Duration::from_secs_f64(config.policy_timeout_s),
            }
        }),
        round_s: config.round_s,
        min_run_s: config.min_run_s.unwrap_or(config.round_s),
        cpus,
        memory_gib,
        public_url: config.public_url.clone().unwrap_or(default_url),
        cgroups,
        isolation,
        wrapper_exe,
        gittins_prior: std::sync::Arc::new(gittins_prior),
        max_processes_per_tenant: containment.processes.limit,
        containment,
        max_queued_per_tenant: config.max_queued_per_tenant,
        max_array_size: config.max_array_size,
        default_max_run_time_s: config.default_max_run_time_s,
        priority_classes: config.priority_classes().map_err(|e| e.to_string())?,
        retention: config.retention(),
        max_log_bytes: (config.max_log_bytes > 0).then_some(config.max_log_bytes),
        gpus: topology::Topology::new(nodes.clone())
            .map(|t| t.inventory())
            .unwrap_or_default(),
        nodes,
        clock: std::sync::Arc::new(clock::SystemClock),
        fairshare_half_life_s: config.fairshare_half_life_s().map_err(|e| e.to_string())?,
    })
}

/// Where webhooks may point: never at this daemon's API (where it listens, and its public URL).
fn webhook_policy(
    config: &ServeConfig,
    listening: std::net::SocketAddr,
    public_url: &str,
) -> crate::security::webhook::AddressPolicy {
    let public = url::Url::parse(public_url).ok();
    let own_host_port = public.as_ref().and_then(|u| {
        Some((
            u.host_str()?
                .to_ascii_lowercase()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            u.port_or_known_default()?,
        ))
    });
    let mut own = vec![listening];
    // A public URL naming an address (not a name) is the daemon's too.
    if let Some((Ok(ip), port)) = own_host_port
        .as_ref()
        .map(|(h, p)| (h.parse::<std::net::IpAddr>(), *p))
    {
        own.push(std::net::SocketAddr::new(ip, port));
    }
    crate::security::webhook::AddressPolicy {
        allow_private: config.webhooks.allow_private,
        own,
        own_host_port,
    }
}

/// The admin token: read from `path`, or created there (0600; never overwritten).
fn admin_token(path: &std::path::Path) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => {
            return Err(format!(
                "{}: empty admin token file; remove it to have a new token created",
                path.display()
            ));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("{}: {e}", path.display()));
        }
        Err(_) => {}
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let token = auth::new_token();
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(f, "{token}").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(token)
}

/// The scrape token for `/metrics`, read from `path` (never created: the admin provisions it
/// for the scraper; never logged). A file others may read is refused, as a leaked token would
/// show every tenant's usage.
fn metrics_token(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("metrics_token_file {}: {e}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "metrics_token_file {}: readable by others (mode {:o}); chmod 600 it",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    let token = std::fs::read_to_string(path)
        .map_err(|e| format!("metrics_token_file {}: {e}", path.display()))?;
    let token = token.trim();
    if token.len() < 16 {
        return Err(format!(
            "metrics_token_file {}: the token is empty or shorter than 16 characters",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// This machine's name (the local executor's node name).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "local".into())
}
