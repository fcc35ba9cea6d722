//! Process mechanics of the local executor: each run of a job is a process session on this
//! machine.
//!
//! A run is the run wrapper (`arbiter job-wrapper SPEC`, this very binary, started by absolute
//! path with an empty environment) in a new process group. The wrapper, still with the daemon's
//! identity, records its pid, joins the run's cgroup, then starts the job — `/bin/sh -c COMMAND`
//! with the job's environment only, as the tenant's unix identity when tenants are isolated — and
//! records the job's exit code once it ends. Where the daemon is root, the job runs in a PID
//! namespace of the run's own under a small init (see [`crate::executor::wrapper`]). Neither the job's environment (`PATH`, `LD_PRELOAD`)
//! nor the job's own processes can reach the wrapper: it shares no environment with the job and,
//! under isolation, runs as another user. The pid and exit files live in the daemon's private
//! `runs/` directory, so a job cannot forge them.
//!
//! The exit file lets a restarted daemon learn how a job it did not spawn ended (after `kill -9`
//! of the daemon, runs keep going; the new daemon re-adopts them by the wrapper's pid, start time
//! and boot id). Each run is its own session (the wrapper calls `setsid()`): a run is over when no
//! process is left in its session, and a job cannot join another run's process group. The wrapper survives the checkpoint signal (it catches
//! the signals a job may ask for), so it records the job's real exit code after a checkpoint.
//!
//! Signals go to the whole session: the checkpoint signal first (default SIGTERM), SIGKILL after
//! the grace period.

use crate::security::identity::UnixIdentity;
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What one run needs; handed to the run wrapper as a JSON file (0600, in the daemon's private
/// `runs/` directory, removed by the wrapper once read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// The job's shell command.
    pub command: String,
    /// Working directory.
    pub working_dir: PathBuf,
    /// The job's whole environment (its own variables, `CUDA_VISIBLE_DEVICES`, `ARBITER_*`);
    /// nothing of the daemon's is inherited.
    pub env: BTreeMap<String, String>,
    /// Where stdout and stderr go (appended; the daemon opens it).
    pub log_path: PathBuf,
    /// Where the wrapper writes the command's exit code.
    pub exit_file: PathBuf,
    /// Where the wrapper writes its process id (= the group id) as its first act, so that a
    /// daemon that died between spawning and recording the id can still find the run.
    pub pid_file: PathBuf,
    /// The checkpoint directory, created by the job (as its identity) before the command runs.
    pub checkpoint_dir: PathBuf,
    /// Run the job as this identity (`None`: the daemon's own).
    pub identity: Option<UnixIdentity>,
    /// The job's tenant (named where its command turns out not to be executable by its uid).
    #[serde(default)]
    pub tenant: Option<String>,
    /// cgroup v2 directory the run joins (CPU/memory limits), if enforced.
    pub cgroup: Option<PathBuf>,
    /// Most processes the tenant's uid may have (RLIMIT_NPROC), when it runs as its own uid.
    #[serde(default)]
    pub max_processes: Option<u64>,
    /// Most bytes of output the run may add to its log (`None`: no limit).
    #[serde(default)]
    pub max_log_bytes: Option<u64>,
    /// Start the job in its own PID namespace with its own /proc (the wrapper's child is the
    /// namespace's init; see [`crate::executor::wrapper`]).
    #[serde(default)]
    pub pid_namespace: bool,
    /// RLIMIT_DATA of each of the job's processes, bytes: the run's memory where no cgroup
    /// limits it (`None`: not set).
    #[serde(default)]
    pub memory_rlimit_bytes: Option<u64>,
}

impl Launch {
    /// Where the launch spec is written: beside the pid file.
    pub fn spec_path(&self) -> PathBuf {
        self.pid_file.with_extension("launch.json")
    }
}

/// Starts a run in its own process group through the wrapper `wrapper_exe`; returns the child
/// (the group leader).
pub fn spawn(launch: &Launch, wrapper_exe: &Path) -> std::io::Result<tokio::process::Child> {
    for file in [&launch.log_path, &launch.pid_file] {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let _ = std::fs::remove_file(&launch.exit_file);
    let _ = std::fs::remove_file(&launch.pid_file);
    let spec = serde_json::to_vec(launch).map_err(std::io::Error::other)?;
    let spec_path = launch.spec_path();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&spec_path)?;
        f.write_all(&spec)?;
    }
    // The log: the daemon's file (0600, never followed through a symlink), handed to the run as
    // its stdout and stderr.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&launch.log_path)?;
    let err = log.try_clone()?;
    let mut command = tokio::process::Command::new(wrapper_exe);
    command
        .arg("job-wrapper")
        .arg(&spec_path)
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err)
        // No process group here: the wrapper makes its own session (setsid), which a caller
        // that is already a group leader could not.
        .kill_on_drop(false);
    command.spawn()
}

/// Sends `signal` to every process of the run whose session is `sid` (its process group and
/// any group the job made inside its session). A run that is already gone is not an error.
pub fn signal_run(sid: u32, signal: Signal) -> Result<(), Errno> {
    let group = match kill(Pid::from_raw(-(sid as i32)), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e),
    };
    // Processes the job moved to other groups of its session; those still in the run's group
    // got the signal above (once: a checkpoint handler must not run twice).
    for p in crate::security::procs::processes()
        .into_iter()
        .filter(|p| p.session == sid && p.pgrp != sid && !p.dead)
    {
        let _ = kill(Pid::from_raw(p.pid as i32), signal);
    }
    group
}

/// Whether any live (non-zombie) process is in the run's session `sid`. Zombies are skipped: a
/// process orphaned when its wrapper died is reaped by whatever is PID 1, which in a container
/// may never do it.
pub fn run_alive(sid: u32) -> bool {
    crate::security::procs::processes()
        .iter()
        .any(|p| p.session == sid && !p.dead)
}

/// Who a run's wrapper was, if it started (its pid file).
pub fn read_run_identity(pid_file: &Path) -> Option<crate::security::procs::RunIdentity> {
    crate::security::procs::RunIdentity::parse(&std::fs::read_to_string(pid_file).ok()?)
}

/// The exit code a finished run's wrapper recorded, if it got that far.
pub fn read_exit_code(exit_file: &Path) -> Option<i32> {
    std::fs::read_to_string(exit_file).ok()?.trim().parse().ok()
}
