//! What confines each run on this host beyond its tenant's unix identity, decided once at start
//! and stated at start and in `/v1/cluster` (docs/security.md):
//! - [`ProcessLimit`]: the most processes a tenant's uid may have (RLIMIT_NPROC), by default a
//!   share of the host's pid space;
//! - [`ProcessVisibility`]: whether each run gets its own PID namespace and /proc, so that a job
//!   sees only its own processes (probed: it needs root);
//! - [`MemoryEnforcement`]: cgroup v2 where the daemon can write it, else RLIMIT_DATA on each of
//!   the job's processes.

use crate::config::ExecutorKind;
use std::path::Path;
use std::time::{Duration, Instant};

/// `pid_max` assumed when `/proc/sys/kernel/pid_max` cannot be read: the kernel's historical
/// default (the smallest a host has unless an admin lowered it).
const DEFAULT_PID_MAX: u64 = 32_768;

/// By default one tenant may hold a quarter of the host's pid space. A fork bomb then takes at
/// most a quarter of the pids and threads the kernel can hand out: the host's own processes
/// (sshd, the daemon, every run's wrapper) and the other tenants keep three quarters, and it
/// takes four tenants at their limit at once to run the machine out. A quarter is still far above
/// what a training job needs (data-loader workers times their threads: hundreds to a few
/// thousand), and on hosts with the modern default `pid_max` of 4,194,304 it is over a million.
const TENANT_SHARE_DIVISOR: u64 = 4;

/// The host's pid space: `kernel.pid_max` and `kernel.threads-max` (a thread takes a pid too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidSpace {
    /// `/proc/sys/kernel/pid_max`.
    pub pid_max: u64,
    /// `/proc/sys/kernel/threads-max`.
    pub threads_max: u64,
}

impl PidSpace {
    /// This host's, from /proc (an unreadable value counts as [`DEFAULT_PID_MAX`]).
    pub fn of_host() -> Self {
        let read = |file: &str| {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|n| *n > 0)
        };
        PidSpace {
            pid_max: read("/proc/sys/kernel/pid_max").unwrap_or(DEFAULT_PID_MAX),
            threads_max: read("/proc/sys/kernel/threads-max").unwrap_or(DEFAULT_PID_MAX),
        }
    }

    /// The processes (threads count) the kernel can hand out at once.
    pub fn usable(self) -> u64 {
        self.pid_max.min(self.threads_max)
    }

    /// The default per-tenant limit: a quarter of [`Self::usable`] (at least 1).
    pub fn tenant_share(self) -> u64 {
        (self.usable() / TENANT_SHARE_DIVISOR).max(1)
    }
}

/// Where the per-tenant process limit in force came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessLimitSource {
    /// `max_processes_per_tenant` unset: derived from the host.
    Derived,
    /// Set in the configuration (0: no limit).
    Configured,
}

/// The per-tenant process limit (RLIMIT_NPROC of a tenant's uid) in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessLimit {
    /// The limit (`None`: no limit).
    pub limit: Option<u64>,
    /// Where it came from.
    pub source: ProcessLimitSource,
    /// The host's pid space.
    pub host: PidSpace,
}

impl ProcessLimit {
    /// The limit for `configured` (`None`: unset, derived from `host`; `Some(0)`: no limit; else
    /// as given).
    pub fn new(configured: Option<u64>, host: PidSpace) -> Self {
        match configured {
            None => ProcessLimit {
                limit: Some(host.tenant_share()),
                source: ProcessLimitSource::Derived,
                host,
            },
            Some(n) => ProcessLimit {
                limit: (n > 0).then_some(n),
                source: ProcessLimitSource::Configured,
                host,
            },
        }
    }

    /// A warning when the configured limit lets one tenant take every pid of the host.
    pub fn warning(&self) -> Option<String> {
        if self.source == ProcessLimitSource::Derived {
            return None;
        }
        let share = self.host.tenant_share();
        match self.limit {
            Some(n) if n < self.host.pid_max => None,
            Some(n) => Some(format!(
                "max_processes_per_tenant = {n} is at least the host's pid_max ({}): one tenant can take every pid of the machine (unset the key for {share}, a quarter of the host's)",
                self.host.pid_max
            )),
            None => Some(format!(
                "max_processes_per_tenant = 0: no process limit, one tenant can take every pid of the machine (unset the key for {share}, a quarter of the host's)"
            )),
        }
    }

    /// One line for the start-up message and `/v1/cluster`; `isolated`: whether tenants run as
    /// their own uids (the limit is counted per uid, so it applies only then).
    pub fn describe(&self, isolated: bool) -> String {
        let limit = match (self.limit, self.source) {
            (None, _) => "no process limit per tenant (max_processes_per_tenant = 0)".to_string(),
            (Some(n), ProcessLimitSource::Derived) => format!(
                "at most {n} processes per tenant (RLIMIT_NPROC, threads count; derived: a quarter of the host's {} = min(pid_max {}, threads-max {}))",
                self.host.usable(),
                self.host.pid_max,
                self.host.threads_max
            ),
            (Some(n), ProcessLimitSource::Configured) => format!(
                "at most {n} processes per tenant (RLIMIT_NPROC, threads count; max_processes_per_tenant)"
            ),
        };
        if isolated {
            limit
        } else {
            format!("{limit}; not applied: jobs run as the daemon's user")
        }
    }
}

/// Whether a job can see other runs' processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessVisibility {
    /// Each run has its own PID namespace and /proc.
    OwnNamespace,
    /// Runs share the host's PID namespace and /proc.
    Shared {
        /// Why.
        why: String,
    },
}

/// How long the start-up probe of namespaces may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl ProcessVisibility {
    /// Tries, once at start, whether runs can get their own PID namespace and /proc: only with
    /// the local executor and per-tenant identities (the daemon is root), and only if the run
    /// wrapper `wrapper_exe` can really set one up here (`job-wrapper --probe`, which does what a
    /// run does: a container may refuse it).
    pub fn probe(executor: ExecutorKind, isolated: bool, wrapper_exe: &Path) -> Self {
        let why = match (executor, isolated) {
            (ExecutorKind::Slurm, _) => {
                "the Slurm executor: jobs run as Slurm runs them".to_string()
            }
            (_, false) => "tenants do not run as their own uids".to_string(),
            (ExecutorKind::Local, true) => match run_probe(wrapper_exe) {
                Ok(()) => return ProcessVisibility::OwnNamespace,
                Err(why) => format!("a PID namespace could not be set up here: {why}"),
            },
        };
        ProcessVisibility::Shared { why }
    }

    /// Whether runs get their own namespace.
    pub fn own_namespace(&self) -> bool {
        matches!(self, ProcessVisibility::OwnNamespace)
    }

    /// One line for the start-up message and `/v1/cluster`.
    pub fn describe(&self) -> String {
        match self {
            ProcessVisibility::OwnNamespace => {
                "each run has its own PID namespace and /proc: a job sees only its own processes, and what it leaves running is killed when its main process ends".into()
            }
            ProcessVisibility::Shared { why } => format!(
                "jobs share the host's PID namespace ({why}): a job sees every process of the machine and its command line in /proc (mount /proc with hidepid=2 to hide them)"
            ),
        }
    }
}

/// Runs `wrapper_exe job-wrapper --probe`; its last line of stderr says why it failed.
fn run_probe(wrapper_exe: &Path) -> Result<(), String> {
    let mut child = std::process::Command::new(wrapper_exe)
        .args(["job-wrapper", "--probe"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", wrapper_exe.display()))?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the probe took more than {} s",
                    PROBE_TIMEOUT.as_secs()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    Err(stderr
        .lines()
        .last()
        .map(|l| l.trim_start_matches("arbiter: ").to_string())
        .unwrap_or_else(|| format!("the probe failed ({status})")))
}

/// How runs' memory limits are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryEnforcement {
    /// `memory.max` of the run's cgroup v2: all of the run's processes together.
    CgroupV2,
    /// RLIMIT_DATA of each of the job's processes (no writable cgroup v2 here).
    RlimitData,
    /// Given to Slurm (`--mem`).
    Slurm,
}

impl MemoryEnforcement {
    /// What enforces memory limits for `executor`, given whether the daemon has a writable
    /// cgroup v2 subtree.
    pub fn select(executor: ExecutorKind, cgroups: bool) -> Self {
        match (executor, cgroups) {
            (ExecutorKind::Slurm, _) => MemoryEnforcement::Slurm,
            (ExecutorKind::Local, true) => MemoryEnforcement::CgroupV2,
            (ExecutorKind::Local, false) => MemoryEnforcement::RlimitData,
        }
    }

    /// One line for the start-up message and `/v1/cluster`.
    pub fn describe(self) -> &'static str {
        match self {
            MemoryEnforcement::CgroupV2 => {
                "cgroup v2 (memory.max: all of a run's processes together)"
            }
            MemoryEnforcement::RlimitData => {
                "RLIMIT_DATA per process (fallback: no writable cgroup v2 here): each of a job's processes may map at most the run's memory in private writable memory; not a limit on the run as a whole, nor on shared memory"
            }
            MemoryEnforcement::Slurm => {
                "given to Slurm (--mem; enforced where its TaskPlugin confines tasks)"
            }
        }
    }
}

/// Everything of this module in force, as `Settings` carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Containment {
    /// The per-tenant process limit.
    pub processes: ProcessLimit,
    /// Whether runs get their own PID namespace.
    pub visibility: ProcessVisibility,
    /// How memory limits are enforced.
    pub memory: MemoryEnforcement,
}

impl Containment {
    /// Nothing beyond the tenant identities: no process limit, the host's PID namespace, memory
    /// given to the executor (tests and benchmarks with a fake executor).
    pub fn none() -> Self {
        Containment {
            processes: ProcessLimit::new(
                Some(0),
                PidSpace {
                    pid_max: DEFAULT_PID_MAX,
                    threads_max: DEFAULT_PID_MAX,
                },
            ),
            visibility: ProcessVisibility::Shared {
                why: "not set up".into(),
            },
            memory: MemoryEnforcement::RlimitData,
        }
    }

    /// What the local executor applies to each run.
    pub fn run_confinement(&self) -> RunConfinement {
        // With cgroup v2 too: a run whose group could not be prepared falls back to RLIMIT_DATA.
        RunConfinement {
            pid_namespace: self.visibility.own_namespace(),
            memory_rlimit: self.memory != MemoryEnforcement::Slurm,
        }
    }

    /// The CPU/memory part of the start-up line and of `/v1/cluster`.
    pub fn cpu_memory_limits(&self) -> &'static str {
        match self.memory {
            MemoryEnforcement::CgroupV2 => "enforced with cgroup v2",
            MemoryEnforcement::RlimitData => {
                "NOT enforced for CPU (no writable cgroup v2 here); memory by RLIMIT_DATA per process"
            }
            MemoryEnforcement::Slurm => {
                "given to Slurm (--cpus-per-task, --mem; enforced where its TaskPlugin confines tasks)"
            }
        }
    }
}

/// What the local executor applies to each run it starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunConfinement {
    /// Start the job in its own PID namespace with its own /proc.
    pub pid_namespace: bool,
    /// Limit each of the job's processes with RLIMIT_DATA when the run has no cgroup (none here,
    /// or its group could not be prepared).
    pub memory_rlimit: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: PidSpace = PidSpace {
        pid_max: 32_768,
        threads_max: 192_730,
    };

    #[test]
    fn the_default_process_limit_is_a_quarter_of_the_smaller_of_pid_max_and_threads_max() {
        assert_eq!(HOST.tenant_share(), 8_192);
        assert_eq!(
            PidSpace {
                pid_max: 4_194_304,
                threads_max: 100_000
            }
            .tenant_share(),
            25_000
        );
        assert_eq!(
            PidSpace {
                pid_max: 3,
                threads_max: 3
            }
            .tenant_share(),
            1,
            "never 0 (which would mean no limit)"
        );
        let derived = ProcessLimit::new(None, HOST);
        assert_eq!(
            (derived.limit, derived.source, derived.warning()),
            (Some(8_192), ProcessLimitSource::Derived, None)
        );
        assert!(
            derived.describe(true).contains("at most 8192 processes")
                && derived.describe(true).contains("derived"),
            "{}",
            derived.describe(true)
        );
        assert!(derived.describe(false).contains("not applied"));
        // This host's values are read and give a limit below its pid_max.
        let host = PidSpace::of_host();
        assert!(host.tenant_share() < host.pid_max, "{host:?}");
    }

    #[test]
    fn an_explicit_process_limit_is_used_as_given_and_warned_about_when_it_reaches_pid_max() {
        let below = ProcessLimit::new(Some(1_000), HOST);
        assert_eq!((below.limit, below.warning()), (Some(1_000), None));
        let at = ProcessLimit::new(Some(32_768), HOST);
        assert_eq!(at.limit, Some(32_768), "used as given");
        assert!(
            at.warning().is_some_and(|w| w.contains("pid_max (32768)")),
            "{:?}",
            at.warning()
        );
        let none = ProcessLimit::new(Some(0), HOST);
        assert_eq!(none.limit, None, "0 still means no limit");
        assert!(none.warning().is_some() && none.describe(true).contains("no process limit"));
    }

    #[test]
    fn memory_is_limited_by_cgroup_v2_where_writable_else_by_rlimit_data() {
        assert_eq!(
            MemoryEnforcement::select(ExecutorKind::Local, true),
            MemoryEnforcement::CgroupV2
        );
        assert_eq!(
            MemoryEnforcement::select(ExecutorKind::Local, false),
            MemoryEnforcement::RlimitData
        );
        assert_eq!(
            MemoryEnforcement::select(ExecutorKind::Slurm, true),
            MemoryEnforcement::Slurm
        );
        assert!(
            MemoryEnforcement::RlimitData
                .describe()
                .starts_with("RLIMIT_DATA per process (fallback")
        );
        let local = |memory| {
            Containment {
                memory,
                ..Containment::none()
            }
            .run_confinement()
            .memory_rlimit
        };
        // With cgroup v2 the fallback stays armed for a run whose group could not be prepared.
        assert!(
            local(MemoryEnforcement::RlimitData)
                && local(MemoryEnforcement::CgroupV2)
                && !local(MemoryEnforcement::Slurm)
        );
    }

    #[test]
    fn namespaces_are_not_tried_without_per_tenant_uids_or_under_slurm() {
        let exe = Path::new("/nonexistent/arbiter");
        let shared = ProcessVisibility::probe(ExecutorKind::Local, false, exe);
        assert!(
            !shared.own_namespace()
                && shared
                    .describe()
                    .starts_with("jobs share the host's PID namespace (tenants do not"),
            "{}",
            shared.describe()
        );
        assert!(!ProcessVisibility::probe(ExecutorKind::Slurm, true, exe).own_namespace());
        // A wrapper that cannot run: the reason is given.
        let failed = ProcessVisibility::probe(ExecutorKind::Local, true, exe);
        assert!(
            failed
                .describe()
                .contains("could not be set up here: cannot run /nonexistent/arbiter"),
            "{}",
            failed.describe()
        );
    }
}
