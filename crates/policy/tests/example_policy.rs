//! The example of docs/policies.md, "Adding a policy": a whole policy in one file — its
//! parameters, its descriptor, its builder and its code. It ships in no registry. A real one
//! would be this file as `crates/policy/src/largest_first.rs` (`crate::` where it says
//! `arbiter_policy::`, the tests left out), `pub mod largest_first;` in `lib.rs`, and one line in
//! the `policies!` table of `kind.rs`:
//!
//! ```text
//! LargestFirst [largest_first: crate::largest_first::LargestFirstParams] => crate::largest_first::DESCRIPTOR, crate::largest_first::build(largest_first);
//! ```
//!
//! The tests below hold the example to compiling, reading its parameters as a scenario's
//! `[policy.largest_first]` table would be read, building from them and deciding.

use arbiter_model::{ActiveJob, Cluster, Decision, JobId, JobSpec, SimTime};
use arbiter_policy::descriptor::{Descriptor, Family};
use arbiter_policy::mechanisms::greedy::{GreedyOptions, schedule_in_order};
use arbiter_policy::{PlacementStrategy, Placing, Policy, PolicyError, SchedulerView};
use std::cmp::Reverse;

/// Its parameters: the scenario table `[policy.largest_first]`, which the registry line
/// declares as a field of `PolicyConfig` (`Default` when a scenario leaves it out).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LargestFirstParams {
    /// Let a job that does not fit block the ones after it.
    pub head_of_line_blocking: bool,
}

/// What callers know of it before building it: `arbiter policies` and the guide's tables print
/// this; the simulator, the daemon and the reports read how it decides and what it needs.
pub const DESCRIPTOR: Descriptor = Descriptor::new("largest-first", Family::Events, "largest GPU demand first, then submission order; preemptive")
    .paper("an example (docs/policies.md, \"Adding a policy\")")
    .detail("jobs by GPU demand, largest first, then by submission; running jobs compete again at every decision (preemptive); with `policy.largest_first.head_of_line_blocking`, a job that does not fit blocks the ones after it");

/// Builds it: the registry calls this with `&config.largest_first` (the fields its line names,
/// in order) and the caller's placement.
pub fn build(params: &LargestFirstParams, placing: Placing) -> Result<LargestFirst, PolicyError> {
    let options = GreedyOptions {
        preemptive: true,
        head_of_line_blocking: params.head_of_line_blocking,
        ..GreedyOptions::fit_first(placing)
    };
    Ok(LargestFirst { options })
}

/// The policy: pure — the view and the time in, a decision out.
pub struct LargestFirst {
    options: GreedyOptions,
}

impl Policy for LargestFirst {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        Ok(schedule_in_order(
            view,
            now,
            self.options,
            |job: &ActiveJob| (Reverse(job.gpus), job.submit),
        ))
    }
}

#[test]
fn the_example_policy_places_the_largest_job_first() {
    let cluster = Cluster::homogeneous(1, 1, 4, 32, 256, "a100").expect("cluster");
    let specs: Vec<JobSpec> = [(1, 10.0), (4, 10.0), (2, 10.0)]
        .iter()
        .enumerate()
        .map(|(i, (gpus, s))| JobSpec::new(JobId(i as u32), SimTime::from_ms(i as u64), *gpus, *s))
        .collect();
    let jobs: Vec<ActiveJob> = specs
        .iter()
        .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
        .collect();
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &jobs,
        specs: &specs,
        current: None,
    };
    let placing = Placing {
        strategy: PlacementStrategy::Consolidated,
        keep_placements: true,
    };
    let mut policy = build(&LargestFirstParams::default(), placing).expect("builds");
    let decision = policy
        .schedule(&view, SimTime::from_ms(10))
        .expect("decides");
    let placed: Vec<u32> = decision.run.iter().map(|a| a.job.0).collect();
    assert_eq!(
        placed,
        vec![1],
        "the 4-GPU job takes the node; the others wait"
    );
    assert_eq!(policy.name(), "largest-first");
}

#[test]
fn its_parameters_read_as_a_scenario_table_would() {
    let params: LargestFirstParams =
        serde_json::from_str(r#"{"head_of_line_blocking": true}"#).expect("parses");
    assert!(params.head_of_line_blocking);
    assert_eq!(
        serde_json::from_str::<LargestFirstParams>("{}").expect("defaults"),
        LargestFirstParams::default()
    );
    assert!(
        serde_json::from_str::<LargestFirstParams>(r#"{"head_of_line_blockng": true}"#).is_err(),
        "a mistyped key is refused"
    );
}
