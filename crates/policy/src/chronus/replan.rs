//! Re-planning Chronus' promises with the integer program of [`super::plan`], in a window.
//!
//! The whole plan — every promise over every future lease — is too large to solve at each
//! decision (on the Chronus traces: ~800 promises, ~33,000 binaries, 0.3–8 s a solve with
//! microlp), so a re-plan works in a window of leases `[first, last]`: the leases before the
//! deadlines of the jobs that gain from it. Promises holding leases in the window may move them
//! anywhere in it before their own deadline; what lies after the window stays as it is. The
//! program starts from the present plan (its warm start), so it never returns a worse one, and
//! a window larger than [`super::ChronusConfig::mip_max_binaries`] is not attempted.

use super::plan::{LeaseProblem, PlanJob, PlanOption};
use super::{Chronus, Standing};
use crate::SchedulerView;
use arbiter_model::{JobId, JobSpec, SimTime};
use arbiter_solver::MipOptions;
use std::collections::{BTreeMap, BTreeSet};

/// A job in the window, and how to write its plan back.
struct Member {
    id: JobId,
    /// The deadline of each of its plan options.
    deadlines: Vec<SimTime>,
}

impl Chronus {
    /// Re-plans the promises in a window from lease `first`. With `candidates` (jobs the greedy
    /// admission could not fit), admits those a plan keeping every promise also fits, and
    /// returns them. Without (at a boundary), re-plans for the jobs that can gain: those behind
    /// their reservations (which lose their promise if no plan keeps it) and, with
    /// `later_options`, those kept on a later option than their first. Promised jobs missing
    /// from the view keep their reservations as they are.
    pub(super) fn replan(
        &mut self,
        view: &SchedulerView<'_>,
        first: u64,
        capacity: u32,
        candidates: &[&JobSpec],
        now: SimTime,
    ) -> BTreeSet<JobId> {
        if self.config.mip_node_limit == 0 {
            return BTreeSet::new();
        }
        // Who gains, and the window's last lease.
        let mut gaining: BTreeSet<JobId> = BTreeSet::new();
        let mut last = None::<u64>;
        for spec in candidates {
            last = last.max(
                self.options_of(spec, false)
                    .iter()
                    .map(|(_, o)| o.last_lease)
                    .max(),
            );
        }
        if candidates.is_empty() {
            for a in view.jobs {
                let spec = view.spec(a);
                let Some(Standing::Admitted {
                    leases, deadline, ..
                }) = self.standing.get(&a.id)
                else {
                    continue;
                };
                let behind = self
                    .leases_needed(spec, a.remaining_s_at(now))
                    .is_some_and(|n| n > leases.len() as u64);
                let upgradable = self.config.later_options && Some(*deadline) != spec.deadline;
                if behind || upgradable {
                    gaining.insert(a.id);
                    last = last.max(Some(self.last_lease_by(*deadline)));
                }
            }
        }
        let Some(last) = last.filter(|l| *l >= first) else {
            return BTreeSet::new();
        };

        let mut members = Vec::new();
        let mut jobs = Vec::new();
        for a in view.jobs {
            let spec = view.spec(a);
            let Some(Standing::Admitted {
                leases, deadline, ..
            }) = self.standing.get(&a.id)
            else {
                continue;
            };
            let options = self.options_of(spec, gaining.contains(&a.id));
            let Some(current) = options.iter().position(|(d, _)| d == deadline) else {
                continue;
            };
            let promised = options[current].1.value;
            let held: BTreeSet<u64> = leases.range(first..=last).copied().collect();
            if gaining.contains(&a.id) {
                // Its whole plan is in the window: the leases the work left needs, on its present
                // option or a better one.
                let needed = self
                    .leases_needed(spec, a.remaining_s_at(now))
                    .unwrap_or(held.len() as u64);
                let options: Vec<(SimTime, PlanOption)> =
                    options.into_iter().take(current + 1).collect();
                jobs.push(PlanJob {
                    gpus: spec.gpus,
                    leases: needed,
                    options: options.iter().map(|(_, o)| o.clone()).collect(),
                    promised: Some(promised),
                    current: Some((current, held)),
                });
                members.push(Member {
                    id: a.id,
                    deadlines: options.into_iter().map(|(d, _)| d).collect(),
                });
            } else if !held.is_empty() {
                // It keeps as many leases in the window, before its deadline (or the window's end).
                let option = PlanOption {
                    last_lease: options[current].1.last_lease.min(last),
                    value: promised,
                };
                jobs.push(PlanJob {
                    gpus: spec.gpus,
                    leases: held.len() as u64,
                    options: vec![option],
                    promised: Some(promised),
                    current: Some((0, held)),
                });
                members.push(Member {
                    id: a.id,
                    deadlines: vec![*deadline],
                });
            }
        }
        let planned: BTreeSet<JobId> = members.iter().map(|m| m.id).collect();
        let mut taken: BTreeMap<u64, u32> = BTreeMap::new();
        for (id, s) in &self.standing {
            if let Standing::Admitted { leases, gpus, .. } = s
                && !planned.contains(id)
            {
                for l in leases.range(first..=last) {
                    *taken.entry(*l).or_insert(0) += gpus;
                }
            }
        }
        let free = |t: u64| f64::from(capacity.saturating_sub(taken.get(&t).copied().unwrap_or(0)));
        for spec in candidates {
            let options = self.options_of(spec, false);
            let Some(needed) = self.leases_needed(spec, spec.run_time_s) else {
                continue;
            };
            let Some(deadline) = options.iter().map(|(_, o)| o.last_lease).max() else {
                continue;
            };
            // A counting bound first: the GPU-leases free before its deadline, less those of the
            // promises that must stay before it, must hold the candidate's.
            let committed: f64 = jobs
                .iter()
                .filter(|j| j.options.iter().all(|o| o.last_lease <= deadline))
                .map(|j| j.leases as f64 * f64::from(j.gpus))
                .sum();
            let room: f64 = (first..=deadline).map(free).sum::<f64>() - committed;
            if room < needed as f64 * f64::from(spec.gpus) {
                continue;
            }
            jobs.push(PlanJob {
                gpus: spec.gpus,
                leases: needed,
                options: options.iter().map(|(_, o)| o.clone()).collect(),
                promised: None,
                current: None,
            });
            members.push(Member {
                id: spec.id,
                deadlines: options.into_iter().map(|(d, _)| d).collect(),
            });
        }
        if !candidates.is_empty() && !jobs.iter().any(|j| j.promised.is_none()) {
            return BTreeSet::new();
        }
        let problem = LeaseProblem {
            first,
            capacity,
            taken,
            jobs,
        };
        if problem.binaries() > self.config.mip_max_binaries {
            return BTreeSet::new();
        }
        let limits = MipOptions {
            node_limit: Some(self.config.mip_node_limit),
            time_limit_s: self.config.mip_time_limit_s,
            warm_start: None,
        };
        let Ok(plan) = problem.solve(&limits) else {
            return BTreeSet::new();
        };
        // The solver's answer is checked, not trusted; and admitting a newcomer must not cost
        // a promise that held.
        let Some(score) = problem.score(&plan.jobs) else {
            return BTreeSet::new();
        };
        let promised = problem.jobs.iter().filter(|j| j.promised.is_some()).count();
        if !candidates.is_empty() && score.promises_kept < promised {
            return BTreeSet::new();
        }
        let mut admitted = BTreeSet::new();
        for ((member, job), assignment) in members.iter().zip(&problem.jobs).zip(&plan.jobs) {
            let kept = assignment.as_ref().filter(|a| {
                job.promised
                    .is_none_or(|p| job.options[a.option].value >= p)
            });
            match kept {
                Some(a) => {
                    // Leases outside the window stay; those in it are the plan's.
                    let mut leases: BTreeSet<u64> = match self.standing.get(&member.id) {
                        Some(Standing::Admitted { leases, .. }) => leases
                            .iter()
                            .copied()
                            .filter(|l| *l < first || *l > last)
                            .collect(),
                        _ => BTreeSet::new(),
                    };
                    leases.extend(a.leases.iter().copied());
                    self.standing.insert(
                        member.id,
                        Standing::Admitted {
                            leases,
                            deadline: member.deadlines[a.option],
                            gpus: job.gpus,
                        },
                    );
                    if job.promised.is_none() {
                        admitted.insert(member.id);
                    }
                }
                // A promise no plan keeps (the job fell behind its reservations) is withdrawn.
                None if job.promised.is_some() => {
                    self.standing.insert(member.id, Standing::Refused);
                }
                None => {}
            }
        }
        self.recount_reserved();
        admitted
    }
}
