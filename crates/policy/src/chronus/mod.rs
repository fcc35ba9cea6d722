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
//! - **Re-planning** (`chronus/replan.rs`, `chronus/plan.rs`): when the greedy test fails, an
//!   integer program re-plans the promises in the leases before the newcomer's deadline — each
//!   promise kept, leases moved anywhere before its own deadline — and admits the newcomer if a
//!   plan fits it too. The artifact re-plans every promise at every boundary (Gurobi, 5 s); the
//!   whole plan is too large to solve at each decision here, and at a boundary only a job behind
//!   its reservations, or one kept on a later option, can gain, so only those are re-planned
//!   then. Solved by microlp with a node limit (deterministic), from the present plan.
//! - **At each lease boundary** the jobs holding a reservation for the starting lease run first
//!   (largest first, on the GPUs the reservations counted); an admitted job that got ahead on
//!   spare GPUs gives back its earliest reservations it no longer needs.
//! - **Spare GPUs** go, at every scheduling point, to refused and best-effort jobs by least
//!   remaining GPU time, then to admitted jobs by least slack; between boundaries running jobs
//!   keep their GPUs (only boundaries preempt).
//!
//! Jobs without a deadline are best effort. Run times are the oracle's (`run_time_s`), as the
//! artifact's users declare them.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::greedy::{GreedyOptions, schedule_in_order};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{ActiveJob, Decision, JobId, JobSpec, SimDuration, SimTime};
use plan::PlanOption;
use std::collections::{BTreeMap, BTreeSet};

mod plan;
mod replan;

/// `chronus`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("chronus", Family::Events, "Chronus: deadlines admitted only if leases of their GPUs can be reserved before them (guaranteed), refused ones and best effort on spare GPUs by least remaining GPU time (SoCC'21)")
    .paper("Chronus (SoCC'21), as its artifact")
    .detail("deadline guarantees with admission: at submission a job's first deadline is admitted if leases of its GPUs (`policy.chronus.lease_s` long; run time × `policy.chronus.margin` per lease less a restart) can be reserved before it after earlier promises, or if an integer program re-planning the promises makes room, else refused; each lease's holders run first, spare GPUs go to refused and best-effort jobs by least remaining GPU time, then to admitted ones by least slack; preempts only at lease boundaries");

/// Builds `chronus` with its settings (checked).
pub fn build(chronus: &ChronusConfig, placing: Placing) -> Result<Chronus, PolicyError> {
    Chronus::new(*chronus, GreedyOptions::fit_first(placing))
}

/// Chronus' settings (scenario table `[policy.chronus]`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChronusConfig {
    /// Lease length, seconds (the artifact: 20 minutes).
    pub lease_s: f64,
    /// Safety factor on run times (the artifact: 1.1).
    pub margin: f64,
    /// Also admit a soft job at a later, less valuable deadline when its first cannot be
    /// guaranteed (the artifact does not: false).
    pub later_options: bool,
    /// Branch-and-bound nodes the lease-plan integer program may use per solve (deterministic;
    /// 0: keep every plan as admitted, never re-plan).
    pub mip_node_limit: u64,
    /// Wall-clock limit of one solve, seconds (the daemon's; `None` in simulation, which must not
    /// depend on the machine's speed: not a scenario key).
    #[serde(skip)]
    pub mip_time_limit_s: Option<f64>,
    /// The largest re-plan attempted, in binary variables (larger windows keep their plan).
    pub mip_max_binaries: usize,
}

impl Default for ChronusConfig {
    fn default() -> Self {
        ChronusConfig {
            lease_s: 1200.0,
            margin: 1.1,
            later_options: false,
            mip_node_limit: 200,
            mip_time_limit_s: None,
            mip_max_binaries: 4000,
        }
    }
}

/// Where a job with a deadline stands.
#[derive(Clone, Debug, PartialEq)]
enum Standing {
    /// Its deadline is guaranteed: `gpus` GPUs reserved in these leases (absolute lease
    /// indices), for the option ending at `deadline`.
    Admitted {
        leases: BTreeSet<u64>,
        deadline: SimTime,
        gpus: u32,
    },
    /// Not guaranteed: runs on spare GPUs only.
    Refused,
}

/// What the greedy admission test found.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Admission {
    /// Guaranteed, leases reserved.
    Admitted,
    /// No deadline window holds its leases even on an empty cluster: refused outright.
    Impossible,
    /// Not around the present reservations; re-planning them may make room.
    NoRoom,
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
            return Err(PolicyError::Config(format!(
                "chronus needs a lease of at least 1 s, got {}",
                config.lease_s
            )));
        }
        if !(config.margin.is_finite() && config.margin >= 1.0) {
            return Err(PolicyError::Config(format!(
                "chronus' run-time margin must be >= 1, got {}",
                config.margin
            )));
        }
        Ok(Chronus {
            config,
            options: GreedyOptions {
                preemptive: true,
                head_of_line_blocking: false,
                ..options
            },
            standing: BTreeMap::new(),
            reserved: BTreeMap::new(),
            lease: None,
        })
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
    fn latest_free(
        &self,
        first: u64,
        last: u64,
        needed: u64,
        gpus: u32,
        capacity: u32,
    ) -> Option<BTreeSet<u64>> {
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

    /// Admission of a job seen for the first time, by the greedy test: the first of its deadline
    /// options that its reservations fit before, as late as possible, around the promises made.
    fn admit(&mut self, spec: &JobSpec, now: SimTime, capacity: u32) -> Admission {
        let Some(needed) = self.leases_needed(spec, spec.run_time_s) else {
            return Admission::Impossible;
        };
        let next = self.lease_of(now) + 1;
        let mut impossible = true;
        for (deadline, option) in self.options_of(spec, false) {
            let last = option.last_lease;
            if last < next {
                continue;
            }
            impossible &= last + 1 - next < needed || spec.gpus > capacity;
            if let Some(leases) = self.latest_free(next, last, needed, spec.gpus, capacity) {
                for l in &leases {
                    *self.reserved.entry(*l).or_insert(0) += spec.gpus;
                }
                self.standing.insert(
                    spec.id,
                    Standing::Admitted {
                        leases,
                        deadline,
                        gpus: spec.gpus,
                    },
                );
                return Admission::Admitted;
            }
        }
        if impossible {
            Admission::Impossible
        } else {
            Admission::NoRoom
        }
    }

    /// The last lease that ends by `deadline`.
    fn last_lease_by(&self, deadline: SimTime) -> u64 {
        ((deadline.as_secs_f64() / self.config.lease_s).floor() as u64).saturating_sub(1)
    }

    /// The deadline options a job may be guaranteed, with the last lease ending by each: its
    /// first only (the artifact), or all of them with `later_options` (or `all`).
    fn options_of(&self, spec: &JobSpec, all: bool) -> Vec<(SimTime, PlanOption)> {
        let Some(first) = spec.deadline else {
            return Vec::new();
        };
        let Some(best) = spec.deadline_options.first().filter(|o| o.value > 0.0) else {
            return vec![(
                first,
                PlanOption {
                    last_lease: self.last_lease_by(first),
                    value: 1.0,
                },
            )];
        };
        let take = if all || self.config.later_options {
            spec.deadline_options.len()
        } else {
            1
        };
        spec.deadline_options
            .iter()
            .take(take)
            .map(|o| {
                (
                    o.deadline,
                    PlanOption {
                        last_lease: self.last_lease_by(o.deadline),
                        value: o.value / best.value,
                    },
                )
            })
            .collect()
    }

    fn release(&mut self, leases: &BTreeSet<u64>, gpus: u32) {
        for l in leases {
            if let Some(r) = self.reserved.get_mut(l) {
                *r = r.saturating_sub(gpus);
            }
        }
    }

    /// GPUs reserved per lease, recounted from the promises.
    fn recount_reserved(&mut self) {
        self.reserved.clear();
        for s in self.standing.values() {
            if let Standing::Admitted { leases, gpus, .. } = s {
                for l in leases {
                    *self.reserved.entry(*l).or_insert(0) += gpus;
                }
            }
        }
    }
}

impl Policy for Chronus {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let capacity = view.cluster.total_gpus();
        let lease = self.lease_of(now);
        let boundary = self.lease.is_none_or(|l| lease > l);
        self.lease = Some(lease);
        let mut jobs: Vec<&ActiveJob> = view.jobs.iter().collect();
        jobs.sort_by_key(|j| (j.submit, j.id));
        let mut admitted = Vec::new();
        let mut no_room = Vec::new();
        let mut restored_behind = false;
        for j in &jobs {
            let spec = view.spec(j);
            if spec.deadline.is_some() && !self.standing.contains_key(&j.id) {
                // An answer given before (the daemon restarted) stands: a refused job stays
                // refused; a guaranteed one gets its reservations back — where the greedy test
                // cannot place them, as a job behind its plan, re-planned below.
                match spec.deadline_answer {
                    Some(false) => {
                        self.standing.insert(j.id, Standing::Refused);
                        continue;
                    }
                    Some(true) => {
                        if self.admit(spec, now, capacity) != Admission::Admitted {
                            let deadline = spec.deadline.unwrap_or(SimTime::ZERO);
                            self.standing.insert(
                                j.id,
                                Standing::Admitted {
                                    leases: BTreeSet::new(),
                                    deadline,
                                    gpus: spec.gpus,
                                },
                            );
                            restored_behind = true;
                        }
                        continue;
                    }
                    None => {}
                }
                let answer = self.admit(spec, now, capacity);
                admitted.push((j.id, answer == Admission::Admitted));
                match answer {
                    Admission::Admitted => {}
                    Admission::Impossible => {
                        self.standing.insert(j.id, Standing::Refused);
                    }
                    Admission::NoRoom => no_room.push(spec),
                }
            }
        }
        if restored_behind {
            self.replan(view, lease + 1, capacity, &[], now);
        }
        if !no_room.is_empty() {
            // The greedy test failed: re-planning every promise may still make room.
            let won = self.replan(view, lease + 1, capacity, &no_room, now);
            for (id, answer) in &mut admitted {
                *answer |= won.contains(id);
            }
            for spec in no_room {
                self.standing.entry(spec.id).or_insert(Standing::Refused);
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
            // Re-plan where the plan can gain: a job behind its reservations (run times longer
            // than declared), or one kept on a later option than its first.
            self.replan(view, lease, capacity, &[], now);
        }
        // Order: guaranteed this lease (largest first), then — between boundaries — the running
        // jobs, then refused and best-effort jobs by least remaining GPU time, then admitted ones
        // by least slack.
        let standing = &self.standing;
        let key = |j: &ActiveJob| -> (u8, u64, u64, u32) {
            let spec = view.spec(j);
            let remaining = j.remaining_s_at(now);
            match standing.get(&j.id) {
                Some(Standing::Admitted { leases, .. }) if leases.contains(&lease) => {
                    (0, u64::MAX - u64::from(spec.gpus), 0, j.id.0)
                }
                _ if !boundary && j.is_running() => (1, 0, 0, j.id.0),
                Some(Standing::Admitted { deadline, .. }) => {
                    let slack = deadline.as_secs_f64() - now.as_secs_f64() - remaining;
                    (
                        3,
                        order_key((slack.max(0.0) + 1.0) * f64::from(spec.gpus)),
                        j.submit.as_ms(),
                        j.id.0,
                    )
                }
                _ => (
                    2,
                    order_key(remaining * f64::from(spec.gpus)),
                    j.submit.as_ms(),
                    j.id.0,
                ),
            }
        };
        let mut decision = schedule_in_order(view, now, self.options, key);
        decision.admitted = admitted;
        // The next boundary, while anything runs (with nothing running, every waiting job is one
        // the cluster cannot hold, and nothing will change).
        let next = SimTime::from_secs_f64((lease + 1) as f64 * self.config.lease_s);
        decision.wake_at =
            (!decision.run.is_empty()).then_some(next.max(now + SimDuration::from_ms(1)));
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
