//! The example of docs/policies.md, "Adding a policy": a whole policy in one file. It ships in
//! no registry (a real one would be `crates/policy/src/largest_first.rs` plus one line in
//! `kind.rs`'s `policies!` table); this test holds the example to compiling and deciding.

use arbiter_model::{ActiveJob, Cluster, Decision, JobId, JobSpec, SimTime};
use arbiter_policy::mechanisms::greedy::{schedule_in_order, GreedyOptions};
use arbiter_policy::{PlacementStrategy, Policy, PolicyError, SchedulerView};
use std::cmp::Reverse;

/// Largest GPU demand first, then submission order; preemptive. Its parameter would be a table
/// of its own, `[policy.largest_first]`, and a field of `PolicyConfig`.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LargestFirstParams {
    /// Let a job that does not fit block the ones after it.
    pub head_of_line_blocking: bool,
}

/// The policy: pure — the view and the time in, a decision out.
pub struct LargestFirst {
    options: GreedyOptions,
}

impl LargestFirst {
    pub fn new(params: LargestFirstParams, strategy: PlacementStrategy) -> Self {
        LargestFirst { options: GreedyOptions { preemptive: true, head_of_line_blocking: params.head_of_line_blocking, keep_placements: true, strategy } }
    }
}

impl Policy for LargestFirst {
    fn name(&self) -> &'static str {
        "largest-first"
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, PolicyError> {
        Ok(schedule_in_order(view, now, self.options, |job: &ActiveJob| (Reverse(job.gpus), job.submit)))
    }
}

#[test]
fn the_example_policy_places_the_largest_job_first() {
    let cluster = Cluster::homogeneous(1, 1, 4, 32, 256, "a100").expect("cluster");
    let specs: Vec<JobSpec> = [(1, 10.0), (4, 10.0), (2, 10.0)].iter().enumerate().map(|(i, (gpus, s))| JobSpec::new(JobId(i as u32), SimTime::from_ms(i as u64), *gpus, *s)).collect();
    let jobs: Vec<ActiveJob> = specs.iter().map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s)).collect();
    let view = SchedulerView { cluster: &cluster, jobs: &jobs, specs: &specs, current: None };
    let mut policy = LargestFirst::new(LargestFirstParams::default(), PlacementStrategy::Consolidated);
    let decision = policy.schedule(&view, SimTime::from_ms(10)).expect("decides");
    let placed: Vec<u32> = decision.run.iter().map(|a| a.job.0).collect();
    assert_eq!(placed, vec![1], "the 4-GPU job takes the node; the others wait");
}
