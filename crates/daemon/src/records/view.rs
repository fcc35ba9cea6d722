//! The policy's view of the daemon's jobs: each job as a [`JobSpec`] and the queued and running
//! ones as the simulator's engine would show them ([`ActiveJob`]), so that the very same policy
//! code decides in both worlds.

use crate::records::job::{JobRecord, JobState};
use crate::records::topology::Topology;
use arbiter_model::{
    ActiveJob, Cluster, GpuRange, JobId, JobSpec, NodeId, Placement, PlacementSpeed, RunState,
    Scaling, SimDuration, SimTime,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Run time assumed for jobs that give no estimate (policies like SRTF need one).
pub const DEFAULT_EXPECTED_RUN_S: u64 = 3600;

/// Unix seconds as the policies' clock.
pub fn sim_time_s(unix_s: i64) -> SimTime {
    SimTime::from_ms(unix_s.max(0).unsigned_abs().saturating_mul(1000))
}

/// The policy's view of a job.
pub fn spec_of(
    job: &JobRecord,
    cluster: &Cluster,
    classes: &crate::config::PriorityClasses,
) -> JobSpec {
    let r = &job.request;
    let expected = r
        .expected_run_time_s
        .or(r.max_run_time_s)
        .unwrap_or(DEFAULT_EXPECTED_RUN_S) as f64;
    let mut spec = JobSpec::new(
        JobId(job.id),
        sim_time_s(job.submitted_unix_s),
        r.gpus,
        expected,
    );
    spec.tenant = job.tenant.as_str().into();
    spec.name = r.name.clone();
    // Co-location speeds are looked up by job type, namespaced by tenant (see `records/pairs.rs`).
    spec.model = r
        .job_type
        .as_deref()
        .map(|t| crate::records::pairs::namespaced(&job.tenant, t));
    spec.priority = r.priority;
    spec.class = classes.job_class(r.priority_class.as_deref());
    spec.deadline = r.deadline_unix_s.map(sim_time_s);
    // An answer given before a restart stands: the policy re-reserves for it instead of asking.
    spec.deadline_answer = job.deadline_admitted;
    spec.restart_overhead = Some(SimDuration::from_ms(0));
    // Per-iteration stage times (Muri's policies interleave jobs by them); one iteration alone
    // takes their sum.
    if let Some(stages) = r.iteration_stages {
        spec.stages = Some(stages.to_model());
        spec.iteration_s = Some(stages.iteration_s());
    }
    // Speed per GPU type: 0 where the job may not run; measured throughput relative to its best
    // measured type where it has run; 1 (optimistic, so it gets tried) elsewhere.
    let allowed =
        |t: &str| r.gpu_types.is_empty() || r.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(t));
    // Only usable rates count (a record from before reports were bounded may hold others).
    let measured = |t: &str| {
        job.throughput_by_gpu_type
            .get(t)
            .copied()
            .and_then(crate::records::progress::usable_throughput)
    };
    let best = job
        .throughput_by_gpu_type
        .values()
        .copied()
        .filter_map(crate::records::progress::usable_throughput)
        .fold(0.0, f64::max);
    if !r.gpu_types.is_empty() || best > 0.0 {
        spec.speed_by_gpu_type = cluster
            .gpu_type_names
            .iter()
            .map(|t| match (allowed(t), measured(t)) {
                (false, _) => 0.0,
                (true, Some(m)) if best > 0.0 => m / best,
                (true, _) => 1.0,
            })
            .collect();
    }
    // An elastic job: its range, and its speed-up from the throughput measured at each count.
    if let Some(most) = r.max_gpus.filter(|m| *m > r.gpus) {
        spec.elastic = Some(GpuRange {
            min: r.gpus,
            max: most,
        });
        spec.scaling = Some(Scaling(Arc::new(MeasuredScaling {
            reference: r.gpus,
            by_count: job.throughput_by_gpu_count.clone(),
        })));
    }
    // Remaining work from measured progress, when the job said how many steps it has.
    // Bounded (`progress::remaining_s`): a policy never sees a time that is not a finite number.
    if let (Some(total), Some(p)) = (job.total_steps, job.progress.as_ref())
        && let Some(left) = p
            .throughput
            .and_then(|rate| crate::records::progress::remaining_s(total, p.steps, rate))
    {
        spec.run_time_s = job.executed_s + left;
    }
    spec
}

/// What the policy's view holds for a job whose record was pruned (it ended for good long ago;
/// no policy looks it up, but the views index jobs by id).
pub fn pruned_spec(id: u32) -> JobSpec {
    JobSpec::new(JobId(id), SimTime::from_ms(0), 0, 0.0)
}

/// An elastic job's speed-up curve from what it measured: steps per second by GPU count,
/// relative to its least count. A count not tried yet is assumed to scale linearly from the
/// nearest tried one (optimistic, so that it gets tried); nothing measured: linear throughout.
struct MeasuredScaling {
    reference: u32,
    by_count: BTreeMap<u32, f64>,
}

impl MeasuredScaling {
    /// Throughput at `n` GPUs, in measured units where any count was measured.
    fn throughput(&self, n: u32) -> f64 {
        let usable = |t: &f64| crate::records::progress::usable_throughput(*t).is_some();
        if let Some(t) = self.by_count.get(&n).filter(|t| usable(t)) {
            return *t;
        }
        let nearest = self
            .by_count
            .iter()
            .filter(|(_, t)| usable(t))
            .min_by_key(|(c, _)| (c.abs_diff(n), **c));
        match nearest {
            Some((&c, &t)) if c > 0 => t * f64::from(n) / f64::from(c),
            _ => f64::from(n),
        }
    }
}

impl PlacementSpeed for MeasuredScaling {
    fn speed(&self, shape: &[u32]) -> Option<f64> {
        let reference = self.throughput(self.reference.max(1));
        (reference > 0.0).then(|| self.throughput(shape.iter().sum()) / reference)
    }

    fn remaining_iterations(&self, _done: f64) -> Option<f64> {
        None
    }

    /// Relative to the least count's (seconds per unit of work at reference speed): comparable
    /// across jobs, with remaining work in seconds standing in for iterations.
    fn predicted_iteration_s(&self, gpus: u32, _gpus_per_node: u32) -> Option<f64> {
        let t = self.throughput(gpus);
        (t > 0.0).then(|| self.throughput(self.reference.max(1)) / t)
    }

    fn describe(&self) -> String {
        format!("measured on {} GPU counts", self.by_count.len())
    }
}

/// A job as the engine shows it to a policy: queued or running (with the GPU type it runs on),
/// its attained service and preemptions. `None` for jobs that hold no GPUs and wait for none.
pub fn active_of(
    job: &JobRecord,
    spec: &JobSpec,
    topology: &Topology,
    now: SimTime,
) -> Option<ActiveJob> {
    debug_assert_eq!(spec.id.0, job.id, "a job with another job's spec");
    let expected = spec.run_time_s;
    let mut a = ActiveJob::submitted(JobId(job.id), spec.gpus, spec.submit, expected);
    a.executed_s = job.executed_s;
    a.remaining_s = (expected - job.executed_s).max(1.0);
    a.preemptions = job.preemptions;
    a.failures = job.failures;
    match &job.state {
        JobState::Queued => {
            a.pending_since = job.history.last_at_unix_s().map_or(now, sim_time_s);
            a.accounted_at = now;
            a.first_start = job.history.first_run_at_unix_s().map(sim_time_s);
        }
        JobState::Running {
            gpus,
            started_unix_s,
            ..
        } => {
            let since = sim_time_s(*started_unix_s).min(now);
            a.accounted_at = since;
            a.first_start = Some(job.history.first_run_at_unix_s().map_or(since, sim_time_s));
            let placement = topology
                .placement_of(gpus)
                .unwrap_or_else(|| Placement::single(NodeId(0), spec.gpus));
            a.state = RunState::Running {
                placement,
                since,
                speed: 1.0,
            };
        }
        _ => return None,
    }
    Some(a)
}

/// A job that has ended, as the engine hands it to [`arbiter_policy::Policy::job_finished`]:
/// with the service it really attained (QSSF learns its predictions from `executed_s`).
pub fn finished_of(job: &JobRecord, spec: &JobSpec) -> ActiveJob {
    let mut a = ActiveJob::submitted(JobId(job.id), spec.gpus, spec.submit, spec.run_time_s);
    a.executed_s = job.executed_s;
    a.remaining_s = 0.0;
    a.preemptions = job.preemptions;
    a.failures = job.failures;
    a.first_start = job.history.first_run_at_unix_s().map(sim_time_s);
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::SubmitRequest;
    use arbiter_model::{GpuTypeId, Node, RackId};
    use std::collections::BTreeMap;

    #[test]
    fn an_elastic_jobs_speed_up_comes_from_its_measurements_and_untried_counts_scale_linearly() {
        let measured = MeasuredScaling {
            reference: 2,
            by_count: BTreeMap::from([(2, 10.0), (4, 16.0)]),
        };
        assert_eq!(measured.speed(&[2]), Some(1.0));
        assert_eq!(measured.speed(&[2, 2]), Some(1.6));
        // 8 GPUs untried: linear from the nearest tried count (4: 16 steps/s) — 32, 3.2x.
        assert_eq!(measured.speed(&[4, 4]), Some(3.2));
        // 3: equally near 2 and 4; the smaller wins — 15 steps/s.
        assert_eq!(measured.speed(&[3]), Some(1.5));
        assert_eq!(measured.predicted_iteration_s(4, 8), Some(10.0 / 16.0));
        // Nothing measured yet: linear throughout.
        let fresh = MeasuredScaling {
            reference: 1,
            by_count: BTreeMap::new(),
        };
        assert_eq!(fresh.speed(&[4]), Some(4.0));
        // And a submission with max_gpus becomes an elastic spec.
        let request: SubmitRequest = serde_json::from_value(
            serde_json::json!({"command": "true", "gpus": 2, "max_gpus": 8}),
        )
        .expect("request");
        let record = JobRecord::submitted(0, "t", request, 0, String::new());
        let cluster = Cluster::homogeneous(1, 1, 8, 64, 256, "a100").expect("cluster");
        let spec = spec_of(&record, &cluster, &Default::default());
        assert_eq!(spec.elastic, Some(GpuRange { min: 2, max: 8 }));
        assert_eq!(
            spec.placement_speed(&Placement::single(NodeId(0), 4)),
            Some(2.0)
        );
    }

    #[test]
    fn measured_throughput_gives_speeds_per_type_and_remaining_time() {
        let nodes = vec![
            Node {
                id: NodeId(0),
                name: "a".into(),
                rack: RackId(0),
                gpu_type: GpuTypeId(0),
                gpus: 2,
                cpus: 8,
                memory_gib: 32,
            },
            Node {
                id: NodeId(1),
                name: "b".into(),
                rack: RackId(0),
                gpu_type: GpuTypeId(1),
                gpus: 2,
                cpus: 8,
                memory_gib: 32,
            },
            Node {
                id: NodeId(2),
                name: "c".into(),
                rack: RackId(0),
                gpu_type: GpuTypeId(2),
                gpus: 2,
                cpus: 8,
                memory_gib: 32,
            },
        ];
        let cluster =
            Cluster::new(vec!["v100".into(), "k80".into(), "t4".into()], nodes).expect("valid");
        let request: SubmitRequest =
            serde_json::from_str(r#"{"command": "x", "gpu_types": ["v100", "k80"]}"#)
                .expect("valid");
        let mut job = JobRecord::submitted(0, "t", request, 0, String::new());
        job.executed_s = 100.0;
        job.runs = 1;
        // Not measured yet: allowed types 1, the others 0.
        assert_eq!(
            spec_of(&job, &cluster, &Default::default()).speed_by_gpu_type,
            vec![1.0, 1.0, 0.0]
        );
        // Measured 40 steps/s on V100s and 10 on K80s: K80 runs at a quarter of the speed.
        job.throughput_by_gpu_type =
            BTreeMap::from([("v100".to_string(), 40.0), ("k80".to_string(), 10.0)]);
        assert_eq!(
            spec_of(&job, &cluster, &Default::default()).speed_by_gpu_type,
            vec![1.0, 0.25, 0.0]
        );
        // 1,000 of 5,000 steps done at 40 steps/s: 100 s left after the 100 s already run.
        job.total_steps = Some(5000);
        job.progress = Some(crate::records::job::Progress {
            steps: 1000,
            throughput: Some(40.0),
            at_unix_s: 0,
        });
        assert_eq!(
            spec_of(&job, &cluster, &Default::default()).run_time_s,
            200.0
        );
        // A deadline's admission answer, once given, goes with the job to the policy (after a
        // restart Chronus keeps it rather than answering again).
        assert_eq!(
            spec_of(&job, &cluster, &Default::default()).deadline_answer,
            None
        );
        job.deadline_admitted = Some(true);
        assert_eq!(
            spec_of(&job, &cluster, &Default::default()).deadline_answer,
            Some(true)
        );
        // A tenant cannot hand itself an answer: the submission has no such field.
        assert!(
            serde_json::from_str::<SubmitRequest>(r#"{"command": "x", "deadline_admitted": true}"#)
                .is_err()
        );
    }

    #[test]
    fn qssf_learns_the_real_run_time_of_a_finished_job() {
        // The daemon used to hand `job_finished` a fresh ActiveJob: QSSF learned 0 s from every
        // job. It must learn what the job attained.
        let request: SubmitRequest = serde_json::from_str(r#"{"command": "x"}"#).expect("valid");
        let mut job = JobRecord::submitted(3, "t", request, 0, String::new());
        job.executed_s = 4321.0;
        let cluster = Cluster::new(
            vec!["a100".into()],
            vec![Node {
                id: NodeId(0),
                name: "n".into(),
                rack: RackId(0),
                gpu_type: GpuTypeId(0),
                gpus: 4,
                cpus: 8,
                memory_gib: 32,
            }],
        )
        .expect("valid");
        let spec = spec_of(&job, &cluster, &Default::default());
        let finished = finished_of(&job, &spec);
        assert_eq!(finished.executed_s, 4321.0);
        let mut qssf = arbiter_policy::qssf::Qssf::new(
            arbiter_policy::mechanisms::greedy::GreedyOptions {
                preemptive: false,
                head_of_line_blocking: false,
                keep_placements: true,
                strategy: arbiter_policy::PlacementStrategy::Consolidated,
            },
            10,
        );
        use arbiter_policy::Policy;
        qssf.job_finished(&spec, &finished, SimTime::from_ms(5_000_000));
        // A new job of the same tenant and size is predicted from that history.
        let mut next = spec.clone();
        next.id = JobId(4);
        assert_eq!(qssf.predict_duration_s(&next), Some(4321.0));
    }

    proptest::proptest! {
        /// Whatever a job's record holds about its progress — also values no report may give any
        /// more, from a store an older daemon wrote — the policy sees only finite numbers.
        #[test]
        fn the_policy_sees_finite_numbers_whatever_the_progress_on_record(
            steps in proptest::prelude::any::<u64>(),
            total in proptest::option::of(proptest::prelude::any::<u64>()),
            rate_bits in proptest::prelude::any::<u64>(),
            type_bits in proptest::collection::vec(proptest::prelude::any::<u64>(), 2),
            count_bits in proptest::collection::vec(proptest::prelude::any::<u64>(), 2),
        ) {
            let request: SubmitRequest = serde_json::from_str(r#"{"command": "x", "gpus": 1, "max_gpus": 4}"#).expect("valid");
            let mut job = JobRecord::submitted(0, "t", request, 0, String::new());
            job.total_steps = total;
            job.progress = Some(crate::records::job::Progress { steps, throughput: Some(f64::from_bits(rate_bits)), at_unix_s: 0 });
            job.throughput_by_gpu_type = BTreeMap::from([("a100".to_string(), f64::from_bits(type_bits[0])), ("v100".to_string(), f64::from_bits(type_bits[1]))]);
            job.throughput_by_gpu_count = BTreeMap::from([(1, f64::from_bits(count_bits[0])), (2, f64::from_bits(count_bits[1]))]);
            let node = |name: &str, gpu_type: &str| crate::records::topology::NodeSpec { name: name.into(), gpu_type: gpu_type.into(), devices: (0..4).collect(), cpus: 8, memory_gib: 32, rack: "r".into() };
            let topology = Topology::new(vec![node("a", "a100"), node("v", "v100")]).expect("valid");
            let cluster = topology.cluster();
            let spec = spec_of(&job, cluster, &Default::default());
            proptest::prop_assert!(spec.run_time_s.is_finite() && spec.run_time_s > 0.0, "{}", spec.run_time_s);
            proptest::prop_assert!(spec.speed_by_gpu_type.iter().all(|s| s.is_finite() && *s >= 0.0), "{:?}", spec.speed_by_gpu_type);
            for n in 1..=4 {
                if let Some(speed) = spec.placement_speed(&Placement::single(NodeId(0), n)) {
                    proptest::prop_assert!(speed.is_finite(), "{n} GPUs: {speed}");
                }
            }
            let a = active_of(&job, &spec, &topology, SimTime::from_ms(0)).expect("queued");
            proptest::prop_assert!(a.remaining_s.is_finite());
        }
    }
}
