//! The run wrapper: `arbiter job-wrapper SPEC`, the leader of each run's process group.
//!
//! Started by the daemon (by absolute path, empty environment, the daemon's identity), it
//! 1. makes its own session (`setsid`: the run's processes can be found by session, and no job
//!    can move a process into another run's group), reads and removes its launch spec
//!    ([`Launch`]),
//! 2. writes who it is (pid = the run's session id, start time, boot id) to the run's pid file,
//! 3. joins the run's cgroup, so that every process of the job is inside before it starts,
//! 4. catches the signals a job may ask to be checkpointed with (so a checkpoint signal sent to
//!    the group reaches the job but does not end the wrapper),
//! 5. starts the job: `/bin/sh -c PRELUDE arbiter-job COMMAND` with exactly the job's
//!    environment, as the tenant's identity where one is set (supplementary groups dropped),
//!    stdin from /dev/null, stdout/stderr to the log the daemon opened; the prelude creates the
//!    checkpoint directory as that identity (mode 0700) and then `exec`s the command,
//! 6. waits for it and writes its exit code (128 + signal when killed) to the exit file.

use crate::executor::Launch;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Creates the checkpoint directory (as the job's identity: a symlink swapped in cannot lead
/// anywhere the tenant could not write anyway), then runs the command. `command -p` finds the
/// tools on the default path whatever the job's PATH says. The shell that runs the command
/// catches the checkpoint signals with `exit $?`: the signal (sent to the whole run) reaches the
/// job's own processes, and once the one in the foreground has ended the shell exits with *its*
/// status — a job that checkpoints and exits 0 is recorded as exit 0, not as the shell's 143 —
/// and runs no further commands.
const PRELUDE: &str = r#"umask 077
command -p mkdir -p -- "$ARBITER_CHECKPOINT_DIR" && command -p chmod 0700 -- "$ARBITER_CHECKPOINT_DIR" || { echo "arbiter: cannot create the checkpoint directory $ARBITER_CHECKPOINT_DIR" >&2; exit 125; }
exec /bin/sh -c "trap 'exit \$?' TERM INT HUP USR1 USR2 QUIT
$1""#;

/// Exit code recorded when the job could not be started at all.
const COULD_NOT_START: i32 = 127;

/// Writes a line to the run's log (the wrapper's stderr). Never fails and never panics: a log on
/// a full disk must not turn into an exit code of the wrapper's own.
fn note(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "arbiter: {message}");
}

/// Runs the wrapper; returns the process exit code.
pub fn run(spec_path: &Path) -> i32 {
    if let Err(e) = nix::unistd::setsid() {
        note(format_args!("job wrapper: setsid: {e}"));
    }
    // Descriptors the daemon inherited from whoever started it (a supervisor's pipe, say) must
    // not reach the job: close everything above stderr.
    close_inherited_descriptors();
    let launch: Launch = match std::fs::read(spec_path).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string())) {
        Ok(launch) => launch,
        Err(e) => {
            note(format_args!("job wrapper: cannot read its launch spec {}: {e}", spec_path.display()));
            return COULD_NOT_START;
        }
    };
    let _ = std::fs::remove_file(spec_path);
    if let Err(e) = crate::datadir::write_private(&launch.pid_file, &crate::procs::RunIdentity::of_self().to_line()) {
        note(format_args!("job wrapper: cannot write {}: {e}", launch.pid_file.display()));
    }
    if let Some(cgroup) = &launch.cgroup
        && let Err(e) = std::fs::write(cgroup.join("cgroup.procs"), format!("{}\n", std::process::id())) {
            note(format_args!("could not join {}; CPU/memory limits not applied: {e}", cgroup.display()));
        }
    // Catch (not ignore: ignored dispositions would be inherited by the job) every signal a job
    // may ask to be checkpointed with.
    let caught = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP, signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2, signal_hook::consts::SIGQUIT] {
        if let Err(e) = signal_hook::flag::register(signal, caught.clone()) {
            note(format_args!("job wrapper: cannot catch signal {signal}: {e}"));
        }
    }
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let mut command = Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(PRELUDE)
        .arg("arbiter-job")
        .arg(&launch.command)
        .env_clear()
        .envs(&launch.env)
        .current_dir(&launch.working_dir)
        .stdin(Stdio::null());
    if let Some(identity) = launch.identity {
        // std drops the supplementary groups when root switches users.
        command.uid(identity.uid).gid(identity.gid);
        if let Some(limit) = launch.max_processes {
            // Counted per uid, and each tenant has its own: a fork bomb stops at its tenant's
            // limit. (The wrapper, as root, is not held by it; the job inherits it.)
            if let Err(e) = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, limit, limit) {
                note(format_args!("job wrapper: cannot limit processes to {limit}: {e}"));
            }
        }
    }
    // The job's stdout and stderr go through the wrapper to the log, so that a run's share of
    // the log can be capped (a job printing without end would fill the daemon's disk).
    let mut copier = None;
    // Close-on-exec: the job gets the write end as its stdout/stderr only, never as an extra
    // descriptor that could keep the run's output open.
    match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).and_then(|(read, write)| Ok((read, write.try_clone().map_err(|_| nix::errno::Errno::EMFILE)?, write))) {
        Ok((read, write_out, write_err)) => {
            command.stdout(Stdio::from(write_out)).stderr(Stdio::from(write_err));
            let cap = launch.max_log_bytes;
            copier = Some(std::thread::spawn(move || copy_capped(std::fs::File::from(read), cap)));
        }
        Err(e) => note(format_args!("job wrapper: no pipe for the job's output ({e}); its log is not capped")),
    }
    let spawned = command.spawn();
    // The wrapper's copies of the pipe's write end go with the command: the copier sees the end
    // of the output once the job's own processes have closed it.
    drop(command);
    let code = match spawned {
        Ok(mut child) => match child.wait() {
            Ok(status) => status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            Err(e) => {
                note(format_args!("job wrapper: waiting for the job: {e}"));
                COULD_NOT_START
            }
        },
        Err(e) => {
            let who = launch.identity.map(|i| format!(" as uid {} gid {}", i.uid, i.gid)).unwrap_or_default();
            note(format_args!("could not start the job{who} in {}: {e}", launch.working_dir.display()));
            COULD_NOT_START
        }
    };
    if let Err(e) = crate::datadir::write_private(&launch.exit_file, &format!("{code}\n")) {
        note(format_args!("job wrapper: cannot write {}: {e}", launch.exit_file.display()));
    }
    // Processes the job left in the background may still write: the wrapper (and so the run)
    // lasts until they have closed the output too.
    if let Some(copier) = copier {
        let _ = copier.join();
    }
    code
}

/// Copies the job's output to the log (the wrapper's stdout), at most `cap` bytes; beyond it,
/// says so once and drops the rest (still reading, so the job never blocks on a full pipe). Write
/// errors (a full disk) are ignored for the same reason.
fn copy_capped(mut from: std::fs::File, cap: Option<u64>) {
    use std::io::Read;
    let mut log = std::io::stdout().lock();
    let mut written: u64 = 0;
    let mut said = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let room = cap.map_or(n as u64, |c| c.saturating_sub(written)).min(n as u64) as usize;
        if room > 0 {
            let _ = log.write_all(&buf[..room]);
            written += room as u64;
        }
        if room < n && !said {
            let _ = log.flush();
            let _ = writeln!(log, "\narbiter: this run's output reached max_log_bytes ({} bytes); the rest is dropped", cap.unwrap_or(0));
            said = true;
        }
    }
    let _ = log.flush();
}

/// Closes every descriptor above 2 (listed in `/proc/self/fd`).
fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<i32> = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|fd| *fd > 2).collect();
    for fd in fds {
        // The directory listing's own descriptor is among them and already closed: EBADF.
        let _ = nix::unistd::close(fd);
    }
}

