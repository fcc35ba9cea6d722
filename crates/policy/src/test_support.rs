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
                j.state = RunState::Running {
                    placement: a.placement.clone(),
                    since: s.submit,
                    speed: 1.0,
                };
            }
            j
        })
        .collect()
}

/// One decision of `policy` at time 0 over the jobs `live`, after `last`.
pub fn step(
    policy: &mut dyn Policy,
    cluster: &Cluster,
    specs: &[JobSpec],
    live: &[u32],
    last: &Decision,
) -> Decision {
    decide(
        policy,
        cluster,
        &active(specs, live, last),
        specs,
        SimTime::ZERO,
    )
}

/// One decision of `policy` over `jobs` at `now`.
pub fn decide(
    policy: &mut dyn Policy,
    cluster: &Cluster,
    jobs: &[ActiveJob],
    specs: &[JobSpec],
    now: SimTime,
) -> Decision {
    policy
        .schedule(
            &SchedulerView {
                cluster,
                jobs,
                specs,
                current: None,
            },
            now,
        )
        .expect("decides")
}

/// `nodes` nodes of `gpus_per_node` GPUs, one rack.
pub fn cluster(nodes: u32, gpus_per_node: u32) -> Cluster {
    Cluster::homogeneous(
        1,
        nodes,
        gpus_per_node,
        16 * gpus_per_node,
        64 * gpus_per_node,
        "T4",
    )
    .expect("valid cluster")
}

/// Job `id` submitted at `submit_s` asking for `gpus` GPUs with `run_time_s` of work.
pub fn spec_with(id: u32, submit_s: u64, gpus: u32, run_time_s: f64) -> JobSpec {
    JobSpec::new(
        arbiter_model::JobId(id),
        SimTime::from_ms((submit_s) * 1000),
        gpus,
        run_time_s,
    )
}

/// `job` running on `placement` since `since`, at speed 1.
pub fn running(
    mut job: ActiveJob,
    placement: arbiter_model::Placement,
    since: SimTime,
) -> ActiveJob {
    job.state = RunState::Running {
        placement,
        since,
        speed: 1.0,
    };
    job.accounted_at = since;
    job
}
