//! Themis' finish-time fairness needs, for each completed job, the mean number of jobs in the
//! system over its life. [`Contention`] integrates that count once over a run and remembers
//! where each job's submission and finish fall in it, so that a job's mean is two reads —
//! not two searches of a step function with two changes per job (a million-job run's
//! searches cost ≈ 0.4 s, most of them cache misses).

use super::{JobOutcome, JobRecord, Window};

/// A record not counted (unplaceable), or without a finish.
const NONE: u32 = u32::MAX;

/// The mean number of jobs in the system (submitted, not yet finished) over each job's life,
/// from every record of a run: a step function integrated once.
pub(super) struct Contention {
    /// Times at which the count changes, ascending.
    times: Vec<f64>,
    /// Jobs in the system from `times[i]` to `times[i + 1]`.
    counts: Vec<f64>,
    /// The count integrated from `times[0]` to `times[i]`.
    integral: Vec<f64>,
    /// Per record, the indices in `times` of its submission and its finish ([`NONE`]: not
    /// counted, or no finish).
    at: Vec<[u32; 2]>,
}

/// The count's changes, gathered in one pass over the records: (time, record index).
#[derive(Default)]
pub(super) struct Changes {
    arrivals: Vec<(f64, u32)>,
    departures: Vec<(f64, u32)>,
    records: usize,
}

impl Changes {
    /// Counts record `index` (every record is offered, in order).
    pub(super) fn add(&mut self, index: usize, record: &JobRecord) {
        self.records = index + 1;
        if record.outcome == JobOutcome::Unplaceable {
            return;
        }
        self.arrivals.push((record.submit_s, index as u32));
        if let Some(f) = record.finish_s {
            self.departures.push((f, index as u32));
        }
    }

    /// Every record's changes.
    pub(super) fn of(records: &[JobRecord]) -> Self {
        let mut changes = Changes::default();
        for (i, r) in records.iter().enumerate() {
            changes.add(i, r);
        }
        changes
    }
}

impl Contention {
    /// The step function of `changes`. Arrivals come in record order (sorted already when the
    /// records are in submission order, as a run's are) and are merged with the departures
    /// (sorted here). The order of changes at one instant does not matter (their sum is what
    /// is kept).
    pub(super) fn of(changes: Changes) -> Self {
        let Changes {
            mut arrivals,
            mut departures,
            records,
        } = changes;
        let by_time = |a: &(f64, u32), b: &(f64, u32)| a.0.total_cmp(&b.0);
        if !arrivals.is_sorted_by(|a, b| by_time(a, b).is_le()) {
            arrivals.sort_unstable_by(by_time);
        }
        departures.sort_unstable_by(by_time);
        let mut c = Contention {
            times: Vec::new(),
            counts: Vec::new(),
            integral: Vec::new(),
            at: vec![[NONE; 2]; records],
        };
        let mut count = 0.0;
        let (mut a, mut d) = (0, 0);
        while a < arrivals.len() || d < departures.len() {
            let arrival_first = match (arrivals.get(a), departures.get(d)) {
                (Some(x), Some(y)) => x.0.total_cmp(&y.0).is_le(),
                (x, _) => x.is_some(),
            };
            let ((t, record), delta, end) = if arrival_first {
                a += 1;
                (arrivals[a - 1], 1.0, 0)
            } else {
                d += 1;
                (departures[d - 1], -1.0, 1)
            };
            if c.times.last() != Some(&t) {
                let area = match (c.times.last(), c.counts.last(), c.integral.last()) {
                    (Some(&t0), Some(&c0), Some(&i0)) => i0 + c0 * (t - t0),
                    _ => 0.0,
                };
                c.times.push(t);
                c.counts.push(count);
                c.integral.push(area);
            }
            count += delta;
            if let Some(last) = c.counts.last_mut() {
                *last = count;
            }
            c.at[record as usize][end] = (c.times.len() - 1) as u32;
        }
        c
    }

    /// Mean jobs in the system over record `index`'s life, `[submit_s, finish_s]` (the count
    /// after the changes at its submission, for an empty life); `None` for a record without a
    /// finish or not counted.
    pub(super) fn mean_over(&self, index: usize, submit_s: f64, finish_s: f64) -> Option<f64> {
        let [from, to] = *self.at.get(index)?;
        if from == NONE || to == NONE {
            return None;
        }
        let (from, to) = (from as usize, to as usize);
        Some(if finish_s > submit_s {
            // Each time is one of the steps', so the area up to it is the integral there.
            (self.integral[to] - self.integral[from]) / (finish_s - submit_s)
        } else {
            self.counts[from]
        })
    }

    /// Record `index`'s finish-time fairness ρ (`None` where it is undefined: not completed,
    /// no work).
    pub(super) fn rho(&self, index: usize, record: &JobRecord, capacity_gpus: u32) -> Option<f64> {
        if record.outcome != JobOutcome::Completed {
            return None;
        }
        let (finish, jct) = (record.finish_s?, record.jct_s()?);
        let mean = self.mean_over(index, record.submit_s, finish)?;
        let jobs = mean.round().max(1.0) as usize;
        arbiter_policy::themis::finish_time_fairness(
            jct,
            record.run_time_s,
            record.gpus,
            capacity_gpus,
            jobs,
        )
    }
}

/// Themis' finish-time fairness ρ of every completed job inside `window`, `(job, ρ)` in record
/// order (see [`super::Summary::max_ftf_rho`]); jobs where ρ is undefined (no work) are left
/// out.
pub fn ftf_rhos(records: &[JobRecord], window: Window, capacity_gpus: u32) -> Vec<(u32, f64)> {
    let contention = Contention::of(Changes::of(records));
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| window.contains(r.job))
        .filter_map(|(i, r)| Some((r.job, contention.rho(i, r, capacity_gpus)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::finished;

    /// The mean over `[from, to]` by searching the steps (what each job's mean was before the
    /// indices were kept).
    fn searched_mean(c: &Contention, from: f64, to: f64) -> f64 {
        let area_to = |t: f64| {
            let i = c.times.partition_point(|&x| x <= t);
            if i == 0 {
                (0.0, 0)
            } else {
                (
                    c.integral[i - 1] + c.counts[i - 1] * (t - c.times[i - 1]),
                    i,
                )
            }
        };
        let (area_from, at) = area_to(from);
        if to > from {
            (area_to(to).0 - area_from) / (to - from)
        } else if at == 0 {
            0.0
        } else {
            c.counts[at - 1]
        }
    }

    #[test]
    fn contention_is_the_time_mean_of_jobs_in_the_system() {
        let mut records = vec![
            finished(0, 1, 0.0, 10.0, 1.0),
            finished(1, 1, 5.0, 20.0, 1.0),
            finished(2, 1, 5.0, 6.0, 1.0),
            finished(3, 1, 6.0, 6.0, 1.0),
        ];
        records[3].outcome = JobOutcome::Unplaceable;
        records.push(finished(4, 1, 7.0, 7.0, 1.0));
        records[4].finish_s = None;
        let c = Contention::of(Changes::of(&records));
        // [0, 5): 1 job; [5, 6): 3; [6, 7): 2; [7, 10): 3; [10, 20): 2 (job 4 never ends).
        let mean = |i: usize| c.mean_over(i, records[i].submit_s, records[i].finish_s?);
        assert_eq!(mean(0), Some((5.0 + 3.0 + 2.0 + 9.0) / 10.0));
        assert_eq!(mean(1), Some((3.0 + 2.0 + 9.0 + 20.0) / 15.0));
        assert_eq!(mean(2), Some(3.0));
        assert_eq!(mean(3), None, "unplaceable: not counted");
        assert_eq!(mean(4), None, "no finish");
    }

    proptest::proptest! {
        /// Records out of submission order, shared instants, zero-length lives, unplaceable and
        /// unfinished jobs: (submission in half seconds, life in quarter seconds or none, kind).
        #[test]
        fn each_jobs_mean_is_what_searching_the_steps_gives_bit_for_bit(
            jobs in proptest::collection::vec((0u32..50, proptest::option::of(0u32..60), 0u8..8), 0..40),
        ) {
            let records: Vec<JobRecord> = jobs
                .iter()
                .enumerate()
                .map(|(id, &(submit, life, kind))| {
                    let submit = submit as f64 * 0.5;
                    let life = life.map_or(0.0, |l| l as f64 * 0.25);
                    let mut r = finished(id as u32, 1, submit, submit + life, 1.0);
                    match kind {
                        0 => r.outcome = JobOutcome::Unplaceable,
                        1 => r.finish_s = None,
                        _ => {}
                    }
                    r
                })
                .collect();
            let c = Contention::of(Changes::of(&records));
            for (i, r) in records.iter().enumerate() {
                let Some(finish) = r.finish_s.filter(|_| r.outcome != JobOutcome::Unplaceable)
                else {
                    assert_eq!(c.mean_over(i, r.submit_s, r.finish_s.unwrap_or(0.0)), None);
                    continue;
                };
                let kept = c.mean_over(i, r.submit_s, finish).expect("counted");
                let searched = searched_mean(&c, r.submit_s, finish);
                assert_eq!(kept.to_bits(), searched.to_bits(), "record {i}: {r:?}");
            }
        }
    }
}
