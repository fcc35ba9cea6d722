//! The daemon's jobs by id: job `i` is at slot `i` (ids are dense, as the policies' views index
//! them), and a slot is emptied when the job's record is pruned by the retention policy
//! (`records/retention.rs`): a pruned job costs its empty slot (the record's inline size, ~770 bytes) and
//! its placeholder in the policy's specs (~350 bytes), not the text and history it held.
//!
//! Slots hold records inline, not boxed: every round walks all of them several times, and with
//! 100,000 boxed records a steady round took 47 ms instead of 31 (`arbiter bench --suite
//! daemon-scale`: the records scattered over the heap defeat the prefetcher).

use crate::records::holders::GpuHolders;
use crate::records::job::JobRecord;

/// Jobs by id; pruned ones leave an empty slot.
#[derive(Clone, Debug, Default)]
pub struct Jobs {
    slots: Vec<Option<JobRecord>>,
}

impl Jobs {
    /// Who holds which GPU (running or stopping jobs).
    pub fn gpu_holders(&self) -> GpuHolders {
        GpuHolders::of(self.iter())
    }

    /// Jobs from records in any order (ids above the highest record's are not slots yet; ids
    /// without a record are pruned ones).
    pub fn from_records(records: Vec<JobRecord>) -> Self {
        let len = records.iter().map(|j| j.id as usize + 1).max().unwrap_or(0);
        let mut slots: Vec<Option<JobRecord>> = Vec::with_capacity(len);
        slots.resize_with(len, || None);
        for record in records {
            let id = record.id as usize;
            slots[id] = Some(record);
        }
        Jobs { slots }
    }

    /// Makes `len` ids given out: those beyond the last record's were pruned.
    pub fn extend_to(&mut self, len: usize) {
        if len > self.slots.len() {
            self.slots.resize_with(len, || None);
        }
    }

    /// The number of ids given out (the next job's id).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no job was ever submitted.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Job `id`, unless there is none or it was pruned.
    pub fn get(&self, id: usize) -> Option<&JobRecord> {
        self.slots.get(id).and_then(|s| s.as_ref())
    }

    /// Job `id`, to change it.
    pub fn get_mut(&mut self, id: usize) -> Option<&mut JobRecord> {
        self.slots.get_mut(id).and_then(|s| s.as_mut())
    }

    /// Every job on record, by id.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Every job on record from id `from` on.
    pub fn iter_from(&self, from: usize) -> Iter<'_> {
        self.slots
            .get(from..)
            .unwrap_or_default()
            .iter()
            .filter_map(on_record)
    }

    /// Every job on record, to change them.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut JobRecord> {
        self.slots.iter_mut().filter_map(|s| s.as_mut())
    }

    /// Adds the next job (its id must be [`Jobs::len`]).
    pub fn push(&mut self, job: JobRecord) {
        debug_assert_eq!(job.id as usize, self.slots.len());
        self.slots.push(Some(job));
    }

    /// Forgets job `id`'s record; returns it.
    pub fn prune(&mut self, id: usize) -> Option<JobRecord> {
        self.slots.get_mut(id).and_then(Option::take)
    }
}

/// The jobs on record, by id.
pub type Iter<'a> = std::iter::FilterMap<
    std::slice::Iter<'a, Option<JobRecord>>,
    fn(&Option<JobRecord>) -> Option<&JobRecord>,
>;

fn on_record(slot: &Option<JobRecord>) -> Option<&JobRecord> {
    slot.as_ref()
}

impl<'a> IntoIterator for &'a Jobs {
    type Item = &'a JobRecord;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Job `id`, which the caller knows is on record (a job the state refers to: running, queued,
/// watched, in a decision). Pruning takes only jobs that ended for good, which nothing refers to.
impl std::ops::Index<usize> for Jobs {
    type Output = JobRecord;
    fn index(&self, id: usize) -> &JobRecord {
        match self.slots.get(id).and_then(|s| s.as_ref()) {
            Some(job) => job,
            None => panic!("job {id} is not on record (pruned or never submitted)"),
        }
    }
}

impl std::ops::IndexMut<usize> for Jobs {
    fn index_mut(&mut self, id: usize) -> &mut JobRecord {
        match self.slots.get_mut(id).and_then(|s| s.as_mut()) {
            Some(job) => job,
            None => panic!("job {id} is not on record (pruned or never submitted)"),
        }
    }
}
