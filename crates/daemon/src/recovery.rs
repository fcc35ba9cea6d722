//! Recovery after a restart: every run the store calls running or stopping is re-adopted if its
//! process group lives, else concluded from its exit file by the same rules as a run the daemon
//! saw end (retries count, time limits hold).

use crate::daemon::{unix_ms, unix_s, Daemon, DaemonError, Watched};
use crate::executor;
use crate::job::{JobRecord, JobState, Transition};
use crate::runs::conclude;
use nix::sys::signal::Signal;

impl Daemon {
    /// Re-adopts runs whose process group lives (re-sending the checkpoint signal to runs that
    /// were being stopped: the previous daemon may have died between persisting `stopping` and
    /// signalling); concludes the others.
    pub(crate) fn recover(&self) -> Result<(), DaemonError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let now = unix_s();
        let mut changed = Vec::new();
        for job in &mut state.jobs {
            let (Some(recorded), Some(gpus)) = (job.state.pid(), job.state.gpus().map(<[u32]>::to_vec)) else { continue };
            // The wrapper's pid file says who it was (pid, start time, boot): only that very
            // process is re-adopted, never an unrelated one that got the same pid after a reboot
            // or a pid wrap. It also has the pid of a run whose id the daemon had not recorded.
            let identity = executor::read_run_identity(&self.run_file(job.id, "pid")).filter(|i| recorded == 0 || i.pid == recorded);
            let pid = identity.as_ref().map_or(0, |i| i.pid);
            if let JobState::Running { pid: p, .. } | JobState::Stopping { pid: p, .. } = &mut job.state {
                *p = pid;
            }
            if identity.as_ref().is_some_and(|i| i.is_alive()) {
                for g in &gpus {
                    state.free_gpus.remove(g);
                }
                let kill_at_ms = if let JobState::Stopping { signal_sent, .. } = &mut job.state {
                    // The previous daemon may have died between persisting `stopping` and
                    // signalling; a signal it recorded as sent is not sent twice (that would
                    // interrupt a checkpoint in progress).
                    if !*signal_sent {
                        let signal = executor::parse_signal(&job.request.checkpoint_signal).unwrap_or(Signal::SIGTERM);
                        let _ = executor::signal_run(pid, signal);
                        *signal_sent = true;
                        tracing::info!(job = job.id, pid, "re-adopted while stopping: {signal} sent (it had not been), SIGKILL after {} s", job.request.grace_s);
                    } else {
                        tracing::info!(job = job.id, pid, "re-adopted while stopping; SIGKILL after {} s", job.request.grace_s);
                    }
                    Some(unix_ms() + job.request.grace_s * 1000)
                } else {
                    tracing::info!(job = job.id, pid, "re-adopted its running process group");
                    None
                };
                state.watched.insert(job.id, Watched { pgid: pid, kill_at_ms, sigkilled: false });
                let why = match kill_at_ms {
                    Some(_) => format!("re-adopted process group {pid} after a daemon restart, while stopping"),
                    None => format!("re-adopted process group {pid} after a daemon restart"),
                };
                job.history.push(Transition { at_unix_s: now, to: job.state.name().into(), why });
                changed.push(job.id);
                continue;
            }
            if pid == 0 {
                // Persisted as starting, but the run never began: not the job's failure.
                job.transition(JobState::Queued, "its start was interrupted by a daemon restart; requeued", now);
            } else {
                let code = executor::read_exit_code(&self.run_file(job.id, "exit"));
                conclude(job, code, now, true);
            }
            tracing::info!(job = job.id, "its run ended while the daemon was down: {}", job.history.last().map_or("", |t| t.why.as_str()));
            changed.push(job.id);
        }
        let records: Vec<&JobRecord> = changed.iter().map(|&id| &state.jobs[id as usize]).collect();
        self.store.put_jobs(&records)?;
        let adopted: Vec<(u32, u32)> = state.watched.iter().map(|(id, w)| (*id, w.pgid)).collect();
        drop(guard);
        for (id, pgid) in adopted {
            self.watch_adopted(id, pgid);
        }
        Ok(())
    }
}
