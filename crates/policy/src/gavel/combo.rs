//! What Gavel's round mechanism hands GPUs to: job combinations, and their claims on a GPU type.

use arbiter_model::JobId;

/// What the mechanism schedules: one job alone, or two jobs sharing GPUs (first id smaller).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Combo {
    Single(JobId),
    Pair(JobId, JobId),
}

impl Combo {
    pub(crate) fn contains(self, id: JobId) -> bool {
        match self {
            Combo::Single(a) => a == id,
            Combo::Pair(a, b) => a == id || b == id,
        }
    }

    /// The job whose spec stands for the combination (GPU count, placement).
    pub(crate) fn first(self) -> JobId {
        match self {
            Combo::Single(a) | Combo::Pair(a, _) => a,
        }
    }

    pub(crate) fn jobs(self) -> impl Iterator<Item = JobId> {
        let (a, b) = match self {
            Combo::Single(a) => (a, None),
            Combo::Pair(a, b) => (a, Some(b)),
        };
        std::iter::once(a).chain(b)
    }
}

/// A combination's claim on one GPU type in a round. Greater claims come first: higher priority,
/// then larger deficit, then larger allocation, then the smaller combination (a total order, so
/// the hand-out is deterministic).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    pub(crate) priority: f64,
    pub(crate) deficit_s: f64,
    pub(crate) allocation: f64,
    pub(crate) combo: Combo,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.priority
            .total_cmp(&other.priority)
            .then(self.deficit_s.total_cmp(&other.deficit_s))
            .then(self.allocation.total_cmp(&other.allocation))
            .then(other.combo.cmp(&self.combo))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Candidate {}
