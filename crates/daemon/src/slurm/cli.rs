//! Slurm's command-line tools as typed calls: `sbatch --parsable`, `squeue --json`,
//! `sinfo --json`, `scancel`, `sacct -P`. No daemon logic here.
//!
//! Facts this relies on (Slurm 22.05, `../shared/SLURM.md`): `squeue --json --states=all` keeps
//! finished jobs for `MinJobAge` seconds, and its `exit_code` is the raw wait status (exit code
//! 2 reads 512); `sacct --json` misreports exit codes in 22.05, so accounting is read with
//! `sacct -n -P`. Every tool runs without a shell, with a deadline: a dead `slurmctld` makes
//! them hang for a long time.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A Slurm tool failed.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// The tool could not be started.
    #[error("cannot run {tool}: {reason} (is Slurm's client installed, or set [slurm] bin_dir?)")]
    NotInstalled {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The tool exited with an error.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// The tool did not answer in time.
    #[error("`{command}` did not answer within {seconds} s (is slurmctld up?)")]
    Timeout {
        /// The command line.
        command: String,
        /// The deadline.
        seconds: f64,
    },
    /// Its output could not be read.
    #[error("cannot read {what}: {reason}")]
    Parse {
        /// What was read.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// A request that cannot be turned into a batch job.
    #[error("{0}")]
    Invalid(String),
}

/// The Slurm tools of one partition.
#[derive(Clone, Debug)]
pub struct SlurmCli {
    /// The partition jobs go to and nodes are read from.
    pub partition: String,
    /// Where the tools are (`None`: `PATH`).
    pub bin_dir: Option<PathBuf>,
    /// How long one call may take.
    pub timeout: Duration,
}

/// One batch job to submit, pinned to nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchJob {
    /// Job name.
    pub name: String,
    /// Exact nodes (`--nodelist`, `--nodes` = their count).
    pub nodes: Vec<String>,
    /// GPU type (`--gres=gpu:TYPE:N`), if any.
    pub gpu_type: Option<String>,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// CPUs per node (one task per node).
    pub cpus_per_node: u32,
    /// Memory per node, MiB.
    pub memory_mb_per_node: u64,
    /// Output and error file (appended).
    pub output: PathBuf,
    /// Working directory.
    pub working_dir: PathBuf,
    /// The job's whole environment (`--export=NONE`, then these, set in the script).
    pub env: BTreeMap<String, String>,
    /// Shell command.
    pub command: String,
    /// Run as this uid and gid (`--uid/--gid`, root only).
    pub identity: Option<(u32, u32)>,
}

/// A job's state in Slurm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlurmJobState {
    /// Waiting.
    Pending,
    /// Running (or being configured).
    Running,
    /// Suspended.
    Suspended,
    /// Ending.
    Completing,
    /// Exited 0.
    Completed,
    /// Exited non-zero.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Over its time limit.
    Timeout,
    /// A node failed.
    NodeFail,
    /// Preempted by Slurm.
    Preempted,
    /// Killed for memory.
    OutOfMemory,
    /// Any other state, as Slurm names it.
    Other(String),
}

impl SlurmJobState {
    fn parse(text: &str) -> Self {
        match text {
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => SlurmJobState::Pending,
            "RUNNING" | "CONFIGURING" | "RESIZING" | "SIGNALING" | "STAGE_OUT" => SlurmJobState::Running,
            "SUSPENDED" | "STOPPED" => SlurmJobState::Suspended,
            "COMPLETING" => SlurmJobState::Completing,
            "COMPLETED" => SlurmJobState::Completed,
            "FAILED" | "BOOT_FAIL" | "DEADLINE" => SlurmJobState::Failed,
            "CANCELLED" => SlurmJobState::Cancelled,
            "TIMEOUT" => SlurmJobState::Timeout,
            "NODE_FAIL" => SlurmJobState::NodeFail,
            "PREEMPTED" => SlurmJobState::Preempted,
            "OUT_OF_MEMORY" => SlurmJobState::OutOfMemory,
            other => SlurmJobState::Other(other.to_string()),
        }
    }

    /// Whether the job is over (its processes are gone).
    pub fn is_finished(&self) -> bool {
        !matches!(self, SlurmJobState::Pending | SlurmJobState::Running | SlurmJobState::Suspended | SlurmJobState::Completing | SlurmJobState::Other(_))
    }
}

/// A job as `squeue` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmJob {
    /// Job id.
    pub id: u64,
    /// Job name.
    pub name: String,
    /// State.
    pub state: SlurmJobState,
    /// Exit code once it ended by itself (`None`: still running, or ended by a signal).
    pub exit_code: Option<i32>,
    /// The uid it runs as.
    pub user_id: Option<u32>,
}

/// A node as `sinfo` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmNode {
    /// Node name.
    pub name: String,
    /// CPUs.
    pub cpus: u32,
    /// Memory, MiB.
    pub memory_mb: u64,
    /// GPU type from the gres (`gpu:a100:4` → `a100`).
    pub gpu_type: Option<String>,
    /// GPUs.
    pub gpus: u32,
    /// Features.
    pub features: Vec<String>,
    /// State (`idle`, `mixed`, `down`, ...).
    pub state: String,
}

impl SlurmCli {
    fn tool(&self, name: &str) -> PathBuf {
        self.bin_dir.as_ref().map_or_else(|| PathBuf::from(name), |d| d.join(name))
    }

    /// Runs `tool args`, feeding `stdin`; returns its stdout.
    fn run(&self, tool: &str, args: &[String], stdin: Option<&str>) -> Result<String, SlurmError> {
        let command = format!("{tool} {}", args.join(" "));
        let mut child = Command::new(self.tool(tool))
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| SlurmError::NotInstalled { tool: tool.into(), reason: e.to_string() })?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(text.as_bytes());
        }
        // Read both pipes on threads so a chatty tool cannot block on a full pipe.
        let mut out_pipe = child.stdout.take();
        let mut err_pipe = child.stderr.take();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(p) = out_pipe.as_mut() {
                let _ = p.read_to_string(&mut s);
            }
            s
        });
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(p) = err_pipe.as_mut() {
                let _ = p.read_to_string(&mut s);
            }
            s
        });
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SlurmError::Timeout { command, seconds: self.timeout.as_secs_f64() });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(SlurmError::Command { command, status: "unknown".into(), stderr: e.to_string() }),
            }
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        if !status.success() {
            return Err(SlurmError::Command { command, status: status.to_string(), stderr: stderr.trim().to_string() });
        }
        Ok(stdout)
    }

    /// Submits `job`; returns its id.
    pub fn submit(&self, job: &BatchJob) -> Result<u64, SlurmError> {
        if job.nodes.is_empty() {
            return Err(SlurmError::Invalid(format!("job {} names no node", job.name)));
        }
        let gres = match &job.gpu_type {
            Some(t) => format!("--gres=gpu:{t}:{}", job.gpus_per_node),
            None => format!("--gres=gpu:{}", job.gpus_per_node),
        };
        let mut args = vec![
            "--parsable".to_string(),
            format!("--partition={}", self.partition),
            format!("--job-name={}", job.name),
            format!("--nodelist={}", job.nodes.join(",")),
            format!("--nodes={}", job.nodes.len()),
            "--ntasks-per-node=1".into(),
            gres,
            format!("--cpus-per-task={}", job.cpus_per_node.max(1)),
            format!("--mem={}M", job.memory_mb_per_node.max(1)),
            "--open-mode=append".into(),
            format!("--output={}", job.output.display()),
            format!("--chdir={}", job.working_dir.display()),
            "--export=NONE".into(),
        ];
        if let Some((uid, gid)) = job.identity {
            args.push(format!("--uid={uid}"));
            args.push(format!("--gid={gid}"));
        }
        let out = self.run("sbatch", &args, Some(&batch_script(job)?))?;
        parse_sbatch_output(&out)
    }

    /// Every job of the partition Slurm still shows (finished ones for `MinJobAge`).
    pub fn jobs(&self) -> Result<Vec<SlurmJob>, SlurmError> {
        let out = self.run("squeue", &["--json".into(), "--states=all".into(), format!("--partition={}", self.partition)], None)?;
        parse_squeue_json(&out)
    }

    /// Sends `signal` (`USR1`, `TERM`) to every process of the job, its batch script included.
    pub fn signal_all(&self, id: u64, signal: &str) -> Result<(), SlurmError> {
        self.run("scancel", &[format!("--signal={signal}"), "--full".into(), id.to_string()], None).map(|_| ())
    }

    /// Cancels the job (Slurm kills what is left after `KillWait`).
    pub fn kill(&self, id: u64) -> Result<(), SlurmError> {
        self.run("scancel", &[id.to_string()], None).map(|_| ())
    }

    /// The partition's nodes.
    pub fn nodes(&self) -> Result<Vec<SlurmNode>, SlurmError> {
        let out = self.run("sinfo", &["--json".into()], None)?;
        Ok(parse_sinfo_json(&out)?.into_iter().filter(|(_, partitions)| partitions.contains(&self.partition)).map(|(n, _)| n).collect())
    }

    /// State and exit code from accounting (`sacct -P`), `None` when accounting is disabled or
    /// does not know the job.
    pub fn accounting_exit(&self, id: u64) -> Result<Option<(String, i32)>, SlurmError> {
        let out = match self.run("sacct", &["-j".into(), id.to_string(), "-X".into(), "-n".into(), "-P".into(), "-o".into(), "JobID,State,ExitCode".into()], None) {
            Ok(out) => out,
            Err(SlurmError::Command { stderr, .. }) if stderr.contains("accounting storage is disabled") => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(out.lines().find_map(|line| {
            let mut f = line.split('|');
            let (_, state, code) = (f.next()?, f.next()?, f.next()?);
            Some((state.to_string(), code.split(':').next()?.parse().ok()?))
        }))
    }
}

/// The batch script: the environment as `export` lines, then the command, whose exit status is
/// the job's.
pub fn batch_script(job: &BatchJob) -> Result<String, SlurmError> {
    let mut script = String::from("#!/bin/sh\n");
    for (k, v) in &job.env {
        let valid = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(SlurmError::Invalid(format!("environment variable name `{k}` cannot be exported")));
        }
        script.push_str(&format!("export {k}={}\n", quote(v)));
    }
    script.push_str(&format!("exec /bin/sh -c {}\n", quote(&job.command)));
    Ok(script)
}

/// Single-quotes `s` for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `123` or `123;cluster`.
pub fn parse_sbatch_output(out: &str) -> Result<u64, SlurmError> {
    let first = out.trim().split(';').next().unwrap_or("");
    first.parse().map_err(|_| SlurmError::Parse { what: "sbatch's answer".into(), reason: format!("`{}` is not a job id", out.trim()) })
}

#[derive(Deserialize)]
struct SqueueOut {
    jobs: Vec<SqueueJob>,
    /// With slurmctld down, squeue exits 0 with no jobs and says why only here.
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct SqueueJob {
    job_id: u64,
    #[serde(default)]
    name: String,
    job_state: String,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    user_id: Option<u32>,
}

/// Parses `squeue --json` (openapi v0.0.38): the exit code is the raw wait status.
pub fn parse_squeue_json(text: &str) -> Result<Vec<SlurmJob>, SlurmError> {
    let out: SqueueOut = serde_json::from_str(text).map_err(|e| SlurmError::Parse { what: "squeue --json".into(), reason: e.to_string() })?;
    if !out.errors.is_empty() {
        // An empty list with errors is not "every job is gone".
        return Err(SlurmError::Parse { what: "squeue --json".into(), reason: format!("Slurm reported errors: {}", serde_json::Value::from(out.errors)) });
    }
    Ok(out
        .jobs
        .into_iter()
        .map(|j| {
            let state = SlurmJobState::parse(&j.job_state);
            // A wait status: exit code in bits 8-15 when the low 7 bits (the signal) are 0.
            let exit_code = j.exit_code.filter(|_| state.is_finished()).filter(|s| s & 0x7f == 0).map(|s| ((s >> 8) & 0xff) as i32);
            SlurmJob { id: j.job_id, name: j.name, state, exit_code, user_id: j.user_id }
        })
        .collect())
}

#[derive(Deserialize)]
struct SinfoOut {
    nodes: Vec<SinfoNode>,
}

#[derive(Deserialize)]
struct SinfoNode {
    name: String,
    cpus: u32,
    real_memory: u64,
    #[serde(default)]
    gres: String,
    #[serde(default)]
    features: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    partitions: Vec<String>,
}

/// Parses `sinfo --json`: each node with its partitions.
pub fn parse_sinfo_json(text: &str) -> Result<Vec<(SlurmNode, Vec<String>)>, SlurmError> {
    let out: SinfoOut = serde_json::from_str(text).map_err(|e| SlurmError::Parse { what: "sinfo --json".into(), reason: e.to_string() })?;
    Ok(out
        .nodes
        .into_iter()
        .map(|n| {
            let (gpu_type, gpus) = parse_gres(&n.gres);
            let node = SlurmNode {
                name: n.name,
                cpus: n.cpus,
                memory_mb: n.real_memory,
                gpu_type,
                gpus,
                features: n.features.split(',').filter(|f| !f.is_empty()).map(str::to_string).collect(),
                state: n.state,
            };
            (node, n.partitions)
        })
        .collect())
}

/// GPU type and count of a gres string (`gpu:a100:4`, `gpu:4`, `gpu:a100:4(S:0-1),mps:100`).
pub fn parse_gres(gres: &str) -> (Option<String>, u32) {
    for item in gres.split(',') {
        let item = item.split('(').next().unwrap_or(item);
        let parts: Vec<&str> = item.split(':').collect();
        match parts.as_slice() {
            ["gpu", n] => return (None, n.parse().unwrap_or(0)),
            ["gpu", t, n] => return (Some((*t).to_string()), n.parse().unwrap_or(0)),
            _ => {}
        }
    }
    (None, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_sbatch_and_wait_statuses_parse() {
        assert_eq!(parse_gres("gpu:a100:4"), (Some("a100".into()), 4));
        assert_eq!(parse_gres("mps:100,gpu:v100:2(S:0-1)"), (Some("v100".into()), 2));
        assert_eq!(parse_gres("gpu:8"), (None, 8));
        assert_eq!(parse_gres(""), (None, 0));
        assert_eq!(parse_sbatch_output("42\n").expect("id"), 42);
        assert_eq!(parse_sbatch_output("42;lab").expect("id"), 42);
        assert!(parse_sbatch_output("sbatch: error").is_err());
        // Captured from Slurm 22.05.8 (trimmed): exit 2 is 512, a cancelled job killed by a
        // signal has no exit code, a running job none yet.
        let squeue = r#"{"meta": {}, "errors": [], "jobs": [
            {"job_id": 43, "name": "arbiter-3.1", "job_state": "FAILED", "state_reason": "NonZeroExitCode", "exit_code": 512, "nodes": "n[1-2]", "user_id": 0},
            {"job_id": 44, "name": "arbiter-4.1", "job_state": "COMPLETED", "exit_code": 0, "user_id": 1900000200},
            {"job_id": 45, "name": "x", "job_state": "CANCELLED", "exit_code": 15},
            {"job_id": 46, "name": "y", "job_state": "RUNNING", "exit_code": 0, "unknown_key": [1]}]}"#;
        let jobs = parse_squeue_json(squeue).expect("parses");
        assert_eq!(jobs.iter().map(|j| (j.id, j.state.is_finished(), j.exit_code)).collect::<Vec<_>>(), vec![(43, true, Some(2)), (44, true, Some(0)), (45, true, None), (46, false, None)]);
        assert_eq!(jobs[1].user_id, Some(1_900_000_200));
        let sinfo = r#"{"meta": {}, "errors": [], "nodes": [
            {"name": "n1", "cpus": 8, "real_memory": 16000, "gres": "gpu:v100:4", "features": "v100,rack1", "state": "idle", "partitions": ["arbiter"]},
            {"name": "c1", "cpus": 4, "real_memory": 8000, "gres": "", "features": "", "state": "idle", "partitions": ["cpu"]}]}"#;
        let nodes = parse_sinfo_json(sinfo).expect("parses");
        assert_eq!(nodes[0].0, SlurmNode { name: "n1".into(), cpus: 8, memory_mb: 16000, gpu_type: Some("v100".into()), gpus: 4, features: vec!["v100".into(), "rack1".into()], state: "idle".into() });
        assert_eq!(nodes[1].0.gpus, 0);
        assert!(parse_squeue_json("{}").is_err());
        let down = r#"{"errors": [{"error": "Unable to contact slurm controller", "error_number": 1007}], "jobs": []}"#;
        assert!(parse_squeue_json(down).is_err(), "a controller that is down must not read as no jobs");
    }

    #[test]
    fn the_batch_script_quotes_everything_and_refuses_bad_names() {
        let mut job = BatchJob {
            name: "j".into(),
            nodes: vec!["n1".into()],
            gpu_type: None,
            gpus_per_node: 1,
            cpus_per_node: 1,
            memory_mb_per_node: 1,
            output: "/dev/null".into(),
            working_dir: "/".into(),
            env: BTreeMap::from([("A".to_string(), "it's $HOME `id`\nnext".to_string())]),
            command: "printf '%s|' \"$A\"; exit 3".into(),
            identity: None,
        };
        let script = batch_script(&job).expect("script");
        let out = Command::new("/bin/sh").arg("-c").arg(&script).output().expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $HOME `id`\nnext|");
        assert_eq!(out.status.code(), Some(3), "the command's exit status is the job's");
        job.env.insert("BAD-NAME".into(), "x".into());
        assert!(batch_script(&job).is_err());
    }
}
