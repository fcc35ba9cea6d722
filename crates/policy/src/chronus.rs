//! `chronus`: deadline-aware scheduling with admission control (Gao et al., "Chronus: A Novel
//! Deadline-aware Scheduler for Deep Learning Training Jobs", SoCC'21), as its artifact runs it
//! (`docs/chronus-reference.md`), without its bugs:
//!
//! - Time is cut into leases of `lease_s` (20 minutes). A job with a deadline needs
//!   `r = ⌈margin × run time ÷ (lease − restart overhead)⌉` leases of its GPUs (the 10% margin
//!   and the restart every lease may cost are Chronus' safety factors; with exact run times `r`
//!   guaranteed leases always finish it).
//! - **Admission**, when the policy first sees the job: its first (most valuable) deadline is
//!   admissible if `r` leases that end by it, from the next lease on, still have the job's GPUs
//!   free after the leases promised to jobs admitted before it (with `later_options`, a soft
//!   job's later deadlines are tried in turn; the artifact tries only the first). They are reserved as late as possible (leaving the near leases
//!   to others). Admitted: the deadline is *guaranteed*, and the policy says so
//!   ([`Decision::admitted`]); refused: the job runs only on GPUs nobody is guaranteed, like a
//!   best-effort job, and is never offered again. (The artifact, by a bug, also refuses every
//!   later job of the same 5-minute batch after one refusal.)
//! - **At each lease boundary** the jobs holding a reservation for the starting lease run first
//!   (largest first, on the GPUs the reservations counted); an admitted job that got ahead on
//!   spare GPUs gives back its earliest reservations it no longer needs. The artifact re-plans
//!   every reservation with an integer program at each boundary (Gurobi, 5 s limit), maximizing
//!   the value of the options kept; reservations made at admission are already feasible for the
//!   first option met, so this keeps them (an integer program over thousands of leases × jobs
//!   is the next step: `docs/chronus-reference.md`).
//! - **Spare GPUs** go, at every scheduling point, to refused and best-effort jobs by least
//!   remaining GPU time, then to admitted jobs by least slack; between boundaries running jobs
//!   keep their GPUs (only boundaries preempt).
//!
//! Jobs without a deadline are best effort. Run times are the oracle's (`run_time_s`), as the
//! artifact's users declare them.

use crate::greedy::{schedule_in_order, GreedyOptions};
use crate::{order_key, Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobId, JobSpec, SimDuration, SimTime};
use std::collections::{BTreeMap, BTreeSet};

/// Chronus' settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChronusConfig {
    /// Lease length, seconds (the artifact: 20 minutes).
    pub lease_s: f64,
    /// Safety factor on run times (the artifact: 1.1).
    pub margin: f64,
    /// Also admit a soft job at a later, less valuable deadline when its first cannot be
    /// guaranteed (the artifact does not: false).
    pub later_options: bool,
}

impl Default for ChronusConfig {
    fn default() -> Self {
        ChronusConfig { lease_s: 1200.0, margin: 1.1, later_options: false }
    }
}

/// Where a job with a deadline stands.
#[derive(Clone, Debug, PartialEq)]
enum Standing {
    /// Its deadline is guaranteed: GPUs reserved in these leases (absolute lease indices), for
    /// the option ending at `deadline`.
    Admitted { leases: BTreeSet<u64>, deadline: SimTime },
    /// Not guaranteed: runs on spare GPUs only.
    Refused,
}

/// Chronus.
#[derive(Clone, Debug)]
pub struct Chronus {
    config: ChronusConfig,
    options: GreedyOptions,
    standing: BTreeMap<JobId, Standing>,
    /// GPUs reserved per lease index.
    reserved: BTreeMap<u64, u32>,
    /// The lease of the last decision.
    lease: Option<u64>,
}

impl Chronus {
    /// Chronus with `config`, placing with `options`' strategy.
    pub fn new(config: ChronusConfig, options: GreedyOptions) -> Result<Self, PolicyError> {
        if !(config.lease_s.is_finite() && config.lease_s >= 1.0) {
            return Err(PolicyError::Config(format!("chronus needs a lease of at least 1 s, got {}", config.lease_s)));
        }
        if !(config.margin.is_finite() && config.margin >= 1.0) {
            return Err(PolicyError::Config(format!("chronus' run-time margin must be >= 1, got {}", config.margin)));
        }
        Ok(Chronus { config, options: GreedyOptions { preemptive: true, head_of_line_blocking: false, ..options }, standing: BTreeMap::new(), reserved: BTreeMap::new(), lease: None })
    }

    fn lease_of(&self, t: SimTime) -> u64 {
        (t.as_secs_f64() / self.config.lease_s).floor() as u64
    }

    /// Leases of guaranteed GPUs needed for `work_s` of work (each may start with a restart).
    fn leases_needed(&self, spec: &JobSpec, work_s: f64) -> Option<u64> {
        let overhead_s = spec.restart_overhead.map_or(0.0, SimDuration::as_secs_f64);
        let per_lease = self.config.lease_s - overhead_s;
        (per_lease > 0.0).then(|| (self.config.margin * work_s / per_lease).ceil().max(0.0) as u64)
    }

    /// `needed` leases from `first` through `last`, as late as possible, with `gpus` free.
    fn latest_free(&self, first: u64, last: u64, needed: u64, gpus: u32, capacity: u32) -> Option<BTreeSet<u64>> {
        if needed == 0 {
            return Some(BTreeSet::new());
        }
        let mut chosen = BTreeSet::new();
        let mut lease = last;
        while lease >= first {
            if self.reserved.get(&lease).copied().unwrap_or(0) + gpus <= capacity {
                chosen.insert(lease);
                if chosen.len() as u64 == needed {
                    return Some(chosen);
                }
            }
            if lease == 0 {
                break;
            }
            lease -= 1;
        }
        None
    }

    /// Admission of a job seen for the first time: the first of its deadline options that its
    /// reservations fit before.
    fn admit(&mut self, spec: &JobSpec, now: SimTime, capacity: u32) -> bool {
        let Some(first_deadline) = spec.deadline else { return false };
        let Some(needed) = self.leases_needed(spec, spec.run_time_s) else {
            self.standing.insert(spec.id, Standing::Refused);
            return false;
        };
        let next = self.lease_of(now) + 1;
        // The artifact guarantees the first (most valuable) option or none: a soft job that
        // cannot have it runs on spare GPUs, where its later options may still be met.
        let deadlines: Vec<SimTime> = if self.config.later_options && !spec.deadline_options.is_empty() {
            spec.deadline_options.iter().map(|o| o.deadline).collect()
        } else {
            vec![first_deadline]
        };
        for deadline in deadlines {
            // The last lease that ends by the deadline.
            let end = (deadline.as_secs_f64() / self.config.lease_s).floor() as u64;
            let Some(last) = end.checked_sub(1).filter(|l| *l >= next) else { continue };
            if let Some(leases) = self.latest_free(next, last, needed, spec.gpus, capacity) {
                for l in &leases {
                    *self.reserved.entry(*l).or_insert(0) += spec.gpus;
                }
                self.standing.insert(spec.id, Standing::Admitted { leases, deadline });
                return true;
            }
        }
        self.standing.insert(spec.id, Standing::Refused);
        false
    }

    fn release(&mut self, leases: &BTreeSet<u64>, gpus: u32) {
        for l in leases {
            if let Some(r) = self.reserved.get_mut(l) {
                *r = r.saturating_sub(gpus);
            }
        }
    }
}

impl Policy for Chronus {
    fn name(&self) -> &'static str {
        "chronus"
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, PolicyError> {
        let capacity = view.cluster.total_gpus();
        let lease = self.lease_of(now);
        let boundary = self.lease.is_none_or(|l| lease > l);
        self.lease = Some(lease);
        let mut jobs: Vec<&ActiveJob> = view.jobs.iter().collect();
        jobs.sort_by_key(|j| (j.submit, j.id));
        let mut admitted = Vec::new();
        for j in &jobs {
            let spec = view.spec(j);
            if spec.deadline.is_some() && !self.standing.contains_key(&j.id) {
                admitted.push((j.id, self.admit(spec, now, capacity)));
            }
        }
        if boundary {
            // Past leases are spent; a job ahead of its plan gives back its earliest leases.
            self.reserved = self.reserved.split_off(&lease);
            let mut given_back = Vec::new();
            for j in &jobs {
                let spec = view.spec(j);
                let needed = self.leases_needed(spec, j.remaining_s_at(now));
                if let Some(Standing::Admitted { leases, .. }) = self.standing.get_mut(&j.id) {
                    *leases = leases.split_off(&lease);
                    let mut spare = BTreeSet::new();
                    while needed.is_some_and(|n| (leases.len() as u64) > n) {
                        if let Some(first) = leases.pop_first() {
                            spare.insert(first);
                        }
                    }
                    given_back.push((spare, spec.gpus));
                }
            }
            for (spare, gpus) in given_back {
                self.release(&spare, gpus);
            }
            // A job missing from the view is not necessarily gone: the daemon leaves out a job
            // whose run is being stopped, and it comes back, promise intact. Finished jobs give
            // their promises back in `job_finished`; one that left otherwise (cancelled while
            // queued) keeps its leases until they are spent, then is forgotten.
            let active: BTreeSet<JobId> = view.jobs.iter().map(|j| j.id).collect();
            self.standing.retain(|id, s| active.contains(id) || matches!(s, Standing::Admitted { leases, .. } if leases.last().is_some_and(|l| *l >= lease)));
        }
        // Order: guaranteed this lease (largest first), then — between boundaries — the running
        // jobs, then refused and best-effort jobs by least remaining GPU time, then admitted ones
        // by least slack.
        let standing = &self.standing;
        let key = |j: &ActiveJob| -> (u8, u64, u64, u32) {
            let spec = view.spec(j);
            let remaining = j.remaining_s_at(now);
            match standing.get(&j.id) {
                Some(Standing::Admitted { leases, .. }) if leases.contains(&lease) => (0, u64::MAX - u64::from(spec.gpus), 0, j.id.0),
                _ if !boundary && j.is_running() => (1, 0, 0, j.id.0),
                Some(Standing::Admitted { deadline, .. }) => {
                    let slack = deadline.as_secs_f64() - now.as_secs_f64() - remaining;
                    (3, order_key((slack.max(0.0) + 1.0) * f64::from(spec.gpus)), j.submit.as_ms(), j.id.0)
                }
                _ => (2, order_key(remaining * f64::from(spec.gpus)), j.submit.as_ms(), j.id.0),
            }
        };
        let mut decision = schedule_in_order(view, now, self.options, key);
        decision.admitted = admitted;
        // The next boundary, while anything runs (with nothing running, every waiting job is one
        // the cluster cannot hold, and nothing will change).
        let next = SimTime::from_secs_f64((lease + 1) as f64 * self.config.lease_s);
        decision.wake_at = (!decision.run.is_empty()).then_some(next.max(now + SimDuration::from_ms(1)));
        Ok(decision)
    }

    fn job_finished(&mut self, spec: &JobSpec, _job: &ActiveJob, _now: SimTime) {
        if let Some(Standing::Admitted { leases, .. }) = self.standing.remove(&spec.id) {
            self.release(&leases, spec.gpus);
        }
    }
}

#[cfg(test)]
mod tests;
