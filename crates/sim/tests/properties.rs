//! Invariants over random workloads and clusters, for every policy.

use arbiter_model::{Cluster, JobId, JobSpec, SimTime};
use arbiter_policy::{PlacementStrategy, PolicyConfig, PolicyKind, build};
use arbiter_sim::{FailureConfig, JobOutcome, OverheadModel, SimConfig, Summary, Window, simulate};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

mod support;

fn workload() -> impl Strategy<Value = (Cluster, Vec<JobSpec>)> {
    (1u32..3, 1u32..4, 1u32..9)
        .prop_flat_map(|(racks, nodes, gpus)| {
            let cluster = Cluster::homogeneous(racks, nodes, gpus, 32, 256, "V100").expect("valid");
            let max_gpus = racks * nodes * gpus + 1;
            let jobs =
                proptest::collection::vec((0u64..2_000, 1u32..=max_gpus, 1u32..600_000), 1..40);
            (Just(cluster), jobs)
        })
        .prop_map(|(cluster, raw)| {
            let mut raw = raw;
            raw.sort_by_key(|(submit, _, _)| *submit);
            let jobs = raw
                .into_iter()
                .enumerate()
                .map(|(i, (submit_s, gpus, run_ms))| {
                    let mut j = JobSpec::new(
                        JobId(i as u32),
                        SimTime::from_ms(submit_s * 1000),
                        gpus,
                        run_ms as f64 / 1000.0,
                    );
                    j.tenant = format!("t{}", i % 3).into();
                    j.model = Some(["A", "B", "C"][i % 3].to_string());
                    // Opportunistic under AntMan (guests on others' GPUs); a weight of 1 under Gavel,
                    // as priority 0 has.
                    j.priority = i32::from(i % 3 == 1);
                    if i % 2 == 0 {
                        j.sensitivity = Some(sensitivity(i % 4 == 0));
                    }
                    j
                })
                .collect();
            (cluster, jobs)
        })
}

fn policy_config(strategy: PlacementStrategy) -> PolicyConfig {
    PolicyConfig {
        placement: strategy,
        gittins_prior_gpu_s: vec![10.0, 60.0, 300.0, 3_600.0, 20_000.0],
        pair_speeds: Some(std::sync::Arc::new(pair_speeds())),
        ..PolicyConfig::default()
    }
}

/// An image-model-like profile (up to 3× with 12 cores and 64 memory per GPU) or a
/// language-model-like one (flat, ideal 1 core and 8 memory per GPU).
fn sensitivity(sensitive: bool) -> std::sync::Arc<arbiter_model::ResourceSensitivity> {
    use arbiter_model::{HostShare, ResourceSensitivity};
    let (rows, ideal) = if sensitive {
        (
            vec![
                vec![0.1, 0.5, 0.5],
                vec![0.1, 1.0, 1.2],
                vec![0.1, 2.0, 3.0],
            ],
            HostShare {
                cpus_per_gpu: 12.0,
                memory_per_gpu: 64.0,
            },
        )
    } else {
        (
            vec![vec![1.0; 3]; 3],
            HostShare {
                cpus_per_gpu: 1.0,
                memory_per_gpu: 8.0,
            },
        )
    };
    std::sync::Arc::new(
        ResourceSensitivity::new(vec![1.0, 4.0, 12.0], vec![8.0, 32.0, 64.0], rows, ideal)
            .expect("valid"),
    )
}

/// Co-location speeds for the space-sharing policy on the one-type clusters of [`workload`]:
/// A with B and A with A worth sharing, B with C lopsided, C with C not measured.
fn pair_speeds() -> arbiter_policy::mechanisms::colocation::PairSpeeds {
    let mut speeds = arbiter_policy::mechanisms::colocation::PairSpeeds::default();
    let key = |m: &str, g: u32| (m.to_string(), g);
    for gpus in 1..=49 {
        speeds.insert(key("A", gpus), key("B", gpus), vec![(0.7, 0.6)]);
        speeds.insert(key("A", gpus), key("A", gpus), vec![(0.55, 0.55)]);
        speeds.insert(key("B", gpus), key("C", gpus), vec![(0.9, 0.2)]);
    }
    speeds
}

fn strategies() -> impl Strategy<Value = PlacementStrategy> {
    prop_oneof![
        Just(PlacementStrategy::Consolidated),
        Just(PlacementStrategy::Spread),
        Just(PlacementStrategy::Anywhere),
        Just(PlacementStrategy::Relaxed { after_s: 30.0 }),
    ]
}

/// Runs one policy and checks the invariants: feasible (the engine validates every decision and
/// fails the run otherwise), every job that fits finishes, GPU-seconds of work are conserved, a
/// second run gives identical records, and utilization counts each GPU once (at most 1).
fn check_policy(
    kind: PolicyKind,
    cluster: &Cluster,
    jobs: &[JobSpec],
    strategy: PlacementStrategy,
    rounds: Option<f64>,
) -> Result<(), TestCaseError> {
    check_built(kind, cluster, jobs, strategy, rounds, &|kind, config| {
        build(kind, config).expect("builds")
    })
}

type Builder = dyn Fn(PolicyKind, &PolicyConfig) -> Box<dyn arbiter_policy::Policy>;

fn check_built(
    kind: PolicyKind,
    cluster: &Cluster,
    jobs: &[JobSpec],
    strategy: PlacementStrategy,
    rounds: Option<f64>,
    build: &Builder,
) -> Result<(), TestCaseError> {
    let config = policy_config(strategy);
    let sim = SimConfig {
        overhead: OverheadModel::None,
        round_s: rounds,
        ..SimConfig::default()
    };
    let mut policy = build(kind, &config);
    let out = simulate(cluster, jobs, policy.as_mut(), &sim);
    prop_assert!(out.is_ok(), "{kind}: {:?}", out.err());
    let out = out.expect("checked");
    let capacity = cluster.total_gpus();
    for (spec, record) in jobs.iter().zip(&out.records) {
        if spec.gpus <= capacity {
            prop_assert_eq!(
                record.outcome,
                JobOutcome::Completed,
                "{} job {}",
                kind,
                spec.id
            );
            // Each stint rounds its end up to the next millisecond.
            let stints = 1.0 + (record.preemptions + record.migrations) as f64;
            let slack = 0.001 * stints * spec.gpus as f64 + 1e-6;
            // (Shared GPUs count half per job, and jobs progress at their shared speed there.)
            // (Jobs with a CPU/memory profile progress at their host speedup instead.)
            let unit_speed = record.colocated_s == 0.0 && spec.sensitivity.is_none();
            prop_assert!(
                !unit_speed || (record.gpu_s_allocated - spec.gpu_seconds()).abs() <= slack,
                "{} job {}: allocated {} GPU-s for {} of work",
                kind,
                spec.id,
                record.gpu_s_allocated,
                spec.gpu_seconds()
            );
            prop_assert!(record.first_start_s.expect("started") >= record.submit_s);
        } else {
            prop_assert_eq!(record.outcome, JobOutcome::Unplaceable);
        }
    }
    // The second run records its timeline, which changes nothing.
    let mut again = build(kind, &config);
    let second = simulate(
        cluster,
        jobs,
        again.as_mut(),
        &SimConfig {
            record_timeline: true,
            ..sim
        },
    )
    .expect("runs");
    prop_assert_eq!(&out.records, &second.records);
    // GPU time is never counted twice: at no moment do a node's jobs hold more than its GPUs
    // (jobs sharing GPUs each hold their share of them; guests hold none).
    let mut changes: Vec<(f64, u32, f64)> = Vec::new();
    for segment in second.timeline.iter().filter(|s| !s.guest) {
        for &(node, gpus) in &segment.slots {
            changes.push((segment.start_s, node, gpus as f64 * segment.gpu_share));
            changes.push((segment.end_s, node, -(gpus as f64) * segment.gpu_share));
        }
    }
    changes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.total_cmp(&b.2)));
    let mut held = vec![0.0; cluster.nodes.len()];
    for (at, node, delta) in changes {
        held[node as usize] += delta;
        let gpus = cluster.nodes[node as usize].gpus as f64;
        prop_assert!(
            held[node as usize] <= gpus + 1e-9,
            "{}: node {} holds {} of {} GPUs at {}",
            kind,
            node,
            held[node as usize],
            gpus,
            at
        );
    }
    // Utilization counts each GPU once (issue 32): at no moment more busy GPUs than the cluster
    // has, guests included (placements do not name GPUs, so over the cluster), nor more shared
    // than busy; the records count what the timeline does; the run's utilization is at most 1.
    let segments = second.timeline.iter().map(|t| {
        (
            t.start_s,
            t.end_s,
            t.gpus_counted().busy,
            t.gpus_counted().shared,
        )
    });
    for (at, busy, shared) in support::gpus_counted_over_time(segments) {
        prop_assert!(
            busy <= capacity as f64 + 1e-9,
            "{}: {} busy GPUs of {} at {}",
            kind,
            busy,
            capacity,
            at
        );
        prop_assert!(
            shared <= busy + 1e-9,
            "{}: {} shared GPUs of {} busy at {}",
            kind,
            shared,
            busy,
            at
        );
    }
    for r in &out.records {
        let counted: f64 = second
            .timeline
            .iter()
            .filter(|t| t.job == r.job)
            .map(|t| t.gpus_counted().busy * (t.end_s - t.start_s))
            .sum();
        prop_assert!(
            (counted - r.busy_gpu_s).abs() <= 1e-6 * counted.max(1.0),
            "{} job {}: {} busy GPU-s in the timeline, {} in the record",
            kind,
            r.job,
            counted,
            r.busy_gpu_s
        );
    }
    let summary = Summary::compute(&out.records, Window::default(), capacity);
    prop_assert!(
        summary.gpu_utilization <= 1.0 + 1e-9,
        "{}: utilization {}",
        kind,
        summary.gpu_utilization
    );
    prop_assert!(
        (0.0..=1.0 + 1e-9).contains(&summary.shared_gpu_fraction),
        "{}: shared {}",
        kind,
        summary.shared_gpu_fraction
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    /// The classic policies, over every placement strategy, with and without rounds.
    #[test]
    fn every_classic_policy_is_feasible_complete_conserving_and_deterministic(
        (cluster, jobs) in workload(),
        strategy in strategies(),
        rounds in prop_oneof![Just(None), Just(Some(60.0))],
    ) {
        // `external` is whatever its agent answers (its e2e tests run it through a real one).
        for kind in PolicyKind::ALL.into_iter().filter(|k| !k.is_gavel() && *k != PolicyKind::External) {
            check_policy(kind, &cluster, &jobs, strategy, rounds)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// The classic policies under priority classes (three classes, the middle one not
    /// preemptible): the same invariants hold as without classes.
    #[test]
    fn every_classic_policy_under_priority_classes_keeps_the_invariants(
        (cluster, mut jobs) in workload(),
        strategy in strategies(),
        rounds in prop_oneof![Just(None), Just(Some(60.0))],
    ) {
        for (i, job) in jobs.iter_mut().enumerate() {
            let (name, value, preemptible) = [("low", 10, true), ("steady", 50, false), ("high", 100, true)][(i * 7) % 3];
            job.class = arbiter_model::JobClass { name: Some(name.into()), value, preemptible };
        }
        let wrapped = |kind, config: &PolicyConfig| -> Box<dyn arbiter_policy::Policy> {
            Box::new(arbiter_policy::mechanisms::classes::PriorityClasses::new(kind, config.clone()).expect("builds"))
        };
        // AntMan has its own two classes and is refused under priority classes.
        let classic = |k: &PolicyKind| !k.is_gavel() && !matches!(k, PolicyKind::External | PolicyKind::AntMan);
        for kind in PolicyKind::ALL.into_iter().filter(classic) {
            check_built(kind, &cluster, &jobs, strategy, rounds, &wrapped)?;
        }
    }
}

proptest! {
    // Each Gavel recomputation solves LPs: fewer cases keep the suite fast.
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// Gavel's LP policies and round mechanism, self-driven (no engine rounds) or with rounds,
    /// their programs solved by either method (`policy.gavel.solver`).
    #[test]
    fn gavel_policies_are_feasible_complete_conserving_and_deterministic(
        (cluster, jobs) in workload(),
        rounds in prop_oneof![Just(None), Just(Some(360.0))],
    ) {
        use arbiter_policy::gavel::AllocationSolver;
        for solver in [AllocationSolver::InteriorPoint, AllocationSolver::Simplex] {
            let by_solver = move |kind, config: &PolicyConfig| -> Box<dyn arbiter_policy::Policy> {
                let mut config = config.clone();
                config.rounds.solver = solver;
                build(kind, &config).expect("builds")
            };
            for kind in PolicyKind::ALL.into_iter().filter(|k| k.is_gavel()) {
                check_built(kind, &cluster, &jobs, PlacementStrategy::Consolidated, rounds, &by_solver)?;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// With failures and restart overheads, runs stay feasible, every job ends (completed or
    /// failed for good), and the same seed gives the same outcome.
    #[test]
    fn failures_and_overheads_keep_runs_feasible_and_reproducible(
        (cluster, jobs) in workload(),
        seed in 0u64..1_000,
        overhead_s in 0.0f64..30.0,
    ) {
        let sim = SimConfig {
            overhead: OverheadModel::OnRestart,
            restart_overhead_s: overhead_s,
            failures: Some(FailureConfig { probability_per_attempt: 0.3, max_retries: 2 }),
            seed,
            ..SimConfig::default()
        };
        for kind in [PolicyKind::Fifo, PolicyKind::Srtf, PolicyKind::Las] {
            let config = policy_config(PlacementStrategy::Consolidated);
            let mut policy = build(kind, &config).expect("builds");
            let out = simulate(&cluster, &jobs, policy.as_mut(), &sim).expect("runs");
            for (spec, record) in jobs.iter().zip(&out.records) {
                if spec.gpus <= cluster.total_gpus() {
                    prop_assert!(matches!(record.outcome, JobOutcome::Completed | JobOutcome::Failed));
                    prop_assert!(record.failures <= 3);
                }
            }
            let mut again = build(kind, &config).expect("builds");
            prop_assert_eq!(&out.records, &simulate(&cluster, &jobs, again.as_mut(), &sim).expect("runs").records);
        }
    }
}
