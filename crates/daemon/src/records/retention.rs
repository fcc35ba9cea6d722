//! What a tenant keeps: its ended jobs' records are pruned by age, count and size, and its
//! submissions are rate-limited, so that no tenant can grow the daemon's memory and store
//! without bound (issue 26: 1,500 jobs that ended at once took the daemon from 10 to 181 MB and
//! its store to 95 MB, never shrinking).
//!
//! ```text
//!   job ends for good ──► its tenant's ended jobs, in the order they ended
//!   each round ──► the oldest are pruned while the tenant keeps more than keep_finished_per_tenant,
//!                  more than keep_finished_mib_per_tenant of records, or ones older than
//!                  keep_finished_days: record deleted from the store, log file removed, slot freed
//! ```
//!
//! A pruned job's id is never given out again; `GET /v1/jobs/ID` answers 404 for it. (Its
//! checkpoint directory is the tenant's data and is left alone.)

use crate::records::job::JobRecord;
use std::collections::{BTreeMap, VecDeque};

/// How much of its ended jobs a tenant keeps, and how fast it may submit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Retention {
    /// Most ended jobs a tenant keeps on record.
    pub keep_finished_per_tenant: usize,
    /// Most bytes of ended jobs' records a tenant keeps (their JSON size, roughly).
    pub keep_finished_bytes_per_tenant: u64,
    /// Ended jobs older than this are pruned (seconds; 0: kept whatever their age).
    pub keep_finished_s: u64,
    /// Submissions a tenant may make per second, on average.
    pub submissions_per_s: f64,
    /// Submissions a tenant may make at once (the bucket's size).
    pub submission_burst: u32,
}

impl Default for Retention {
    /// A busy year on one box: a year of ended jobs, at most 10,000 per tenant and 64 MiB of
    /// their records; bursts of 1,000 submissions, one a second on average (86,400 a day).
    fn default() -> Self {
        Retention {
            keep_finished_per_tenant: 10_000,
            keep_finished_bytes_per_tenant: 64 << 20,
            keep_finished_s: 365 * 86_400,
            submissions_per_s: 1.0,
            submission_burst: 1_000,
        }
    }
}

/// A tenant's ended jobs, oldest end first.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ended {
    pub(crate) jobs: VecDeque<EndedJob>,
    pub(crate) bytes: u64,
}

/// One ended job, as retention counts it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EndedJob {
    pub(crate) id: u32,
    pub(crate) ended_unix_s: i64,
    pub(crate) bytes: u64,
}

/// Roughly the size of a job's record as JSON: its variable parts (the tenant's text) and a
/// fixed part. Cheap enough to compute at every job end, unlike serializing it.
pub(crate) fn approx_record_bytes(job: &JobRecord) -> u64 {
    let r = &job.request;
    let text = r.command.len()
        + r.env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>()
        + r.working_dir.as_ref().map_or(0, String::len)
        + r.checkpoint_dir.as_ref().map_or(0, String::len)
        + r.name.as_ref().map_or(0, String::len)
        + r.gpu_types.iter().map(String::len).sum::<usize>()
        + job
            .history
            .iter()
            .map(|t| t.why.len() + t.to.name().len() + 40)
            .sum::<usize>()
        + job.pending_reason.as_ref().map_or(0, |r| r.len());
    (text + 1024) as u64
}

/// When a job ended (its last transition), Unix seconds.
fn ended_at(job: &JobRecord) -> i64 {
    job.history
        .last()
        .map_or(job.submitted_unix_s, |t| t.at_unix_s)
}

impl Ended {
    pub(crate) fn push(&mut self, job: &JobRecord) {
        let bytes = approx_record_bytes(job);
        self.bytes += bytes;
        self.jobs.push_back(EndedJob {
            id: job.id,
            ended_unix_s: ended_at(job),
            bytes,
        });
    }
}

/// Each tenant's ended jobs on record, from the records at start.
pub(crate) fn ended_by_tenant(jobs: &crate::records::jobs::Jobs) -> BTreeMap<String, Ended> {
    let mut ended: Vec<&JobRecord> = jobs.iter().filter(|j| j.state.is_terminal()).collect();
    ended.sort_by_key(|j| (ended_at(j), j.id));
    let mut by_tenant: BTreeMap<String, Ended> = BTreeMap::new();
    for job in ended {
        by_tenant.entry(job.tenant.clone()).or_default().push(job);
    }
    by_tenant
}

/// A tenant's submission budget: a token bucket of `submission_burst` refilled at
/// `submissions_per_s`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    tokens: f64,
    at_ms: u64,
}

impl Budget {
    pub(crate) fn full(retention: &Retention, now_ms: u64) -> Self {
        Budget {
            tokens: f64::from(retention.submission_burst.max(1)),
            at_ms: now_ms,
        }
    }

    /// One submission at `now_ms`, or the seconds until one may be made.
    pub(crate) fn take(&mut self, retention: &Retention, now_ms: u64) -> Result<(), f64> {
        let burst = f64::from(retention.submission_burst.max(1));
        let refilled = (self.tokens
            + now_ms.saturating_sub(self.at_ms) as f64 / 1000.0 * retention.submissions_per_s)
            .min(burst);
        self.at_ms = self.at_ms.max(now_ms);
        if refilled < 1.0 {
            self.tokens = refilled;
            return Err((1.0 - refilled) / retention.submissions_per_s.max(f64::MIN_POSITIVE));
        }
        self.tokens = refilled - 1.0;
        Ok(())
    }
}

impl crate::config::ServeConfig {
    /// What tenants keep of their ended jobs, and how fast they may submit.
    pub fn retention(&self) -> Retention {
        Retention {
            keep_finished_per_tenant: self.keep_finished_per_tenant,
            keep_finished_bytes_per_tenant: self
                .keep_finished_mib_per_tenant
                .saturating_mul(1 << 20),
            keep_finished_s: self.keep_finished_days.saturating_mul(86_400),
            submissions_per_s: self.submissions_per_s_per_tenant,
            submission_burst: self.submission_burst_per_tenant,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_submission_budget_refills_at_its_rate_up_to_its_burst() {
        let retention = Retention {
            submissions_per_s: 2.0,
            submission_burst: 3,
            ..Retention::default()
        };
        let mut budget = Budget::full(&retention, 0);
        let mut take = |now_ms: u64| budget.take(&retention, now_ms).is_ok();
        assert!(take(0) && take(0) && take(0), "a burst of 3");
        assert!(!take(0), "then empty");
        assert!(take(500), "one more after half a second at 2/s");
        assert!(!take(500));
        assert_eq!(
            Budget::full(&retention, 0).take(
                &Retention {
                    submission_burst: 0,
                    ..retention
                },
                0
            ),
            Ok(()),
            "a burst of 0 counts as 1"
        );
        assert!(
            take(10_000) && take(10_000) && take(10_000) && !take(10_000),
            "never more than the burst"
        );
    }
}
