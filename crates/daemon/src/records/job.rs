//! Jobs as the daemon keeps them: what was submitted, where they are in their life, and the
//! history of every state transition (persisted before it is acted on).

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
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
    /// An elastic job: it may run on any count from `gpus` up to this many. Policies that resize
    /// jobs (`afs`, `optimus`) choose the count, from the throughput the job reports at each
    /// count (untried counts are assumed to scale linearly from the nearest tried one); the
    /// others run it on `gpus`. A resize is a checkpoint and a restart on the new count: the run
    /// learns its count from `ARBITER_GPUS` and the previous run's from
    /// `ARBITER_PREVIOUS_GPUS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<u32>,
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
    /// Idempotency key chosen by the client (also accepted as the `Idempotency-Key` header): a
    /// second submission by the same tenant with the same key returns the first job instead of
    /// creating another, so a client may retry after a lost reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    /// Seconds a started run is protected from preemption (default: the daemon's `min_run_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_run_time_s: Option<u64>,
    /// An opportunistic job (AntMan's): it runs only on GPUs the other jobs leave idle, is never
    /// seen by the policy nor counted against quotas or fair shares, and yields at once — its
    /// checkpoint signal, then at most [`OPPORTUNISTIC_GRACE_S`] — when a job the policy placed
    /// needs its GPUs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opportunistic: bool,
    /// One training iteration's time on each resource (storage I/O, CPU, GPU), seconds: Muri's
    /// policies (`muri-s`, `muri-l`) interleave jobs whose iterations stress different resources
    /// on the same GPUs. Without it the job runs alone under them. (Absent in records written
    /// before it existed.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_stages: Option<StageTimes>,
    /// What kind of job this is (`resnet50`, `bert-large-bs32`: 1-128 bytes of letters, digits
    /// and `. _ - + : /`), within its tenant: jobs of a type are assumed to interfere alike when
    /// they share GPUs. The daemon learns, from progress reports, how fast each type runs next
    /// to each other type (`GET /v1/pairs`), and the co-locating policies (`gandiva`,
    /// `max-min-fairness-packed`, `horus`) pair jobs by it. Types are the tenant's own: another
    /// tenant's `resnet50` is another type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    /// Its priority class (`arbiter submit --priority-class`); `None` on submission: the
    /// configured default, filled in when the daemon takes the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Dependencies in Slurm's syntax (`afterok:12:13,afterany:14`, `singleton`): the job
    /// waits until they hold, and fails if they never can. Only the tenant's own jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// A job array, in Slurm's syntax (`0-99%8`, `1,3,5-7`, `0-15:4`): one job per task, each
    /// told its index (`ARBITER_ARRAY_TASK_ID`), at most N running at once with `%N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    /// Who in the tenant submitted it (the CLI sends the login name): a label for usage reports
    /// (`arbiter usage --by user`), as the client says it — a tenant's members share its token,
    /// so the daemon cannot check it. 1-64 bytes of letters, digits and `. _ - @`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// One iteration's time on each resource, seconds (`SubmitRequest::iteration_stages`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageTimes {
    /// Reading input from storage.
    pub io_s: f64,
    /// CPU work (preprocessing, data loading).
    pub cpu_s: f64,
    /// GPU compute (forward and backward pass).
    pub gpu_s: f64,
}

/// Longest iteration a submission may describe (each stage and their sum), seconds: one day.
pub const MAX_ITERATION_S: f64 = 86_400.0;

/// Shortest iteration a submission may describe (the sum of its stages), seconds: a
/// microsecond, which keeps the interleaving arithmetic away from denormal numbers.
pub const MIN_ITERATION_S: f64 = 1e-6;

impl StageTimes {
    /// One iteration alone: the sum of the stages, seconds.
    pub fn iteration_s(&self) -> f64 {
        self.io_s + self.cpu_s + self.gpu_s
    }

    /// The stages as the policies see them.
    pub fn to_model(self) -> arbiter_model::IterationStages {
        arbiter_model::IterationStages {
            io_s: self.io_s,
            cpu_s: self.cpu_s,
            gpu_s: self.gpu_s,
        }
    }

    /// Why these stage times are not acceptable, if they are not.
    fn problem(&self) -> Option<String> {
        for (name, v) in [
            ("io_s", self.io_s),
            ("cpu_s", self.cpu_s),
            ("gpu_s", self.gpu_s),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Some(format!(
                    "{name} is {v}; each stage must be a finite number of seconds >= 0"
                ));
            }
            if v > MAX_ITERATION_S {
                return Some(format!(
                    "{name} is {v} s; an iteration stage is at most {MAX_ITERATION_S} s (a day)"
                ));
            }
        }
        let sum = self.iteration_s();
        if !(MIN_ITERATION_S..=MAX_ITERATION_S).contains(&sum) {
            return Some(format!(
                "the stages sum to {sum} s; an iteration takes {MIN_ITERATION_S} to {MAX_ITERATION_S} s"
            ));
        }
        None
    }
}

/// The longest an opportunistic job is given to checkpoint when it must yield its GPUs.
pub const OPPORTUNISTIC_GRACE_S: u64 = 5;

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

/// A field of a submission that is not acceptable, and why (defined with the text checks, which
/// every field goes through).
pub use crate::security::text::FieldError;

/// What a submission is checked against: the machine's GPUs, CPUs and memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// GPUs by type.
    pub gpus: crate::config::GpuInventory,
    /// CPU cores.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
}

/// Longest time a submission may name (run-time limits, estimates): ten years.
pub const MAX_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// Environment variables Arbiter sets for every run; a submission may not set them.
pub fn is_owned_variable(key: &str) -> bool {
    key.starts_with("ARBITER_") || key == "CUDA_VISIBLE_DEVICES" || key == "CUDA_DEVICE_ORDER"
}

impl SubmitRequest {
    /// Seconds between the checkpoint signal and the kill when a run is stopped: `grace_s`, at
    /// most [`OPPORTUNISTIC_GRACE_S`] for an opportunistic job.
    pub fn effective_grace_s(&self) -> u64 {
        if self.opportunistic {
            self.grace_s.min(OPPORTUNISTIC_GRACE_S)
        } else {
            self.grace_s
        }
    }

    /// Checks the characters of every text field (`crate::security::text`): what is shown to others (the
    /// admin's terminal, the dashboard) holds no control, format or separator character that
    /// could forge lines or reorder text there, and nothing holds NUL, which cannot reach a
    /// process (argv, environment and paths are C strings). First, so that later messages may
    /// quote the fields.
    fn check_text(&self) -> Result<(), FieldError> {
        use crate::security::text::{Text, check};
        check("command", &self.command, Text::Lines)?;
        let lines = [
            ("working_dir", self.working_dir.as_deref()),
            ("checkpoint_dir", self.checkpoint_dir.as_deref()),
            ("checkpoint_signal", Some(self.checkpoint_signal.as_str())),
            ("name", self.name.as_deref()),
            ("client_request_id", self.client_request_id.as_deref()),
            ("job_type", self.job_type.as_deref()),
            ("priority_class", self.priority_class.as_deref()),
            ("dependency", self.dependency.as_deref()),
            ("array", self.array.as_deref()),
            ("user", self.user.as_deref()),
        ];
        for (field, value) in lines {
            value.map_or(Ok(()), |v| check(field, v, Text::Line))?;
        }
        for gpu_type in &self.gpu_types {
            check("gpu_types", gpu_type, Text::Line)?;
        }
        for (key, value) in &self.env {
            let within = |what: String| {
                move |e: FieldError| FieldError {
                    field: e.field,
                    reason: format!("{what} {}", e.reason),
                }
            };
            check("env", key, Text::Line)
                .map_err(within(format!("the name `{}`", key.escape_debug())))?;
            check("env", value, Text::Value).map_err(within(format!("the value of `{key}`")))?;
        }
        Ok(())
    }

    /// Checks the submission against the daemon's limits. Every refusal names the field.
    pub fn validate(&self, limits: &Limits) -> Result<(), FieldError> {
        let bad = |field, reason: String| Err(FieldError { field, reason });
        self.check_text()?;
        if self.command.trim().is_empty() {
            return bad("command", "must not be empty".into());
        }
        if self.command.len() > 16 * 1024 {
            return bad("command", "longer than 16 KiB".into());
        }
        if self.name.as_ref().is_some_and(|n| n.len() > 256) {
            return bad("name", "longer than 256 bytes".into());
        }
        if self
            .client_request_id
            .as_ref()
            .is_some_and(|k| k.is_empty() || k.len() > 256)
        {
            return bad("client_request_id", "must be 1-256 bytes".into());
        }
        if self.gpus == 0 {
            return bad(
                "gpus",
                "must be at least 1 (jobs without GPUs are not scheduled by Arbiter)".into(),
            );
        }
        let machine_types: Vec<&str> = limits.gpus.iter().map(|(t, _)| t.as_str()).collect();
        if let Some(unknown) = self
            .gpu_types
            .iter()
            .find(|t| !machine_types.iter().any(|m| m.eq_ignore_ascii_case(t)))
        {
            return bad(
                "gpu_types",
                format!(
                    "`{unknown}` is not a GPU type of this cluster (it has: {})",
                    if machine_types.is_empty() {
                        "none".into()
                    } else {
                        machine_types.join(", ")
                    }
                ),
            );
        }
        let allowed: u32 = limits
            .gpus
            .iter()
            .filter(|(t, _)| {
                self.gpu_types.is_empty()
                    || self.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(t))
            })
            .map(|(_, n)| n)
            .sum();
        let largest: u32 = limits
            .gpus
            .iter()
            .filter(|(t, _)| {
                self.gpu_types.is_empty()
                    || self.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(t))
            })
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        if self.gpus > largest {
            let what = if self.gpu_types.is_empty() {
                String::new()
            } else {
                format!(" of type {}", self.gpu_types.join("/"))
            };
            // A job runs on GPUs of one type: a gang larger than the largest group never starts.
            return bad(
                "gpus",
                format!(
                    "asks for {} GPUs{what}; this cluster has {allowed}{}",
                    self.gpus,
                    if allowed > largest {
                        format!(", at most {largest} of one type")
                    } else {
                        String::new()
                    }
                ),
            );
        }
        if let Some(most) = self.max_gpus {
            if most < self.gpus {
                return bad(
                    "max_gpus",
                    format!(
                        "{most} is fewer than gpus ({}); an elastic job runs on gpus..max_gpus",
                        self.gpus
                    ),
                );
            }
            if most > largest {
                return bad(
                    "max_gpus",
                    format!("{most} GPUs; this cluster has at most {largest} of one type"),
                );
            }
            if self.opportunistic {
                return bad(
                    "max_gpus",
                    "an opportunistic job cannot be elastic (it runs on whatever GPUs are idle)"
                        .into(),
                );
            }
        }
        if self.cpus > limits.cpus {
            return bad(
                "cpus",
                format!(
                    "asks for {} CPU cores; this machine has {}",
                    self.cpus, limits.cpus
                ),
            );
        }
        if self.memory_gib > limits.memory_gib {
            return bad(
                "memory_gib",
                format!(
                    "asks for {} GiB; this machine has {}",
                    self.memory_gib, limits.memory_gib
                ),
            );
        }
        if let Some(dir) = &self.working_dir
            && !dir.starts_with('/')
        {
            return bad("working_dir", format!("`{dir}` is not an absolute path"));
        }
        if parse_signal(&self.checkpoint_signal).is_none() {
            return bad(
                "checkpoint_signal",
                format!(
                    "`{}` is not a signal name (TERM, INT, USR1, USR2, HUP, QUIT)",
                    self.checkpoint_signal
                ),
            );
        }
        if self.max_retries > MAX_RETRIES {
            return bad("max_retries", format!("at most {MAX_RETRIES}"));
        }
        if self.grace_s > 3600 {
            return bad("grace_s", "at most 3600".into());
        }
        let is_name = |k: &str| {
            k.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if let Some(key) = self.env.keys().find(|k| !is_name(k)) {
            return bad(
                "env",
                format!(
                    "`{}` is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                    key.escape_debug()
                ),
            );
        }
        if let Some(key) = self.env.keys().find(|k| is_owned_variable(k)) {
            return bad(
                "env",
                format!(
                    "`{key}` is set by Arbiter for every run (ARBITER_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER) and cannot be submitted"
                ),
            );
        }
        for (field, value) in [
            ("max_run_time_s", self.max_run_time_s),
            ("expected_run_time_s", self.expected_run_time_s),
            ("min_run_time_s", self.min_run_time_s),
        ] {
            match value {
                Some(0) if field != "min_run_time_s" => return bad(field, "must be > 0".into()),
                Some(v) if v > MAX_SECONDS => {
                    return bad(
                        field,
                        format!("{v} is more than ten years ({MAX_SECONDS} s)"),
                    );
                }
                _ => {}
            }
        }
        if let Some(d) = self.deadline_unix_s
            && !(0..=i64::try_from(MAX_SECONDS * 100).unwrap_or(i64::MAX)).contains(&d)
        {
            return bad(
                "deadline_unix_s",
                format!("{d} is not a plausible Unix time"),
            );
        }
        if let Some(problem) = self.iteration_stages.as_ref().and_then(StageTimes::problem) {
            return bad("iteration_stages", problem);
        }
        if let Some(problem) = self
            .job_type
            .as_deref()
            .and_then(crate::records::pairs::job_type_problem)
        {
            return bad("job_type", problem);
        }
        if self.priority_class.as_ref().is_some_and(|c| c.len() > 64) {
            return bad("priority_class", "longer than 64 bytes".into());
        }
        if let Some(text) = &self.dependency {
            if text.len() > 16 * 1024 {
                return bad("dependency", "longer than 16 KiB".into());
            }
            arbiter_model::Dependencies::parse(text).map_err(|reason| FieldError {
                field: "dependency",
                reason,
            })?;
        }
        if let Some(user) = &self.user
            && (user.is_empty()
                || user.len() > 64
                || !user
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c)))
        {
            return bad(
                "user",
                format!(
                    "`{}` is not a user name (1-64 bytes of letters, digits and . _ - @)",
                    user.escape_debug()
                ),
            );
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
        /// Whether the signal was sent (recorded right after sending): a restarted daemon sends
        /// it again only when it was not, so a checkpoint in progress is not interrupted.
        #[serde(default)]
        signal_sent: bool,
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

impl StopReason {
    /// Lower-case name (`preempted`, `cancelled`, `timed-out`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Preempted => "preempted",
            StopReason::Cancelled => "cancelled",
            StopReason::TimedOut => "timed-out",
        }
    }
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// Which state it is, without its data.
    pub fn kind(&self) -> StateKind {
        match self {
            JobState::Queued => StateKind::Queued,
            JobState::Running { .. } => StateKind::Running,
            JobState::Stopping { .. } => StateKind::Stopping,
            JobState::Succeeded => StateKind::Succeeded,
            JobState::Failed => StateKind::Failed,
            JobState::Cancelled => StateKind::Cancelled,
        }
    }

    /// Short name (`queued`, `running`, ...).
    pub fn name(&self) -> &'static str {
        self.kind().name()
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
    /// The new state (its name in JSON).
    pub to: StateKind,
    /// Why (free text: `submitted`, `started on GPUs 0,1`, `exit code 1`, ...).
    pub why: String,
}

/// A job's transitions, oldest first, with the two times a scheduling round reads of each job
/// kept beside them: the transitions live on the heap, and reading them for each of 100,000
/// waiting jobs was a cache miss per job, a fifth of a round (`arbiter bench --suite
/// daemon-scale`). Read as a slice; changed only through its methods, which keep the times.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    transitions: Vec<Transition>,
    /// Unix seconds of the latest transition.
    last_at_unix_s: Option<i64>,
    /// Unix seconds of the first transition to `running` still in `transitions`.
    first_run_at_unix_s: Option<i64>,
}

impl History {
    /// Adds the latest transition.
    pub fn push(&mut self, transition: Transition) {
        self.last_at_unix_s = Some(transition.at_unix_s);
        if self.first_run_at_unix_s.is_none() && transition.to == StateKind::Running {
            self.first_run_at_unix_s = Some(transition.at_unix_s);
        }
        self.transitions.push(transition);
    }

    /// Drops `count` transitions after the first (the submission).
    pub fn drop_after_first(&mut self, count: usize) {
        let end = (1 + count).min(self.transitions.len());
        if end > 1 {
            self.transitions.drain(1..end);
        }
        self.first_run_at_unix_s = first_run_at(&self.transitions);
    }

    /// Forgets every transition.
    pub fn clear(&mut self) {
        *self = History::default();
    }

    /// Unix seconds of the latest transition, without reading the transitions.
    pub fn last_at_unix_s(&self) -> Option<i64> {
        self.last_at_unix_s
    }

    /// Unix seconds of the first transition to `running` kept, without reading the transitions.
    pub fn first_run_at_unix_s(&self) -> Option<i64> {
        self.first_run_at_unix_s
    }
}

fn first_run_at(transitions: &[Transition]) -> Option<i64> {
    transitions
        .iter()
        .find(|t| t.to == StateKind::Running)
        .map(|t| t.at_unix_s)
}

impl From<Vec<Transition>> for History {
    fn from(transitions: Vec<Transition>) -> Self {
        History {
            last_at_unix_s: transitions.last().map(|t| t.at_unix_s),
            first_run_at_unix_s: first_run_at(&transitions),
            transitions,
        }
    }
}

impl std::ops::Deref for History {
    type Target = [Transition];
    fn deref(&self) -> &[Transition] {
        &self.transitions
    }
}

/// Written and read as the list of transitions (the times are derived).
impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.transitions.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Transition>::deserialize(deserializer).map(History::from)
    }
}

/// A job state without its data: what a history records (`queued`, `running`, ... in JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateKind {
    /// Waiting for GPUs.
    #[default]
    Queued,
    /// A run holds GPUs.
    Running,
    /// Its run was asked to stop and has not ended yet.
    Stopping,
    /// Ended with exit code 0.
    Succeeded,
    /// Ended otherwise, retries used up.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl StateKind {
    /// Its name (`queued`, `running`, ...).
    pub fn name(self) -> &'static str {
        match self {
            StateKind::Queued => "queued",
            StateKind::Running => "running",
            StateKind::Stopping => "stopping",
            StateKind::Succeeded => "succeeded",
            StateKind::Failed => "failed",
            StateKind::Cancelled => "cancelled",
        }
    }
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
    /// Why the policy did not place it at the last scheduling point (while queued). Words
    /// shared by every job (the policy's reasons) are kept as the one static text, compared by
    /// address: a round compares the reason of every waiting job.
    pub pending_reason: Option<Cow<'static, str>>,
    /// Latest progress report.
    pub progress: Option<Progress>,
    /// Measured steps per second on each GPU type it ran on (smoothed over reports).
    #[serde(default)]
    pub throughput_by_gpu_type: BTreeMap<String, f64>,
    /// Elastic jobs: measured steps per second by GPU count (smoothed over reports made alone).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub throughput_by_gpu_count: BTreeMap<u32, f64>,
    /// With a deadline, under a policy that admits deadlines (`chronus`): whether its deadline
    /// was guaranteed when it was submitted (answered at the first scheduling point after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_admitted: Option<bool>,
    /// GPUs its last run had (`ARBITER_PREVIOUS_GPUS` for the next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_gpus: Option<u32>,
    /// Total steps, if the job said (turns progress into a remaining-time estimate).
    #[serde(default)]
    pub total_steps: Option<u64>,
    /// Every transition (the oldest dropped past [`MAX_HISTORY`], the submission kept).
    pub history: History,
    /// Hash of the job's own token (it reports progress with it).
    pub token_sha256: String,
    /// The checkpoint directory, fixed at submission (`None` in records written before it was:
    /// `<data_dir>/checkpoints/<id>`).
    #[serde(default)]
    pub checkpoint_dir: Option<String>,
    /// After a failed run, not started again before this (Unix seconds): retries back off
    /// (1, 2, 4, ... s, at most 5 minutes), so a crash-looping job cannot saturate the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_unix_s: Option<i64>,
    /// Transitions dropped from the middle of `history` to keep it bounded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub history_omitted: u64,
    /// The CPU/memory share per GPU the policy gave its current run (`None`: its node's
    /// GPU-proportional share, or what the job asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_share: Option<arbiter_model::HostShare>,
    /// What its settled progress reports taught the co-location table (`records/pairs.rs`): its speed
    /// alone per GPU type, and shared speeds waiting for one. Not shown by the API (a pending
    /// measurement names its partner's type, which may be another tenant's).
    #[serde(
        default,
        skip_serializing_if = "crate::records::pairs::JobMeasurements::is_empty"
    )]
    pub measurements: crate::records::pairs::JobMeasurements,
    /// A task of a job array: which array, which task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<crate::records::array::ArrayTask>,
    /// Runs whose usage was accounted (`records/usage.rs`): the key of the last one's row.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub runs_accounted: u32,
    /// What its last ended run used; written to the usage table with every write of this
    /// record (the same row each time), so the row lands with the record that ended the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_usage: Option<crate::records::usage::RunUsage>,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Transitions kept per job: the first (its submission) and the latest ones.
pub const MAX_HISTORY: usize = 200;

/// Most retries a job may ask for.
pub const MAX_RETRIES: u32 = 100;

/// Backoff after the `failures`-th failed run: 1, 2, 4, ... seconds, at most 300.
pub fn retry_backoff_s(failures: u32) -> i64 {
    (1i64 << failures.saturating_sub(1).min(9)).min(300)
}

impl JobRecord {
    /// Whether it waits out the back-off after a failed run at `now_s` (queued, retried later).
    pub fn backing_off(&self, now_s: i64) -> bool {
        matches!(self.state, JobState::Queued) && self.retry_after_unix_s.is_some_and(|t| t > now_s)
    }

    /// A job just submitted (queued, nothing run yet), its submission recorded in its history.
    pub fn submitted(
        id: u32,
        tenant: &str,
        request: SubmitRequest,
        now_unix_ms: u64,
        token_sha256: String,
    ) -> Self {
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
            throughput_by_gpu_count: BTreeMap::new(),
            last_run_gpus: None,
            deadline_admitted: None,
            total_steps: None,
            history: History::default(),
            token_sha256,
            checkpoint_dir: None,
            retry_after_unix_s: None,
            history_omitted: 0,
            host_share: None,
            measurements: crate::records::pairs::JobMeasurements::default(),
            array: None,
            runs_accounted: 0,
            last_run_usage: None,
        };
        record.transition(JobState::Queued, "submitted", now_s);
        record
    }

    /// Unix seconds the current run started (`None` when it holds no GPUs, or a stopping run's
    /// start fell out of the kept history).
    pub fn current_run_started_unix_s(&self) -> Option<i64> {
        match &self.state {
            JobState::Running { started_unix_s, .. } => Some(*started_unix_s),
            JobState::Stopping { .. } => self
                .history
                .iter()
                .rev()
                .find(|t| t.to == StateKind::Running)
                .map(|t| t.at_unix_s),
            _ => None,
        }
    }

    /// Seconds it has held GPUs over all runs as of `now_unix_s`: [`JobRecord::executed_s`]
    /// counts ended runs only, so a job in its first run would read 0 s for as long as it runs.
    pub fn executed_s_at(&self, now_unix_s: i64) -> f64 {
        self.executed_s
            + self
                .current_run_started_unix_s()
                .map_or(0.0, |s| (now_unix_s - s).max(0) as f64)
    }

    /// Records a transition to `state`.
    pub fn transition(&mut self, state: JobState, why: impl Into<String>, now_unix_s: i64) {
        self.history.push(Transition {
            at_unix_s: now_unix_s,
            to: state.kind(),
            why: why.into(),
        });
        if self.history.len() > MAX_HISTORY {
            // Keep the submission and the latest transitions; count what was dropped.
            let drop = self.history.len() - MAX_HISTORY;
            self.history.drop_after_first(drop);
            self.history_omitted += drop as u64;
        }
        if state != JobState::Queued {
            // Why it waited no longer applies.
            self.pending_reason = None;
        }
        self.state = state;
    }

    /// The checkpoint directory: as fixed at submission, or for older records the requested
    /// one or `<data>/checkpoints/<id>`.
    pub fn checkpoint_dir(&self, data_dir: &std::path::Path) -> std::path::PathBuf {
        self.checkpoint_dir
            .as_ref()
            .or(self.request.checkpoint_dir.as_ref())
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| data_dir.join("checkpoints").join(self.id.to_string()))
    }
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
pub(crate) mod tests {
    use super::*;

    #[test]
    fn signal_names_parse() {
        assert_eq!(parse_signal("TERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("sigusr1"), Some(Signal::SIGUSR1));
        assert_eq!(parse_signal("KILL"), None);
    }
    use proptest::prelude::*;

    #[test]
    fn a_history_keeps_its_times_through_runs_drops_and_the_store() {
        let request: SubmitRequest =
            serde_json::from_str(r#"{"command": "train"}"#).expect("valid");
        let mut job = JobRecord::submitted(0, "team-a", request, 10_000, String::new());
        let scanned = |h: &History| {
            (
                h.last().map(|t| t.at_unix_s),
                h.iter()
                    .find(|t| t.to == StateKind::Running)
                    .map(|t| t.at_unix_s),
            )
        };
        let kept = |h: &History| (h.last_at_unix_s(), h.first_run_at_unix_s());
        assert_eq!(kept(&job.history), (Some(10), None));
        let running = |t: i64| JobState::Running {
            gpus: vec![0],
            pid: 7,
            started_unix_s: t,
        };
        job.transition(running(20), "started", 20);
        job.transition(JobState::Queued, "preempted", 30);
        assert_eq!(kept(&job.history), (Some(30), Some(20)));
        // Past the cap the first run's transition is dropped: the next run's time is kept.
        for i in 0..MAX_HISTORY as i64 {
            job.transition(running(40 + 2 * i), "started", 40 + 2 * i);
            job.transition(JobState::Queued, "preempted", 41 + 2 * i);
            assert_eq!(kept(&job.history), scanned(&job.history));
        }
        assert!(job.history_omitted > 0 && job.history.first_run_at_unix_s() > Some(20));
        // Written as the list of transitions, read back with the same times.
        let json = serde_json::to_value(&job.history).expect("json");
        assert!(json.is_array());
        let back: History = serde_json::from_value(json).expect("read back");
        assert_eq!(back, job.history);
        assert_eq!(kept(&back), scanned(&job.history));
        job.history.clear();
        assert_eq!(kept(&job.history), (None, None));
    }

    #[test]
    fn the_time_on_gpus_counts_the_run_going_on() {
        // Issue 33: `arbiter show` said "0 s on GPUs" for a job running for minutes.
        let request: SubmitRequest =
            serde_json::from_str(r#"{"command": "train"}"#).expect("valid");
        let mut job = JobRecord::submitted(0, "team-a", request, 1_000_000, String::new());
        assert_eq!(job.executed_s_at(2_000), 0.0);
        job.executed_s = 50.0;
        job.transition(
            JobState::Running {
                gpus: vec![0],
                pid: 7,
                started_unix_s: 1_100,
            },
            "started on GPUs 0",
            1_100,
        );
        assert_eq!(job.executed_s_at(1_160), 110.0);
        // Stopping: still on its GPUs, counted from the run's start in the history.
        job.transition(
            JobState::Stopping {
                gpus: vec![0],
                pid: 7,
                reason: StopReason::Preempted,
                since_unix_s: 1_200,
                signal_sent: true,
            },
            "preempted",
            1_200,
        );
        assert_eq!(job.executed_s_at(1_210), 160.0);
        // A clock behind the start adds nothing rather than subtracting.
        assert_eq!(job.executed_s_at(1_000), 50.0);
        job.transition(JobState::Queued, "preempted", 1_220);
        assert_eq!(job.executed_s_at(5_000), 50.0);
    }

    fn limits() -> Limits {
        Limits {
            gpus: vec![("a100".into(), 1)],
            cpus: 8,
            memory_gib: 32,
        }
    }

    pub(crate) fn with_stages(io_s: f64, cpu_s: f64, gpu_s: f64) -> SubmitRequest {
        let mut r: SubmitRequest = serde_json::from_str(r#"{"command": "train"}"#).expect("valid");
        r.iteration_stages = Some(StageTimes { io_s, cpu_s, gpu_s });
        r
    }

    /// A submission of `true` with `field` set to `value` (as JSON), on the cluster of
    /// [`limits`].
    fn with_field(field: &str, value: &str) -> SubmitRequest {
        let mut body = serde_json::json!({ "command": "true" });
        match field {
            "gpu_types" => body[field] = serde_json::json!([value]),
            "env key" => body["env"] = serde_json::json!({ value: "1" }),
            "env value" => body["env"] = serde_json::json!({ "X": value }),
            _ => body[field] = serde_json::json!(value),
        }
        serde_json::from_value(body).expect("a submission")
    }

    /// The fields of one line, as [`with_field`] names them, and the field an error names.
    const ONE_LINE_FIELDS: [(&str, &str); 9] = [
        ("name", "name"),
        ("priority_class", "priority_class"),
        ("client_request_id", "client_request_id"),
        ("job_type", "job_type"),
        ("gpu_types", "gpu_types"),
        ("env key", "env"),
        ("working_dir", "working_dir"),
        ("checkpoint_dir", "checkpoint_dir"),
        ("checkpoint_signal", "checkpoint_signal"),
    ];

    #[test]
    fn names_with_separators_direction_marks_and_invisible_characters_are_refused() {
        // The characters of the review (issue 26, item 8), once accepted in names.
        for c in [
            '\u{2028}', '\u{061c}', '\u{200b}', '\u{feff}', '\u{2029}', '\u{202e}', '\u{1b}', '\n',
        ] {
            let e = with_field("name", &format!("train{c}ing"))
                .validate(&limits())
                .expect_err("refused");
            assert_eq!(e.field, "name", "{e}");
            assert!(e.reason.ends_with(&c.escape_unicode().to_string()), "{e}");
        }
        assert_eq!(
            with_field("name", "résumé ✓ 训练 🚀 a-b_c (v2)").validate(&limits()),
            Ok(())
        );
    }

    #[test]
    fn commands_and_environment_values_keep_newlines_but_not_direction_controls() {
        let command = |c: &str| {
            serde_json::from_value::<SubmitRequest>(serde_json::json!({ "command": c }))
                .expect("parses")
        };
        assert_eq!(
            command("python prep.py\n\tpython train.py # 👩\u{200d}💻").validate(&limits()),
            Ok(())
        );
        for bad in [
            "rm -rf /tmp/x \u{202e}",
            "true\u{2028}false",
            "true\u{1b}[2K",
            "tr\u{0}ue",
        ] {
            assert_eq!(
                command(bad).validate(&limits()).map_err(|e| e.field),
                Err("command"),
                "{bad:?}"
            );
        }
        assert_eq!(
            with_field("env value", "\u{1b}[01;31m\nline").validate(&limits()),
            Ok(()),
            "raw escapes in exported values stay"
        );
        for bad in ["a\u{0}b", "a\u{2066}b"] {
            let e = with_field("env value", bad)
                .validate(&limits())
                .expect_err("refused");
            assert!(
                e.to_string()
                    .starts_with("env: the value of `X` contains the "),
                "{e}"
            );
        }
    }

    proptest! {
        /// Every field of one line refuses text holding any character of the general categories
        /// Cc, Cf, Zl, Zp, naming the field and the character (escaped).
        #[test]
        fn every_one_line_field_refuses_cc_cf_zl_zp(
            (field, named) in prop::sample::select(ONE_LINE_FIELDS.to_vec()),
            before in crate::security::text::tests::clean_text(),
            c in prop::sample::select(crate::security::text::tests::refused_characters()),
            after in "[a-z]{0,8}",
        ) {
            let e = with_field(field, &format!("{before}{c}{after}")).validate(&limits()).expect_err("refused");
            prop_assert_eq!(e.field, named);
            prop_assert!(e.reason.ends_with(&c.escape_unicode().to_string()), "{}", e);
        }

        /// Names and idempotency keys without such characters are accepted.
        #[test]
        fn names_and_keys_without_them_are_accepted(value in crate::security::text::tests::clean_text().prop_filter("non-empty", |v| !v.is_empty())) {
            for field in ["name", "client_request_id"] {
                prop_assert_eq!(with_field(field, &value).validate(&limits()), Ok(()), "{}", field);
            }
        }
    }

    #[test]
    fn iteration_stages_are_finite_non_negative_and_sum_to_a_plausible_iteration() {
        assert_eq!(with_stages(0.05, 0.1, 0.35).validate(&limits()), Ok(()));
        assert_eq!(
            with_stages(0.0, 0.0, 0.2).validate(&limits()),
            Ok(()),
            "a stage may be 0"
        );
        for (io, cpu, gpu) in [
            (f64::NAN, 0.1, 0.1),
            (0.1, f64::INFINITY, 0.1),
            (0.1, 0.1, f64::NEG_INFINITY),
            (-0.1, 0.1, 0.5),
            (0.0, -1e-9, 0.5),
            (0.0, 0.0, 0.0),
            (1e-300, 0.0, 0.0),
            (1e300, 0.0, 0.0),
            (86_400.0, 86_400.0, 0.0),
            (f64::MAX, f64::MAX, f64::MAX),
        ] {
            let e = with_stages(io, cpu, gpu)
                .validate(&limits())
                .expect_err("refused");
            assert_eq!(e.field, "iteration_stages", "({io}, {cpu}, {gpu}): {e}");
            assert!(e.to_string().starts_with("iteration_stages: "), "{e}");
        }
        // Over JSON: unknown keys, missing stages, strings, and numbers beyond f64 are refused
        // by the parser (the API answers 400 with serde's message, which names the key).
        for body in [
            r#"{"command": "x", "iteration_stages": {"io_s": 1, "cpu_s": 1, "gpu_s": 1, "net_s": 1}}"#,
            r#"{"command": "x", "iteration_stages": {"io_s": 1, "cpu_s": 1}}"#,
            r#"{"command": "x", "iteration_stages": {"io_s": "1", "cpu_s": 1, "gpu_s": 1}}"#,
            r#"{"command": "x", "iteration_stages": {"io_s": 1e400, "cpu_s": 1, "gpu_s": 1}}"#,
            r#"{"command": "x", "iteration_stages": {"io_s": NaN, "cpu_s": 1, "gpu_s": 1}}"#,
            r#"{"command": "x", "iteration_stages": {"io_s": null, "cpu_s": 1, "gpu_s": 1}}"#,
        ] {
            assert!(
                serde_json::from_str::<SubmitRequest>(body).is_err(),
                "{body}"
            );
        }
    }

    #[test]
    fn records_written_before_iteration_stages_still_load_and_new_ones_keep_them() {
        // A record as an Arbiter without the field wrote it.
        let old = r#"{"id": 3, "tenant": "t", "request": {"command": "train", "working_dir": null, "env": {}, "gpus": 1,
            "gpu_types": [], "cpus": 0, "memory_gib": 0, "priority": 0, "deadline_unix_s": null, "max_run_time_s": null,
            "expected_run_time_s": null, "checkpoint_dir": null, "checkpoint_signal": "TERM", "grace_s": 30, "max_retries": 2,
            "name": null}, "state": {"state": "queued"}, "submitted_unix_s": 1, "executed_s": 0.0, "runs": 0, "failures": 0,
            "preemptions": 0, "exit_code": null, "pending_reason": null, "progress": null, "history": [], "token_sha256": "x"}"#;
        let record: JobRecord = serde_json::from_str(old).expect("an old record loads");
        assert_eq!(record.request.iteration_stages, None);
        // Without stages nothing new is written (an older Arbiter still reads the record) ...
        assert!(
            !serde_json::to_string(&record)
                .expect("json")
                .contains("iteration_stages")
        );
        // ... with them they survive the round trip.
        let mut record = record;
        record.request.iteration_stages = Some(StageTimes {
            io_s: 0.1,
            cpu_s: 0.2,
            gpu_s: 0.3,
        });
        let back: JobRecord =
            serde_json::from_str(&serde_json::to_string(&record).expect("json")).expect("loads");
        assert_eq!(
            back.request.iteration_stages,
            record.request.iteration_stages
        );
    }
}
