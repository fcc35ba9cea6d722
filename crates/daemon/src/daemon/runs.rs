//! Runs: starting a job's run through the executor, asking it to stop, concluding it once the
//! executor reports that it ended.
//!
//! Memory changes only after the store has the change: a start is persisted (`running`, no
//! process id yet) before the process is spawned and before its GPUs are taken, a stop before the
//! signal. What already happened in the world — a process that started or ended — is recorded in
//! memory even when the store cannot take it at that moment; such jobs are marked dirty and
//! written once the store works again (a restart in between finds the truth through the run's
//! pid and exit files).

use crate::daemon::round::gate::Start;
use crate::daemon::round::hold::Hold;
use crate::daemon::{Daemon, DaemonError, State, Watched};
use crate::executor::RunSpec;
use crate::records::job::{JobRecord, JobState, StopReason};
use crate::records::view;
use arbiter_model::HostShare;
use std::path::PathBuf;

/// PATH for jobs whose environment sets none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

impl Daemon {
    /// CPU cores and memory (bytes) per node for a run of job `id` on `gpus` GPUs per node:
    /// what the job asked for, else the policy's share, else its node's GPU-proportional share.
    pub(crate) fn limits_for(
        &self,
        state: &State,
        id: u32,
        gpus_per_node: u32,
        host: Option<HostShare>,
    ) -> (f64, u64) {
        let job = &state.jobs[id as usize];
        let node = job
            .state
            .gpus()
            .and_then(|g| g.first())
            .and_then(|g| state.topology.node_of(*g))
            .and_then(|n| state.topology.cluster().node(n));
        let proportional = node.map(arbiter_model::proportional_share);
        let n = gpus_per_node.max(1) as f64;
        let cpus = match (job.request.cpus, host, proportional) {
            (c, _, _) if c > 0 => c as f64,
            (_, Some(h), _) if h.cpus_per_gpu > 0.0 => h.cpus_per_gpu * n,
            (_, _, Some(p)) => (p.cpus_per_gpu * n).max(1.0),
            _ => 1.0,
        };
        let memory_gib = match (job.request.memory_gib, host, proportional) {
            (m, _, _) if m > 0 => m as f64,
            (_, Some(h), _) if h.memory_per_gpu > 0.0 => h.memory_per_gpu * n,
            (_, _, Some(p)) => (p.memory_per_gpu * n).max(1.0),
            _ => 1.0,
        };
        (cpus, (memory_gib * (1u64 << 30) as f64) as u64)
    }

    /// Starts runs of queued jobs, each on its GPUs (free; global ids) with the policy's
    /// CPU/memory share. Persists every start (`running`, no run handle yet) in one transaction
    /// before launching any; on a store failure nothing changes and the error is returned. Then
    /// launches them in order and writes what the launches changed in one more transaction.
    /// Returns the jobs whose run started (a job whose tenant identity cannot be set up, or whose
    /// launch failed on the daemon's side, stays queued with the reason).
    pub(crate) fn start_runs(
        &self,
        state: &mut State,
        starts: Vec<Start>,
    ) -> Result<Vec<u32>, DaemonError> {
        let settings = &self.settings;
        let mut ready = Vec::with_capacity(starts.len());
        for start in starts {
            let tenant = state.jobs[start.id as usize].tenant.clone();
            match self.identity_for(state, &tenant) {
                Ok(identity) => ready.push((start, identity)),
                Err(e) => {
                    tracing::error!(job = start.id, tenant = %tenant, "cannot run the job as its tenant's identity: {e}");
                    crate::daemon::round::hold::set(
                        &mut state.jobs[start.id as usize],
                        &Hold::Identity(e.to_string()),
                    );
                }
            }
        }
        if ready.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now_s();
        // Persist the starts before acting: `running` with no run handle yet. If the daemon dies
        // before the handles are recorded, recovery asks the executor for the runs. (Changed in
        // memory under the lock and put back if the store refuses: no one sees it meanwhile.)
        let mut queued_host = Vec::with_capacity(ready.len());
        for (start, _) in &ready {
            let job = &mut state.jobs[start.id as usize];
            queued_host.push(job.host_share);
            job.state = JobState::Running {
                gpus: start.gpus.clone(),
                pid: 0,
                started_unix_s: now,
            };
            job.host_share = start.host;
        }
        let records: Vec<&JobRecord> = ready
            .iter()
            .map(|(start, _)| &state.jobs[start.id as usize])
            .collect();
        if let Err(e) = self.store.put_jobs(&records) {
            for ((start, _), host) in ready.iter().zip(queued_host) {
                let job = &mut state.jobs[start.id as usize];
                job.state = JobState::Queued;
                job.host_share = host;
            }
            return Err(e.into());
        }
        let mut started = Vec::with_capacity(ready.len());
        let mut changed = Vec::with_capacity(ready.len());
        // Each run's own token for progress reports; the daemon keeps only its hash, so a fresh
        // one is issued per run (and dies with the run).
        let mut tokens = crate::security::auth::new_tokens(ready.len()).into_iter();
        for ((Start { id, gpus, host }, identity), queued_host) in
            ready.into_iter().zip(queued_host)
        {
            let tenant = state.jobs[id as usize].tenant.clone();
            let job = &state.jobs[id as usize];
            let nodes = state.topology.devices(&gpus);
            let gpus_per_node = nodes
                .iter()
                .map(|n| n.devices.len() as u32)
                .max()
                .unwrap_or(0);
            let (cpus, memory_bytes) = self.limits_for(state, id, gpus_per_node, host);
            let checkpoint_dir = job.checkpoint_dir(&settings.data_dir);
            let working_dir = job
                .request
                .working_dir
                .as_ref()
                .map(PathBuf::from)
                .unwrap_or_else(|| settings.checkpoint_roots.tenant_area(&tenant));
            let mut env = job.request.env.clone();
            env.entry("PATH".into())
                .or_insert_with(|| DEFAULT_PATH.into());
            env.insert("ARBITER_JOB_ID".into(), id.to_string());
            env.insert("ARBITER_URL".into(), settings.public_url.clone());
            env.insert(
                "ARBITER_CHECKPOINT_DIR".into(),
                checkpoint_dir.display().to_string(),
            );
            env.insert("ARBITER_LEASE_S".into(), format!("{}", settings.round_s));
            env.insert("ARBITER_RUN".into(), (job.runs + 1).to_string());
            // An elastic job's run learns its GPU count, and whether it was resized.
            env.insert("ARBITER_GPUS".into(), gpus.len().to_string());
            if let Some(previous) = job.last_run_gpus {
                env.insert("ARBITER_PREVIOUS_GPUS".into(), previous.to_string());
            }
            env.insert(
                "ARBITER_CHECKPOINT_SIGNAL".into(),
                job.request.checkpoint_signal.clone(),
            );
            if let Some(task) = job.array {
                env.insert("ARBITER_ARRAY_JOB_ID".into(), task.array_id.to_string());
                env.insert("ARBITER_ARRAY_TASK_ID".into(), task.index.to_string());
                env.insert("ARBITER_ARRAY_TASK_COUNT".into(), task.tasks.to_string());
                // Under Slurm, also the names a Slurm array task has (scripts written for
                // `sbatch --array` read them).
                if self.executor.name() == "slurm" {
                    env.insert("SLURM_ARRAY_JOB_ID".into(), task.array_id.to_string());
                    env.insert("SLURM_ARRAY_TASK_ID".into(), task.index.to_string());
                    env.insert("SLURM_ARRAY_TASK_COUNT".into(), task.tasks.to_string());
                }
            }
            let token = tokens
                .next()
                .unwrap_or_else(crate::security::auth::new_token);
            env.insert("ARBITER_JOB_TOKEN".into(), token.clone());
            let gpu_type = gpus
                .first()
                .and_then(|g| state.topology.gpu_type_name(*g))
                .unwrap_or_default()
                .to_string();
            let run = RunSpec {
                job: id,
                run: job.runs + 1,
                tenant: tenant.clone(),
                command: job.request.command.clone(),
                working_dir,
                env,
                log_path: self.log_path(id),
                checkpoint_dir,
                identity,
                nodes,
                gpu_type,
                cpus_per_node: cpus,
                memory_bytes_per_node: memory_bytes,
                max_processes: identity.and(settings.max_processes_per_tenant),
                max_log_bytes: settings.max_log_bytes,
            };
            let first_start = job.runs == 0;
            let submitted_ms = job.submitted_unix_ms;
            let where_ = run
                .nodes
                .iter()
                .map(|n| {
                    format!(
                        "{}:{}",
                        n.node,
                        n.devices
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .collect::<Vec<_>>()
                .join(" ");
            match self.executor.launch(&run) {
                Ok(handle) => {
                    let job = &mut state.jobs[id as usize];
                    job.runs += 1;
                    job.last_run_gpus = Some(gpus.len() as u32);
                    job.token_sha256 = crate::security::auth::sha256_hex(&token);
                    let who = identity
                        .map(|i| format!(" as uid {}", i.uid))
                        .unwrap_or_default();
                    job.transition(
                        JobState::Running {
                            gpus,
                            pid: handle,
                            started_unix_s: now,
                        },
                        format!("started on {where_}{who}"),
                        now,
                    );
                    tracing::info!(job = id, tenant = %job.tenant, run = job.runs, handle, on = %where_, "started{who}");
                    state.counters.runs_started += 1;
                    if first_start {
                        state.counters.start_latency_ms_sum +=
                            self.now_ms().saturating_sub(submitted_ms);
                        state.counters.start_latency_count += 1;
                    }
                    state.watched.insert(
                        id,
                        Watched {
                            handle,
                            kill_at_ms: None,
                            sigkilled: false,
                        },
                    );
                    started.push(id);
                }
                Err(e) => {
                    // The daemon's side failed (writing the launch spec or the log, starting the
                    // wrapper, sbatch: a full disk, say), not the job: it stays queued, its retries
                    // intact. (A job that cannot start itself — a bad working directory — fails
                    // inside its run and is counted like any other failed run.)
                    tracing::warn!(job = id, "could not start a run: {e}");
                    let back = &mut state.jobs[id as usize];
                    back.state = JobState::Queued;
                    back.host_share = queued_host;
                    crate::daemon::round::hold::set(back, &Hold::StartFailed(e.to_string()));
                }
            }
            changed.push(id);
        }
        self.record_all(state, &changed);
        Ok(started)
    }

    /// Sends a running job its checkpoint signal and marks it stopping: persisted first, then
    /// signalled, then recorded as signalled. With `force` (its owner cancels it) a store that
    /// cannot be written does not stop it: the change is written once the store works again.
    pub(crate) fn stop(
        &self,
        state: &mut State,
        id: u32,
        reason: StopReason,
        force: bool,
    ) -> Result<(), DaemonError> {
        let job = &state.jobs[id as usize];
        let JobState::Running { gpus, pid, .. } = job.state.clone() else {
            return Ok(());
        };
        let now = self.now_s();
        let mut stopping = job.clone();
        stopping.transition(
            JobState::Stopping {
                gpus,
                pid,
                reason,
                since_unix_s: now,
                signal_sent: false,
            },
            reason.as_str(),
            now,
        );
        match self.store.put_jobs(&[&stopping]) {
            Ok(()) => {}
            Err(e) if force => {
                tracing::warn!(
                    job = id,
                    "stopping although the store refused the change (written later): {e}"
                );
                state.dirty.insert(id);
            }
            Err(e) => return Err(e.into()),
        }
        let grace_s = stopping.request.effective_grace_s();
        tracing::info!(
            job = id,
            handle = pid,
            "stopping ({}): {} now, killed after {grace_s} s",
            reason.as_str(),
            stopping.request.checkpoint_signal
        );
        state.jobs[id as usize] = stopping;
        self.send_checkpoint_signal(&state.jobs[id as usize], pid);
        if let JobState::Stopping { signal_sent, .. } = &mut state.jobs[id as usize].state {
            *signal_sent = true;
        }
        self.record(state, id);
        if let Some(w) = state.watched.get_mut(&id) {
            w.kill_at_ms = Some(self.now_ms() + grace_s * 1000);
        }
        Ok(())
    }

    /// Writes job `id` as it is in memory; if the store refuses, remembers to write it later.
    pub(crate) fn record(&self, state: &mut State, id: u32) {
        self.record_all(state, &[id]);
    }

    /// Writes jobs `ids` as they are in memory, in one transaction; if the store refuses,
    /// remembers to write them later.
    pub(crate) fn record_all(&self, state: &mut State, ids: &[u32]) {
        if ids.is_empty() {
            return;
        }
        let records: Vec<&JobRecord> = ids.iter().map(|&id| &state.jobs[id as usize]).collect();
        if let Err(e) = self.store.put_jobs(&records) {
            tracing::warn!(jobs = ?ids, "could not persist (will retry): {e}");
            state.dirty.extend(ids.iter().copied());
        }
        for &id in ids {
            let spec = view::spec_of(
                &state.jobs[id as usize],
                state.topology.cluster(),
                &self.settings.priority_classes,
            );
            state.specs[id as usize] = spec;
        }
    }

    /// Writes the jobs the store refused earlier.
    pub(crate) fn flush_dirty(&self, state: &mut State) {
        if state.dirty.is_empty() {
            return;
        }
        let records: Vec<&JobRecord> = state
            .dirty
            .iter()
            .map(|&id| &state.jobs[id as usize])
            .collect();
        if self.store.put_jobs(&records).is_ok() {
            tracing::info!(
                "persisted {} job changes the store had refused",
                state.dirty.len()
            );
            state.dirty.clear();
        }
    }

    /// Job `id`'s current run ended with `code` (None: killed, or unknown).
    pub(crate) fn run_ended(&self, state: &mut State, id: u32, code: Option<i32>) {
        state.watched.remove(&id);
        state.run_ended_since_check = true;
        state
            .ended_tenants
            .insert(state.jobs[id as usize].tenant.clone());
        if state.jobs[id as usize].state.gpus().is_none() {
            return;
        }
        let now = self.now_s();
        self.account_ended_run(state, id, now);
        let job = &mut state.jobs[id as usize];
        conclude(job, code, now, false);
        job.host_share = None;
        tracing::info!(job = id, tenant = %job.tenant, code = ?code, "run ended: {} ({})", job.state.name(), job.history.last().map_or("", |t| t.why.as_str()));
        self.record(state, id);
        if state.jobs[id as usize].state.is_terminal() {
            state.job_ended_for_good(id);
            let spec = &state.specs[id as usize];
            let finished = view::finished_of(&state.jobs[id as usize], spec);
            let now = arbiter_model::SimTime::from_ms(self.now_ms());
            match state.policy.as_mut() {
                Some(policy) => policy.job_finished(spec, &finished, now),
                // The agent hears of it before its next observation (it is not asked while the
                // state is locked). Bounded: an agent that is never asked again must not grow it.
                None if state.agent_finished.len()
                    < crate::daemon::round::decide::MAX_AGENT_BACKLOG =>
                {
                    state.agent_finished.push((spec.clone(), finished, now))
                }
                None => {}
            }
        }
    }
}

/// How a run that has ended (`code`: its exit code, `None` when killed or unknown) leaves its
/// job — the same rules whether the daemon saw it end or learned it after a restart
/// (`while_down`): retries count, time limits hold.
pub(crate) fn conclude(job: &mut JobRecord, code: Option<i32>, now: i64, while_down: bool) {
    if job.state.gpus().is_none() {
        return;
    }
    let started = job.current_run_started_unix_s();
    job.executed_s = job.executed_s_at(now);
    job.exit_code = code;
    let over_limit = match (started, job.request.max_run_time_s) {
        (Some(s), Some(limit)) => {
            i64::try_from(limit).is_ok_and(|limit| now.saturating_sub(s) >= limit)
        }
        _ => false,
    };
    let when = if while_down {
        " (ended while the daemon was down)"
    } else {
        ""
    };
    let (next, why) = match (&job.state, code) {
        (
            JobState::Stopping {
                reason: StopReason::Preempted,
                ..
            },
            _,
        ) => {
            job.preemptions += 1;
            (
                JobState::Queued,
                "preempted; requeued to resume from its checkpoint".to_string(),
            )
        }
        (
            JobState::Stopping {
                reason: StopReason::Cancelled,
                ..
            },
            _,
        ) => (JobState::Cancelled, "cancelled".into()),
        (
            JobState::Stopping {
                reason: StopReason::TimedOut,
                ..
            },
            _,
        ) => (JobState::Failed, "over its max_run_time_s".into()),
        (_, Some(0)) => (JobState::Succeeded, format!("exit code 0{when}")),
        (_, _) if over_limit => (JobState::Failed, format!("over its max_run_time_s{when}")),
        (_, code) => {
            job.failures += 1;
            // The shell's codes for a command it could not run: the log says which (and, for
            // a tenant's own uid, which directory or file stops it: `executor::access`).
            let what = match code {
                None => "killed".to_string(),
                Some(c @ 126) => {
                    format!("exit code {c} (the command could not be executed: see its log)")
                }
                Some(c @ 127) => format!(
                    "exit code {c} (the command was not found, or not reachable by the job's user: see its log)"
                ),
                Some(c) => format!("exit code {c}"),
            };
            if job.failures > job.request.max_retries {
                (JobState::Failed, format!("{what}{when}; retries used up"))
            } else {
                let backoff = crate::records::job::retry_backoff_s(job.failures);
                job.retry_after_unix_s = Some(now + backoff);
                (
                    JobState::Queued,
                    format!(
                        "{what}{when}; retry {} of {} in {backoff} s",
                        job.failures, job.request.max_retries
                    ),
                )
            }
        }
    };
    job.transition(next, why, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::SubmitRequest;

    fn running(request: &str, started: i64) -> JobRecord {
        let request: SubmitRequest = serde_json::from_str(request).expect("valid");
        let mut job = JobRecord::submitted(0, "t", request, 0, String::new());
        job.transition(
            JobState::Running {
                gpus: vec![0],
                pid: 42,
                started_unix_s: started,
            },
            "started",
            started,
        );
        job
    }

    #[test]
    fn a_run_that_ended_while_the_daemon_was_down_counts_against_its_retries() {
        let mut job = running(r#"{"command": "exit 7", "max_retries": 0}"#, 100);
        conclude(&mut job, Some(7), 110, true);
        assert_eq!(job.state, JobState::Failed, "max_retries 0: no second run");
        assert!(
            job.history
                .last()
                .expect("why")
                .why
                .contains("retries used up")
        );
        let mut job = running(r#"{"command": "exit 7", "max_retries": 1}"#, 100);
        conclude(&mut job, Some(7), 110, true);
        assert_eq!((job.state.clone(), job.failures), (JobState::Queued, 1));
        assert_eq!(
            job.retry_after_unix_s,
            Some(111),
            "the first retry waits 1 s"
        );
    }

    #[test]
    fn retries_back_off_and_history_stays_bounded() {
        assert_eq!(
            (1..=10)
                .map(crate::records::job::retry_backoff_s)
                .collect::<Vec<_>>(),
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300]
        );
        let mut job = running(r#"{"command": "exit 1", "max_retries": 100}"#, 0);
        for t in 0..1000 {
            job.transition(JobState::Queued, "retry", t);
        }
        assert_eq!(job.history.len(), crate::records::job::MAX_HISTORY);
        assert_eq!(job.history[0].why, "submitted");
        assert_eq!(
            job.history_omitted,
            1002 - crate::records::job::MAX_HISTORY as u64
        );
    }

    #[test]
    fn a_command_the_shell_could_not_run_says_so_in_the_history_and_points_at_the_log() {
        for (code, words) in [
            (126, "could not be executed"),
            (127, "not reachable by the job's user"),
        ] {
            let mut job = running(
                r#"{"command": "/root/venv/bin/tool", "max_retries": 0}"#,
                100,
            );
            conclude(&mut job, Some(code), 101, false);
            let why = &job.history.last().expect("a transition").why;
            assert!(
                why.contains(&format!("exit code {code}"))
                    && why.contains(words)
                    && why.contains("see its log"),
                "{why}"
            );
        }
    }

    #[test]
    fn a_run_over_its_time_limit_while_the_daemon_was_down_fails() {
        let mut job = running(r#"{"command": "sleep 100", "max_run_time_s": 2}"#, 100);
        conclude(&mut job, None, 105, true);
        assert_eq!(job.state, JobState::Failed);
        assert!(
            job.history
                .last()
                .expect("why")
                .why
                .contains("max_run_time_s")
        );
        assert_eq!(job.executed_s, 5.0);
    }
}
