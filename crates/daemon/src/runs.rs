//! Runs: starting a job's run, asking it to stop, noticing that it ended.
//!
//! Memory changes only after the store has the change: a start is persisted (`running`, no
//! process id yet) before the process is spawned and before its GPUs are taken, a stop before the
//! signal. What already happened in the world — a process that started or ended — is recorded in
//! memory even when the store cannot take it at that moment; such jobs are marked dirty and
//! written once the store works again (a restart in between finds the truth through the run's
//! pid and exit files).

use crate::daemon::{unix_ms, unix_s, Daemon, DaemonError, State, Watched};
use crate::executor::{self, Launch};
use crate::job::{JobRecord, JobState, StopReason};
use crate::view;
use arbiter_model::HostShare;
use nix::sys::signal::Signal;
use std::path::PathBuf;
use std::time::Duration;

/// PATH for jobs whose environment sets none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

impl Daemon {
    /// Path of a run file of job `id` (`pid`, `exit`) in the daemon's private `runs/`.
    pub(crate) fn run_file(&self, id: u32, ext: &str) -> PathBuf {
        self.settings.data_dir.join("runs").join(format!("{id}.{ext}"))
    }

    /// Starts a run of queued job `id` on `gpus` (free), with the policy's CPU/memory share.
    /// Persists `running` before spawning; on a store failure nothing changes and the error is
    /// returned. A job whose tenant identity cannot be set up stays queued with the reason.
    pub(crate) fn start_run(&self, state: &mut State, id: u32, gpus: Vec<u32>, host: Option<HostShare>) -> Result<(), DaemonError> {
        let settings = &self.settings;
        let tenant = state.jobs[id as usize].tenant.clone();
        let identity = match self.identity_for(state, &tenant) {
            Ok(identity) => identity,
            Err(e) => {
                tracing::error!(job = id, tenant = %tenant, "cannot run the job as its tenant's identity: {e}");
                state.jobs[id as usize].pending_reason = Some(format!("cannot run as tenant {tenant}'s identity: {e}"));
                return Ok(());
            }
        };
        let job = &state.jobs[id as usize];
        let checkpoint_dir = job.checkpoint_dir(&settings.data_dir);
        let working_dir = job.request.working_dir.as_ref().map(PathBuf::from).unwrap_or_else(|| settings.checkpoint_roots.tenant_area(&tenant));
        let mut env = job.request.env.clone();
        env.entry("PATH".into()).or_insert_with(|| DEFAULT_PATH.into());
        let visible: Vec<String> = gpus.iter().map(u32::to_string).collect();
        env.insert("CUDA_VISIBLE_DEVICES".into(), visible.join(","));
        // GPU indices come from nvidia-smi, which numbers GPUs in PCI bus order; CUDA's default
        // order (fastest first) differs on machines with mixed GPUs.
        env.insert("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into());
        env.insert("ARBITER_JOB_ID".into(), id.to_string());
        env.insert("ARBITER_URL".into(), settings.public_url.clone());
        env.insert("ARBITER_CHECKPOINT_DIR".into(), checkpoint_dir.display().to_string());
        env.insert("ARBITER_LEASE_S".into(), format!("{}", settings.round_s));
        env.insert("ARBITER_RUN".into(), (job.runs + 1).to_string());
        env.insert("ARBITER_CHECKPOINT_SIGNAL".into(), job.request.checkpoint_signal.clone());
        // The job's own token for progress reports; the daemon keeps only its hash, so a fresh
        // one is issued per run (and dies with the run).
        let token = crate::auth::new_token();
        env.insert("ARBITER_JOB_TOKEN".into(), token.clone());
        // CPU and memory limits: what the job asked for, else the policy's share, else its
        // GPU-proportional share.
        let total_gpus: u32 = settings.gpus.iter().map(|(_, n)| n).sum::<u32>().max(1);
        let share = gpus.len() as f64 / total_gpus as f64;
        let n = gpus.len() as f64;
        let cpus = match (job.request.cpus, host) {
            (c, _) if c > 0 => c as f64,
            (_, Some(h)) if h.cpus_per_gpu > 0.0 => h.cpus_per_gpu * n,
            _ => (settings.cpus as f64 * share).max(1.0),
        };
        let memory_gib = match (job.request.memory_gib, host) {
            (m, _) if m > 0 => m as f64,
            (_, Some(h)) if h.memory_per_gpu > 0.0 => h.memory_per_gpu * n,
            _ => (settings.memory_gib as f64 * share).max(1.0),
        };
        let cgroup = settings.cgroups.as_ref().and_then(|cg| match cg.prepare(id, cpus, (memory_gib * (1u64 << 30) as f64) as u64) {
            Ok(dir) => Some(dir),
            Err(e) => {
                tracing::warn!(job = id, "cgroup limits not applied: {e}");
                None
            }
        });
        let launch = Launch {
            command: job.request.command.clone(),
            working_dir,
            env,
            log_path: self.log_path(id),
            exit_file: self.run_file(id, "exit"),
            pid_file: self.run_file(id, "pid"),
            checkpoint_dir,
            identity,
            cgroup,
            max_processes: identity.and(settings.max_processes_per_tenant),
            max_log_bytes: settings.max_log_bytes,
        };
        let now = unix_s();
        let first_start = job.runs == 0;
        let submitted_ms = job.submitted_unix_ms;
        // Persist the start before acting: `running` with no process id yet. If the daemon dies
        // before the id is recorded, recovery finds the run through its pid file.
        let queued = job.clone();
        let mut starting = job.clone();
        starting.state = JobState::Running { gpus: gpus.clone(), pid: 0, started_unix_s: now };
        self.store.put_jobs(&[&starting])?;
        state.jobs[id as usize] = starting;
        for g in &gpus {
            state.free_gpus.remove(g);
        }
        match executor::spawn(&launch, &settings.wrapper_exe) {
            Ok(child) => {
                let pid = child.id().unwrap_or(0);
                let job = &mut state.jobs[id as usize];
                job.runs += 1;
                job.token_sha256 = crate::auth::sha256_hex(&token);
                let who = identity.map(|i| format!(" as uid {}", i.uid)).unwrap_or_default();
                job.transition(JobState::Running { gpus: gpus.clone(), pid, started_unix_s: now }, format!("started on GPUs {}{who}", visible.join(",")), now);
                tracing::info!(job = id, tenant = %job.tenant, run = job.runs, pid, gpus = %visible.join(","), "started{who}");
                self.record(state, id);
                state.counters.runs_started += 1;
                if first_start {
                    state.counters.start_latency_ms_sum += unix_ms().saturating_sub(submitted_ms);
                    state.counters.start_latency_count += 1;
                }
                state.watched.insert(id, Watched { pgid: pid, kill_at_ms: None, sigkilled: false });
                self.watch_child(id, pid, child);
            }
            Err(e) => {
                // The daemon's side failed (writing the launch spec or the log, starting the
                // wrapper: a full disk, say), not the job: it stays queued, its retries intact.
                // (A job that cannot start itself — a bad working directory — fails inside the
                // wrapper and is counted like any other failed run.)
                for g in &gpus {
                    state.free_gpus.insert(*g);
                }
                tracing::warn!(job = id, "could not start a run: {e}");
                let mut back = queued;
                back.pending_reason = Some(format!("the daemon could not start its run: {e}; retrying every round"));
                state.jobs[id as usize] = back;
                self.record(state, id);
            }
        }
        Ok(())
    }

    /// Sends a running job its checkpoint signal and marks it stopping: persisted first, then
    /// signalled, then recorded as signalled. With `force` (its owner cancels it) a store that
    /// cannot be written does not stop it: the change is written once the store works again.
    pub(crate) fn stop(&self, state: &mut State, id: u32, reason: StopReason, force: bool) -> Result<(), DaemonError> {
        let job = &state.jobs[id as usize];
        let JobState::Running { gpus, pid, .. } = job.state.clone() else { return Ok(()) };
        let now = unix_s();
        let mut stopping = job.clone();
        stopping.transition(JobState::Stopping { gpus, pid, reason, since_unix_s: now, signal_sent: false }, reason.as_str(), now);
        match self.store.put_jobs(&[&stopping]) {
            Ok(()) => {}
            Err(e) if force => {
                tracing::warn!(job = id, "stopping although the store refused the change (written later): {e}");
                state.dirty.insert(id);
            }
            Err(e) => return Err(e.into()),
        }
        let signal = executor::parse_signal(&stopping.request.checkpoint_signal).unwrap_or(Signal::SIGTERM);
        let grace_ms = stopping.request.grace_s * 1000;
        tracing::info!(job = id, pid, "stopping ({}): {signal} now, SIGKILL after {} s", reason.as_str(), stopping.request.grace_s);
        state.jobs[id as usize] = stopping;
        let _ = executor::signal_run(pid, signal);
        if let JobState::Stopping { signal_sent, .. } = &mut state.jobs[id as usize].state {
            *signal_sent = true;
        }
        self.record(state, id);
        if let Some(w) = state.watched.get_mut(&id) {
            w.kill_at_ms = Some(unix_ms() + grace_ms);
        }
        Ok(())
    }

    /// Writes job `id` as it is in memory; if the store refuses, remembers to write it later.
    pub(crate) fn record(&self, state: &mut State, id: u32) {
        if let Err(e) = self.store.put_jobs(&[&state.jobs[id as usize]]) {
            tracing::warn!(job = id, "could not persist (will retry): {e}");
            state.dirty.insert(id);
        }
        let spec = view::spec_of(&state.jobs[id as usize], &state.cluster);
        state.specs[id as usize] = spec;
    }

    /// Kills the processes that escaped their run: a process of a tenant's *automatic* uid (one
    /// the daemon allocated, so nothing else runs as it) outside the sessions of that tenant's
    /// live runs was started by a job and left its session (`setsid`, a double fork) to outlive
    /// the run and its GPUs. Existing users named in `tenant_users` are left alone (their logins
    /// run as them too).
    pub(crate) fn kill_strays(&self, state: &State) {
        if !self.settings.isolation.is_isolated() {
            return;
        }
        let automatic: std::collections::BTreeMap<u32, &str> = state.allocated_uids.iter().map(|(tenant, uid)| (*uid, tenant.as_str())).collect();
        if automatic.is_empty() {
            return;
        }
        // Sessions of live runs, by the uid of the tenant they run for.
        let live: std::collections::BTreeSet<u32> = state.watched.values().map(|w| w.pgid).collect();
        let busy: std::collections::BTreeSet<u32> = state
            .watched
            .keys()
            .filter_map(|id| state.allocated_uids.get(&state.jobs[*id as usize].tenant))
            .copied()
            .collect();
        // A scan of /proc is not atomic: a process that forks and exits faster than the scan
        // reads the table is never seen. So: where a tenant has no live run, everything of its
        // uid is killed at once with kill(-1) issued *as that uid* (the kernel signals all of a
        // uid's processes under one lock, so no fork escapes); where it has live runs, the scan
        // is repeated while it still finds strays.
        // Tenants whose run just ended and that have none left: killed whether or not the scan
        // below sees anything (a chain of short-lived processes may be invisible to it).
        let mut idle_with_processes: std::collections::BTreeSet<u32> =
            state.ended_tenants.iter().filter_map(|t| state.allocated_uids.get(t)).copied().filter(|uid| !busy.contains(uid)).collect();
        for pass in 0..5 {
            let mut found = false;
            for p in crate::procs::processes() {
                if p.dead || live.contains(&p.session) {
                    continue;
                }
                let Some(tenant) = automatic.get(&p.uid) else { continue };
                if !busy.contains(&p.uid) {
                    idle_with_processes.insert(p.uid);
                    continue;
                }
                if pass == 0 {
                    tracing::warn!(tenant, pid = p.pid, session = p.session, "killing a process that left its run's session");
                }
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p.pid as i32), Signal::SIGKILL);
                found = true;
            }
            if !found {
                break;
            }
        }
        for uid in idle_with_processes {
            tracing::warn!(tenant = automatic.get(&uid).copied().unwrap_or(""), uid, "killing every process of a tenant with no live run");
            kill_everything_of(uid);
        }
    }

    /// Writes the jobs the store refused earlier.
    pub(crate) fn flush_dirty(&self, state: &mut State) {
        if state.dirty.is_empty() {
            return;
        }
        let records: Vec<&JobRecord> = state.dirty.iter().map(|&id| &state.jobs[id as usize]).collect();
        if self.store.put_jobs(&records).is_ok() {
            tracing::info!("persisted {} job changes the store had refused", state.dirty.len());
            state.dirty.clear();
        }
    }

    /// Waits for a spawned run to end (its group empty), then records how.
    pub(crate) fn watch_child(&self, id: u32, pgid: u32, mut child: tokio::process::Child) {
        let daemon = self.clone();
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            wait_group_empty(pgid).await;
            let code = executor::read_exit_code(&daemon.run_file(id, "exit")).or(status.and_then(|s| s.code()));
            daemon.run_ended(id, code);
        });
    }

    /// Waits for a re-adopted run (not our child) to end.
    pub(crate) fn watch_adopted(&self, id: u32, pgid: u32) {
        let daemon = self.clone();
        tokio::spawn(async move {
            wait_group_empty(pgid).await;
            let code = executor::read_exit_code(&daemon.run_file(id, "exit"));
            daemon.run_ended(id, code);
        });
    }

    /// A run ended with `code` (None: killed, or unknown).
    pub(crate) fn run_ended(&self, id: u32, code: Option<i32>) {
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            state.watched.remove(&id);
            state.run_ended_since_check = true;
            state.ended_tenants.insert(state.jobs[id as usize].tenant.clone());
            let Some(gpus) = state.jobs[id as usize].state.gpus().map(<[u32]>::to_vec) else { return };
            let job = &mut state.jobs[id as usize];
            conclude(job, code, unix_s(), false);
            tracing::info!(job = id, tenant = %job.tenant, code = ?code, "run ended: {} ({})", job.state.name(), job.history.last().map_or("", |t| t.why.as_str()));
            self.record(state, id);
            if state.jobs[id as usize].state.is_terminal() {
                let spec = &state.specs[id as usize];
                let finished = view::finished_of(&state.jobs[id as usize], spec);
                state.policy.job_finished(spec, &finished, arbiter_model::SimTime::from_ms(unix_ms()));
            }
            for g in gpus {
                state.free_gpus.insert(g);
            }
        }
        if let Some(cg) = &self.settings.cgroups {
            cg.remove(id);
        }
        self.wake.notify_one();
    }
}

/// How a run that has ended (`code`: its exit code, `None` when killed or unknown) leaves its
/// job — the same rules whether the daemon saw it end or learned it after a restart
/// (`while_down`): retries count, time limits hold.
pub(crate) fn conclude(job: &mut JobRecord, code: Option<i32>, now: i64, while_down: bool) {
    let started = match &job.state {
        JobState::Running { started_unix_s, .. } => Some(*started_unix_s),
        JobState::Stopping { .. } => job.history.iter().rev().find(|t| t.to == "running").map(|t| t.at_unix_s),
        _ => return,
    };
    job.executed_s += started.map_or(0.0, |s| (now - s).max(0) as f64);
    job.exit_code = code;
    let over_limit = match (started, job.request.max_run_time_s) {
        (Some(s), Some(limit)) => i64::try_from(limit).is_ok_and(|limit| now.saturating_sub(s) >= limit),
        _ => false,
    };
    let when = if while_down { " (ended while the daemon was down)" } else { "" };
    let (next, why) = match (&job.state, code) {
        (JobState::Stopping { reason: StopReason::Preempted, .. }, _) => {
            job.preemptions += 1;
            (JobState::Queued, "preempted; requeued to resume from its checkpoint".to_string())
        }
        (JobState::Stopping { reason: StopReason::Cancelled, .. }, _) => (JobState::Cancelled, "cancelled".into()),
        (JobState::Stopping { reason: StopReason::TimedOut, .. }, _) => (JobState::Failed, "over its max_run_time_s".into()),
        (_, Some(0)) => (JobState::Succeeded, format!("exit code 0{when}")),
        (_, _) if over_limit => (JobState::Failed, format!("over its max_run_time_s{when}")),
        (_, code) => {
            job.failures += 1;
            let what = code.map_or("killed".to_string(), |c| format!("exit code {c}"));
            if job.failures > job.request.max_retries {
                (JobState::Failed, format!("{what}{when}; retries used up"))
            } else {
                let backoff = crate::job::retry_backoff_s(job.failures);
                job.retry_after_unix_s = Some(now + backoff);
                (JobState::Queued, format!("{what}{when}; retry {} of {} in {backoff} s", job.failures, job.request.max_retries))
            }
        }
    };
    job.transition(next, why, now);
}

/// Sends SIGKILL to every process of `uid` at once: `kill -9 -1` run as that uid (the kernel
/// signals all processes the caller may signal, atomically with respect to fork).
fn kill_everything_of(uid: u32) {
    use std::os::unix::process::CommandExt;
    let status = std::process::Command::new("/bin/kill")
        .args(["-9", "-1"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .uid(uid)
        .gid(uid)
        .status();
    if let Err(e) = status {
        tracing::warn!(uid, "could not run /bin/kill as uid {uid}: {e}");
    }
}

/// Polls until no live process is left in the run's session `sid`.
async fn wait_group_empty(sid: u32) {
    let mut delay = Duration::from_millis(5);
    while executor::run_alive(sid) {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::SubmitRequest;

    fn running(request: &str, started: i64) -> JobRecord {
        let request: SubmitRequest = serde_json::from_str(request).expect("valid");
        let mut job = JobRecord::submitted(0, "t", request, 0, String::new());
        job.transition(JobState::Running { gpus: vec![0], pid: 42, started_unix_s: started }, "started", started);
        job
    }

    #[test]
    fn a_run_that_ended_while_the_daemon_was_down_counts_against_its_retries() {
        let mut job = running(r#"{"command": "exit 7", "max_retries": 0}"#, 100);
        conclude(&mut job, Some(7), 110, true);
        assert_eq!(job.state, JobState::Failed, "max_retries 0: no second run");
        assert!(job.history.last().expect("why").why.contains("retries used up"));
        let mut job = running(r#"{"command": "exit 7", "max_retries": 1}"#, 100);
        conclude(&mut job, Some(7), 110, true);
        assert_eq!((job.state.clone(), job.failures), (JobState::Queued, 1));
        assert_eq!(job.retry_after_unix_s, Some(111), "the first retry waits 1 s");
    }

    #[test]
    fn retries_back_off_and_history_stays_bounded() {
        assert_eq!((1..=10).map(crate::job::retry_backoff_s).collect::<Vec<_>>(), vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        let mut job = running(r#"{"command": "exit 1", "max_retries": 100}"#, 0);
        for t in 0..1000 {
            job.transition(JobState::Queued, "retry", t);
        }
        assert_eq!(job.history.len(), crate::job::MAX_HISTORY);
        assert_eq!(job.history[0].why, "submitted");
        assert_eq!(job.history_omitted, 1002 - crate::job::MAX_HISTORY as u64);
    }

    #[test]
    fn a_run_over_its_time_limit_while_the_daemon_was_down_fails() {
        let mut job = running(r#"{"command": "sleep 100", "max_run_time_s": 2}"#, 100);
        conclude(&mut job, None, 105, true);
        assert_eq!(job.state, JobState::Failed);
        assert!(job.history.last().expect("why").why.contains("max_run_time_s"));
        assert_eq!(job.executed_s, 5.0);
    }
}
