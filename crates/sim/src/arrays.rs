//! Job arrays with a running limit (Slurm's `--array=0-99%8`, [`JobSpec::array_limit`]): at
//! most the limit of an array's tasks are active — waiting in the queue or running — and the
//! others wait outside the queue, in order, until one of them leaves.
//!
//! This is the daemon's rule seen from the simulator: at each round the daemon offers its policy
//! an array's queued tasks in id order only while the array has room (its limit less its tasks
//! running) and holds the rest ("array 12 has 8 tasks running, its limit (%8)"). The tasks it
//! offers are those active here: a task preempted back to the queue keeps its place, which is
//! ahead of every task not yet let in (those have higher ids).

use arbiter_model::{JobId, JobSpec};
use std::collections::BTreeSet;

/// One limited array's state.
#[derive(Clone, Debug, Default)]
struct Array {
    max_running: u32,
    /// Its tasks queued or running.
    active: u32,
    /// Its tasks that arrived and wait their turn, by job id.
    waiting: BTreeSet<JobId>,
}

/// Every limited array of a trace, and each job's.
#[derive(Clone, Debug, Default)]
pub(crate) struct ArrayLimits {
    /// Per job id, its array's position in `arrays` (none: not a task of a limited array).
    array_of: Vec<Option<u32>>,
    arrays: Vec<Array>,
}

impl ArrayLimits {
    /// The limited arrays of `specs` (empty, and free to ask, when there are none).
    pub(crate) fn new(specs: &[JobSpec]) -> Self {
        if specs.iter().all(|s| s.array_limit.is_none()) {
            return Self::default();
        }
        let mut limits = ArrayLimits {
            array_of: vec![None; specs.len()],
            arrays: Vec::new(),
        };
        for spec in specs {
            let Some(limit) = spec.array_limit else {
                continue;
            };
            let at = limit.array as usize;
            if limits.arrays.len() <= at {
                limits.arrays.resize_with(at + 1, Array::default);
            }
            // (A trace gives every task of an array the same limit; the first one read counts.)
            if limits.arrays[at].max_running == 0 {
                limits.arrays[at].max_running = limit.max_running.max(1);
            }
            if let Some(slot) = limits.array_of.get_mut(spec.id.index()) {
                *slot = Some(limit.array);
            }
        }
        limits
    }

    fn array(&mut self, job: JobId) -> Option<&mut Array> {
        let at = (*self.array_of.get(job.index())?)?;
        self.arrays.get_mut(at as usize)
    }

    /// Job `job` may join the queue now (`true`: it is let in and counted), or waits its turn.
    pub(crate) fn let_in(&mut self, job: JobId) -> bool {
        let Some(array) = self.array(job) else {
            return true;
        };
        if array.active < array.max_running {
            array.active += 1;
            true
        } else {
            array.waiting.insert(job);
            false
        }
    }

    /// Job `job` left the queue for good (it ended): the task of its array next in turn, if
    /// one waits, is let in (counted) and returned.
    pub(crate) fn left(&mut self, job: JobId) -> Option<JobId> {
        let array = self.array(job)?;
        array.active = array.active.saturating_sub(1);
        let next = array.waiting.pop_first()?;
        array.active += 1;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{ArrayLimit, SimTime};

    fn task(id: u32, array: u32, max_running: u32) -> JobSpec {
        JobSpec {
            array_limit: Some(ArrayLimit { array, max_running }),
            ..JobSpec::new(JobId(id), SimTime::ZERO, 1, 10.0)
        }
    }

    #[test]
    fn at_most_the_limit_are_let_in_and_the_next_in_id_order_follows_one_that_ends() {
        let specs = vec![
            task(0, 0, 2),
            task(1, 0, 2),
            JobSpec::new(JobId(2), SimTime::ZERO, 1, 10.0),
            task(3, 0, 2),
            task(4, 0, 2),
            task(5, 1, 1),
        ];
        let mut limits = ArrayLimits::new(&specs);
        assert!(limits.let_in(JobId(0)) && limits.let_in(JobId(1)));
        assert!(limits.let_in(JobId(2)), "not a task of an array");
        assert!(limits.let_in(JobId(5)), "another array's room");
        // Arrivals out of id order still go in id order.
        assert!(!limits.let_in(JobId(4)) && !limits.let_in(JobId(3)));
        assert_eq!(limits.left(JobId(1)), Some(JobId(3)));
        assert_eq!(limits.left(JobId(0)), Some(JobId(4)));
        assert_eq!(limits.left(JobId(3)), None);
        assert_eq!(limits.left(JobId(2)), None, "not a task of an array");
        assert_eq!(limits.arrays[0].active, 1, "task 4");
    }

    #[test]
    fn a_trace_without_limited_arrays_keeps_nothing() {
        let specs = vec![JobSpec::new(JobId(0), SimTime::ZERO, 1, 10.0)];
        let mut limits = ArrayLimits::new(&specs);
        assert!(limits.array_of.is_empty());
        assert!(limits.let_in(JobId(0)));
        assert_eq!(limits.left(JobId(0)), None);
    }
}
