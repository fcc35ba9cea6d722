//! Who holds which GPU: the one map, built from the jobs, that the round (what is free, who
//! shares with whom, what each tenant holds against its quota) and the API (`shares_gpus_with`)
//! read. A GPU is held by every job whose run is running or still stopping on it; co-located
//! jobs hold the same GPUs.

use crate::records::job::{JobRecord, JobState};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A job holding GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Holder {
    /// The job.
    id: u32,
    /// Its tenant, as a position in [`GpuHolders::tenants`].
    tenant: u32,
    /// Its run is running (not stopping).
    running: bool,
    /// It counts against its tenant's quota (it is not opportunistic).
    counts_for_quota: bool,
}

/// Which jobs hold each GPU, by GPU index, each GPU's holders in job-id order.
///
/// Flat, built in one pass over the holders (a round builds it several times): each holding
/// job once with its tenant's position, and the holders of GPU `g` at
/// `on_gpu[start[g]..start[g + 1]]` — not a list per GPU and a tenant name per GPU held, which
/// were 8,000 allocations a build on a full 1,000-node cluster.
#[derive(Clone, Debug, Default)]
pub struct GpuHolders {
    /// The holding jobs, in the order given (by id).
    jobs: Vec<Holder>,
    /// Their tenants, each once.
    tenants: Vec<String>,
    /// Per GPU index, where its holders start in `on_gpu` (one more entry than GPUs).
    start: Vec<u32>,
    /// Positions in `jobs`, grouped by GPU.
    on_gpu: Vec<u32>,
}

impl GpuHolders {
    /// The holders among `jobs`.
    pub fn of<'a>(jobs: impl IntoIterator<Item = &'a JobRecord>) -> Self {
        Self::of_filtered(jobs, |_| true)
    }

    /// The holders among `jobs` of the GPUs in `gpus` only: enough for
    /// [`GpuHolders::shared_with`] of jobs that hold no others (a page of the job list).
    pub fn of_gpus<'a>(
        jobs: impl IntoIterator<Item = &'a JobRecord>,
        gpus: &BTreeSet<u32>,
    ) -> Self {
        Self::of_filtered(jobs, |g| gpus.contains(&g))
    }

    fn of_filtered<'a>(
        jobs: impl IntoIterator<Item = &'a JobRecord>,
        keep: impl Fn(u32) -> bool,
    ) -> Self {
        let mut holders = GpuHolders::default();
        let mut tenant_at: BTreeMap<&str, u32> = BTreeMap::new();
        // (GPU, position of its holder), in job order.
        let mut held: Vec<(u32, u32)> = Vec::new();
        for job in jobs {
            let Some(gpus) = job.state.gpus() else {
                continue;
            };
            let at = holders.jobs.len() as u32;
            let before = held.len();
            held.extend(gpus.iter().filter(|g| keep(**g)).map(|&g| (g, at)));
            if held.len() == before {
                continue;
            }
            let tenant = *tenant_at.entry(job.tenant.as_str()).or_insert_with(|| {
                holders.tenants.push(job.tenant.clone());
                holders.tenants.len() as u32 - 1
            });
            holders.jobs.push(Holder {
                id: job.id,
                tenant,
                running: matches!(job.state, JobState::Running { .. }),
                counts_for_quota: !job.request.opportunistic,
            });
        }
        // Counting sort by GPU: each GPU's holders stay in job order.
        let gpus = held.iter().map(|&(g, _)| g as usize + 1).max().unwrap_or(0);
        holders.start = vec![0; gpus + 1];
        for &(g, _) in &held {
            holders.start[g as usize + 1] += 1;
        }
        for g in 0..gpus {
            holders.start[g + 1] += holders.start[g];
        }
        holders.on_gpu = vec![0; held.len()];
        let mut next: Vec<u32> = holders.start[..gpus].to_vec();
        for &(g, at) in &held {
            holders.on_gpu[next[g as usize] as usize] = at;
            next[g as usize] += 1;
        }
        holders
    }

    /// The holders of GPU `gpu`, in job-id order.
    fn on(&self, gpu: u32) -> impl Iterator<Item = &Holder> {
        let g = gpu as usize;
        let range = match (self.start.get(g), self.start.get(g + 1)) {
            (Some(&from), Some(&to)) => from as usize..to as usize,
            _ => 0..0,
        };
        self.on_gpu[range].iter().map(|&at| &self.jobs[at as usize])
    }

    /// The GPU indices that have a place (the highest held, plus one).
    fn gpus(&self) -> u32 {
        self.start.len().saturating_sub(1) as u32
    }

    /// Whether any job holds GPU `gpu`.
    pub fn is_held(&self, gpu: u32) -> bool {
        self.on(gpu).next().is_some()
    }

    /// The GPUs held, ascending.
    pub fn held(&self) -> BTreeSet<u32> {
        (0..self.gpus()).filter(|g| self.is_held(*g)).collect()
    }

    /// Per tenant, the GPUs its jobs hold that count against its quota (a GPU two of its jobs
    /// share counts twice, once for each).
    pub fn held_by_tenant(&self) -> BTreeMap<String, u32> {
        let mut by_tenant = vec![0u32; self.tenants.len()];
        for &at in &self.on_gpu {
            let h = &self.jobs[at as usize];
            if h.counts_for_quota {
                by_tenant[h.tenant as usize] += 1;
            }
        }
        self.tenants
            .iter()
            .zip(by_tenant)
            .filter(|(_, n)| *n > 0)
            .map(|(t, n)| (t.clone(), n))
            .collect()
    }

    /// Each job holding GPUs, with the other jobs holding any of them (ascending; empty for a
    /// job alone on its GPUs).
    pub fn sharing(&self) -> BTreeMap<u32, Vec<u32>> {
        let mut sharing: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for g in 0..self.gpus() {
            for h in self.on(g) {
                sharing
                    .entry(h.id)
                    .or_default()
                    .extend(self.on(g).map(|o| o.id).filter(|o| *o != h.id));
            }
        }
        for others in sharing.values_mut() {
            others.sort_unstable();
            others.dedup();
        }
        sharing
    }

    /// Who runs co-located with whom: running jobs holding exactly the same GPUs form a group of
    /// 2 to [`arbiter_model::MAX_GROUP`], a ring (in job-id order) in which each names the next
    /// (a pair names each other).
    pub fn partners(&self) -> BTreeMap<u32, u32> {
        let mut gpus_of: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for g in 0..self.gpus() {
            for h in self.on(g).filter(|h| h.running) {
                gpus_of.entry(h.id).or_default().push(g);
            }
        }
        let mut groups: BTreeMap<&[u32], Vec<u32>> = BTreeMap::new();
        for (id, gpus) in &gpus_of {
            groups.entry(gpus.as_slice()).or_default().push(*id);
        }
        groups
            .values()
            .filter(|ids| (2..=arbiter_model::MAX_GROUP).contains(&ids.len()))
            .flat_map(|ids| {
                ids.iter()
                    .enumerate()
                    .map(|(i, id)| (*id, ids[(i + 1) % ids.len()]))
            })
            .collect()
    }

    /// The other jobs holding GPUs `job` holds, as `viewer` (`None`: the admin) may see them:
    /// the ones it may see by id first, then other tenants' (ordered by their GPUs, not their
    /// ids).
    pub fn shared_with(&self, job: &JobRecord, viewer: Option<&str>) -> Vec<SharedGpus> {
        let mut by_job: BTreeMap<u32, (bool, Vec<u32>)> = BTreeMap::new();
        for &g in job.state.gpus().unwrap_or_default() {
            for other in self.on(g).filter(|o| o.id != job.id) {
                let visible =
                    viewer.is_none_or(|v| v == self.tenants[other.tenant as usize].as_str());
                by_job
                    .entry(other.id)
                    .or_insert_with(|| (visible, Vec::new()))
                    .1
                    .push(g);
            }
        }
        let (mut seen, mut hidden): (Vec<SharedGpus>, Vec<SharedGpus>) = (Vec::new(), Vec::new());
        for (other, (visible, gpus)) in by_job {
            if visible {
                seen.push(SharedGpus {
                    id: Some(other),
                    gpus,
                    other_tenant: false,
                });
            } else {
                hidden.push(SharedGpus {
                    id: None,
                    gpus,
                    other_tenant: true,
                });
            }
        }
        hidden.sort_by(|a, b| a.gpus.cmp(&b.gpus));
        seen.extend(hidden);
        seen
    }
}

/// Another job holding GPUs a job holds (the policy co-located them), as one caller may see it:
/// its id only when the caller may see that job (the admin, or the same tenant); for another
/// tenant's job only that the GPUs are shared — what `/v1/cluster` already shows of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedGpus {
    /// The other job, when the caller may see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// The GPU indices both hold.
    pub gpus: Vec<u32>,
    /// The other job belongs to another tenant (its id is not shown).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub other_tenant: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::tests::with_stages;

    fn on(id: u32, tenant: &str, gpus: &[u32], running: bool) -> JobRecord {
        let mut j = JobRecord::submitted(id, tenant, with_stages(0.1, 0.1, 0.1), 0, String::new());
        j.state = if running {
            JobState::Running {
                gpus: gpus.to_vec(),
                pid: 100 + id,
                started_unix_s: 0,
            }
        } else {
            JobState::Stopping {
                gpus: gpus.to_vec(),
                pid: 100 + id,
                reason: crate::records::job::StopReason::Preempted,
                since_unix_s: 0,
                signal_sent: true,
            }
        };
        j
    }

    #[test]
    fn a_tenant_sees_another_tenants_job_on_its_gpus_only_as_shared_gpus() {
        let running = |id, tenant, gpus: &[u32]| on(id, tenant, gpus, true);
        let jobs = [
            running(0, "a", &[0]),
            running(1, "a", &[0]),
            running(2, "b", &[0]),
            running(3, "b", &[1]),
            JobRecord::submitted(4, "a", with_stages(0.1, 0.1, 0.1), 0, String::new()),
        ];
        let holders = GpuHolders::of(&jobs);
        let mine = |id: Option<u32>, gpus: &[u32]| SharedGpus {
            id,
            gpus: gpus.to_vec(),
            other_tenant: id.is_none(),
        };
        assert_eq!(
            holders.shared_with(&jobs[0], Some("a")),
            vec![mine(Some(1), &[0]), mine(None, &[0])]
        );
        assert_eq!(
            holders.shared_with(&jobs[2], Some("b")),
            vec![mine(None, &[0]), mine(None, &[0])]
        );
        assert_eq!(
            holders.shared_with(&jobs[0], None),
            vec![mine(Some(1), &[0]), mine(Some(2), &[0])],
            "the admin sees every id"
        );
        assert_eq!(holders.shared_with(&jobs[3], Some("b")), vec![]);
        assert_eq!(
            holders.shared_with(&jobs[4], Some("a")),
            vec![],
            "a queued job shares nothing"
        );
        let json = serde_json::to_value(holders.shared_with(&jobs[2], Some("b"))).expect("json");
        assert_eq!(
            json,
            serde_json::json!([{"gpus": [0], "other_tenant": true}, {"gpus": [0], "other_tenant": true}])
        );
    }

    #[test]
    fn one_map_answers_what_is_held_who_shares_and_who_runs_together() {
        let mut opportunistic = on(5, "b", &[6], true);
        opportunistic.request.opportunistic = true;
        let jobs = [
            on(0, "a", &[0, 1], true),
            on(1, "a", &[0, 1], true),
            on(2, "b", &[1, 2], true),
            on(3, "b", &[4], false),
            on(4, "a", &[5], true),
            opportunistic,
        ];
        let holders = GpuHolders::of(&jobs);
        assert_eq!(holders.held(), BTreeSet::from([0, 1, 2, 4, 5, 6]));
        assert!(holders.is_held(4) && !holders.is_held(3) && !holders.is_held(99));
        assert_eq!(
            holders.held_by_tenant(),
            BTreeMap::from([("a".to_string(), 5), ("b".to_string(), 3)]),
            "a stopping run holds; an opportunistic one counts for no quota"
        );
        assert_eq!(
            holders.sharing(),
            BTreeMap::from([
                (0, vec![1, 2]),
                (1, vec![0, 2]),
                (2, vec![0, 1]),
                (3, vec![]),
                (4, vec![]),
                (5, vec![])
            ])
        );
        assert_eq!(
            holders.partners(),
            BTreeMap::from([(0, 1), (1, 0)]),
            "exactly the same GPUs, running"
        );
        let trio = [
            on(0, "a", &[3], true),
            on(1, "a", &[3], true),
            on(2, "a", &[3], true),
            on(3, "a", &[3], false),
        ];
        assert_eq!(
            GpuHolders::of(&trio).partners(),
            BTreeMap::from([(0, 1), (1, 2), (2, 0)]),
            "a ring; the stopping run is not a partner"
        );
        assert_eq!(
            GpuHolders::of_gpus(&jobs, &BTreeSet::from([1])).held(),
            BTreeSet::from([1])
        );
    }
}
