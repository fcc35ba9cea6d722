//! Slurm's command-line tools as typed calls: `sbatch`, `squeue --json`, `sinfo --json`,
//! `scancel`, `sacct`. No daemon logic; every call is one process with a deadline.
//!
//! Facts this layer relies on, measured on Debian bookworm's Slurm 22.05.8 (openapi v0.0.38)
//! with `scripts/slurm-up.sh` (4 multiple-slurmd nodes, fake GPUs, no accounting):
//!
//! - `--uid/--gid` (as root) are resolved by sbatch itself: a uid with no passwd entry fails
//!   with `sbatch: error: Invalid --uid specification`, a gid with no group entry with
//!   `sbatch: error: Invalid --gid specification` (exit 255, nothing submitted). Running sbatch
//!   *as* such a uid is accepted, but slurmctld then logs `_fill_cred_gids: getpwuid failed`,
//!   `slurm_cred_create failure` and requeues the job forever (PENDING, reason BeginTime).
//!   So identities must exist in the passwd/group databases of the controller and the nodes.
//!   An existing user works (`--uid=1900000200 --gid=<its group>`); `--uid` alone keeps the
//!   submitter's gid (0), so always pass both.
//! - The `--output` file is opened by slurmstepd *as the job's uid*. Directory 0700 root:
//!   job FAILED, reason `JobLaunchFailure`, raw exit 4021, slurmd logs `Could not open stdout
//!   file ...: Permission denied`. Directory 0711 with the file pre-created, owned by the uid,
//!   0600: works (appends). File pre-created root-owned 0600: JobLaunchFailure again. A
//!   `--chdir` the uid cannot enter is not fatal: the job runs in /tmp (error on stderr).
//!   `%` in `--output` is a pattern (`%j`), `%%` a literal `%`, and a `\` anywhere disables all
//!   patterns and is itself dropped: hence [`escape_output_path`].
//! - `--export=NONE` implies `SLURM_GET_USER_ENV=1`: slurmd loads the user's *login*
//!   environment (HOME, USER, SHELL, PATH and whatever ~/.bashrc exports) before the script's
//!   own `export` lines, which win. The batch shell sees SLURM_* (SLURM_JOB_ID,
//!   SLURM_JOB_NODELIST=n[1-2], SLURM_NODEID=0, SLURM_PROCID=0, SLURM_JOB_GPUS=0,1, ...),
//!   CUDA_VISIBLE_DEVICES=0,1 (also ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK, GPU_DEVICE_ORDINAL).
//!   `srun` inherits `SLURM_EXPORT_ENV=NONE` and then execs with *no* PATH (`execve(): sh: No
//!   such file or directory`); with `SLURM_EXPORT_ENV=ALL` exported in the script, srun on a
//!   2-node job gives node n1 NODEID=0 PROCID=0 and n2 NODEID=1 PROCID=1, each with its own
//!   CUDA_VISIBLE_DEVICES and the script's variables. [`batch_script`] exports it.
//! - `scancel --signal=USR1 --batch ID` reaches only the batch shell (its children do not get
//!   it); `--full` reaches the shell, its children and all steps. `scancel ID` sends TERM to every process, then KILL after KillWait. `scancel
//!   --signal=KILL [--full] ID` is turned into the same job kill (REQUEST_KILL_JOB): a process
//!   ignoring TERM survives until KillWait, the state ends CANCELLED. `--signal=KILL --batch`
//!   kills only the shell at once, the job ends FAILED/JobLaunchFailure and a TERM-ignoring
//!   child escaped to PID 1 and kept running: never use it. `scancel ID` on an unknown or
//!   finished job exits 0 silently; signalling one prints `Invalid job id specified` (exit 1).
//! - `squeue --json` in 22.05 ignores `--partition`, `--jobs` and `--states`: it lists every
//!   job slurmctld holds (finished ones for MinJobAge). [`SlurmCli::jobs`] filters itself.
//!   With slurmctld down it waits ~9 s, exits 0 and prints `"jobs": []` with the failure only
//!   in `errors` (`slurm_load_jobs`, `Unspecified error`): [`SlurmError::Reported`].
//!   `job_state` is a string (`COMPLETED`, `FAILED`, `CANCELLED`, `RUNNING`, `PENDING`);
//!   `state_reason` `None`, `NonZeroExitCode`, `Resources`, `JobLaunchFailure`; `exit_code` is
//!   an integer holding the raw wait status: 0, 768 (exit 3), 36608 (exit 143 after a TERM
//!   trap, state CANCELLED), 9 (killed by SIGKILL), 4021 (signal 53: launch failure).
//! - `sinfo --json` already lists one entry per node (`-N` changes nothing): `gres`
//!   `gpu:v100:4`, `features` `v100,rack1`, `state` `idle`/`mixed`, `state_flags` `["DRAIN"]`.
//! - Without slurmdbd, `sacct` prints `Slurm accounting storage is disabled` and exits 1.
//! - Submit to RUNNING for a pinned job: batch jobs are not placed inside the sbatch RPC but by
//!   slurmctld's 1 s background loop once `batch_sched_delay` (default 3 s) has passed: 2.0-3.0
//!   s by default, 0.5-1.0 s with `batch_sched_delay=0` (sched/builtin and sched/backfill with
//!   bf_interval=1 alike). RUNNING shows 0.1-1.3 s (once ~2 s) *before* slurmd launches the
//!   script; a signal sent in that window is dropped and scancel still exits 0.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use super::error::SlurmError;
pub use super::parse::{Gres, SlurmJob, SlurmJobState, SlurmNode, expand_hostlist, parse_gres};
use super::parse::{parse_sacct_output, parse_sbatch_output, parse_sinfo_json, parse_squeue_json};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// One batch job to submit, pinned to exact nodes with exact per-node resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchJob {
    /// Job name (`--job-name`).
    pub name: String,
    /// Exact node names; the job gets `--nodelist` with all of them and `--nodes=len`.
    pub nodes: Vec<String>,
    /// GPU type (`gpu:TYPE:N`), or any type when `None`.
    pub gpu_type: Option<String>,
    /// GPUs on each node; 0 requests none.
    pub gpus_per_node: u32,
    /// CPUs on each node (one task per node with this many CPUs).
    pub cpus_per_node: u32,
    /// Memory on each node in MB. Must not be 0: `--mem=0` means the whole node in Slurm.
    pub memory_mb_per_node: u64,
    /// Output file (stdout and stderr), appended to; opened by the job's uid, not root.
    pub output: PathBuf,
    /// Working directory of the job.
    pub working_dir: PathBuf,
    /// Environment exported by the script, on top of Slurm's and the user's login variables.
    pub env: BTreeMap<String, String>,
    /// Shell command the job runs (`/bin/sh -c`); its exit status is the job's.
    pub command: String,
    /// Run as this (uid, gid) (`--uid/--gid`, needs root; both must exist in passwd/group).
    pub identity: Option<(u32, u32)>,
}

/// Runs Slurm's tools for one partition.
#[derive(Debug, Clone)]
pub struct SlurmCli {
    /// Partition jobs are submitted to and listed from.
    pub partition: String,
    /// Directory holding the tools; `PATH` when `None`.
    pub bin_dir: Option<PathBuf>,
    /// Deadline for each call, after which the tool is killed.
    pub timeout: Duration,
}

/// What a finished tool printed.
struct Output {
    line: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl SlurmCli {
    /// Tools from `PATH`, a 30 s deadline (with no controller the tools give up by themselves
    /// after about 9 s).
    pub fn new(partition: impl Into<String>) -> Self {
        Self {
            partition: partition.into(),
            bin_dir: None,
            timeout: Duration::from_secs(30),
        }
    }

    /// Submits `req`; returns the job id.
    pub fn submit(&self, req: &BatchJob) -> Result<u64, SlurmError> {
        let script = batch_script(req)?;
        let out = check(self.run("sbatch", &sbatch_args(&self.partition, req)?, Some(&script))?)?;
        parse_sbatch_output(&out.stdout)
    }

    /// Jobs of the partition, finished ones included (for MinJobAge).
    pub fn jobs(&self) -> Result<Vec<SlurmJob>, SlurmError> {
        let args = ["--json", "--states=all", "--partition", &self.partition];
        let out = check(self.run("squeue", &os(&args), None)?)?;
        let mut jobs = parse_squeue_json(&out.stdout)?;
        // 22.05 ignores --partition with --json.
        jobs.retain(|j| j.partition == self.partition);
        Ok(jobs)
    }

    /// Nodes of the partition.
    pub fn nodes(&self) -> Result<Vec<SlurmNode>, SlurmError> {
        let out = check(self.run("sinfo", &os(&["--json"]), None)?)?;
        let mut nodes = parse_sinfo_json(&out.stdout)?;
        nodes.retain(|n| n.partitions.contains(&self.partition));
        Ok(nodes)
    }

    /// Sends `signal` (`USR1`, `SIGUSR1`, `10`) to the batch shell only, not its children.
    pub fn signal_batch(&self, id: u64, signal: &str) -> Result<(), SlurmError> {
        self.signal(id, signal, "--batch")
    }

    /// Sends `signal` to every process of the job: the batch shell, its children, all steps.
    pub fn signal_all(&self, id: u64, signal: &str) -> Result<(), SlurmError> {
        self.signal(id, signal, "--full")
    }

    fn signal(&self, id: u64, signal: &str, scope: &str) -> Result<(), SlurmError> {
        if signal.is_empty() || !signal.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(SlurmError::InvalidJob(format!(
                "bad signal name {signal:?}"
            )));
        }
        let args = [format!("--signal={signal}"), scope.into(), id.to_string()];
        check(self.run("scancel", &os(&args), None)?).map(drop)
    }

    /// Cancels: TERM to every process, KILL after KillWait; ends CANCELLED. Silent no-op for
    /// unknown or finished jobs.
    pub fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        check(self.run("scancel", &os(&[id.to_string()]), None)?).map(drop)
    }

    /// Kills every process of the job. Slurm 22.05 turns `--signal=KILL --full` into the same
    /// job kill as [`Self::cancel`] (a TERM-ignoring process lives until KillWait); what it
    /// must not be is `--signal=KILL --batch`, which orphans the batch shell's children.
    pub fn kill(&self, id: u64) -> Result<(), SlurmError> {
        let args = ["--signal=KILL".to_string(), "--full".into(), id.to_string()];
        check(self.run("scancel", &os(&args), None)?).map(drop)
    }

    /// The steps of job `id`, as `(step id, name)` (`63.2`, `arbiter-7.1`; the batch step
    /// too). An unknown or finished job has none.
    pub fn steps(&self, id: u64) -> Result<Vec<(String, String)>, SlurmError> {
        let args = [
            "--steps".to_string(),
            "--noheader".into(),
            format!("--jobs={id}"),
            "--format=%i %j".into(),
        ];
        let out = self.run("squeue", &os(&args), None)?;
        if !out.status.success() && out.stderr.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        let out = check(out)?;
        Ok(out
            .stdout
            .lines()
            .filter_map(|l| l.trim().split_once(' '))
            .map(|(step, name)| (step.to_string(), name.trim().to_string()))
            .collect())
    }

    /// Sends `signal` to every task of step `step` (`63.2`); slurmstepd logs the step as
    /// "CANCELLED" even when the tasks catch the signal and go on.
    pub fn signal_step(&self, step: &str, signal: &str) -> Result<(), SlurmError> {
        let step_id = step.split_once('.').is_some_and(|(j, s)| {
            !j.is_empty() && !s.is_empty() && j.chars().chain(s.chars()).all(|c| c.is_ascii_digit())
        });
        if !step_id || signal.is_empty() || !signal.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(SlurmError::InvalidJob(format!(
                "bad step {step:?} or signal {signal:?}"
            )));
        }
        check(self.run(
            "scancel",
            &os(&[format!("--signal={signal}"), step.to_string()]),
            None,
        )?)
        .map(drop)
    }

    /// `(State, exit status)` from accounting; `Ok(None)` when accounting is disabled or does
    /// not know the job. A signal death reads as `128 + signal`.
    pub fn accounting_exit(&self, id: u64) -> Result<Option<(String, i32)>, SlurmError> {
        let args = [
            "-j".to_string(),
            id.to_string(),
            "-X".into(),
            "-n".into(),
            "-P".into(),
        ];
        let mut args = os(&args);
        args.extend(os(&["-o", "JobID,State,ExitCode"]));
        let out = self.run("sacct", &args, None)?;
        if out.stderr.contains("accounting storage is disabled") {
            return Ok(None);
        }
        let out = check(out)?;
        parse_sacct_output(&out.stdout, id)
    }

    /// Runs `tool args` (no shell), feeds `stdin`, kills it at the deadline.
    fn run(
        &self,
        tool: &str,
        args: &[OsString],
        stdin: Option<&str>,
    ) -> Result<Output, SlurmError> {
        let program = match &self.bin_dir {
            Some(dir) => dir.join(tool),
            None => PathBuf::from(tool),
        };
        let line = command_line(&program, args);
        let mut cmd = Command::new(&program);
        // Own process group: at the deadline the whole group is killed, so a helper it forked
        // cannot keep our pipes open.
        cmd.process_group(0)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Input variables (SBATCH_*, SQUEUE_*, SLURM_* from an enclosing job) would silently
        // change what the flags ask for. SLURM_CONF says which cluster: keep it.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            let input = [
                "SBATCH_", "SQUEUE_", "SINFO_", "SACCT_", "SCANCEL_", "SLURM_",
            ];
            if k != "SLURM_CONF" && input.iter().any(|p| k.starts_with(p)) {
                cmd.env_remove(&key);
            }
        }
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SlurmError::NotInstalled {
                tool: program.display().to_string(),
            },
            _ => SlurmError::Command {
                command: line.clone(),
                status: format!("not started: {e}"),
                stderr: String::new(),
            },
        })?;
        let (input, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (status, stdout, stderr) = std::thread::scope(|s| {
            // Separate threads so a full pipe on one side cannot block the other.
            let writer = s.spawn(move || {
                if let (Some(mut pipe), Some(text)) = (input, stdin) {
                    let _ = pipe.write_all(text.as_bytes()); // EPIPE if it died: seen below
                }
            });
            let out = s.spawn(move || read_all(stdout));
            let err = s.spawn(move || read_all(stderr));
            let deadline = Instant::now() + self.timeout;
            let mut pause = Duration::from_millis(1);
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Ok(status),
                    Ok(None) if Instant::now() < deadline => {}
                    other => {
                        // Deadline passed (or wait failed): the pipes close when it dies, so
                        // the reader threads end too.
                        if let Ok(pid) = i32::try_from(child.id()) {
                            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                        }
                        let _ = child.kill();
                        let _ = child.wait();
                        break Err(other.err());
                    }
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            };
            let _ = writer.join();
            (
                status,
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            )
        });
        match status {
            Ok(status) => Ok(Output {
                line,
                status,
                stdout,
                stderr,
            }),
            Err(None) => Err(SlurmError::Timeout {
                command: line,
                timeout: self.timeout,
            }),
            Err(Some(e)) => Err(SlurmError::Command {
                command: line,
                status: format!("wait failed: {e}"),
                stderr,
            }),
        }
    }
}

/// Turns a non-zero exit into [`SlurmError::Command`].
fn check(out: Output) -> Result<Output, SlurmError> {
    if out.status.success() {
        return Ok(out);
    }
    Err(SlurmError::Command {
        command: out.line,
        status: out.status.to_string(),
        stderr: out.stderr.trim().to_string(),
    })
}

fn read_all(pipe: Option<impl Read>) -> String {
    let mut bytes = Vec::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn os<S: AsRef<str>>(args: &[S]) -> Vec<OsString> {
    args.iter().map(|a| OsString::from(a.as_ref())).collect()
}

fn command_line(program: &Path, args: &[OsString]) -> String {
    let mut line = program.display().to_string();
    for a in args {
        line.push(' ');
        line.push_str(&a.to_string_lossy());
    }
    line
}

/// sbatch's arguments for `req`. Every option is one `--opt=value` argv entry, so a value
/// starting with `-` can never be read as another option.
fn sbatch_args(partition: &str, req: &BatchJob) -> Result<Vec<OsString>, SlurmError> {
    let mut args = os(&["--parsable".to_string(), format!("--partition={partition}")]);
    args.extend(placement_args(req)?);
    args.extend(os(&[
        "--open-mode=append".to_string(),
        format!("--output={}", escape_output_path(&req.output)?),
    ]));
    args.extend(run_args(req, "NONE")?);
    if let Some((uid, gid)) = req.identity {
        args.extend(os(&[format!("--uid={uid}"), format!("--gid={gid}")]));
    }
    Ok(args)
}

/// The options pinning `req` to its nodes, GPUs, CPUs and memory (one task per node), the
/// same for sbatch and srun; checks that every value is plain.
fn placement_args(req: &BatchJob) -> Result<Vec<OsString>, SlurmError> {
    let bad = |m: String| Err(SlurmError::InvalidJob(m));
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if req.nodes.is_empty() {
        return bad("no nodes".into());
    }
    if let Some(n) = req.nodes.iter().find(|n| !plain(n)) {
        return bad(format!("node name {n:?} is not a plain host name"));
    }
    if let Some(t) = req.gpu_type.as_deref().filter(|t| !plain(t)) {
        return bad(format!("GPU type {t:?} is not a plain name"));
    }
    if req.cpus_per_node == 0 || req.memory_mb_per_node == 0 {
        return bad(
            "cpus and memory per node must be at least 1 (--mem=0 is the whole node)".into(),
        );
    }
    let mut args = os(&[
        format!("--nodelist={}", req.nodes.join(",")),
        format!("--nodes={}", req.nodes.len()),
        "--ntasks-per-node=1".into(),
    ]);
    if req.gpus_per_node > 0 {
        let kind = req
            .gpu_type
            .as_ref()
            .map(|t| format!("{t}:"))
            .unwrap_or_default();
        args.push(format!("--gres=gpu:{kind}{}", req.gpus_per_node).into());
    }
    args.extend(os(&[
        format!("--cpus-per-task={}", req.cpus_per_node),
        format!("--mem={}M", req.memory_mb_per_node),
    ]));
    Ok(args)
}

/// Working directory, name and the environment Slurm passes (`--export`: none for sbatch,
/// whose script exports the job's own; for srun the variable carrying the script).
fn run_args(req: &BatchJob, export: &str) -> Result<Vec<OsString>, SlurmError> {
    if req.name.chars().any(char::is_control) {
        return Err(SlurmError::InvalidJob(format!(
            "job name {:?} has control characters",
            req.name
        )));
    }
    let mut chdir = OsString::from("--chdir=");
    chdir.push(req.working_dir.as_os_str());
    let mut args = vec![chdir];
    args.extend(os(&[
        format!("--job-name={}", req.name),
        format!("--export={export}"),
    ]));
    Ok(args)
}

/// How long a step waits for its allocation to start before it gives up (seconds).
pub const STEP_WAIT_S: u32 = 600;

/// The environment variable that carries a step's script to its task (never its argv, which
/// every user of the machine can read).
pub const STEP_SCRIPT_VAR: &str = "ARBITER_STEP_SCRIPT";

/// How a run becomes a step of an allocation: the command and the script for its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// For `/bin/sh -c` where the daemon runs, with [`STEP_SCRIPT_VAR`] = `script` in its
    /// environment: it waits until the allocation runs (srun refuses a pending one: "Job is
    /// pending execution"), at most [`STEP_WAIT_S`], then execs `srun --jobid --overlap` (steps
    /// share the allocation's GPUs, each seeing the same `CUDA_VISIBLE_DEVICES`), whose exit
    /// status is the step's and whose output is the tasks'. It holds nothing of the job's.
    pub command: String,
    /// What each task runs: `req`'s batch script ([`batch_script`]), preceded by entering its
    /// working directory. srun hands it over in the environment (`--export=` that variable
    /// only); on the node the task, as the allocation's owner, first becomes the job's identity
    /// (`setpriv`: uid, gid, no supplementary groups, no inheritable capabilities; the
    /// allocation belongs to the daemon's user, so that several tenants' jobs may share it),
    /// limits its processes (`prlimit --nproc`), and only then reads the script.
    pub script: String,
}

/// The [`Step`] that runs `req` in the allocation `holder`, at most `max_processes` processes of
/// its user on a node.
pub fn step_command(
    bin_dir: Option<&Path>,
    holder: u64,
    req: &BatchJob,
    max_processes: Option<u64>,
) -> Result<Step, SlurmError> {
    let tool = |name: &str| -> Result<String, SlurmError> {
        let path = bin_dir.map_or_else(|| PathBuf::from(name), |d| d.join(name));
        shell_quote(&path.to_string_lossy())
    };
    // The working directory is entered by the job itself, as its identity: slurmstepd would
    // enter it as the allocation's owner (root), past permissions the tenant does not have.
    let wd = req.working_dir.to_str().ok_or_else(|| {
        SlurmError::InvalidJob(format!(
            "working directory {} is not UTF-8",
            req.working_dir.display()
        ))
    })?;
    let inner = BatchJob {
        command: format!("cd -- {} || exit 1\n{}", shell_quote(wd)?, req.command),
        ..req.clone()
    };
    let script = batch_script(&inner)?;
    let run = shell_quote(&format!(
        "s=${STEP_SCRIPT_VAR}; unset {STEP_SCRIPT_VAR}; eval \"$s\""
    ))?;
    let limit = max_processes
        .map(|n| format!("/usr/bin/prlimit --nproc={n}:{n} -- "))
        .unwrap_or_default();
    let task = match req.identity {
        Some((uid, gid)) => format!(
            "exec {limit}/usr/bin/setpriv --reuid={uid} --regid={gid} --clear-groups --inh-caps=-all -- /bin/sh -c {run}"
        ),
        None => format!("exec {limit}/bin/sh -c {run}"),
    };
    let mut args = os(&[
        format!("--jobid={holder}"),
        "--overlap".into(),
        "--kill-on-bad-exit=1".into(),
        "--mpi=none".into(),
    ]);
    args.extend(placement_args(req)?);
    args.extend(run_args(
        &BatchJob {
            working_dir: PathBuf::from("/"),
            ..req.clone()
        },
        STEP_SCRIPT_VAR,
    )?);
    let mut srun = tool("srun")?;
    for a in args {
        srun.push(' ');
        srun.push_str(&shell_quote(&a.to_string_lossy())?);
    }
    let tries = STEP_WAIT_S * 4;
    let command = format!(
        "n=0\nwhile :; do\n  s=$({squeue} --noheader --jobs={holder} --format=%T 2>/dev/null)\n  case \"$s\" in\n    RUNNING) break ;;\n    PENDING|CONFIGURING|'') ;;\n    *) echo \"arbiter: allocation {holder}, which holds this job's GPUs, is $s\" >&2; exit 1 ;;\n  esac\n  n=$((n + 1))\n  if [ \"$n\" -ge {tries} ]; then echo \"arbiter: allocation {holder} did not start within {STEP_WAIT_S} s\" >&2; exit 1; fi\n  sleep 0.25\ndone\nexec {srun} /bin/sh -c {}\n",
        shell_quote(&task)?,
        squeue = tool("squeue")?,
    );
    Ok(Step { command, script })
}

/// `path` as a literal `--output` value: `%` is a pattern character (`%j`), `%%` a literal `%`;
/// a `\` turns patterns off and vanishes itself, so it cannot be expressed and is refused.
pub fn escape_output_path(path: &Path) -> Result<String, SlurmError> {
    let s = path.to_str().ok_or_else(|| {
        SlurmError::InvalidJob(format!("output path {} is not UTF-8", path.display()))
    })?;
    if s.contains('\\') || s.chars().any(char::is_control) {
        return Err(SlurmError::InvalidJob(format!(
            "output path {s:?} has `\\` or control characters"
        )));
    }
    Ok(s.replace('%', "%%"))
}

/// The batch script sbatch reads on stdin: the environment as `export` lines, then the command
/// exec'd by `/bin/sh -c`, so the job's exit status is the command's.
pub fn batch_script(req: &BatchJob) -> Result<String, SlurmError> {
    let mut s = String::from("#!/bin/sh\n");
    // With --export=NONE, srun steps inherit SLURM_EXPORT_ENV=NONE and start with no PATH;
    // ALL hands them this script's environment. First, so the job's own env may override it.
    s.push_str("export SLURM_EXPORT_ENV=ALL\n");
    for (name, value) in &req.env {
        let mut chars = name.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(SlurmError::InvalidJob(format!(
                "environment name {name:?} is not a shell variable name"
            )));
        }
        s.push_str(&format!("export {name}={}\n", shell_quote(value)?));
    }
    s.push_str(&format!("exec /bin/sh -c {}\n", shell_quote(&req.command)?));
    Ok(s)
}

/// `'value'` for sh: inside single quotes only `'` itself is special; it becomes `'\''`.
fn shell_quote(value: &str) -> Result<String, SlurmError> {
    if value.contains('\0') {
        return Err(SlurmError::InvalidJob(
            "NUL byte in an environment value or command".into(),
        ));
    }
    Ok(format!("'{}'", value.replace('\'', r"'\''")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(command: &str) -> BatchJob {
        BatchJob {
            name: "arbiter-7.1".into(),
            nodes: vec!["n3".into()],
            gpu_type: Some("a100".into()),
            gpus_per_node: 1,
            cpus_per_node: 2,
            memory_mb_per_node: 1000,
            output: "/tmp/out%x.log".into(),
            working_dir: "/tmp".into(),
            env: BTreeMap::new(),
            command: command.into(),
            identity: None,
        }
    }

    #[test]
    fn sbatch_arguments() {
        let mut req = job("true");
        req.nodes = vec!["n3".into(), "n4".into()];
        req.identity = Some((1000, 1001));
        let args: Vec<String> = sbatch_args("arbiter", &req)
            .expect("valid")
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let want = "--parsable --partition=arbiter --nodelist=n3,n4 --nodes=2 --ntasks-per-node=1 \
            --gres=gpu:a100:1 --cpus-per-task=2 --mem=1000M --open-mode=append \
            --output=/tmp/out%%x.log --chdir=/tmp --job-name=arbiter-7.1 --export=NONE --uid=1000 --gid=1001";
        assert_eq!(args.join(" "), want);
        req.gpus_per_node = 0;
        assert!(
            !sbatch_args("p", &req)
                .expect("valid")
                .iter()
                .any(|a| a.to_string_lossy().starts_with("--gres"))
        );
        for broken in [
            BatchJob {
                nodes: vec![],
                ..job("")
            },
            BatchJob {
                nodes: vec!["n1,n2".into()],
                ..job("")
            },
            BatchJob {
                memory_mb_per_node: 0,
                ..job("")
            },
            BatchJob {
                output: r"/tmp/a\b".into(),
                ..job("")
            },
            BatchJob {
                name: "a\nb".into(),
                ..job("")
            },
        ] {
            assert!(
                matches!(sbatch_args("p", &broken), Err(SlurmError::InvalidJob(_))),
                "{broken:?}"
            );
        }
    }

    #[test]
    fn batch_script_quotes_and_runs() {
        let mut req =
            job("printf '[%s]' \"$A\" \"$B\" \"$C\" \"$D\" \"$SLURM_EXPORT_ENV\"; exit 7");
        let values = [
            ("A", "it's"),
            ("B", "$HOME `id` \\ \"q\" $(id)"),
            ("C", "line1\nline2"),
            ("D", ""),
        ];
        req.env = values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let script = batch_script(&req).expect("valid");
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(script.contains("export A='it'\\''s'\n"), "{script}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("job.sh");
        std::fs::write(&path, &script).expect("write");
        let out = Command::new("/bin/sh")
            .arg(&path)
            .env_clear()
            .output()
            .expect("sh runs");
        assert_eq!(out.status.code(), Some(7), "{out:?}");
        let want = "[it's][$HOME `id` \\ \"q\" $(id)][line1\nline2][][ALL]";
        assert_eq!(String::from_utf8_lossy(&out.stdout), want);

        for bad in ["1A", "A-B", "", "A B"] {
            req.env = [(bad.to_string(), "v".to_string())].into();
            assert!(
                batch_script(&req)
                    .expect_err(bad)
                    .to_string()
                    .contains("not a shell variable")
            );
        }
        req.env = [("A".to_string(), "nul\0".to_string())].into();
        assert!(batch_script(&req).is_err());
    }

    /// An executable shell script `name` in `dir` standing in for one of Slurm's tools.
    fn fake_tool(dir: &Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    #[test]
    fn a_step_waits_for_its_allocation_then_runs_the_job_through_srun() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = |name: &str, body: &str| fake_tool(dir.path(), name, body);
        let state = dir.path().join("state");
        let calls = dir.path().join("calls");
        // squeue says PENDING twice, then whatever the test put in `state`; srun records its
        // options and runs the task (its last argument) as the step would.
        tool(
            "squeue",
            &format!(
                "echo x >> {c}; if [ $(wc -l < {c}) -le 2 ]; then echo PENDING; else cat {s}; fi",
                c = calls.display(),
                s = state.display()
            ),
        );
        tool(
            "srun",
            &format!(
                "for a; do last=$a; done; echo \"$@\" > {}/srun-args; exec /bin/sh -c \"$last\"",
                dir.path().display()
            ),
        );
        let mut req = job("echo \"[$A] $(pwd) [${ARBITER_STEP_SCRIPT-unset}]\"; exit 7");
        let secret = "it's $HOME, a secret";
        req.env = [("A".to_string(), secret.to_string())].into();
        let step = step_command(Some(dir.path()), 42, &req, None).expect("valid");
        assert!(
            !step.command.contains("secret"),
            "the job's environment stays out of every command line: {}",
            step.command
        );
        std::fs::write(&state, "RUNNING\n").expect("write");
        let run = |step: &Step| {
            Command::new("/bin/sh")
                .args(["-c", &step.command])
                .env(STEP_SCRIPT_VAR, &step.script)
                .output()
                .expect("runs")
        };
        let out = run(&step);
        assert_eq!(
            out.status.code(),
            Some(7),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("[{secret}] /tmp [unset]\n"),
            "its environment, in its working directory, the script variable gone"
        );
        assert_eq!(
            std::fs::read_to_string(&calls)
                .expect("calls")
                .lines()
                .count(),
            3,
            "asked until RUNNING"
        );
        let args = std::fs::read_to_string(dir.path().join("srun-args")).expect("srun ran");
        for want in [
            "--jobid=42 --overlap",
            "--mpi=none",
            "--chdir=/ ",
            "--nodelist=n3",
            "--gres=gpu:a100:1",
            "--cpus-per-task=2",
            "--mem=1000M",
            "--job-name=arbiter-7.1",
            "--export=ARBITER_STEP_SCRIPT",
        ] {
            assert!(args.contains(want), "{want} in {args}");
        }
        // An allocation that ended before the step could start: the run fails, saying why.
        std::fs::remove_file(&calls).expect("reset");
        std::fs::write(&state, "CANCELLED\n").expect("write");
        let out = run(&step);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("allocation 42, which holds this job's GPUs, is CANCELLED"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // With an identity the task first becomes that user, with its process limit.
        req.identity = Some((1000, 1001));
        let step = step_command(None, 42, &req, Some(64)).expect("valid");
        assert!(step.command.contains("exec /usr/bin/prlimit --nproc=64:64 -- /usr/bin/setpriv --reuid=1000 --regid=1001 --clear-groups --inh-caps=-all -- /bin/sh -c"), "{}", step.command);
        assert!(
            step_command(
                None,
                42,
                &BatchJob {
                    nodes: vec!["a b".into()],
                    ..job("")
                },
                None
            )
            .is_err()
        );
    }

    #[test]
    fn runner_times_out_and_reports() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tool = |name: &str, body: &str| fake_tool(dir.path(), name, body);
        tool("squeue", "sleep 5");
        tool(
            "sbatch",
            "cat >/dev/null; echo 'sbatch: error: invalid partition specified: x' >&2; exit 1",
        );
        tool("sinfo", "echo '{\"nodes\":[]}'");
        let cli = SlurmCli {
            bin_dir: Some(dir.path().into()),
            timeout: Duration::from_millis(300),
            ..SlurmCli::new("p")
        };
        let start = Instant::now();
        assert!(matches!(cli.jobs(), Err(SlurmError::Timeout { .. })));
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "killed at the deadline"
        );
        let e = cli.submit(&job("true")).expect_err("fails").to_string();
        assert!(
            e.contains("sbatch --parsable") && e.contains("invalid partition"),
            "{e}"
        );
        assert_eq!(cli.nodes().expect("empty list"), []);
        assert!(matches!(
            cli.cancel(1),
            Err(SlurmError::NotInstalled { .. })
        ));
    }

    /// Needs `scripts/slurm-up.sh` and root.
    #[test]
    #[ignore = "needs the lab Slurm cluster: scripts/slurm-up.sh, then cargo test -- --ignored slurm_"]
    fn slurm_tools_against_the_lab_cluster() {
        let cli = SlurmCli::new("arbiter");
        let nodes = cli.nodes().expect("sinfo");
        let a100 = nodes
            .iter()
            .filter(|n| n.gpu_type.as_deref() == Some("a100"));
        let a100 = a100
            .clone()
            .find(|n| n.state == "idle")
            .or(a100.clone().next())
            .expect("an a100 node");
        let dir = tempfile::tempdir().expect("tempdir");
        let submit = |name: &str, command: &str| {
            let mut req = job(command);
            req.name = format!("arbiter-test-{name}");
            req.nodes = vec![a100.name.clone()];
            req.output = dir.path().join(format!("{name}.log"));
            req.working_dir = dir.path().into();
            req.env = [("GREETING".to_string(), "it's $fine".to_string())].into();
            (cli.submit(&req).expect("sbatch"), req.output)
        };
        let wait = |id: u64, done: fn(&SlurmJobState) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let jobs = cli.jobs().expect("squeue");
                match jobs.into_iter().find(|j| j.id == id) {
                    Some(j) if done(&j.state) => return j,
                    _ if Instant::now() > deadline => panic!("job {id} did not get there in 15 s"),
                    _ => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        };
        let (id, log) = submit("env", "env; echo \"greeting=$GREETING\"");
        let j = wait(id, SlurmJobState::is_finished);
        assert_eq!(
            (&j.state, j.exit_code),
            (&SlurmJobState::Completed, Some(0)),
            "{j:?}"
        );
        assert!(
            j.nodes == [a100.name.clone()] && ["n3", "n4"].contains(&j.nodes[0].as_str()),
            "{j:?}"
        );
        let out = std::fs::read_to_string(&log).expect("job output");
        assert!(
            out.lines()
                .any(|l| l.starts_with("CUDA_VISIBLE_DEVICES=") && l.len() > 21),
            "{out}"
        );
        assert!(out.contains("greeting=it's $fine"), "{out}");
        assert_eq!(
            cli.accounting_exit(id).expect("sacct"),
            None,
            "no accounting in the lab cluster"
        );

        let (id, _) = submit("three", "exit 3");
        let j = wait(id, SlurmJobState::is_finished);
        assert_eq!(
            (&j.state, j.exit_code, j.reason.as_str()),
            (&SlurmJobState::Failed, Some(3), "NonZeroExitCode")
        );

        let (id, log) = submit(
            "long",
            "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.1; done",
        );
        let logged = |what: &str| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(what)
            {
                assert!(Instant::now() < deadline, "no {what:?} in the job's output");
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        // RUNNING comes up to ~2 s before slurmd launches the script; a signal sent in between
        // is lost without an error. So wait for the script itself.
        logged("ready");
        cli.signal_batch(id, "USR1").expect("scancel --batch");
        logged("got-usr1");
        cli.cancel(id).expect("scancel");
        let j = wait(id, SlurmJobState::is_finished);
        assert_eq!(j.state, SlurmJobState::Cancelled, "{j:?}");
    }
}
