//! Job arrays as a whole (`records/array.rs` has what a task is): naming a task as `12_7`, and
//! cancelling every task of an array at once.

use crate::daemon::{Daemon, RequestError, State};
use crate::records::array::parse_task_ref;
use crate::records::job::{FieldError, JobState, StopReason};

/// The job id of task `index` of array `array` (`None`: no such array or task).
pub(crate) fn task_id(state: &State, array: u32, index: u32) -> Option<u32> {
    let ids = state.arrays.get(&array)?.ids();
    ids.into_iter().find(|&id| {
        state
            .jobs
            .get(id as usize)
            .and_then(|j| j.array)
            .is_some_and(|t| t.index == index)
    })
}

impl Daemon {
    /// The job `text` names: `12`, or task 7 of array 12 as `12_7` (not found: `NotFound`, the
    /// same for another tenant's array, whose tasks' ids say nothing more than its id).
    pub fn job_ref(&self, text: &str) -> Result<u32, RequestError> {
        match parse_task_ref(text) {
            Some((array, index)) => self.with_state(|state| {
                task_id(state, array, index).ok_or(RequestError::NotFound(array))
            }),
            None => text.parse().map_err(|_| {
                FieldError {
                    field: "id",
                    reason: format!(
                        "`{}` is not a job id (12, or 12_7 for task 7 of array 12)",
                        text.escape_debug()
                    ),
                }
                .into()
            }),
        }
    }

    /// Whether job `id` is an array's id (its first task).
    pub fn is_array(&self, id: u32) -> bool {
        self.with_state(|state| state.arrays.contains_key(&id))
    }

    /// Cancels every task of array `array_id` that has not ended: queued ones in one write,
    /// running ones as [`Daemon::cancel`] does. Returns how many tasks were cancelled.
    pub fn cancel_array(&self, array_id: u32, tenant: Option<&str>) -> Result<u32, RequestError> {
        let count = {
            let mut state = self.lock();
            let ids = state
                .arrays
                .get(&array_id)
                .map(|a| a.ids())
                .ok_or(RequestError::NotFound(array_id))?;
            let owner = state.jobs.get(array_id as usize).map(|j| j.tenant.clone());
            if tenant.is_some_and(|t| owner.as_deref().is_some_and(|o| o != t)) {
                return Err(RequestError::Forbidden(array_id));
            }
            let live: Vec<u32> = ids
                .filter(|&id| {
                    state
                        .jobs
                        .get(id as usize)
                        .is_some_and(|j| !j.state.is_terminal())
                })
                .collect();
            let now_s = self.now_s();
            let queued: Vec<_> = live
                .iter()
                .filter_map(|&id| {
                    state
                        .jobs
                        .get(id as usize)
                        .filter(|j| matches!(j.state, JobState::Queued))
                })
                .map(|j| {
                    let mut cancelled = j.clone();
                    cancelled.transition(
                        JobState::Cancelled,
                        "cancelled with its array while queued",
                        now_s,
                    );
                    cancelled
                })
                .collect();
            self.store.put_jobs(&queued.iter().collect::<Vec<_>>())?;
            for job in queued {
                let id = job.id;
                state.jobs[id as usize] = job;
                state.job_ended_for_good(id);
            }
            for &id in &live {
                match state.jobs.get(id as usize).map(|j| j.state.clone()) {
                    Some(JobState::Running { .. }) => {
                        self.stop(&mut state, id, StopReason::Cancelled, true)?
                    }
                    Some(JobState::Stopping { .. }) => {
                        if let JobState::Stopping { reason, .. } =
                            &mut state.jobs[id as usize].state
                        {
                            *reason = StopReason::Cancelled;
                        }
                        self.record(&mut state, id);
                    }
                    _ => {}
                }
            }
            live.len() as u32
        };
        tracing::info!(array = array_id, tasks = count, "array cancelled");
        self.wake.notify_one();
        Ok(count)
    }
}
