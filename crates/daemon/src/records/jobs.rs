//! The daemon's jobs by id: job `i` is at slot `i` (ids are dense, as the policies' views index
//! them), and a slot is emptied when the job's record is pruned by the retention policy
//! (`records/retention.rs`): a pruned job costs its empty slot (the record's inline size, ~770 bytes) and
//! its placeholder in the policy's specs (~350 bytes), not the text and history it held.
//!
//! Slots hold records inline, not boxed: a round's snapshot walks all of them, and with
//! 100,000 boxed records a steady round took 47 ms instead of 31 (`arbiter bench --suite
//! daemon-scale`: the records scattered over the heap defeat the prefetcher). What a round
//! would otherwise find by walking them all again — the jobs holding GPUs, the opportunistic
//! jobs waiting, the waiting reasons that stand — is kept here, from the records handed out to
//! change.

use crate::records::holders::GpuHolders;
use crate::records::job::JobRecord;
use arbiter_policy::quotas::QuotaHold;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeSet;

/// Jobs by id; pruned ones leave an empty slot.
#[derive(Clone, Debug, Default)]
pub struct Jobs {
    slots: Vec<Option<JobRecord>>,
    /// The jobs holding GPUs and the waiting opportunistic ones, brought up to date when read.
    holding: RefCell<Holding>,
    /// Per job id, the shared reason its waiting reason was last set to through
    /// [`Jobs::set_shared_reason`] or [`Jobs::set_quota_reason`], forgotten as soon as the job
    /// is handed out to change in any other way: a round then knows a waiting job's reason
    /// stands without reading its record (one record of 770 bytes for each of 100,000 waiting
    /// jobs per round).
    shared_reason: Vec<Option<SharedReason>>,
}

/// A waiting reason many jobs share, as a round knows it without its words.
#[derive(Clone, Copy, Debug)]
enum SharedReason {
    /// A policy's fixed words (compared by address).
    Policy(&'static str),
    /// The quota tree's hold, without what its words leave out
    /// ([`QuotaHold::without_counts`]): its words are made from it and the tree.
    Quota(QuotaHold),
}

impl PartialEq for SharedReason {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (SharedReason::Policy(a), SharedReason::Policy(b)) => std::ptr::eq(*a, *b),
            (SharedReason::Quota(a), SharedReason::Quota(b)) => a == b,
            _ => false,
        }
    }
}

/// The ids of the jobs whose state holds GPUs (running or stopping) and of the opportunistic
/// jobs waiting, kept so that who holds which GPU costs the few thousand holders rather than a
/// pass over every record (a round asked several times, each pass over 100,000 records a few
/// milliseconds). Every record handed out to change (`get_mut`, `[id]`, `push`) is noted, and
/// only those are looked at again when the sets are read; `iter_mut` notes every job.
#[derive(Clone, Debug, Default)]
struct Holding {
    ids: BTreeSet<u32>,
    /// The opportunistic jobs waiting (queued).
    opportunistic: BTreeSet<u32>,
    /// Jobs handed out to change since the sets were last brought up to date.
    touched: Vec<u32>,
    /// Whether any job may have changed (the set is counted again from every record).
    all: bool,
}

impl Jobs {
    /// Who holds which GPU (running or stopping jobs).
    pub fn gpu_holders(&self) -> GpuHolders {
        self.with_holding(|jobs, ids| {
            GpuHolders::of(ids.iter().filter_map(|&id| jobs.get(id as usize)))
        })
    }

    /// The jobs holding GPUs (running or stopping), by id.
    pub fn holding(&self) -> Vec<&JobRecord> {
        self.with_holding(|jobs, ids| ids.iter().filter_map(|&id| jobs.get(id as usize)).collect())
    }

    /// The opportunistic jobs waiting (queued), by id.
    pub fn opportunistic_waiting(&self) -> Vec<u32> {
        self.kept().opportunistic.iter().copied().collect()
    }

    /// `f` on the ids of the jobs holding GPUs, brought up to date first.
    fn with_holding<'a, T>(&'a self, f: impl FnOnce(&'a Jobs, &BTreeSet<u32>) -> T) -> T {
        f(self, &self.kept().ids)
    }

    /// The kept sets, brought up to date (debug builds check them against every record).
    fn kept(&self) -> std::cell::RefMut<'_, Holding> {
        let mut holding = self.holding.borrow_mut();
        holding.update(&self.slots);
        debug_assert_eq!(
            holding.ids,
            self.iter()
                .filter(|j| j.state.gpus().is_some())
                .map(|j| j.id)
                .collect(),
            "the kept set of GPU holders is stale"
        );
        debug_assert_eq!(
            holding.opportunistic,
            self.iter()
                .filter(|j| waits_opportunistic(j))
                .map(|j| j.id)
                .collect(),
            "the kept set of waiting opportunistic jobs is stale"
        );
        holding
    }

    /// Forgets the shared reason kept for job `id` (its record is handed out).
    fn forget_shared_reason(&mut self, id: usize) {
        if let Some(words) = self.shared_reason.get_mut(id) {
            *words = None;
        }
    }

    /// Notes that job `id` is handed out to change.
    fn touch(&mut self, id: usize) {
        self.forget_shared_reason(id);
        let holding = self.holding.get_mut();
        if holding.all {
            return;
        }
        if holding.touched.len() > self.slots.len() {
            // Touched more often than there are jobs (no round read the set): count afresh.
            holding.all = true;
            holding.touched.clear();
        } else {
            holding.touched.push(id as u32);
        }
    }

    /// The reason job `id` waits, to set, and its tenant (its state cannot change through it,
    /// so the job is not noted as changed: a round sets the reasons of every waiting job).
    pub fn reason_of(&mut self, id: usize) -> Option<ReasonSlot<'_>> {
        self.forget_shared_reason(id);
        self.slots
            .get_mut(id)
            .and_then(|s| s.as_mut())
            .map(ReasonSlot::of)
    }

    /// Sets job `id`'s waiting reason to `words` shared by many jobs (a policy's reason), if
    /// `waits` says the job is one to explain. When the last words set here are these and the
    /// job was not handed out to change since, its record is not read: it still waits with
    /// them. Returns whether the record changed.
    pub fn set_shared_reason(
        &mut self,
        id: usize,
        words: &'static str,
        waits: impl Fn(&JobRecord) -> bool,
    ) -> bool {
        self.set_kept_reason(id, SharedReason::Policy(words), waits, |reason| {
            set_static_reason(reason, words)
        })
    }

    /// [`Jobs::set_shared_reason`] for the quota tree's `hold` (the words it and the tree make:
    /// `words`, asked only when the record is written). The holds kept are the tree's: call
    /// [`Jobs::forget_quota_reasons`] when the tree changes.
    pub fn set_quota_reason<'w>(
        &mut self,
        id: usize,
        hold: QuotaHold,
        waits: impl Fn(&JobRecord) -> bool,
        words: impl FnOnce() -> &'w str,
    ) -> bool {
        self.set_kept_reason(
            id,
            SharedReason::Quota(hold.without_counts()),
            waits,
            |reason| set_owned_reason(reason, words()),
        )
    }

    /// Forgets the quota holds kept as reasons (the tree that words them changed).
    pub fn forget_quota_reasons(&mut self) {
        for kept in &mut self.shared_reason {
            if matches!(kept, Some(SharedReason::Quota(_))) {
                *kept = None;
            }
        }
    }

    /// Sets job `id`'s reason with `write` unless `shared` is kept for it, and keeps `shared`.
    fn set_kept_reason(
        &mut self,
        id: usize,
        shared: SharedReason,
        waits: impl Fn(&JobRecord) -> bool,
        write: impl FnOnce(&mut Option<Cow<'static, str>>) -> bool,
    ) -> bool {
        if self
            .shared_reason
            .get(id)
            .copied()
            .flatten()
            .is_some_and(|kept| kept == shared)
        {
            debug_assert!(
                self.get(id).is_some_and(|j| waits(j)
                    && match shared {
                        SharedReason::Policy(words) => j.pending_reason.as_deref() == Some(words),
                        SharedReason::Quota(_) => j.pending_reason.is_some(),
                    }),
                "job {id}'s kept reason is stale"
            );
            return false;
        }
        let Some(job) = self.slots.get_mut(id).and_then(|s| s.as_mut()) else {
            return false;
        };
        if !waits(job) {
            return false;
        }
        let changed = write(&mut job.pending_reason);
        if self.shared_reason.len() <= id {
            self.shared_reason
                .resize(self.slots.len().max(id + 1), None);
        }
        self.shared_reason[id] = Some(shared);
        changed
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
        Jobs {
            slots,
            holding: RefCell::new(Holding {
                all: true,
                ..Holding::default()
            }),
            shared_reason: Vec::new(),
        }
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
        self.touch(id);
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
        self.shared_reason.clear();
        let holding = self.holding.get_mut();
        holding.all = true;
        holding.touched.clear();
        self.slots.iter_mut().filter_map(|s| s.as_mut())
    }

    /// Adds the next job (its id must be [`Jobs::len`]).
    pub fn push(&mut self, job: JobRecord) {
        debug_assert_eq!(job.id as usize, self.slots.len());
        self.touch(self.slots.len());
        self.slots.push(Some(job));
    }

    /// Forgets job `id`'s record; returns it.
    pub fn prune(&mut self, id: usize) -> Option<JobRecord> {
        self.touch(id);
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
        self.touch(id);
        match self.slots.get_mut(id).and_then(|s| s.as_mut()) {
            Some(job) => job,
            None => panic!("job {id} is not on record (pruned or never submitted)"),
        }
    }
}

impl Holding {
    /// Brings the set up to date with `slots`: every job if any may have changed, else the
    /// jobs touched since.
    fn update(&mut self, slots: &[Option<JobRecord>]) {
        if self.all {
            self.ids.clear();
            self.opportunistic.clear();
            self.touched.clear();
            self.touched.extend(0..slots.len() as u32);
            self.all = false;
        }
        for id in self.touched.drain(..) {
            let job = slots.get(id as usize).and_then(|s| s.as_ref());
            for (set, is) in [
                (&mut self.ids, job.is_some_and(|j| j.state.gpus().is_some())),
                (
                    &mut self.opportunistic,
                    job.is_some_and(waits_opportunistic),
                ),
            ] {
                if is {
                    set.insert(id);
                } else {
                    set.remove(&id);
                }
            }
        }
    }
}

/// Sets a job's reason to a copy of `words` made once for many jobs (the quota tree's hold, a
/// hold's words: see `explain`), unless it has them; returns whether it changed.
pub(crate) fn set_owned_reason(reason: &mut Option<Cow<'static, str>>, words: &str) -> bool {
    if reason.as_deref() == Some(words) {
        return false;
    }
    *reason = Some(Cow::Owned(words.to_string()));
    true
}

/// Sets a waiting reason to `words` every job of a kind shares (the policy's reasons): kept as
/// the static text, so that the next comparison is of addresses rather than of the words.
/// Returns whether the reason changed.
pub(crate) fn set_static_reason(
    reason: &mut Option<Cow<'static, str>>,
    words: &'static str,
) -> bool {
    if let Some(Cow::Borrowed(now)) = reason
        && std::ptr::eq(*now, words)
    {
        return false;
    }
    let changed = reason.as_deref() != Some(words);
    *reason = Some(Cow::Borrowed(words));
    changed
}

/// Whether `job` is an opportunistic job waiting for idle GPUs.
fn waits_opportunistic(job: &JobRecord) -> bool {
    job.request.opportunistic && matches!(job.state, crate::records::job::JobState::Queued)
}

/// A job's waiting reason to set, with its tenant (the words name it): a change that cannot
/// change the job's state.
pub struct ReasonSlot<'a> {
    /// The job's tenant.
    pub tenant: &'a str,
    /// Why it waits.
    pub reason: &'a mut Option<Cow<'static, str>>,
}

impl<'a> ReasonSlot<'a> {
    /// `job`'s.
    pub fn of(job: &'a mut JobRecord) -> Self {
        ReasonSlot {
            tenant: &job.tenant,
            reason: &mut job.pending_reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::{JobState, StopReason, SubmitRequest};

    fn job(id: u32) -> JobRecord {
        let request: SubmitRequest = serde_json::from_str(r#"{"command": "true"}"#).expect("valid");
        JobRecord::submitted(id, "t", request, 0, String::new())
    }

    fn scanned(jobs: &Jobs) -> Vec<u32> {
        jobs.iter()
            .filter(|j| j.state.gpus().is_some())
            .map(|j| j.id)
            .collect()
    }

    fn kept(jobs: &Jobs) -> Vec<u32> {
        jobs.holding().iter().map(|j| j.id).collect()
    }

    #[test]
    fn the_kept_holders_follow_every_way_a_job_changes() {
        let running = |gpu: u32| JobState::Running {
            gpus: vec![gpu],
            pid: 1,
            started_unix_s: 0,
        };
        let mut jobs = Jobs::default();
        for id in 0..6 {
            jobs.push(job(id));
        }
        assert_eq!(kept(&jobs), Vec::<u32>::new());
        jobs[1].state = running(0);
        jobs.get_mut(3).expect("job 3").state = running(1);
        assert_eq!(kept(&jobs), vec![1, 3]);
        // Stopping still holds; a whole record replaced; a job pruned; a new job running.
        jobs[1].state = JobState::Stopping {
            gpus: vec![0],
            pid: 1,
            reason: StopReason::Preempted,
            since_unix_s: 0,
            signal_sent: true,
        };
        let mut replaced = job(4);
        replaced.state = running(2);
        jobs[4] = replaced;
        jobs.get_mut(3).expect("job 3").state = JobState::Succeeded;
        assert_eq!(kept(&jobs), vec![1, 4]);
        jobs.prune(1);
        let mut started = job(6);
        started.state = running(3);
        jobs.push(started);
        assert_eq!(kept(&jobs), vec![4, 6]);
        for j in jobs.iter_mut() {
            j.state = running(j.id);
        }
        assert_eq!(kept(&jobs), scanned(&jobs));
        assert_eq!(kept(&jobs), vec![0, 2, 3, 4, 5, 6]);
        // Read back from the store: counted from the records.
        let read = Jobs::from_records(jobs.iter().cloned().collect());
        assert_eq!(kept(&read), scanned(&jobs));
        // Opportunistic jobs waiting: kept as they are submitted, start and end.
        let mut spare = job(7);
        spare.request.opportunistic = true;
        jobs.push(spare);
        assert_eq!(jobs.opportunistic_waiting(), vec![7]);
        jobs[7].state = running(7);
        assert_eq!(jobs.opportunistic_waiting(), Vec::<u32>::new());
        jobs.get_mut(7).expect("job 7").state = JobState::Queued;
        assert_eq!(jobs.opportunistic_waiting(), vec![7]);
        assert_eq!(kept(&jobs), scanned(&jobs));
        // Setting a reason does not change what is held, and is not noted as a change.
        if let Some(slot) = jobs.reason_of(0) {
            *slot.reason = Some("waiting".into());
        }
        assert!(jobs.holding.borrow().touched.is_empty());
        assert_eq!(kept(&jobs), scanned(&jobs));
    }

    #[test]
    fn a_shared_reason_is_kept_until_the_job_changes_in_any_other_way() {
        let waits = |j: &JobRecord| matches!(j.state, JobState::Queued);
        let (busy, fragmented) = ("not enough free GPUs", "not in one piece");
        let mut jobs = Jobs::default();
        jobs.push(job(0));
        jobs.push(job(1));
        assert!(jobs.set_shared_reason(0, busy, waits));
        assert!(
            !jobs.set_shared_reason(0, busy, waits),
            "kept: the record is not read"
        );
        assert!(
            jobs.set_shared_reason(0, fragmented, waits),
            "other words are written"
        );
        // Run and wait again: the transition clears the reason, and it is set again.
        jobs[0].transition(
            JobState::Running {
                gpus: vec![0],
                pid: 1,
                started_unix_s: 1,
            },
            "started",
            1,
        );
        assert!(
            !jobs.set_shared_reason(0, fragmented, waits),
            "a running job is not told"
        );
        jobs[0].transition(JobState::Queued, "preempted", 2);
        assert_eq!(jobs[0].pending_reason, None);
        assert!(jobs.set_shared_reason(0, fragmented, waits));
        assert_eq!(jobs[0].pending_reason.as_deref(), Some(fragmented));
        // Words set another way (a hold) are not taken for the kept ones.
        assert!(!jobs.set_shared_reason(0, fragmented, waits));
        if let Some(slot) = jobs.reason_of(0) {
            *slot.reason = Some("held by its quota".into());
        }
        assert!(jobs.set_shared_reason(0, fragmented, waits));
        assert_eq!(jobs[0].pending_reason.as_deref(), Some(fragmented));
        // Every job changed at once forgets them all.
        assert!(jobs.set_shared_reason(1, busy, waits));
        for j in jobs.iter_mut() {
            j.pending_reason = None;
        }
        assert!(jobs.set_shared_reason(1, busy, waits));
        assert_eq!(jobs[1].pending_reason.as_deref(), Some(busy));
    }

    #[test]
    fn a_quota_reason_is_worded_again_only_when_its_words_would_change() {
        let waits = |j: &JobRecord| matches!(j.state, JobState::Queued);
        let mut jobs = Jobs::default();
        jobs.push(job(0));
        let not_lent = |room, gpus| QuotaHold::NotLent { dim: 0, room, gpus };
        let asked = std::cell::Cell::new(0);
        let set = |jobs: &mut Jobs, hold, words: &'static str| {
            jobs.set_quota_reason(0, hold, waits, || {
                asked.set(asked.get() + 1);
                words
            })
        };
        assert!(set(&mut jobs, not_lent(3, 2), "needs 2"));
        assert_eq!(jobs[0].pending_reason.as_deref(), Some("needs 2"));
        // The room left is not in the words: the record is not read, the words not made.
        assert!(!set(&mut jobs, not_lent(0, 2), "needs 2"));
        assert_eq!(asked.get(), 1);
        // Another job size is other words.
        assert!(set(&mut jobs, not_lent(0, 4), "needs 4"));
        assert_eq!(asked.get(), 2);
        // A policy's reason in between, then the hold again: worded again.
        assert!(jobs.set_shared_reason(0, "not enough free GPUs", waits));
        assert!(set(&mut jobs, not_lent(0, 4), "needs 4"));
        assert_eq!(asked.get(), 3);
        // Another tree words the same hold otherwise: forgotten, worded again.
        jobs.forget_quota_reasons();
        assert!(set(&mut jobs, not_lent(0, 4), "needs 4 of team-b's"));
        assert_eq!(
            jobs[0].pending_reason.as_deref(),
            Some("needs 4 of team-b's")
        );
        // A change to the job forgets it too: the record is read and the words made again
        // (the same here, so the record is not written).
        jobs[0].transition(JobState::Queued, "requeued", 3);
        assert!(!set(&mut jobs, not_lent(0, 4), "needs 4 of team-b's"));
        assert_eq!(asked.get(), 5);
    }

    #[test]
    fn holders_touched_far_more_often_than_read_are_counted_afresh() {
        let mut jobs = Jobs::default();
        jobs.push(job(0));
        for _ in 0..10 {
            jobs[0].state = JobState::Queued;
        }
        assert!(
            jobs.holding.borrow().all,
            "more touches than jobs: counted afresh"
        );
        jobs[0].state = JobState::Running {
            gpus: vec![0],
            pid: 1,
            started_unix_s: 0,
        };
        assert_eq!(kept(&jobs), vec![0]);
    }
}
