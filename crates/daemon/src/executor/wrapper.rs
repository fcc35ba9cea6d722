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
//!    environment, as the tenant's identity where one is set (supplementary groups dropped, at
//!    most `max_processes` processes for its uid), with RLIMIT_DATA at the run's memory where no
//!    cgroup limits it, stdin from /dev/null, stdout/stderr to the log the daemon opened; the
//!    prelude creates the checkpoint directory as that identity (mode 0700) and then `exec`s the
//!    command,
//! 6. waits for it and writes its exit code (128 + signal when killed) to the exit file.
//!
//! With `pid_namespace` (the daemon is root and found at start that namespaces work here), step
//! 5 happens in a PID namespace of the run's own: the wrapper unshares one and starts itself again
//! as `job-wrapper --pid-init` ([`pid_init`]), which is PID 1 there. That init mounts a fresh
//! /proc in a mount namespace of its own (so the job sees only its own processes, not other
//! tenants' command lines), starts the job as above, reaps the namespace's orphans and exits with
//! the job's exit code as soon as the job's process ends; the kernel then kills whatever the job
//! left running in the namespace. The job's shell is not PID 1 on purpose: PID 1 ignores every
//! signal it has no handler for, so a checkpoint signal would be lost on it. The init has no
//! handlers: the signals the daemon sends the run's group pass it by (the kernel drops them, only
//! SIGKILL is forced on it) and reach the job; SIGKILL ends the init and so the whole namespace.

use crate::executor::Launch;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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

/// The write ends of the pipe the job's stdout and stderr go through (to [`copy_capped`]).
type Output = (std::os::fd::OwnedFd, std::os::fd::OwnedFd);

/// Writes a line to the run's log (the wrapper's stderr). Never fails and never panics: a log on
/// a full disk must not turn into an exit code of the wrapper's own.
fn note(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "arbiter: {message}");
}

/// `arbiter job-wrapper`: the wrapper of a run (`SPEC`), the init of a run's PID namespace
/// (`--pid-init`), or the daemon's start-up check that namespaces work here (`--probe`).
/// Returns the process exit code.
pub fn main(spec: Option<&Path>, pid_init: bool, probe: bool) -> i32 {
    match (spec, pid_init, probe) {
        (Some(spec), false, false) => run(spec),
        (None, true, probe) => self::pid_init(probe),
        (None, false, true) => self::probe(),
        _ => {
            note(format_args!(
                "job wrapper: usage: job-wrapper SPEC | job-wrapper --pid-init [--probe] | job-wrapper --probe"
            ));
            2
        }
    }
}

/// Runs the wrapper; returns the process exit code.
pub fn run(spec_path: &Path) -> i32 {
    if let Err(e) = nix::unistd::setsid() {
        note(format_args!("job wrapper: setsid: {e}"));
    }
    // Descriptors the daemon inherited from whoever started it (a supervisor's pipe, say) must
    // not reach the job: close everything above stderr.
    close_inherited_descriptors();
    let launch = match std::fs::read(spec_path)
        .map_err(|e| e.to_string())
        .and_then(|b| parse_launch(&b))
    {
        Ok(launch) => launch,
        Err(e) => {
            note(format_args!(
                "job wrapper: cannot read its launch spec {}: {e}",
                spec_path.display()
            ));
            return COULD_NOT_START;
        }
    };
    let _ = std::fs::remove_file(spec_path);
    if let Err(e) = crate::security::datadir::write_private(
        &launch.pid_file,
        &crate::security::procs::RunIdentity::of_self().to_line(),
    ) {
        note(format_args!(
            "job wrapper: cannot write {}: {e}",
            launch.pid_file.display()
        ));
    }
    if let Some(cgroup) = &launch.cgroup
        && let Err(e) = std::fs::write(
            cgroup.join("cgroup.procs"),
            format!("{}\n", std::process::id()),
        )
    {
        note(format_args!(
            "could not join {}; CPU/memory limits not applied: {e}",
            cgroup.display()
        ));
    }
    catch_checkpoint_signals();
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    // The copier thread starts first: once this process has unshared a PID namespace it can
    // start no thread (the kernel refuses a thread whose children would be in another one).
    let (output, mut copier) = capture_output(launch.max_log_bytes);
    let code = if launch.pid_namespace {
        start_in_namespace(&launch, output)
    } else {
        start_here(&launch, output)
    };
    // The shell's bare "Permission denied" for a program the tenant's uid cannot reach (a venv
    // under /root) is explained in the log, after the shell's line: the job never started, so
    // nothing else holds its output open and the copier ends at once.
    if let Some(why) = crate::executor::access::explain(&launch, code) {
        if let Some(copier) = copier.take() {
            let _ = copier.join();
        }
        note(format_args!("{why}"));
    }
    if let Err(e) = crate::security::datadir::write_private(&launch.exit_file, &format!("{code}\n"))
    {
        note(format_args!(
            "job wrapper: cannot write {}: {e}",
            launch.exit_file.display()
        ));
    }
    // Processes the job left in the background may still write: the wrapper (and so the run)
    // lasts until they have closed the output too.
    if let Some(copier) = copier {
        let _ = copier.join();
    }
    code
}

/// A launch spec from its JSON.
fn parse_launch(bytes: &[u8]) -> Result<Launch, String> {
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// Catches (not ignores: ignored dispositions would be inherited by the job) every signal a job
/// may ask to be checkpointed with.
fn catch_checkpoint_signals() {
    let caught = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
        signal_hook::consts::SIGQUIT,
    ] {
        if let Err(e) = signal_hook::flag::register(signal, caught.clone()) {
            note(format_args!(
                "job wrapper: cannot catch signal {signal}: {e}"
            ));
        }
    }
}

/// The job's stdout and stderr go through the wrapper to the log, so that a run's share of the
/// log can be capped (a job printing without end would fill the daemon's disk): the pipe's write
/// ends (for the job) and the thread copying to the log.
fn capture_output(cap: Option<u64>) -> (Option<Output>, Option<std::thread::JoinHandle<()>>) {
    // Close-on-exec: the job gets the write end as its stdout/stderr only, never as an extra
    // descriptor that could keep the run's output open.
    match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).and_then(|(read, write)| {
        Ok((
            read,
            write.try_clone().map_err(|_| nix::errno::Errno::EMFILE)?,
            write,
        ))
    }) {
        Ok((read, write_out, write_err)) => (
            Some((write_out, write_err)),
            Some(std::thread::spawn(move || {
                copy_capped(std::fs::File::from(read), cap)
            })),
        ),
        Err(e) => {
            note(format_args!(
                "job wrapper: no pipe for the job's output ({e}); its log is not capped"
            ));
            (None, None)
        }
    }
}

/// Gives `command` the pipe as its stdout and stderr (without one, they stay the log itself).
fn attach(command: &mut Command, output: Option<Output>) {
    if let Some((out, err)) = output {
        command.stdout(Stdio::from(out)).stderr(Stdio::from(err));
    }
}

/// Starts the job as this process's child and waits for it; its exit code.
fn start_here(launch: &Launch, output: Option<Output>) -> i32 {
    limit_processes(launch);
    let mut command = job_command(launch);
    attach(&mut command, output);
    let spawned = with_memory_limit(launch.memory_rlimit_bytes, || command.spawn());
    // The wrapper's copies of the pipe's write end go with the command: the copier sees the end
    // of the output once the job's own processes have closed it.
    drop(command);
    match spawned {
        Ok(mut child) => exit_code(child.wait()),
        Err(e) => could_not_start(launch, &e),
    }
}

/// Starts the job in a new PID namespace, under `job-wrapper --pid-init` (its PID 1, which gets
/// the launch spec on its stdin), and waits for that init; the job's exit code.
fn start_in_namespace(launch: &Launch, output: Option<Output>) -> i32 {
    // The daemon found at start that this works: failing now, the job is not started rather
    // than started where it could see every process of the machine.
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWPID) {
        note(format_args!(
            "job wrapper: cannot make the run's PID namespace ({e}); the job is not started"
        ));
        return COULD_NOT_START;
    }
    // This very program, whatever became of its file since (an upgrade replaces it).
    let mut init = Command::new("/proc/self/exe");
    init.args(["job-wrapper", "--pid-init"])
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped());
    attach(&mut init, output);
    let spawned = init.spawn();
    drop(init);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            note(format_args!(
                "job wrapper: cannot start the run's init: {e}"
            ));
            return COULD_NOT_START;
        }
    };
    // Should the write fail, the init reads an incomplete spec, says so and exits 127.
    if let Some(mut stdin) = child.stdin.take()
        && let Err(e) = serde_json::to_writer(&mut stdin, launch)
    {
        note(format_args!(
            "job wrapper: cannot hand the launch spec to the run's init: {e}"
        ));
    }
    exit_code(child.wait())
}

/// `job-wrapper --pid-init`: PID 1 of a run's PID namespace. Mounts the namespace's own /proc,
/// starts the job (its launch spec on stdin), reaps orphans until the job's process ends, and
/// returns the job's exit code. With `probe`, only checks that its /proc shows its namespace.
pub fn pid_init(probe: bool) -> i32 {
    if let Err(e) = mount_own_proc() {
        note(format_args!("run init: {e}"));
        return COULD_NOT_START;
    }
    if probe {
        return check_own_proc();
    }
    let mut spec = Vec::new();
    let launch = match std::io::Read::read_to_end(&mut std::io::stdin(), &mut spec)
        .map_err(|e| e.to_string())
        .and_then(|_| parse_launch(&spec))
    {
        Ok(launch) => launch,
        Err(e) => {
            note(format_args!("run init: cannot read the launch spec: {e}"));
            return COULD_NOT_START;
        }
    };
    limit_processes(&launch);
    // stdout and stderr: the init's own, the wrapper's pipe.
    let mut command = job_command(&launch);
    let spawned = with_memory_limit(launch.memory_rlimit_bytes, || command.spawn());
    drop(command);
    match spawned {
        Ok(child) => reap_until(nix::unistd::Pid::from_raw(child.id() as i32)),
        Err(e) => could_not_start(&launch, &e),
    }
}

/// In a mount namespace of this process's own, with `/` made recursively private first (so that
/// nothing mounted here reaches the host's mount namespace, nor the host's mounts come in), a
/// fresh proc on /proc: it shows this PID namespace only. Only PID 1 of a new PID namespace may
/// do it (elsewhere the fresh /proc would show the host's processes).
fn mount_own_proc() -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    if nix::unistd::getpid().as_raw() != 1 {
        return Err("not PID 1 of a new PID namespace".into());
    }
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("unshare(CLONE_NEWNS): {e}"))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, None::<&str>)
        .map_err(|e| format!("mounting a fresh /proc: {e}"))
}

/// The probe's check: the fresh /proc shows this process as 1 and no other process.
fn check_own_proc() -> i32 {
    let me = std::fs::read_link("/proc/self")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let pids: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    if me == "1" && pids == ["1"] {
        0
    } else {
        note(format_args!(
            "run init: the fresh /proc shows self = {me:?} and processes {pids:?}"
        ));
        1
    }
}

/// `job-wrapper --probe`: does what a run does — a new PID namespace, then `--pid-init --probe`
/// in it, which mounts its own /proc and checks it. Exit 0 when all of it works; otherwise the
/// last line on stderr says why.
pub fn probe() -> i32 {
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWPID) {
        note(format_args!("unshare(CLONE_NEWPID): {e}"));
        return 1;
    }
    let status = Command::new("/proc/self/exe")
        .args(["job-wrapper", "--pid-init", "--probe"])
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => 0,
        Ok(status) => {
            note(format_args!("the run init of the probe failed ({status})"));
            1
        }
        Err(e) => {
            note(format_args!("cannot start the run init of the probe: {e}"));
            1
        }
    }
}

/// Waits for children (orphans of the namespace are re-parented to its init) until `job` ends;
/// its exit code (128 + signal when killed).
fn reap_until(job: nix::unistd::Pid) -> i32 {
    use nix::sys::wait::{WaitStatus, waitpid};
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == job => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == job => return 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                note(format_args!("run init: waiting for the job: {e}"));
                return COULD_NOT_START;
            }
        }
    }
}

/// The job's command: the prelude's shell with exactly the job's environment, in its working
/// directory, as its identity (std drops the supplementary groups when root switches users),
/// stdin from /dev/null.
fn job_command(launch: &Launch) -> Command {
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
        command.uid(identity.uid).gid(identity.gid);
    }
    command
}

/// RLIMIT_NPROC for the job, set on this process (root, so not held by it) for the job to
/// inherit: counted per uid, and each tenant has its own, so a fork bomb stops at its tenant's
/// limit. Only where the job runs as its tenant's identity.
fn limit_processes(launch: &Launch) {
    if let (Some(_), Some(limit)) = (launch.identity, launch.max_processes)
        && let Err(e) =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, limit, limit)
    {
        note(format_args!(
            "job wrapper: cannot limit processes to {limit}: {e}"
        ));
    }
}

/// Runs `spawn` with RLIMIT_DATA (soft and hard) at `limit`, so that the job it starts inherits
/// it and cannot raise it, then gives this process its previous limit back (as root; a wrapper
/// without the privilege keeps the lower one, which its few allocations fit).
///
/// RLIMIT_DATA, not RLIMIT_AS: it counts private writable memory (heap, anonymous mappings), the
/// memory a job really uses, while RLIMIT_AS counts every reserved address — and CUDA reserves
/// tens of GiB of address space it never backs, so a GPU job under RLIMIT_AS fails at start.
fn with_memory_limit<T>(limit: Option<u64>, spawn: impl FnOnce() -> T) -> T {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Some(limit) = limit else { return spawn() };
    let previous = getrlimit(Resource::RLIMIT_DATA);
    // Never above a hard limit already lower (which would fail, and holds the job anyway).
    let limit = previous.map_or(limit, |(_, hard)| limit.min(hard));
    if let Err(e) = setrlimit(Resource::RLIMIT_DATA, limit, limit) {
        note(format_args!(
            "job wrapper: cannot limit the job's memory to {limit} bytes (RLIMIT_DATA): {e}"
        ));
    }
    let spawned = spawn();
    if let Ok((soft, hard)) = previous {
        let _ = setrlimit(Resource::RLIMIT_DATA, soft, hard);
    }
    spawned
}

/// A waited-for child's exit code: 128 + signal when it was killed.
fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    match status {
        Ok(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        Err(e) => {
            note(format_args!("job wrapper: waiting for the job: {e}"));
            COULD_NOT_START
        }
    }
}

/// Says why the job could not start; [`COULD_NOT_START`].
fn could_not_start(launch: &Launch, e: &std::io::Error) -> i32 {
    let who = launch
        .identity
        .map(|i| format!(" as uid {} gid {}", i.uid, i.gid))
        .unwrap_or_default();
    note(format_args!(
        "could not start the job{who} in {}: {e}",
        launch.working_dir.display()
    ));
    COULD_NOT_START
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
        let room = cap
            .map_or(n as u64, |c| c.saturating_sub(written))
            .min(n as u64) as usize;
        if room > 0 {
            let _ = log.write_all(&buf[..room]);
            written += room as u64;
        }
        if room < n && !said {
            let _ = log.flush();
            let _ = writeln!(
                log,
                "\narbiter: this run's output reached max_log_bytes ({} bytes); the rest is dropped",
                cap.unwrap_or(0)
            );
            said = true;
        }
    }
    let _ = log.flush();
}

/// Closes every descriptor above 2 (listed in `/proc/self/fd`).
fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // The directory listing's own descriptor is among them and already closed: EBADF.
        let _ = nix::unistd::close(fd);
    }
}
