//! `arbiter serve` settings: a TOML file, every key optional.
//!
//! ```toml
//! data_dir = "/var/lib/arbiter"     # store, logs, checkpoints, admin token
//! listen = "127.0.0.1:7070"
//! policy = "las"                    # any simulator policy name
//! round_s = 30                      # the policy is also called at every submit and job end
//! gpus = "auto"                     # `nvidia-smi`, or declared: "4xa100", "2xv100,2xk80"
//! cpus = 0                          # 0: detected
//! memory_gib = 0                    # 0: detected
//! admin_token_file = "/etc/arbiter/admin.token"   # default: <data_dir>/admin.token, created
//! max_request_bytes = 65536
//! header_timeout_s = 10             # a request's headers must arrive within this, counted from
//!                                   # the connection's start or the previous response (so an idle
//!                                   # keep-alive connection is closed after it too)
//! idle_timeout_s = 60               # a connection on which no byte moves either way for this
//!                                   # long mid-request (stalled upload, client not reading) is closed
//! request_timeout_s = 30            # a whole request, body included (a trickled body: 408)
//! max_connections = 1024            # connections beyond it get a 503 and are closed
//! max_connections_per_client = 256  # from one address, or one uid on this host (503 beyond)
//! max_connections_per_tenant = 64   # held by one tenant's requests (429 beyond; not the admin)
//! max_requests_in_flight_per_tenant = 16  # one tenant's requests at once (429 beyond)
//! policy_fallback = "fifo"         # decides a round the policy (an external agent) could not
//! min_run_s = 30                    # a started run is not preempted before this (default: round_s)
//!
//! # Tenant isolation (see docs/security.md, "Tenant isolation"). As root (or with CAP_SETUID and
//! # CAP_SETGID) every run executes as its tenant's own unix identity:
//! tenant_uid_range = [1900000000, 1900065535] # automatic uid = gid per tenant (a range systemd leaves unused)
//! tenant_users = { team-a = "alice" }  # or an existing user for a tenant
//! max_processes_per_tenant = 4096   # example. RLIMIT_NPROC of a tenant's uid (threads count);
//!                                   # 0: none; unset: a quarter of min(pid_max, threads-max)
//! max_queued_per_tenant = 10000     # jobs a tenant may have queued or running (429 beyond)
//! keep_finished_per_tenant = 10000  # ended jobs a tenant keeps on record (oldest pruned beyond)
//! keep_finished_mib_per_tenant = 64 # and at most this much of their records
//! keep_finished_days = 365          # and none older than this (0: any age)
//! submissions_per_s_per_tenant = 1.0  # on average (429 beyond) ...
//! submission_burst_per_tenant = 1000  # ... in bursts of this many
//! max_log_bytes = 1073741824        # output one run may add to its log (the rest is dropped)
//! checkpoint_roots = ["/data/ckpt"] # a job's checkpoint_dir must lie in <root>/<tenant>/
//!                                   # (default: <data_dir>/checkpoints)
//! # Without the privilege to switch users, runs share the daemon's identity and tenants are NOT
//! # isolated from each other; the daemon then refuses more than one tenant unless you say so:
//! allow_shared_identity = false
//!
//! # Usage accounting and decayed fair share (docs/accounting.md):
//! fairshare = false                 # hierarchical and vtc weigh tenants by their decayed usage too
//! fairshare_half_life = "7d"        # past usage counts half after this long (s, m, h, d, w)
//! metrics_token_file = "/etc/arbiter/metrics.token"  # a scrape token for /metrics' per-tenant
//!                                   # series (the admin token reads them too); unset: admin only
//! [webhooks]                        # tenants' webhooks (docs/webhooks.md)
//! allow_private = false             # receivers on loopback/private addresses
//! max_failures = 10                 # failures in a row before a receiver is declared dead
//! queue_per_tenant = 1000           # events waiting per tenant (dropped and counted beyond)
//! timeout_s = 10                    # one delivery
//! retry_initial_s = 1               # backoff: 1, 2, 4, ... s
//! retry_max_s = 300                 # ... at most this
//! ```

use arbiter_policy::PolicyKind;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Daemon settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Store, logs, checkpoints.
    pub data_dir: PathBuf,
    /// HTTP address.
    pub listen: SocketAddr,
    /// Policy name.
    pub policy: String,
    /// Seconds between scheduling rounds.
    pub round_s: f64,
    /// `auto` or declared GPUs (`4xa100`, `2xv100,2xk80`).
    pub gpus: String,
    /// CPU cores (0: detected).
    pub cpus: u32,
    /// Memory in GiB (0: detected).
    pub memory_gib: u32,
    /// File holding the admin token (created with a random token if missing).
    pub admin_token_file: Option<PathBuf>,
    /// Largest request body accepted.
    pub max_request_bytes: usize,
    /// URL jobs use to reach the API (`ARBITER_URL`); default `http://<listen>`.
    pub public_url: Option<String>,
    /// Seconds a client has to send a request's complete headers (also the keep-alive idle limit).
    pub header_timeout_s: f64,
    /// Seconds without a byte moving either way, mid-request, before a connection is closed.
    pub idle_timeout_s: f64,
    /// Seconds a whole request (its body included) may take before it is answered 408.
    pub request_timeout_s: f64,
    /// Most open connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most open connections from one client: a remote address, or on this host the uid that
    /// owns the client's socket (each tenant's jobs run as its own uid); more get 503.
    pub max_connections_per_client: usize,
    /// Most connections one tenant's requests (its clients' and its jobs') may hold open; a
    /// request beyond gets 429 and its connection is closed. The admin is not limited.
    pub max_connections_per_tenant: usize,
    /// Most requests of one tenant handled at once (429 beyond). The admin is not limited.
    pub max_requests_in_flight_per_tenant: usize,
    /// Seconds a started run is protected from preemption (default: one round). A job may ask
    /// for another value with `min_run_time_s`.
    pub min_run_s: Option<f64>,
    /// Automatic unix identities: tenant `n` runs as uid = gid = a free number in this range.
    pub tenant_uid_range: [u32; 2],
    /// Tenants that run as an existing user (tenant → user name) instead of an automatic uid.
    pub tenant_users: std::collections::BTreeMap<String, String>,
    /// Roots for checkpoint directories: a tenant's jobs checkpoint under `<root>/<tenant>/`.
    /// Empty: `<data_dir>/checkpoints`.
    pub checkpoint_roots: Vec<PathBuf>,
    /// Most processes (threads count) one tenant's uid may have at once (RLIMIT_NPROC), when it
    /// runs as its own uid; 0: no limit; unset: a quarter of the host's pid space (see
    /// `containment::PidSpace::tenant_share`). Stops a fork bomb at its tenant.
    pub max_processes_per_tenant: Option<u64>,
    /// Most jobs one tenant may have queued or running (429 beyond).
    pub max_queued_per_tenant: usize,
    /// Most tasks one job array may have (`arbiter submit --array`); each counts against
    /// `max_queued_per_tenant`.
    pub max_array_size: usize,
    /// The time limit reservations assume for a job without `max_run_time_s` (unset: none, so
    /// such a job is placed on a reserved node only once the reservation is over).
    pub default_max_run_time_s: Option<u64>,
    /// Most ended jobs a tenant keeps on record; the oldest beyond are pruned (record and log).
    pub keep_finished_per_tenant: usize,
    /// Most MiB of ended jobs' records a tenant keeps; the oldest beyond are pruned.
    pub keep_finished_mib_per_tenant: u64,
    /// Ended jobs older than this many days are pruned (0: whatever their age).
    pub keep_finished_days: u64,
    /// Submissions one tenant may make per second, on average (429 beyond).
    pub submissions_per_s_per_tenant: f64,
    /// Submissions one tenant may make at once.
    pub submission_burst_per_tenant: u32,
    /// Most bytes of output one run may add to its job's log; 0: no limit.
    pub max_log_bytes: u64,
    /// Acknowledges that, when the daemon cannot switch users, tenants share its identity and
    /// can read each other's files; without it such a daemon serves one tenant only.
    pub allow_shared_identity: bool,
    /// Prior of job sizes (GPU-seconds, one `duration` column) for `gittins`; default: the
    /// bundled samples from Tiresias' production YARN cluster.
    pub gittins_prior: Option<PathBuf>,
    /// With `policy = "external"`: the agent program (run with `sh -c` as the daemon's user, kept
    /// running; the protocol of `arbiter simulate --policy external`). Set by the admin only.
    pub policy_cmd: Option<String>,
    /// With `policy = "external"`: seconds the agent may take to answer one observation.
    pub policy_timeout_s: f64,
    /// The built-in policy that decides a round the configured policy could not (an agent that
    /// crashed, hung or answered nonsense; a policy that failed): `fifo` unless set.
    pub policy_fallback: String,
    /// Who runs the jobs: `local` (process sessions on this machine) or `slurm` (batch jobs
    /// pinned to the nodes the policy chose).
    pub executor: ExecutorKind,
    /// The Slurm executor's settings.
    pub slurm: SlurmConfig,
    /// Priority classes (`[[priority_classes]]`): none, and every job is in one class.
    pub priority_classes: Vec<PriorityClassConfig>,
    /// The class of a job submitted without `--priority-class`: `normal` unless set (with
    /// classes configured, it must name one of them).
    pub default_priority_class: Option<String>,
    /// Decayed fair share: `hierarchical` and `vtc` weigh tenants by their past GPU use too.
    pub fairshare: bool,
    /// Half-life of past usage for the fair share (`7d`, `36h`; s, m, h, d or w).
    pub fairshare_half_life: String,
    /// File holding a token that reads `/metrics` with its per-tenant series (a Prometheus
    /// scrape token; never logged). Unset: only the admin token reads them.
    pub metrics_token_file: Option<PathBuf>,
    /// `[webhooks]`: how tenants' webhooks are delivered, and where they may point.
    pub webhooks: WebhookConfig,
}

/// One priority class (`[[priority_classes]]`), as Kubernetes' PriorityClass or Slurm's QOS.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityClassConfig {
    /// Its name (`arbiter submit --priority-class NAME`).
    pub name: String,
    /// Higher values are served first.
    pub value: i32,
    /// Whether its running jobs may be preempted for a job of a higher class.
    #[serde(default = "preemptible_by_default")]
    pub preemptible: bool,
    /// The tenants that may use it; unset: every tenant.
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
}

fn preemptible_by_default() -> bool {
    true
}

/// The configured priority classes, looked up by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriorityClasses {
    classes: Vec<PriorityClassConfig>,
    default: Option<String>,
}

impl PriorityClasses {
    /// The table of `classes`, jobs without a class going to `default` (`normal` unless set).
    /// Names must be unique and the default one of them.
    pub fn new(
        classes: Vec<PriorityClassConfig>,
        default: Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in classes.iter().enumerate() {
            let plain = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.');
            if c.name.is_empty() || c.name.len() > 64 || !c.name.chars().all(plain) {
                return Err(ConfigError::Invalid(format!(
                    "priority_classes.{i}.name: `{}` is not a name (letters, digits, `-`, `_`, `.`)",
                    c.name
                )));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "priority_classes.{i}.name: `{}` is defined twice",
                    c.name
                )));
            }
        }
        if classes.is_empty() {
            if let Some(d) = default {
                return Err(ConfigError::Invalid(format!(
                    "default_priority_class: `{d}` names no class ([[priority_classes]] is empty)"
                )));
            }
            return Ok(PriorityClasses::default());
        }
        let default = default.unwrap_or_else(|| "normal".into());
        if !seen.contains(default.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "default_priority_class: `{default}` is not among [[priority_classes]] ({}); set it to one of them",
                classes
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(PriorityClasses {
            classes,
            default: Some(default),
        })
    }

    /// Whether any class is configured.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The classes, as configured.
    pub fn all(&self) -> &[PriorityClassConfig] {
        &self.classes
    }

    /// The class `tenant` submits in when it asks for `wanted` (`None`: the default), or why
    /// it may not (the admin, `admin`, may use every class). Class names are not secret
    /// (`arbiter cluster` lists them), so a class not granted is refused saying so.
    pub fn resolve(
        &self,
        tenant: &str,
        wanted: Option<&str>,
        admin: bool,
    ) -> Result<Option<String>, String> {
        if self.classes.is_empty() {
            return match wanted {
                Some(w) => Err(format!(
                    "`{w}`: no priority classes are configured (an admin defines them: [[priority_classes]] in the daemon's config)"
                )),
                None => Ok(None),
            };
        }
        let Some(name) = wanted.or(self.default.as_deref()) else {
            return Ok(None);
        };
        let class = self
            .classes
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| {
                format!(
                    "`{name}` is not a priority class (classes: {})",
                    self.classes
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        if !admin
            && class
                .tenants
                .as_ref()
                .is_some_and(|ts| !ts.iter().any(|t| t == tenant))
        {
            return Err(format!(
                "`{name}`: tenant {tenant} may not use this priority class (an admin grants it: tenants = [...] of the class in the daemon's config)"
            ));
        }
        Ok(Some(name.to_string()))
    }

    /// The scheduler's view of class `name` (a class no longer configured, of a job submitted
    /// before the configuration changed, counts as the default class).
    pub fn job_class(&self, name: Option<&str>) -> arbiter_model::JobClass {
        let find = |n: &str| self.classes.iter().find(|c| c.name == n);
        match name
            .and_then(find)
            .or_else(|| self.default.as_deref().and_then(find))
        {
            Some(c) => arbiter_model::JobClass {
                name: Some(c.name.as_str().into()),
                value: c.value,
                preemptible: c.preemptible,
            },
            None => arbiter_model::JobClass::default(),
        }
    }
}

/// `[webhooks]`: delivery of job state changes to tenants' webhooks (docs/webhooks.md).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookConfig {
    /// Receivers on loopback and private addresses (127/8, 10/8, 172.16/12, 192.168/16, 100.64/10,
    /// ::1, fc00::/7) are allowed. Never the daemon's own API, link-local (metadata services),
    /// unspecified, multicast or broadcast addresses.
    pub allow_private: bool,
    /// Failed attempts in a row after which a receiver is declared dead (its events dropped,
    /// nothing sent until the admin sets the webhook again).
    pub max_failures: u32,
    /// Most events waiting per tenant; beyond, new ones are dropped and counted.
    pub queue_per_tenant: usize,
    /// Seconds one delivery may take (connect, send, answer).
    pub timeout_s: f64,
    /// Seconds before the first retry; each next one waits twice as long ...
    pub retry_initial_s: f64,
    /// ... up to this many seconds.
    pub retry_max_s: f64,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_private: false,
            max_failures: 10,
            queue_per_tenant: 1_000,
            timeout_s: 10.0,
            retry_initial_s: 1.0,
            retry_max_s: 300.0,
        }
    }
}

impl WebhookConfig {
    fn check(&self) -> Result<(), ConfigError> {
        if self.max_failures == 0 || self.queue_per_tenant == 0 {
            return Err(ConfigError::Invalid(
                "webhooks.max_failures and webhooks.queue_per_tenant must be at least 1".into(),
            ));
        }
        for (key, value) in [
            ("webhooks.timeout_s", self.timeout_s),
            ("webhooks.retry_initial_s", self.retry_initial_s),
            ("webhooks.retry_max_s", self.retry_max_s),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
                return Err(ConfigError::Invalid(format!(
                    "{key}: must be > 0 and at most 86400 seconds, got {value}"
                )));
            }
        }
        if self.retry_max_s < self.retry_initial_s {
            return Err(ConfigError::Invalid(
                "webhooks.retry_max_s: must be at least webhooks.retry_initial_s".into(),
            ));
        }
        Ok(())
    }
}

/// Which executor carries out the daemon's decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Process sessions on this machine.
    #[default]
    Local,
    /// Slurm batch jobs.
    Slurm,
}

impl ExecutorKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Slurm => "slurm",
        }
    }
}

impl std::str::FromStr for ExecutorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(ExecutorKind::Local),
            "slurm" => Ok(ExecutorKind::Slurm),
            other => Err(format!("unknown executor `{other}` (local or slurm)")),
        }
    }
}

/// `[slurm]`: where the Slurm executor submits.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    /// The partition Arbiter owns (no other scheduler's jobs, no Slurm preemption there).
    pub partition: String,
    /// Directory of `sbatch`, `squeue`, `scancel`, `sinfo` (default: found on PATH).
    pub bin_dir: Option<PathBuf>,
    /// Seconds a Slurm command may take before the daemon gives up on it.
    pub command_timeout_s: f64,
    /// Seconds between polls of `squeue` for runs that ended.
    pub poll_s: f64,
    /// Run every job as a step of an allocation that holds its GPUs (`srun --jobid --overlap`,
    /// started where the daemon runs), so that jobs the policy co-locates (muri-s/l, gandiva,
    /// horus, max-min-fairness-packed) share GPUs; otherwise such jobs wait for free GPUs.
    pub share_gpus: bool,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            partition: "arbiter".into(),
            bin_dir: None,
            command_timeout_s: 10.0,
            poll_s: 1.0,
            share_gpus: false,
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            data_dir: PathBuf::from("arbiter-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            policy: "fifo".into(),
            round_s: 30.0,
            gpus: "auto".into(),
            cpus: 0,
            memory_gib: 0,
            admin_token_file: None,
            max_request_bytes: 64 * 1024,
            public_url: None,
            header_timeout_s: 10.0,
            idle_timeout_s: 60.0,
            request_timeout_s: 30.0,
            max_connections: 1024,
            max_connections_per_client: 256,
            max_connections_per_tenant: 64,
            max_requests_in_flight_per_tenant: 16,
            min_run_s: None,
            tenant_uid_range: [1_900_000_000, 1_900_065_535],
            tenant_users: std::collections::BTreeMap::new(),
            checkpoint_roots: Vec::new(),
            allow_shared_identity: false,
            max_processes_per_tenant: None,
            max_queued_per_tenant: 10_000,
            max_array_size: 10_000,
            default_max_run_time_s: None,
            keep_finished_per_tenant: 10_000,
            keep_finished_mib_per_tenant: 64,
            keep_finished_days: 365,
            submissions_per_s_per_tenant: 1.0,
            submission_burst_per_tenant: 1_000,
            max_log_bytes: 1 << 30,
            gittins_prior: None,
            policy_cmd: None,
            policy_timeout_s: 10.0,
            policy_fallback: "fifo".into(),
            executor: ExecutorKind::Local,
            slurm: SlurmConfig::default(),
            priority_classes: Vec::new(),
            default_priority_class: None,
            fairshare: false,
            fairshare_half_life: "7d".into(),
            metrics_token_file: None,
            webhooks: WebhookConfig::default(),
        }
    }
}

/// A configuration problem, naming the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unreadable file.
    // (Not `source`: a cause in the words and in the chain was printed twice.)
    #[error("{path}: {cause}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        cause: std::io::Error,
    },
    /// Bad value.
    #[error("{0}")]
    Invalid(String),
}

impl ServeConfig {
    /// The configured priority classes, checked.
    pub fn priority_classes(&self) -> Result<PriorityClasses, ConfigError> {
        PriorityClasses::new(
            self.priority_classes.clone(),
            self.default_priority_class.clone(),
        )
    }

    /// Reads a TOML file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ConfigError::Io {
            path: path.to_path_buf(),
            cause,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))
    }

    /// The policy, parsed.
    pub fn policy_kind(&self) -> Result<PolicyKind, ConfigError> {
        PolicyKind::parse(&self.policy).map_err(|e| ConfigError::Invalid(format!("policy: {e}")))
    }

    /// The policy that decides a round the configured one could not (`policy_fallback`): a
    /// built-in one, the daemon's own code, so that it cannot fail the same way.
    pub fn fallback_kind(&self) -> Result<PolicyKind, ConfigError> {
        match PolicyKind::parse(&self.policy_fallback) {
            Ok(PolicyKind::External) => Err(ConfigError::Invalid(
                "policy_fallback: must be a built-in policy, not `external`".into(),
            )),
            Ok(kind) => Ok(kind),
            Err(e) => Err(ConfigError::Invalid(format!("policy_fallback: {e}"))),
        }
    }

    /// Checks values that parse but cannot work, field by field (`validate` adds what needs
    /// the rest of the daemon: whether the executor can carry out the policy).
    pub fn check_fields(&self) -> Result<(), ConfigError> {
        self.policy_kind()?;
        self.fallback_kind()?;
        if !(self.round_s.is_finite() && self.round_s > 0.0) {
            return Err(ConfigError::Invalid(format!(
                "round_s: must be > 0, got {}",
                self.round_s
            )));
        }
        for (key, value) in [
            ("header_timeout_s", self.header_timeout_s),
            ("idle_timeout_s", self.idle_timeout_s),
            ("request_timeout_s", self.request_timeout_s),
        ] {
            if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
                return Err(ConfigError::Invalid(format!(
                    "{key}: must be > 0 and at most 86400 seconds, got {value}"
                )));
            }
        }
        for (key, value) in [
            (
                "max_connections_per_client",
                self.max_connections_per_client,
            ),
            (
                "max_connections_per_tenant",
                self.max_connections_per_tenant,
            ),
            (
                "max_requests_in_flight_per_tenant",
                self.max_requests_in_flight_per_tenant,
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{key}: must be at least 1")));
            }
        }
        if !(self.submissions_per_s_per_tenant.is_finite()
            && self.submissions_per_s_per_tenant > 0.0)
        {
            return Err(ConfigError::Invalid(format!(
                "submissions_per_s_per_tenant: must be > 0, got {}",
                self.submissions_per_s_per_tenant
            )));
        }
        for (key, value) in [
            (
                "keep_finished_per_tenant",
                self.keep_finished_per_tenant as u64,
            ),
            (
                "keep_finished_mib_per_tenant",
                self.keep_finished_mib_per_tenant,
            ),
            (
                "submission_burst_per_tenant",
                u64::from(self.submission_burst_per_tenant),
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid(format!("{key}: must be at least 1")));
            }
        }
        if self.max_array_size == 0 || self.max_array_size > 1_000_000 {
            return Err(ConfigError::Invalid(format!(
                "max_array_size: must be 1 to 1000000, got {}",
                self.max_array_size
            )));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::Invalid(
                "max_connections: must be at least 1".into(),
            ));
        }
        parse_gpus(&self.gpus)?;
        self.priority_classes()?;
        if let Some(min) = self.min_run_s
            && !(min.is_finite() && min >= 0.0)
        {
            return Err(ConfigError::Invalid(format!(
                "min_run_s: must be >= 0, got {min}"
            )));
        }
        let [low, high] = self.tenant_uid_range;
        if low == 0 || low > high {
            return Err(ConfigError::Invalid(format!(
                "tenant_uid_range: [{low}, {high}] must be a non-empty range of non-root ids (low <= high, low > 0)"
            )));
        }
        for root in &self.checkpoint_roots {
            if !root.is_absolute() {
                return Err(ConfigError::Invalid(format!(
                    "checkpoint_roots: `{}` is not an absolute path",
                    root.display()
                )));
            }
        }
        let kind = self.policy_kind()?;
        if kind == PolicyKind::External
            && self
                .policy_cmd
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
        {
            return Err(ConfigError::Invalid("policy_cmd: policy `external` needs the agent to run, e.g. policy_cmd = \"python3 /opt/agent.py\"".into()));
        }
        if !(self.policy_timeout_s.is_finite() && self.policy_timeout_s > 0.0) {
            return Err(ConfigError::Invalid(format!(
                "policy_timeout_s: must be > 0, got {}",
                self.policy_timeout_s
            )));
        }
        let half_life = parse_duration_s(&self.fairshare_half_life).map_err(|e| {
            ConfigError::Invalid(format!(
                "fairshare_half_life: `{}`: {e}",
                self.fairshare_half_life.escape_debug()
            ))
        })?;
        if half_life == 0 {
            return Err(ConfigError::Invalid("fairshare_half_life: must be longer than 0 (set fairshare = false to turn fair share off)".into()));
        }
        if self.fairshare && !kind.uses_fairshare() {
            return Err(ConfigError::Invalid(format!(
                "fairshare: policy `{kind}` does not weigh tenants; decayed fair share works with the tenant-level policies, hierarchical and vtc"
            )));
        }
        if ![self.slurm.command_timeout_s, self.slurm.poll_s]
            .iter()
            .all(|s| s.is_finite() && *s > 0.0)
        {
            return Err(ConfigError::Invalid(
                "slurm.command_timeout_s and slurm.poll_s must be > 0".into(),
            ));
        }
        self.webhooks.check()?;
        Ok(())
    }
}

impl ServeConfig {
    /// The fair share's half-life in seconds, when `fairshare` is on.
    pub fn fairshare_half_life_s(&self) -> Result<Option<f64>, ConfigError> {
        if !self.fairshare {
            return Ok(None);
        }
        parse_duration_s(&self.fairshare_half_life)
            .map(|s| Some(s as f64))
            .map_err(|e| ConfigError::Invalid(format!("fairshare_half_life: {e}")))
    }
}

/// Seconds in a duration: a whole number with a unit `s`, `m`, `h`, `d` or `w` (none: seconds),
/// at most ten years (`fairshare_half_life`, `arbiter usage --since`).
pub fn parse_duration_s(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    if number.is_empty() {
        return Err("not a duration like 90m, 36h, 7d or 2w".into());
    }
    let scale = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        other => {
            return Err(format!(
                "unknown unit `{}` (s, m, h, d or w)",
                other.escape_debug()
            ));
        }
    };
    let n: i64 = number
        .parse()
        .map_err(|_| "not a duration like 90m, 36h, 7d or 2w".to_string())?;
    match n.checked_mul(scale) {
        Some(s) if s <= 10 * 365 * 86_400 => Ok(s),
        _ => Err("longer than ten years".into()),
    }
}

/// GPUs of the machine: `(type, count)` groups, in index order.
pub type GpuInventory = Vec<(String, u32)>;

/// Parses a declared inventory (`4xa100`, `2xv100,2xk80`, `0`); `auto` gives `None`.
pub fn parse_gpus(text: &str) -> Result<Option<GpuInventory>, ConfigError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    if text == "0" || text.is_empty() {
        return Err(ConfigError::Invalid("gpus: a daemon needs at least one GPU to schedule; declare the machine's, e.g. 4xa100 (or `auto` to ask nvidia-smi)".into()));
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        let (count, kind) = part.trim().split_once(['x', 'X']).ok_or_else(|| {
            ConfigError::Invalid(format!("gpus: `{part}` is not COUNTxTYPE (e.g. 4xa100)"))
        })?;
        let count: u32 = count.trim().parse().map_err(|_| {
            ConfigError::Invalid(format!("gpus: `{count}` in `{part}` is not a number"))
        })?;
        let kind = kind.trim();
        if kind.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "gpus: `{part}` has no GPU type"
            )));
        }
        if count == 0 {
            return Err(ConfigError::Invalid(format!(
                "gpus: `{part}` declares no GPUs"
            )));
        }
        out.push((kind.to_ascii_lowercase(), count));
    }
    Ok(Some(out))
}

/// GPUs found by `nvidia-smi` (none when it is missing or fails).
pub fn detect_gpus() -> GpuInventory {
    let Ok(out) = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=name", "--format=csv,noheader"])
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout))
}

/// Groups `nvidia-smi --query-gpu=name --format=csv,noheader` output into consecutive runs of
/// one type, named by the model number (`NVIDIA A100-SXM4-80GB` → `a100`).
pub fn parse_nvidia_smi(output: &str) -> GpuInventory {
    let mut groups: GpuInventory = Vec::new();
    for line in output.lines().filter(|l| !l.trim().is_empty()) {
        // "NVIDIA A100-SXM4-80GB" → "a100": the first word that contains a digit.
        let name = line
            .split_whitespace()
            .find(|w| w.chars().any(|c| c.is_ascii_digit()))
            .unwrap_or(line.trim());
        let kind = name.split('-').next().unwrap_or(name).to_ascii_lowercase();
        match groups.last_mut() {
            Some((k, n)) if *k == kind => *n += 1,
            _ => groups.push((kind, 1)),
        }
    }
    groups
}

/// CPU cores and memory (GiB) of this machine.
pub fn detect_host() -> (u32, u32) {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let memory_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    (cpus, (memory_kib / (1024 * 1024)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_settings_parse_from_their_section_and_bad_ones_name_the_key() {
        let config: ServeConfig =
            toml::from_str("[webhooks]\nallow_private = true\nmax_failures = 3\n").expect("parses");
        assert!(
            config.webhooks.allow_private
                && config.webhooks.max_failures == 3
                && config.webhooks.queue_per_tenant == 1_000
        );
        config.check_fields().expect("valid");
        for (bad, key) in [
            ("max_failures = 0", "max_failures"),
            ("timeout_s = -1", "timeout_s"),
            ("retry_initial_s = 10\nretry_max_s = 1", "retry_max_s"),
            ("allow_everything = true", "allow_everything"),
        ] {
            let e = toml::from_str::<ServeConfig>(&format!("[webhooks]\n{bad}\n"))
                .map_err(|e| e.to_string())
                .and_then(|c| c.check_fields().map_err(|e| e.to_string()));
            assert!(e.as_ref().is_err_and(|e| e.contains(key)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn declared_gpus_parse_and_bad_ones_name_the_problem() {
        assert_eq!(
            parse_gpus("4xa100").expect("ok"),
            Some(vec![("a100".into(), 4)])
        );
        assert_eq!(
            parse_gpus("2xV100, 2xk80").expect("ok"),
            Some(vec![("v100".into(), 2), ("k80".into(), 2)])
        );
        assert_eq!(parse_gpus("auto").expect("ok"), None);
        assert!(
            parse_gpus("four")
                .expect_err("bad")
                .to_string()
                .contains("COUNTxTYPE")
        );
        assert!(
            parse_gpus("ax100")
                .expect_err("bad")
                .to_string()
                .contains("not a number")
        );
        assert!(
            parse_gpus("0")
                .expect_err("no GPUs")
                .to_string()
                .contains("at least one GPU")
        );
    }

    #[test]
    fn nvidia_smi_names_become_gpu_types() {
        let out = "NVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\nTesla V100-PCIE-16GB\nNVIDIA H100 80GB HBM3\n";
        assert_eq!(
            parse_nvidia_smi(out),
            vec![("a100".into(), 2), ("v100".into(), 1), ("h100".into(), 1)]
        );
        assert!(parse_nvidia_smi("").is_empty());
    }

    #[test]
    fn the_example_config_in_the_repository_parses_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../arbiter.example.toml");
        let config = ServeConfig::read(&path).expect("parses");
        config.validate().expect("valid");
        let defaults = ServeConfig::default();
        assert_eq!(
            (
                config.round_s,
                config.tenant_uid_range,
                config.max_connections
            ),
            (
                defaults.round_s,
                defaults.tenant_uid_range,
                defaults.max_connections
            )
        );
        assert_eq!(
            config.max_processes_per_tenant, None,
            "unset: derived from the host"
        );
    }

    #[test]
    fn the_process_limit_is_derived_when_unset_and_zero_still_means_none() {
        let parsed = |text: &str| {
            toml::from_str::<ServeConfig>(text)
                .expect("parses")
                .max_processes_per_tenant
        };
        assert_eq!(parsed(""), None);
        assert_eq!(parsed("max_processes_per_tenant = 0"), Some(0));
        assert_eq!(parsed("max_processes_per_tenant = 500"), Some(500));
    }

    #[test]
    fn a_policy_the_daemon_cannot_carry_out_is_refused_with_the_reason() {
        // With the local executor it runs on the pair speeds the daemon learns; Slurm cannot
        // co-locate.
        let c: ServeConfig =
            toml::from_str("policy = \"max-min-fairness-packed\"").expect("parses");
        c.validate()
            .expect("max-min-fairness-packed runs on the learned pair speeds");
        let c: ServeConfig =
            toml::from_str("policy = \"max-min-fairness-packed\"\nexecutor = \"slurm\"")
                .expect("parses");
        let e = c.validate().expect_err("refused").to_string();
        assert!(
            e.contains("slurm executor")
                && e.contains("one job at a time")
                && e.contains("share_gpus"),
            "{e}"
        );
        // Sharing GPUs as steps of one allocation, Slurm can.
        let c: ServeConfig = toml::from_str("policy = \"max-min-fairness-packed\"\nexecutor = \"slurm\"\n[slurm]\nshare_gpus = true").expect("parses");
        c.validate().expect("with share_gpus Slurm co-locates");
        let c: ServeConfig = toml::from_str("policy = \"gittins\"").expect("parses");
        c.validate().expect("gittins runs with the bundled prior");
    }

    #[test]
    fn fair_share_needs_a_tenant_level_policy_and_a_real_half_life() {
        let c: ServeConfig = toml::from_str("policy = \"vtc\"\nfairshare = true").expect("parses");
        c.validate().expect("vtc weighs tenants");
        assert_eq!(
            c.fairshare_half_life_s().expect("default"),
            Some(7.0 * 86_400.0),
            "the default half-life is 7 days"
        );
        let c: ServeConfig = toml::from_str(
            "policy = \"hierarchical\"\nfairshare = true\nfairshare_half_life = \"36h\"",
        )
        .expect("parses");
        assert_eq!(
            c.fairshare_half_life_s().expect("valid"),
            Some(36.0 * 3600.0)
        );
        let c: ServeConfig = toml::from_str("policy = \"fifo\"\nfairshare = true").expect("parses");
        assert!(
            c.validate()
                .expect_err("fifo")
                .to_string()
                .contains("hierarchical and vtc")
        );
        for (bad, words) in [
            ("7y", "unknown unit `y`"),
            ("0d", "longer than 0"),
            ("seven", "not a duration"),
            ("9999w", "ten years"),
        ] {
            let c: ServeConfig = toml::from_str(&format!(
                "policy = \"vtc\"\nfairshare = true\nfairshare_half_life = \"{bad}\""
            ))
            .expect("parses");
            let e = c.validate().expect_err(bad).to_string();
            assert!(
                e.contains("fairshare_half_life") && e.contains(words),
                "{bad}: {e}"
            );
        }
        let c: ServeConfig = toml::from_str("policy = \"vtc\"").expect("parses");
        assert_eq!(
            c.fairshare_half_life_s().expect("off"),
            None,
            "off unless asked for"
        );
    }

    #[test]
    fn unknown_keys_and_policies_are_refused() {
        assert!(toml::from_str::<ServeConfig>("polcy = \"las\"").is_err());
        let c: ServeConfig = toml::from_str("policy = \"nope\"").expect("parses");
        assert!(
            c.validate()
                .expect_err("bad")
                .to_string()
                .contains("unknown policy")
        );
        // A typo gets the name it was meant to be (`--policy srft` and the config file alike).
        let c: ServeConfig = toml::from_str("policy = \"srft\"").expect("parses");
        assert!(
            c.validate()
                .expect_err("bad")
                .to_string()
                .contains("did you mean `srtf`?")
        );
        let c: ServeConfig = toml::from_str("policy_fallback = \"fifp\"").expect("parses");
        assert!(
            c.fallback_kind()
                .expect_err("bad")
                .to_string()
                .contains("did you mean `fifo`?")
        );
    }
}

#[cfg(test)]
mod class_tests {
    use super::*;

    fn class(name: &str, value: i32, tenants: Option<Vec<&str>>) -> PriorityClassConfig {
        PriorityClassConfig {
            name: name.into(),
            value,
            preemptible: true,
            tenants: tenants.map(|ts| ts.into_iter().map(String::from).collect()),
        }
    }

    #[test]
    fn bad_class_tables_are_refused_naming_the_key() {
        let e = PriorityClasses::new(
            vec![class("a", 1, None), class("a", 2, None)],
            Some("a".into()),
        )
        .expect_err("twice")
        .to_string();
        assert!(
            e.contains("priority_classes.1.name") && e.contains("twice"),
            "{e}"
        );
        let e = PriorityClasses::new(vec![class("high", 1, None)], None)
            .expect_err("no normal")
            .to_string();
        assert!(
            e.contains("default_priority_class: `normal`") && e.contains("high"),
            "{e}"
        );
        let e = PriorityClasses::new(vec![class("a b", 1, None)], Some("a b".into()))
            .expect_err("not a name")
            .to_string();
        assert!(e.contains("priority_classes.0.name"), "{e}");
        let e = PriorityClasses::new(Vec::new(), Some("normal".into()))
            .expect_err("no classes")
            .to_string();
        assert!(e.contains("default_priority_class"), "{e}");
    }

    #[test]
    fn a_class_resolves_to_itself_or_the_default_and_only_for_the_tenants_granted() {
        let table = PriorityClasses::new(
            vec![
                class("high", 100, Some(vec!["a"])),
                class("normal", 50, None),
            ],
            None,
        )
        .expect("valid");
        assert_eq!(table.resolve("b", None, false), Ok(Some("normal".into())));
        assert_eq!(
            table.resolve("a", Some("high"), false),
            Ok(Some("high".into()))
        );
        assert!(
            table
                .resolve("b", Some("high"), false)
                .expect_err("not granted")
                .contains("may not use")
        );
        assert_eq!(
            table.resolve("admin", Some("high"), true),
            Ok(Some("high".into()))
        );
        assert_eq!(table.job_class(Some("high")).value, 100);
        // A class removed from the configuration since: the default's.
        assert_eq!(table.job_class(Some("gone")).value, 50);
    }
}
