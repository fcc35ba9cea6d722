//! Helpers for tests that step a policy by hand.

use crate::{Policy, SchedulerView};
use arbiter_model::{ActiveJob, Cluster, Decision, JobSpec, RunState, SimTime};

/// The jobs `live` (indices into `specs`) as the policy's `last` decision left them: running
/// where it ran them (since their submission, at speed 1), waiting otherwise.
pub fn active(specs: &[JobSpec], live: &[u32], last: &Decision) -> Vec<ActiveJob> {
    live.iter()
        .map(|&i| {
            let s = &specs[i as usize];
            let mut j = ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s);
            if let Some(a) = last.run.iter().find(|a| a.job == s.id) {
                j.state = RunState::Running { placement: a.placement.clone(), since: s.submit, speed: 1.0 };
            }
            j
        })
        .collect()
}

/// One decision of `policy` at time 0 over the jobs `live`, after `last`.
pub fn step(policy: &mut dyn Policy, cluster: &Cluster, specs: &[JobSpec], live: &[u32], last: &Decision) -> Decision {
    decide(policy, cluster, &active(specs, live, last), specs, SimTime::ZERO)
}

/// One decision of `policy` over `jobs` at `now`.
pub fn decide(policy: &mut dyn Policy, cluster: &Cluster, jobs: &[ActiveJob], specs: &[JobSpec], now: SimTime) -> Decision {
    policy.schedule(&SchedulerView { cluster, jobs, specs }, now).expect("decides")
}
