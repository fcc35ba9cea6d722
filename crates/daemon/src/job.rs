//! Jobs as the daemon keeps them: what was submitted, where they are in their life, and the
//! history of every state transition (persisted before it is acted on).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A job submission (`POST /v1/jobs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// Shell command line, run with `sh -c`.
    pub command: String,
    /// Working directory (absolute); the daemon's data directory when absent.
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// GPUs, all at once.
    #[serde(default = "one")]
    pub gpus: u32,
    /// GPU types the job may run on (empty: any).
    #[serde(default)]
    pub gpu_types: Vec<String>,
    /// CPU cores (0: the GPU-proportional share).
    #[serde(default)]
    pub cpus: u32,
    /// Memory, GiB (0: the GPU-proportional share).
    #[serde(default)]
    pub memory_gib: u32,
    /// Larger runs first where the policy honours priorities.
    #[serde(default)]
    pub priority: i32,
    /// Deadline, Unix seconds.
    #[serde(default)]
    pub deadline_unix_s: Option<i64>,
    /// Wall-clock limit of one run, seconds; the job is stopped and failed beyond it.
    #[serde(default)]
    pub max_run_time_s: Option<u64>,
    /// Expected run time, seconds (policies that need one — SRTF, SJF — use it; default 1 h).
    #[serde(default)]
    pub expected_run_time_s: Option<u64>,
    /// Directory the job checkpoints into; kept across restarts (default: one per job under the
    /// data directory).
    #[serde(default)]
    pub checkpoint_dir: Option<String>,
    /// Signal sent to ask the job to checkpoint and exit (`TERM`, `INT`, `USR1`, ...).
    #[serde(default = "default_signal")]
    pub checkpoint_signal: String,
    /// Seconds between the checkpoint signal and SIGKILL.
    #[serde(default = "default_grace")]
    pub grace_s: u64,
    /// Retries after a failed run (non-zero exit not caused by preemption).
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Job name, for people.
    #[serde(default)]
    pub name: Option<String>,
}

fn one() -> u32 {
    1
}

fn default_signal() -> String {
    "TERM".into()
}

fn default_grace() -> u64 {
    30
}

fn default_retries() -> u32 {
    2
}

/// A field of a submission that is not acceptable, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl SubmitRequest {
    /// Checks the submission against the daemon's limits.
    pub fn validate(&self, gpus_in_cluster: u32) -> Result<(), FieldError> {
        let bad = |field, reason: String| Err(FieldError { field, reason });
        if self.command.trim().is_empty() {
            return bad("command", "must not be empty".into());
        }
        if self.command.len() > 16 * 1024 {
            return bad("command", "longer than 16 KiB".into());
        }
        if self.gpus == 0 {
            return bad("gpus", "must be at least 1".into());
        }
        if self.gpus > gpus_in_cluster {
            return bad("gpus", format!("asks for {} GPUs; this cluster has {gpus_in_cluster}", self.gpus));
        }
        if let Some(dir) = &self.working_dir
            && !dir.starts_with('/') {
                return bad("working_dir", format!("`{dir}` is not an absolute path"));
            }
        if let Some(dir) = &self.checkpoint_dir
            && !dir.starts_with('/') {
                return bad("checkpoint_dir", format!("`{dir}` is not an absolute path"));
            }
        if crate::executor::parse_signal(&self.checkpoint_signal).is_none() {
            return bad("checkpoint_signal", format!("`{}` is not a signal name (TERM, INT, USR1, USR2, HUP)", self.checkpoint_signal));
        }
        if self.grace_s > 3600 {
            return bad("grace_s", "at most 3600".into());
        }
        if let Some(key) = self.env.keys().find(|k| k.is_empty() || k.contains('=') || k.starts_with("ARBITER_")) {
            return bad("env", format!("`{key}` is not allowed (empty, contains `=`, or reserved ARBITER_ prefix)"));
        }
        if self.max_run_time_s == Some(0) {
            return bad("max_run_time_s", "must be > 0".into());
        }
        Ok(())
    }
}

/// Where a job is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum JobState {
    /// Waiting for GPUs (new, preempted, or retrying).
    Queued,
    /// Holding GPUs, its process running.
    Running {
        /// GPU indices (what `CUDA_VISIBLE_DEVICES` lists).
        gpus: Vec<u32>,
        /// Process (group leader) id.
        pid: u32,
        /// Unix seconds it started.
        started_unix_s: i64,
    },
    /// Asked to checkpoint and exit (preempted or cancelled); still holding its GPUs.
    Stopping {
        /// GPU indices.
        gpus: Vec<u32>,
        /// Process id.
        pid: u32,
        /// Why: `preempted` (requeued afterwards) or `cancelled`.
        reason: StopReason,
        /// Unix seconds the signal was sent.
        since_unix_s: i64,
    },
    /// Finished with exit code 0.
    Succeeded,
    /// Failed for good (retries used up, or over its run-time limit).
    Failed,
    /// Cancelled by its tenant or an admin.
    Cancelled,
}

/// Why a running job is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The policy gave its GPUs to others; it goes back to the queue.
    Preempted,
    /// Cancelled; it ends.
    Cancelled,
    /// Over its `max_run_time_s`; it fails.
    TimedOut,
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }

    /// Short name (`queued`, `running`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running { .. } => "running",
            JobState::Stopping { .. } => "stopping",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// GPUs held, if any.
    pub fn gpus(&self) -> Option<&[u32]> {
        match self {
            JobState::Running { gpus, .. } | JobState::Stopping { gpus, .. } => Some(gpus),
            _ => None,
        }
    }

    /// Process id, if it has one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            JobState::Running { pid, .. } | JobState::Stopping { pid, .. } => Some(*pid),
            _ => None,
        }
    }
}

/// One recorded transition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Unix seconds.
    pub at_unix_s: i64,
    /// New state's name.
    pub to: String,
    /// Why (free text: `submitted`, `started on GPUs 0,1`, `exit code 1`, ...).
    pub why: String,
}

/// Progress the job reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Steps done so far (as the job counts them).
    pub steps: u64,
    /// Steps per second, as measured by the job.
    pub throughput: Option<f64>,
    /// Unix seconds of the report.
    pub at_unix_s: i64,
}

/// Everything the daemon knows about a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Dense id (0, 1, 2, ...).
    pub id: u32,
    /// Owning tenant.
    pub tenant: String,
    /// What was submitted.
    pub request: SubmitRequest,
    /// Current state.
    pub state: JobState,
    /// Unix seconds of submission.
    pub submitted_unix_s: i64,
    /// Unix milliseconds of submission (for latency metrics).
    #[serde(default)]
    pub submitted_unix_ms: u64,
    /// Seconds it has held GPUs over all runs (as of the last stop).
    pub executed_s: f64,
    /// Runs started.
    pub runs: u32,
    /// Runs that failed (non-zero exit not caused by a stop).
    pub failures: u32,
    /// Times it was preempted.
    pub preemptions: u32,
    /// Exit code of the last run.
    pub exit_code: Option<i32>,
    /// Why the policy did not place it at the last scheduling point (while queued).
    pub pending_reason: Option<String>,
    /// Latest progress report.
    pub progress: Option<Progress>,
    /// Measured steps per second on each GPU type it ran on (smoothed over reports).
    #[serde(default)]
    pub throughput_by_gpu_type: BTreeMap<String, f64>,
    /// Total steps, if the job said (turns progress into a remaining-time estimate).
    #[serde(default)]
    pub total_steps: Option<u64>,
    /// Every transition.
    pub history: Vec<Transition>,
    /// Hash of the job's own token (it reports progress with it).
    pub token_sha256: String,
}

impl JobRecord {
    /// A job just submitted (queued, nothing run yet), its submission recorded in its history.
    pub fn submitted(id: u32, tenant: &str, request: SubmitRequest, now_unix_ms: u64, token_sha256: String) -> Self {
        let now_s = (now_unix_ms / 1000) as i64;
        let mut record = JobRecord {
            id,
            tenant: tenant.to_string(),
            request,
            state: JobState::Queued,
            submitted_unix_s: now_s,
            submitted_unix_ms: now_unix_ms,
            executed_s: 0.0,
            runs: 0,
            failures: 0,
            preemptions: 0,
            exit_code: None,
            pending_reason: None,
            progress: None,
            throughput_by_gpu_type: BTreeMap::new(),
            total_steps: None,
            history: Vec::new(),
            token_sha256,
        };
        record.transition(JobState::Queued, "submitted", now_s);
        record
    }

    /// Records a transition to `state`.
    pub fn transition(&mut self, state: JobState, why: impl Into<String>, now_unix_s: i64) {
        self.history.push(Transition { at_unix_s: now_unix_s, to: state.name().to_string(), why: why.into() });
        self.state = state;
    }

    /// The checkpoint directory: the requested one or `<data>/checkpoints/<id>`.
    pub fn checkpoint_dir(&self, data_dir: &std::path::Path) -> std::path::PathBuf {
        self.request.checkpoint_dir.as_ref().map(std::path::PathBuf::from).unwrap_or_else(|| data_dir.join("checkpoints").join(self.id.to_string()))
    }
}
