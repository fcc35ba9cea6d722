//! GPU quotas as admission: which waiting jobs a tenant's quota lets the policy see.
//!
//! A quota applied after the policy decided is a trap: the policy places a job the quota then
//! holds back, so the job blocks the head of the queue beside free GPUs, or other tenants' jobs
//! are preempted to make room it never takes. So quotas act *before* the policy, as Kueue
//! admits workloads before the scheduler places them: a waiting job is offered only if its
//! GPUs fit in what its tenant's quota leaves, counting what the tenant holds and the jobs of
//! its admitted ahead of it. Whatever subset of the offered jobs a policy then starts, no
//! tenant exceeds its quota, and no policy preempts for a job the quota would refuse.
//!
//! Within a tenant, jobs are admitted in Kueue's `BestEffortFIFO` order: higher priority
//! first, then earlier submission; a job that does not fit does not stop smaller ones behind
//! it. The policy orders everything offered, across tenants, as it always does.
//!
//! Pure (tenants and jobs in, an answer out), so that the simulator can apply the same rule.

use std::collections::BTreeMap;

/// A tenant's quota and the GPUs its running jobs hold now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaUse {
    /// Most GPUs the tenant's jobs may hold.
    pub quota_gpus: u32,
    /// GPUs its jobs hold now (running, or stopping and not yet released). May exceed the
    /// quota after the quota was lowered: running jobs are not stopped for that.
    pub held_gpus: u32,
}

/// A waiting job of a tenant with a quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting<'a> {
    /// The job's id.
    pub id: u32,
    /// Its tenant.
    pub tenant: &'a str,
    /// Higher first.
    pub priority: i32,
    /// Submission time (any monotone unit); earlier first.
    pub submitted: i64,
    /// The fewest GPUs it can start on.
    pub gpus: u32,
}

/// Why the quota holds a waiting job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaHold {
    /// It needs more GPUs than the whole quota: it waits until the quota is raised.
    OverQuota {
        /// The job's GPUs.
        gpus: u32,
        /// The tenant's quota.
        quota_gpus: u32,
    },
    /// What the tenant holds, plus its jobs admitted ahead of this one, leaves too little now.
    QuotaInUse {
        /// The job's GPUs.
        gpus: u32,
        /// The tenant's quota.
        quota_gpus: u32,
        /// GPUs its jobs hold now.
        held_gpus: u32,
        /// GPUs of its jobs admitted ahead of this one at this round.
        ahead_gpus: u32,
    },
}

impl QuotaHold {
    /// Why, in words, for a job of `tenant` (shown to that tenant only: it names nothing of
    /// any other tenant's).
    pub fn reason(&self, tenant: &str) -> String {
        match *self {
            QuotaHold::OverQuota { gpus, quota_gpus } => {
                format!(
                    "needs {gpus} GPUs, more than tenant {tenant}'s GPU quota ({quota_gpus}): held until the quota is raised"
                )
            }
            QuotaHold::QuotaInUse {
                gpus,
                quota_gpus,
                held_gpus,
                ahead_gpus: 0,
            } => {
                format!(
                    "tenant {tenant} is at its GPU quota: its jobs hold {held_gpus} of {quota_gpus} GPUs and this one needs {gpus}; waits for them to free GPUs"
                )
            }
            QuotaHold::QuotaInUse {
                gpus,
                quota_gpus,
                held_gpus,
                ahead_gpus,
            } => format!(
                "tenant {tenant}'s GPU quota ({quota_gpus}) is taken: its jobs hold {held_gpus} GPUs and {ahead_gpus} go to its jobs ahead of this one (priority, then submission); this one needs {gpus}"
            ),
        }
    }
}

/// What admission came to at one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// Jobs held back, by id (ascending), with why.
    pub held_back: Vec<(u32, QuotaHold)>,
    /// GPUs each tenant's quota leaves after what it holds and what was admitted: room for its
    /// elastic jobs to grow into. Tenants with nothing left are absent.
    pub spare_gpus: BTreeMap<String, u32>,
}

impl Admission {
    /// Why `id` is held back (`None`: offered).
    pub fn hold_of(&self, id: u32) -> Option<QuotaHold> {
        self.held_back
            .binary_search_by_key(&id, |(i, _)| *i)
            .ok()
            .map(|at| self.held_back[at].1)
    }
}

/// Admits the `waiting` jobs of tenants with a quota (`quotas`; a tenant absent from it has
/// none, and its jobs should not be passed). See the module's documentation for the rule.
pub fn admit(quotas: &BTreeMap<&str, QuotaUse>, mut waiting: Vec<Waiting<'_>>) -> Admission {
    waiting.sort_by(|a, b| {
        (a.tenant, -i64::from(a.priority), a.submitted, a.id).cmp(&(
            b.tenant,
            -i64::from(b.priority),
            b.submitted,
            b.id,
        ))
    });
    let mut admission = Admission::default();
    let mut ahead: BTreeMap<&str, u32> = BTreeMap::new();
    for job in &waiting {
        let Some(usage) = quotas.get(job.tenant) else {
            continue;
        };
        let ahead = ahead.entry(job.tenant).or_insert(0);
        let room = usage
            .quota_gpus
            .saturating_sub(usage.held_gpus)
            .saturating_sub(*ahead);
        if job.gpus > usage.quota_gpus {
            admission.held_back.push((
                job.id,
                QuotaHold::OverQuota {
                    gpus: job.gpus,
                    quota_gpus: usage.quota_gpus,
                },
            ));
        } else if job.gpus > room {
            let hold = QuotaHold::QuotaInUse {
                gpus: job.gpus,
                quota_gpus: usage.quota_gpus,
                held_gpus: usage.held_gpus,
                ahead_gpus: *ahead,
            };
            admission.held_back.push((job.id, hold));
        } else {
            *ahead += job.gpus;
        }
    }
    for (tenant, usage) in quotas {
        let taken = usage
            .held_gpus
            .saturating_add(ahead.get(tenant).copied().unwrap_or(0));
        let spare = usage.quota_gpus.saturating_sub(taken);
        if spare > 0 {
            admission.spare_gpus.insert((*tenant).to_string(), spare);
        }
    }
    admission.held_back.sort_unstable_by_key(|(id, _)| *id);
    admission
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn waiting(id: u32, tenant: &str, gpus: u32) -> Waiting<'_> {
        Waiting {
            id,
            tenant,
            priority: 0,
            submitted: i64::from(id),
            gpus,
        }
    }

    #[test]
    fn a_job_larger_than_the_quota_is_held_until_it_is_raised_and_takes_no_room() {
        let quotas = BTreeMap::from([(
            "a",
            QuotaUse {
                quota_gpus: 2,
                held_gpus: 0,
            },
        )]);
        let admission = admit(&quotas, vec![waiting(0, "a", 4), waiting(1, "a", 1)]);
        assert_eq!(
            admission.hold_of(0),
            Some(QuotaHold::OverQuota {
                gpus: 4,
                quota_gpus: 2
            })
        );
        assert_eq!(
            admission.hold_of(1),
            None,
            "a smaller job behind it is admitted"
        );
        assert_eq!(admission.spare_gpus.get("a"), Some(&1));
    }

    #[test]
    fn jobs_are_admitted_by_priority_then_submission_until_the_quota_is_taken() {
        let quotas = BTreeMap::from([(
            "a",
            QuotaUse {
                quota_gpus: 3,
                held_gpus: 1,
            },
        )]);
        let mut urgent = waiting(5, "a", 2);
        urgent.priority = 10;
        let admission = admit(
            &quotas,
            vec![waiting(1, "a", 2), waiting(2, "a", 1), urgent],
        );
        assert_eq!(admission.hold_of(5), None, "the higher priority goes first");
        assert_eq!(
            admission.hold_of(1),
            Some(QuotaHold::QuotaInUse {
                gpus: 2,
                quota_gpus: 3,
                held_gpus: 1,
                ahead_gpus: 2
            })
        );
        assert_eq!(
            admission.hold_of(2),
            Some(QuotaHold::QuotaInUse {
                gpus: 1,
                quota_gpus: 3,
                held_gpus: 1,
                ahead_gpus: 2
            })
        );
        assert!(admission.spare_gpus.is_empty());
    }

    #[test]
    fn a_quota_lowered_under_running_jobs_admits_nothing_and_stops_nothing() {
        let quotas = BTreeMap::from([(
            "a",
            QuotaUse {
                quota_gpus: 1,
                held_gpus: 3,
            },
        )]);
        let admission = admit(&quotas, vec![waiting(0, "a", 1)]);
        assert!(matches!(
            admission.hold_of(0),
            Some(QuotaHold::QuotaInUse { .. })
        ));
    }

    proptest! {
        /// Whatever subset of the admitted jobs starts, no tenant exceeds its quota (beyond what
        /// it already held), and a job is held back only when it did not fit.
        #[test]
        fn admitted_jobs_fit_the_quota_together(
            quotas in proptest::collection::vec((0u32..8, 0u32..8), 1..4),
            jobs in proptest::collection::vec((0usize..4, 1u32..6, -2i32..2), 0..20),
        ) {
            let names = ["a", "b", "c", "d"];
            let quota_map: BTreeMap<&str, QuotaUse> = quotas.iter().enumerate().map(|(i, (q, h))| (names[i], QuotaUse { quota_gpus: *q, held_gpus: *h })).collect();
            let waiting: Vec<Waiting<'_>> = jobs.iter().enumerate().filter(|(_, (t, _, _))| *t < quotas.len())
                .map(|(id, (t, gpus, priority))| Waiting { id: id as u32, tenant: names[*t], priority: *priority, submitted: 0, gpus: *gpus }).collect();
            let admission = admit(&quota_map, waiting.clone());
            for (tenant, usage) in &quota_map {
                let admitted: u32 = waiting.iter().filter(|w| w.tenant == *tenant && admission.hold_of(w.id).is_none()).map(|w| w.gpus).sum();
                prop_assert!(admitted == 0 || usage.held_gpus + admitted <= usage.quota_gpus);
                prop_assert_eq!(admission.spare_gpus.get(*tenant).copied().unwrap_or(0), usage.quota_gpus.saturating_sub(usage.held_gpus + admitted));
            }
            for w in &waiting {
                if let Some(QuotaHold::QuotaInUse { gpus, quota_gpus, held_gpus, ahead_gpus }) = admission.hold_of(w.id) {
                    prop_assert!(gpus + held_gpus + ahead_gpus > quota_gpus);
                }
            }
        }
    }
}
