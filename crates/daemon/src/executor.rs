//! The local executor: each run of a job is a process group on this machine.
//!
//! A run is `sh -c '<wrapper>'` in a new process group: the wrapper runs the job's command with
//! `sh -c` and then writes the command's exit code to the run's exit file. The exit file lets a
//! restarted daemon learn how a job it did not spawn ended (after `kill -9` of the daemon, runs
//! keep going; the new daemon re-adopts them by process-group id). A run is over when its
//! process group is empty — not when the wrapper exits: a checkpoint signal sent to the group
//! ends the wrapper at once while the job itself may still be writing its checkpoint.
//!
//! Signals go to the whole group (`kill(-pgid, sig)`): the checkpoint signal first (default
//! SIGTERM), SIGKILL after the grace period.

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What one run needs.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The job's shell command.
    pub command: String,
    /// Working directory.
    pub working_dir: PathBuf,
    /// Environment added to the daemon's (job variables, `CUDA_VISIBLE_DEVICES`, `ARBITER_*`).
    pub env: BTreeMap<String, String>,
    /// Where stdout and stderr go (appended).
    pub log_path: PathBuf,
    /// Where the wrapper writes the command's exit code.
    pub exit_file: PathBuf,
    /// Where the wrapper writes its process id (= the group id) as its first act, so that a
    /// daemon that died between spawning and recording the id can still find the run.
    pub pid_file: PathBuf,
}

/// The wrapper: run the command, record its exit code, exit with it.
const WRAPPER: &str = r#"echo $$ > "$ARBITER_PID_FILE"
if [ -n "$ARBITER_CGROUP" ]; then echo $$ > "$ARBITER_CGROUP/cgroup.procs" || echo "arbiter: could not join $ARBITER_CGROUP; limits not applied" >&2; fi
sh -c "$1"; code=$?; echo "$code" > "$ARBITER_EXIT_FILE"; exit "$code""#;

/// Starts a run in its own process group; returns the child (the group leader).
pub fn spawn(launch: &Launch) -> std::io::Result<tokio::process::Child> {
    if let Some(dir) = launch.log_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(&launch.exit_file);
    let _ = std::fs::remove_file(&launch.pid_file);
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&launch.log_path)?;
    let err = log.try_clone()?;
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(WRAPPER)
        .arg("arbiter-run")
        .arg(&launch.command)
        .current_dir(&launch.working_dir)
        .envs(&launch.env)
        .env("ARBITER_EXIT_FILE", &launch.exit_file)
        .env("ARBITER_PID_FILE", &launch.pid_file)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(false);
    command.spawn()
}

/// Sends `signal` to the process group `pgid`. A group that is already gone is not an error.
pub fn signal_group(pgid: u32, signal: Signal) -> Result<(), Errno> {
    match kill(Pid::from_raw(-(pgid as i32)), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether any live (non-zombie) process is in group `pgid`. Zombies are skipped: a process
/// orphaned when its wrapper died is reaped by whatever is PID 1, which in a container may never
/// do it. Reads `/proc`; where there is none, asks the kernel with signal 0 (zombies count).
pub fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return matches!(kill(Pid::from_raw(-(pgid as i32)), None), Ok(()) | Err(Errno::EPERM));
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
        // `pid (comm) state ppid pgrp ...`; comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let pgrp = fields.next().and_then(|f| f.parse::<u32>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

/// The process (group) id a run's wrapper recorded, if it started.
pub fn read_pid(pid_file: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
}

/// The exit code a finished run's wrapper recorded, if it got that far.
pub fn read_exit_code(exit_file: &Path) -> Option<i32> {
    std::fs::read_to_string(exit_file).ok()?.trim().parse().ok()
}

/// A signal by name (`TERM`, `SIGTERM`, `int`, ...), among those a job may ask to get.
pub fn parse_signal(name: &str) -> Option<Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match bare {
        "TERM" => Signal::SIGTERM,
        "INT" => Signal::SIGINT,
        "USR1" => Signal::SIGUSR1,
        "USR2" => Signal::SIGUSR2,
        "HUP" => Signal::SIGHUP,
        "QUIT" => Signal::SIGQUIT,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_records_its_exit_code_and_its_group_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let launch = Launch {
            command: "echo hello $CUDA_VISIBLE_DEVICES; exit 3".into(),
            working_dir: dir.path().to_path_buf(),
            env: BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_string(), "1,2".to_string())]),
            log_path: dir.path().join("logs/0.log"),
            exit_file: dir.path().join("0.exit"),
            pid_file: dir.path().join("0.pid"),
        };
        let mut child = spawn(&launch).expect("spawns");
        let pgid = child.id().expect("pid");
        let status = child.wait().await.expect("waits");
        assert_eq!(status.code(), Some(3));
        assert_eq!(read_exit_code(&launch.exit_file), Some(3));
        assert!(!group_alive(pgid));
        let log = std::fs::read_to_string(&launch.log_path).expect("log");
        assert_eq!(log.trim(), "hello 1,2");
    }

    #[tokio::test]
    async fn the_checkpoint_signal_reaches_the_command_and_the_group_outlives_the_wrapper() {
        let dir = tempfile::tempdir().expect("dir");
        let marker = dir.path().join("checkpointed");
        let launch = Launch {
            // On TERM: take a moment (as a checkpoint would), write a marker, exit 0.
            command: format!("trap 'sleep 0.3; touch {}; exit 0' TERM; while true; do sleep 0.05; done", marker.display()),
            working_dir: dir.path().to_path_buf(),
            env: BTreeMap::new(),
            log_path: dir.path().join("1.log"),
            exit_file: dir.path().join("1.exit"),
            pid_file: dir.path().join("1.pid"),
        };
        let mut child = spawn(&launch).expect("spawns");
        let pgid = child.id().expect("pid");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        signal_group(pgid, Signal::SIGTERM).expect("signals");
        let _ = child.wait().await;
        for _ in 0..100 {
            if !group_alive(pgid) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!group_alive(pgid), "the group ends once the command has checkpointed");
        assert!(marker.exists(), "the command got the signal and checkpointed");
    }

    #[test]
    fn signal_names_parse() {
        assert_eq!(parse_signal("TERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("sigusr1"), Some(Signal::SIGUSR1));
        assert_eq!(parse_signal("KILL"), None);
    }
}
