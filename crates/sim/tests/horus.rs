//! Horus through the engine: GPUs are shared only under the predicted utilization and memory
//! limits at every decision (property test), every job ends, runs are reproducible, and shared
//! GPUs slow their jobs by the interference model.

use arbiter_model::{Cluster, Decision, IterationStages, JobId, JobSpec, SimTime};
use arbiter_policy::horus::{Horus, HorusConfig, predict};
use arbiter_policy::mechanisms::colocation::PairSpeeds;
use arbiter_policy::{PlacementStrategy, Policy, PolicyError, SchedulerView};
use arbiter_sim::{JobOutcome, OverheadModel, SimConfig, SimOutput, simulate};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Horus, with every decision checked: each group of jobs sharing GPUs stays within the limits.
struct Checked {
    inner: Horus,
    /// Decisions seen, groups of two or more seen, and what broke a limit.
    decisions: usize,
    shared_groups: usize,
    violations: Vec<String>,
}

impl Checked {
    fn new(config: HorusConfig, pairs: Option<Arc<PairSpeeds>>) -> Self {
        Checked {
            inner: Horus::new(config, PlacementStrategy::Consolidated, pairs).expect("valid"),
            decisions: 0,
            shared_groups: 0,
            violations: Vec::new(),
        }
    }

    fn check(&mut self, view: &SchedulerView<'_>, decision: &Decision) {
        let config = *self.inner.config();
        let partner: BTreeMap<JobId, JobId> = decision
            .run
            .iter()
            .filter_map(|a| a.colocation.map(|c| (a.job, c.partner)))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        for &first in partner.keys() {
            if seen.contains(&first) {
                continue;
            }
            let mut group = vec![first];
            let mut at = partner[&first];
            while at != first && group.len() <= 8 {
                group.push(at);
                at = partner.get(&at).copied().unwrap_or(first);
            }
            seen.extend(group.iter().copied());
            self.shared_groups += 1;
            let util: f64 = group
                .iter()
                .map(|j| predict(&view.specs[j.index()], &config).util_pct)
                .sum();
            let memory: f64 = group
                .iter()
                .map(|j| predict(&view.specs[j.index()], &config).memory_gib)
                .sum();
            if group.len() > config.max_jobs_per_gpu
                || util > config.util_limit_pct + 1e-9
                || memory > config.memory_limit_gib + 1e-9
            {
                self.violations.push(format!(
                    "{group:?}: {} jobs, {util:.3} %, {memory:.3} GiB",
                    group.len()
                ));
            }
        }
    }
}

impl Policy for Checked {
    fn name(&self) -> &'static str {
        "horus"
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let decision = self.inner.schedule(view, now)?;
        self.decisions += 1;
        self.check(view, &decision);
        Ok(decision)
    }
}

/// A job whose GPU stage is `util_pct` % of a one-second iteration, of model `model`.
fn job(id: u32, submit_s: u64, gpus: u32, run_s: f64, util_pct: f64, model: &str) -> JobSpec {
    let mut j = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s);
    let gpu_s = util_pct / 100.0;
    j.stages = Some(IterationStages {
        io_s: 0.5 * (1.0 - gpu_s),
        cpu_s: 0.5 * (1.0 - gpu_s),
        gpu_s,
    });
    j.iteration_s = Some(1.0);
    j.model = Some(model.to_string());
    j
}

fn run(cluster: &Cluster, jobs: &[JobSpec], policy: &mut Checked) -> SimOutput {
    let config = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    simulate(cluster, jobs, policy, &config).expect("runs")
}

fn pair_speeds() -> PairSpeeds {
    let mut speeds = PairSpeeds::default();
    for gpus in 1..=16 {
        speeds.insert(("A".into(), gpus), ("B".into(), gpus), vec![(0.7, 0.6)]);
        speeds.insert(("A".into(), gpus), ("A".into(), gpus), vec![(0.5, 0.5)]);
        speeds.insert(("B".into(), gpus), ("C".into(), gpus), vec![(0.0, 0.0)]);
    }
    speeds
}

fn workload() -> impl Strategy<Value = (Cluster, Vec<JobSpec>)> {
    (1u32..3, 1u32..5)
        .prop_flat_map(|(nodes, gpus)| {
            let cluster = Cluster::homogeneous(1, nodes, gpus, 32, 256, "V100").expect("valid");
            let total = nodes * gpus;
            let raw = proptest::collection::vec(
                (
                    0u64..3_000,
                    1u32..=total,
                    1u32..20_000,
                    0.0f64..100.0,
                    0usize..3,
                ),
                1..30,
            );
            (Just(cluster), raw)
        })
        .prop_map(|(cluster, mut raw)| {
            raw.sort_by_key(|r| r.0);
            let jobs = raw
                .into_iter()
                .enumerate()
                .map(|(i, (submit, gpus, run, util, model))| {
                    job(
                        i as u32,
                        submit,
                        gpus,
                        run as f64,
                        util,
                        ["A", "B", "C"][model],
                    )
                })
                .collect();
            (cluster, jobs)
        })
}

fn configs() -> impl Strategy<Value = HorusConfig> {
    (
        1usize..6,
        40.0f64..300.0,
        4.0f64..40.0,
        1usize..=4,
        0.0f64..1.0,
        0.0f64..20.0,
    )
        .prop_map(
            |(lookahead, util, memory, max, interference, job_memory)| HorusConfig {
                lookahead,
                util_limit_pct: util,
                memory_limit_gib: memory,
                max_jobs_per_gpu: max,
                interference,
                job_memory_gib: job_memory,
                ..HorusConfig::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// At every decision no group of jobs sharing GPUs is predicted over the utilization or
    /// memory limit or has more jobs than allowed; every job finishes; the same input gives the
    /// same records.
    #[test]
    fn horus_never_exceeds_its_utilization_or_memory_limits(
        (cluster, jobs) in workload(),
        config in configs(),
        measured in any::<bool>(),
    ) {
        let pairs = measured.then(|| Arc::new(pair_speeds()));
        let mut policy = Checked::new(config, pairs.clone());
        let out = run(&cluster, &jobs, &mut policy);
        prop_assert!(policy.violations.is_empty(), "{:?}", policy.violations);
        prop_assert!(policy.decisions > 0);
        for r in &out.records {
            prop_assert_eq!(r.outcome, JobOutcome::Completed);
            // Non-preemptive: started once, never moved.
            prop_assert_eq!((r.preemptions, r.migrations), (0, 0));
        }
        let mut again = Checked::new(config, pairs);
        prop_assert_eq!(&out.records, &run(&cluster, &jobs, &mut again).records);
    }
}

#[test]
fn shared_gpus_are_exercised_by_the_property_workload() {
    // Eight light single-GPU jobs on two GPUs: three share each GPU (the most per GPU), the
    // last two run alone once the first six are done (at 120 s: 100 s at 1/1.2 speed).
    let cluster = Cluster::homogeneous(1, 1, 2, 32, 256, "V100").expect("valid");
    let jobs: Vec<JobSpec> = (0..8).map(|i| job(i, 0, 1, 100.0, 20.0, "A")).collect();
    let mut policy = Checked::new(HorusConfig::default(), None);
    let out = run(&cluster, &jobs, &mut policy);
    assert!(policy.violations.is_empty());
    assert!(policy.shared_groups > 0);
    let shared: Vec<u32> = out
        .records
        .iter()
        .filter(|r| r.colocated_s > 0.0)
        .map(|r| r.job)
        .collect();
    assert_eq!(shared, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(out.records[0].finish_s, Some(120.0));
    assert_eq!(out.records[7].finish_s, Some(220.0));
}

#[test]
fn interference_slows_both_jobs_by_hand() {
    // One GPU, two jobs at 40 % (80 % together): both start at 0 on the same GPU at 1/1.2 speed.
    // Job 1 (50 s of work) ends at 60 s; job 0 (100 s) has done 50 s by then and runs the other
    // 50 s alone: it ends at 110 s.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![
        job(0, 0, 1, 100.0, 40.0, "A"),
        job(1, 0, 1, 50.0, 40.0, "A"),
    ];
    let mut policy = Checked::new(HorusConfig::default(), None);
    let out = run(&cluster, &jobs, &mut policy);
    assert_eq!(out.records[1].finish_s, Some(60.0));
    assert_eq!(out.records[0].finish_s, Some(110.0));
    // With Gavel's measured pair (A with A: 0.5 each): job 1 ends at 100 s, job 0 at 150 s.
    let mut measured = Checked::new(HorusConfig::default(), Some(Arc::new(pair_speeds())));
    let out = run(&cluster, &jobs, &mut measured);
    assert_eq!(out.records[1].finish_s, Some(100.0));
    assert_eq!(out.records[0].finish_s, Some(150.0));
}

#[test]
fn over_the_limit_the_second_job_waits_for_the_gpu() {
    // 60 % + 50 % > 100 %: the lighter job (50 %) runs first, alone, then the other.
    let cluster = Cluster::homogeneous(1, 1, 1, 8, 64, "V100").expect("valid");
    let jobs = vec![
        job(0, 0, 1, 100.0, 60.0, "A"),
        job(1, 0, 1, 50.0, 50.0, "A"),
    ];
    let mut policy = Checked::new(HorusConfig::default(), None);
    let out = run(&cluster, &jobs, &mut policy);
    assert_eq!(out.records[1].finish_s, Some(50.0));
    assert_eq!(out.records[0].first_start_s, Some(50.0));
    assert_eq!(out.records[0].finish_s, Some(150.0));
    assert!(out.records.iter().all(|r| r.colocated_s == 0.0));
}
