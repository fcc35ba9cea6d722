//! A policy that lives outside Rust (Decima-style learned policies, issue 12 item 6): a program
//! the simulator starts (`sh -c CMD`) and talks to in JSON lines on its stdin and stdout.
//!
//! Protocol (version 1), one JSON object per line:
//!
//! * Arbiter → agent, once: `{"type": "start", "protocol": 1, "nodes": [{"id": 0, "gpus": 8,
//!   "gpu_type": "V100"}, ...]}` (no answer);
//! * Arbiter → agent, at every scheduling point: `{"type": "observation", "time_s": T,
//!   "reward": R, "free_gpus": [per node], "jobs": [{"id", "tenant", "gpus", "submit_s",
//!   "running", "executed_s", "attained_gpu_s", "duration_s", "remaining_s"}, ...]}` — `reward`
//!   is −(jobs in the system at the previous point) × (seconds since it), so the sum over an
//!   episode is −Σ JCT, the usual objective of a learned scheduler; `duration_s` and
//!   `remaining_s` are oracle values, as SJF/SRTF use (an agent that should not know them
//!   ignores them);
//! * agent → Arbiter, one line per observation: `{"order": [job ids, first served first]}`, and
//!   optionally `"preempt": true` (running jobs compete again and may be stopped; default: they
//!   keep their GPUs). Jobs it leaves out come after, in submission order. The order goes
//!   through the same greedy placement as the built-in ordered policies, so whatever the agent
//!   answers, the decision fits the cluster;
//! * Arbiter → agent, when the episode ends: `{"type": "end", "time_s": T, "reward": R}`; then
//!   its stdin closes and it should exit (it is killed after a second).
//!
//! An answer that is not such an object, names a job that is not waiting or running, or names
//! one twice is an error naming the problem; so is no answer within the time limit, or an agent
//! that exits. Never a hang: every read has the deadline.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, schedule_changes_in_order};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{Decision, SimTime};

/// `external`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("external", Family::Events, "an external program orders the jobs: JSON lines over a pipe (policy.external.command, --policy-cmd), for learned policies such as Decima (SIGCOMM'19)")
    .paper("Decima (SIGCOMM'19) interface")
    .detail("a program outside Rust orders the jobs, answering one JSON line per observation (`policy.external.command`; `arbiter simulate --policy-cmd`): learned policies such as Decima's; see [External policies](#external-policies-a-learned-scheduler-outside-rust)");

/// Builds `external`: starts the agent its table names (required).
pub fn build(
    external: &Option<ExternalConfig>,
    placing: Placing,
) -> Result<ExternalPolicy, PolicyError> {
    let agent = external.as_ref().ok_or_else(|| PolicyError::Config("policy `external` needs the agent's command ([policy.external] command = \"...\"; arbiter simulate --policy-cmd)".into()))?;
    ExternalPolicy::spawn(
        &agent.command,
        agent.timeout,
        GreedyOptions::fit_first(placing),
    )
}

/// How to run an agent (scenario table `[policy.external]`: `command`, `timeout_s`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalConfig {
    /// The command, run with `sh -c` (relative paths in it resolve against the directory the
    /// simulation is started in).
    pub command: String,
    /// Most time one answer may take (10 s unless given).
    #[serde(rename = "timeout_s", default = "default_timeout", with = "seconds")]
    pub timeout: Duration,
}

/// How long an answer may take unless the configuration says.
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

/// A duration as a positive number of seconds.
mod seconds {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "timeout_s must be a positive number of seconds, got {secs}"
                ))
            })
    }
}

/// The agent's answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    order: Vec<u32>,
    #[serde(default)]
    preempt: bool,
}

/// A policy answered by an external program (see the module docs).
pub struct ExternalPolicy {
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<std::io::Result<String>>,
    timeout: Duration,
    options: GreedyOptions,
    started: bool,
    flow: Flowtime,
}

/// The reward of a learned scheduler: −(jobs in the system) × seconds, counted from one
/// scheduling point to the next and through the completions in between, so that its sum over an
/// episode is −Σ JCT.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flowtime {
    /// The last time the reward was counted to, and the jobs in the system since then.
    previous: Option<(SimTime, usize)>,
    /// Reward counted since the last scheduling point (jobs that ended in between).
    pending: f64,
}

impl Flowtime {
    /// Counts −(jobs in the system) × seconds up to `now` into the pending reward; from then on
    /// `jobs` are in the system (`None`: one fewer, a job ended).
    fn count_to(&mut self, now: SimTime, jobs: Option<usize>) {
        if let Some((at, n)) = self.previous {
            self.pending -= n as f64 * now.as_ms().saturating_sub(at.as_ms()) as f64 / 1000.0;
            self.previous = Some((now, jobs.unwrap_or(n.saturating_sub(1))));
        }
    }

    /// A scheduling point at `now` with `jobs` in the system: the reward since the last one.
    pub fn point(&mut self, now: SimTime, jobs: usize) -> f64 {
        self.count_to(now, Some(jobs));
        self.previous = Some((now, jobs));
        std::mem::take(&mut self.pending)
    }

    /// A job ended at `now` (its time in the system counts until then).
    pub fn finished(&mut self, now: SimTime) {
        self.count_to(now, None);
    }

    /// The reward since the last scheduling point, and that point's time (`None` before the
    /// first): what the episode's end reports.
    pub fn end(&self) -> Option<(SimTime, f64)> {
        self.previous.map(|(at, _)| (at, self.pending))
    }
}

impl std::fmt::Debug for ExternalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalPolicy")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl ExternalPolicy {
    /// Starts `command` (with `sh -c`); each answer must come within `timeout`; decisions place
    /// as `options` say.
    pub fn spawn(
        command: &str,
        timeout: Duration,
        options: GreedyOptions,
    ) -> Result<Self, PolicyError> {
        use std::os::unix::process::CommandExt;
        // Its own process group: at the end the whole agent goes, not only its shell.
        let mut child = Command::new("/bin/sh")
            .args(["-c", command])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                PolicyError::Config(format!("external policy `{command}`: cannot start it: {e}"))
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| {
            PolicyError::Config(format!("external policy `{command}`: no stdout"))
        })?;
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("external-policy".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    if send.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| PolicyError::Config(format!("external policy `{command}`: {e}")))?;
        Ok(ExternalPolicy {
            command: command.to_string(),
            child,
            stdin,
            lines,
            timeout,
            options,
            started: false,
            flow: Flowtime::default(),
        })
    }

    fn fail(&self, what: impl std::fmt::Display) -> PolicyError {
        PolicyError::Config(format!("external policy `{}`: {what}", self.command))
    }

    fn send(&mut self, message: &serde_json::Value) -> Result<(), PolicyError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| PolicyError::Config("external policy: its input is closed".into()))?;
        let line = format!("{message}\n");
        let sent = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush());
        sent.map_err(|e| match self.exit_status() {
            Some(status) => self.fail(format_args!("it exited ({status})")),
            None => self.fail(format_args!("it stopped reading its input: {e}")),
        })
    }

    fn receive(&mut self) -> Result<String, PolicyError> {
        match self.lines.recv_timeout(self.timeout) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(e)) => Err(self.fail(format_args!("cannot read its answer: {e}"))),
            Err(RecvTimeoutError::Timeout) => {
                Err(self.fail(format_args!("no answer within {:?}", self.timeout)))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self
                    .exit_status()
                    .map_or(String::new(), |s| format!(" ({s})"));
                Err(self.fail(format_args!("it exited without answering{status}")))
            }
        }
    }

    /// How the agent ended, once it has (waiting a moment for it: its output closes first).
    fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        for _ in 0..50 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

/// What a policy outside Rust sees at a scheduling point (the external protocol's observation,
/// less the reward; Python policies get the same): the time, free GPUs per node, and every
/// waiting or running job's features.
#[derive(Debug, serde::Serialize)]
pub struct Observation<'a> {
    /// Seconds of virtual time.
    pub time_s: f64,
    /// Free GPUs per node, in node order.
    pub free_gpus: Vec<u32>,
    /// The waiting and running jobs, in the view's order.
    pub jobs: Vec<JobFeatures<'a>>,
}

/// One job as a policy outside Rust sees it (`duration_s` and `remaining_s` are oracle values).
#[derive(Debug, serde::Serialize)]
pub struct JobFeatures<'a> {
    /// The job's id, which an order names.
    pub id: u32,
    /// Its tenant.
    pub tenant: &'a str,
    /// GPUs it asks for.
    pub gpus: u32,
    /// Submission time, in seconds.
    pub submit_s: f64,
    /// Whether it holds GPUs now.
    pub running: bool,
    /// Seconds it has run.
    pub executed_s: f64,
    /// GPU-seconds it has had.
    pub attained_gpu_s: f64,
    /// Its run time in the trace (oracle).
    pub duration_s: f64,
    /// Seconds of work left (oracle).
    pub remaining_s: f64,
}

impl<'a> Observation<'a> {
    /// The observation of `view` at `now`.
    pub fn of(view: &'a SchedulerView<'_>, now: SimTime) -> Self {
        let mut free: Vec<u32> = view.cluster.nodes.iter().map(|n| n.gpus).collect();
        for job in view.jobs {
            if let Some(p) = job.placement() {
                for (node, gpus) in &p.slots {
                    if let Some(f) = free.get_mut(node.index()) {
                        *f = f.saturating_sub(*gpus);
                    }
                }
            }
        }
        let jobs = view
            .jobs
            .iter()
            .map(|j| {
                let spec = view.spec(j);
                JobFeatures {
                    id: j.id.0,
                    tenant: spec.tenant.as_str(),
                    gpus: j.gpus,
                    submit_s: j.submit.as_ms() as f64 / 1000.0,
                    running: j.is_running(),
                    executed_s: j.executed_s_at(now),
                    attained_gpu_s: j.attained_gpu_s_at(now),
                    duration_s: spec.run_time_s,
                    remaining_s: j.remaining_s_at(now),
                }
            })
            .collect();
        Observation {
            time_s: now.as_ms() as f64 / 1000.0,
            free_gpus: free,
            jobs,
        }
    }
}

/// An order that names a job it may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// A job that is neither waiting nor running.
    #[error("its order names job {0}, which is not waiting or running")]
    Unknown(u32),
    /// A job named twice.
    #[error("its order names job {0} twice")]
    Twice(u32),
}

/// The decision for an order of job ids (first served first; jobs left out after, in submission
/// order) placed greedily with `options` — running jobs compete again when `preempt` — as the
/// built-in ordered policies place theirs (`schedule_changes_in_order`: the decision of
/// `schedule_in_order`, by changes where it can be): whatever the order, the decision fits.
pub fn decide_in_order(
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    order: &[u32],
    preempt: bool,
) -> Result<Decision, OrderError> {
    decide_in_order_reusing(
        view,
        now,
        options,
        order,
        preempt,
        &mut OrderScratch::default(),
    )
}

/// Memory [`decide_in_order_reusing`] keeps from one decision to the next: positions by job id,
/// all zero between calls (a caller deciding at every scheduling point of a large workload would
/// otherwise allocate and clear a table of every job id each time).
#[derive(Debug, Default)]
pub struct OrderScratch {
    position: Vec<u32>,
}

/// [`decide_in_order`], with its table of positions kept in `scratch`.
pub fn decide_in_order_reusing(
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    order: &[u32],
    preempt: bool,
    scratch: &mut OrderScratch,
) -> Result<Decision, OrderError> {
    // Positions by id (1-based; 0: not in the order), dense: a lookup per job, no hashing (a
    // view of thousands of jobs is built and decided at every scheduling point). Ids index
    // `specs`, so the table covers every job of the workload.
    let position = &mut scratch.position;
    if position.len() < view.specs.len() {
        position.resize(view.specs.len(), 0);
    }
    let decided = rank(view, order, position).map(|()| {
        let options = GreedyOptions {
            preemptive: preempt,
            head_of_line_blocking: false,
            ..options
        };
        // One integer per job, cheaper to compare than a pair in the placement's heap: the
        // place in the order (below 2^32), or for jobs left out 2^32 + the submission time in ms
        // (after every listed job, in submission order; ties go by id either way).
        let key = |j: &arbiter_model::ActiveJob| match position.get(j.id.0 as usize) {
            Some(&p) if p != 0 => u64::from(p - 1),
            _ => (1u64 << 32).saturating_add(j.submit.as_ms()),
        };
        schedule_changes_in_order(view, now, options, key)
    });
    // Back to all zero for the next call, whatever happened.
    for &id in order {
        if let Some(slot) = position.get_mut(id as usize) {
            *slot = 0;
        }
    }
    decided
}

/// Writes each job's 1-based place in `order` into `position` (zero and large enough for every
/// active job's id), or names a job that `order` may not name.
fn rank(view: &SchedulerView<'_>, order: &[u32], position: &mut [u32]) -> Result<(), OrderError> {
    for (i, &id) in order.iter().enumerate() {
        let slot = position
            .get_mut(id as usize)
            .ok_or(OrderError::Unknown(id))?;
        if *slot != 0 {
            return Err(OrderError::Twice(id));
        }
        *slot = i as u32 + 1;
    }
    if !order.is_empty()
        && view
            .jobs
            .iter()
            .filter(|j| position.get(j.id.0 as usize).is_some_and(|&p| p != 0))
            .count()
            < order.len()
    {
        let known: std::collections::HashSet<u32> = view.jobs.iter().map(|j| j.id.0).collect();
        let unknown = order
            .iter()
            .find(|id| !known.contains(id))
            .copied()
            .unwrap_or_default();
        return Err(OrderError::Unknown(unknown));
    }
    Ok(())
}

impl Policy for ExternalPolicy {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        if !self.started {
            let nodes: Vec<serde_json::Value> = view
                .cluster
                .nodes
                .iter()
                .map(|n| json!({ "id": n.id.0, "gpus": n.gpus, "gpu_type": view.cluster.gpu_type_names.get(n.gpu_type.index()) }))
                .collect();
            self.send(&json!({ "type": "start", "protocol": 1, "nodes": nodes }))?;
            self.started = true;
        }
        let features = Observation::of(view, now);
        let reward = self.flow.point(now, view.jobs.len());
        let observation = json!({ "type": "observation", "time_s": features.time_s, "reward": reward, "free_gpus": features.free_gpus, "jobs": features.jobs });
        self.send(&observation)?;
        let line = self.receive()?;
        let answer: Answer = serde_json::from_str(&line).map_err(|e| {
            self.fail(format_args!(
                "answer {line:?} is not {{\"order\": [job ids], \"preempt\": bool}}: {e}"
            ))
        })?;
        decide_in_order(view, now, self.options, &answer.order, answer.preempt)
            .map_err(|e| self.fail(e))
    }

    fn job_finished(
        &mut self,
        _spec: &arbiter_model::JobSpec,
        _job: &arbiter_model::ActiveJob,
        now: SimTime,
    ) {
        // Kept for the next observation (or the end): the job counted in the system until now.
        self.flow.finished(now);
    }
}

impl Drop for ExternalPolicy {
    fn drop(&mut self) {
        if self.started
            && let Some((at, reward)) = self.flow.end()
        {
            // The episode ends with the last job: the reward since the last observation.
            let end =
                json!({ "type": "end", "time_s": at.as_ms() as f64 / 1000.0, "reward": reward });
            let _ = self.send(&end);
        }
        // Closing its input tells it the episode is over.
        self.stdin = None;
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{active, cluster, spec_with};

    #[test]
    fn a_reused_scratch_decides_as_a_fresh_one_even_after_a_refused_order() {
        let cluster = cluster(2, 4);
        let specs: Vec<_> = (0..6)
            .map(|i| spec_with(i, u64::from(i), 1 + i % 3, 100.0))
            .collect();
        let jobs = active(&specs, &[0, 1, 2, 3, 4, 5], &Decision::default());
        let view = SchedulerView {
            cluster: &cluster,
            jobs: &jobs,
            specs: &specs,
            current: None,
        };
        let options = GreedyOptions::fit_first(Placing {
            strategy: crate::PlacementStrategy::Consolidated,
            keep_placements: false,
        });
        let mut scratch = OrderScratch::default();
        for order in [[5, 4, 3].as_slice(), &[2, 0], &[]] {
            // A refused order first: the scratch must be clean after it.
            assert_eq!(
                decide_in_order_reusing(
                    &view,
                    SimTime::ZERO,
                    options,
                    &[order.first().copied().unwrap_or(1), 1, 1],
                    false,
                    &mut scratch
                )
                .err(),
                Some(OrderError::Twice(1))
            );
            assert_eq!(
                decide_in_order_reusing(
                    &view,
                    SimTime::ZERO,
                    options,
                    &[3, 42],
                    false,
                    &mut scratch
                )
                .err(),
                Some(OrderError::Unknown(42))
            );
            let reused =
                decide_in_order_reusing(&view, SimTime::ZERO, options, order, false, &mut scratch)
                    .expect("decides");
            assert_eq!(
                reused,
                decide_in_order(&view, SimTime::ZERO, options, order, false).expect("decides")
            );
            assert!(scratch.position.iter().all(|&p| p == 0));
        }
        // Listed jobs first in the order given, then the rest by submission: 5 (3 GPUs), 4 (2),
        // then 0 (1) and 1 (2) fill the 8 GPUs.
        let decision =
            decide_in_order_reusing(&view, SimTime::ZERO, options, &[5, 4], false, &mut scratch)
                .expect("decides");
        let started: Vec<u32> = decision.run.iter().map(|a| a.job.0).collect();
        assert_eq!(started, [5, 4, 0, 1]);
    }
}
