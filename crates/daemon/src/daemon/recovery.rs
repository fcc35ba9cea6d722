//! Recovery after a restart: every run the store calls running or stopping is asked of the
//! executor — re-adopted if it still runs, else concluded from what the executor knows of its
//! end, by the same rules as a run the daemon saw end (retries count, time limits hold).

use crate::daemon::runs::conclude;
use crate::daemon::{Daemon, DaemonError, Watched};
use crate::executor::Adoption;
use crate::records::job::{JobRecord, JobState, Transition};

impl Daemon {
    /// Re-adopts runs that still run (re-sending the checkpoint signal to runs that were being
    /// stopped, if the previous daemon died between persisting `stopping` and signalling);
    /// concludes the others.
    pub(crate) fn recover(&self) -> Result<(), DaemonError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let now = self.now_s();
        let mut changed = Vec::new();
        for i in 0..state.jobs.len() {
            let Some(job) = state.jobs.get(i) else {
                continue;
            };
            let Some(recorded) = job.state.pid() else {
                continue;
            };
            let adoption = self.executor.adopt(job.id, recorded);
            if matches!(adoption, Adoption::Ended { .. }) {
                // Accounted under the key the lost write would have used: counted once.
                self.account_ended_run(state, i as u32, now);
            }
            let Some(job) = state.jobs.get_mut(i) else {
                continue;
            };
            match adoption {
                Adoption::Alive { handle } => {
                    if let JobState::Running { pid, .. } | JobState::Stopping { pid, .. } =
                        &mut job.state
                    {
                        *pid = handle;
                    }
                    let resend = matches!(
                        job.state,
                        JobState::Stopping {
                            signal_sent: false,
                            ..
                        }
                    );
                    let kill_at_ms = match &mut job.state {
                        JobState::Stopping { signal_sent, .. } => {
                            // A signal recorded as sent is not sent twice (that would interrupt
                            // a checkpoint in progress).
                            *signal_sent = true;
                            Some(self.now_ms() + job.request.effective_grace_s() * 1000)
                        }
                        _ => None,
                    };
                    if resend {
                        self.send_checkpoint_signal(job, handle);
                        tracing::info!(
                            job = job.id,
                            handle,
                            "re-adopted while stopping: {} sent (it had not been), killed after {} s",
                            job.request.checkpoint_signal,
                            job.request.effective_grace_s()
                        );
                    } else {
                        tracing::info!(
                            job = job.id,
                            handle,
                            stopping = kill_at_ms.is_some(),
                            "re-adopted its run"
                        );
                    }
                    let why = match kill_at_ms {
                        Some(_) => format!(
                            "re-adopted run {handle} after a daemon restart, while stopping"
                        ),
                        None => format!("re-adopted run {handle} after a daemon restart"),
                    };
                    job.history.push(Transition {
                        at_unix_s: now,
                        to: job.state.kind(),
                        why,
                    });
                    state.watched.insert(
                        job.id,
                        Watched {
                            handle,
                            kill_at_ms,
                            sigkilled: false,
                        },
                    );
                }
                Adoption::NeverStarted => {
                    // Persisted as starting, but the run never began: not the job's failure.
                    job.transition(
                        JobState::Queued,
                        "its start was interrupted by a daemon restart; requeued",
                        now,
                    );
                    job.host_share = None;
                }
                Adoption::Ended { code } => {
                    conclude(job, code, now, true);
                    job.host_share = None;
                    tracing::info!(
                        job = job.id,
                        "its run ended while the daemon was down: {}",
                        job.history.last().map_or("", |t| t.why.as_str())
                    );
                }
            }
            changed.push(job.id);
        }
        let records: Vec<&JobRecord> = changed.iter().map(|&id| &state.jobs[id as usize]).collect();
        self.store.put_jobs(&records)?;
        Ok(())
    }
}
