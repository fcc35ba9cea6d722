//! Gandiva as Gavel runs it (`gandiva`): time slicing when the cluster is not over-subscribed,
//! random pairs kept across rounds until introspection dissolves them, determinism under a seed,
//! and migration to free a server for a multi-GPU job — stepped by hand and through the engine.

use arbiter_model::{
    ActiveJob, Cluster, Decision, JobId, JobSpec, Node, NodeId, Placement, RackId, RunState,
    SimTime,
};
use arbiter_policy::gavel::RoundOptions;
use arbiter_policy::gavel::gandiva::{Gandiva, normalized_packed_throughput};
use arbiter_policy::mechanisms::colocation::PairSpeeds;
use arbiter_policy::{Policy, PolicyConfig, PolicyKind, SchedulerView, build};
use arbiter_sim::{JobOutcome, OverheadModel, SimConfig, simulate};
use std::collections::BTreeMap;
use std::sync::Arc;

const ROUND_S: u64 = 360;

/// Rounds of 360 s; the allocation is recomputed whenever the job set changed.
fn options(seed: u64) -> RoundOptions {
    RoundOptions {
        round_s: ROUND_S as f64,
        recompute_interval_s: 0.0,
        seed,
        ..RoundOptions::default()
    }
}

fn job(id: u32, model: &str, gpus: u32, submit_s: u64, run_s: f64) -> JobSpec {
    let mut spec = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s);
    if !model.is_empty() {
        spec.model = Some(model.to_string());
    }
    spec
}

/// A and B share well (each keeps 0.8 of its speed: 1.6 ≥ 1); two of a kind do not (0.3 each:
/// 0.6 < 1).
fn speeds() -> Arc<PairSpeeds> {
    let mut pairs = PairSpeeds::default();
    pairs.insert(("A".into(), 1), ("B".into(), 1), vec![(0.8, 0.8)]);
    pairs.insert(("A".into(), 1), ("A".into(), 1), vec![(0.3, 0.3)]);
    pairs.insert(("B".into(), 1), ("B".into(), 1), vec![(0.3, 0.3)]);
    Arc::new(pairs)
}

/// A cluster stepped by hand: the policy's decisions are applied as the engine would.
struct Bench {
    cluster: Cluster,
    specs: Vec<JobSpec>,
    jobs: Vec<ActiveJob>,
}

impl Bench {
    fn new(cluster: Cluster) -> Self {
        Bench {
            cluster,
            specs: Vec::new(),
            jobs: Vec::new(),
        }
    }

    fn submit(&mut self, spec: JobSpec) {
        assert_eq!(spec.id.index(), self.specs.len(), "ids are dense");
        self.jobs.push(ActiveJob::submitted(
            spec.id,
            spec.gpus,
            spec.submit,
            spec.run_time_s,
        ));
        self.specs.push(spec);
    }

    fn finish(&mut self, policy: &mut Gandiva, id: u32, now_s: u64) {
        let i = self
            .jobs
            .iter()
            .position(|j| j.id == JobId(id))
            .expect("active");
        let job = self.jobs.remove(i);
        policy.job_finished(
            &self.specs[id as usize],
            &job,
            SimTime::from_ms(now_s * 1000),
        );
    }

    fn view(&self) -> SchedulerView<'_> {
        SchedulerView {
            cluster: &self.cluster,
            jobs: &self.jobs,
            specs: &self.specs,
            current: None,
        }
    }

    /// One scheduling point at `now_s`; the decision is applied (runs, moves, preemptions).
    fn step(&mut self, policy: &mut dyn Policy, now_s: u64) -> Decision {
        let now = SimTime::from_ms(now_s * 1000);
        let decision = policy.schedule(&self.view(), now).expect("decides");
        check_fits(&self.cluster, &decision);
        let placed: BTreeMap<JobId, (Placement, f64)> = decision
            .run
            .iter()
            .map(|a| {
                (
                    a.job,
                    (a.placement.clone(), a.colocation.map_or(1.0, |c| c.speed)),
                )
            })
            .collect();
        for job in &mut self.jobs {
            job.state = match placed.get(&job.id) {
                Some((placement, speed)) => RunState::Running {
                    placement: placement.clone(),
                    since: now,
                    speed: *speed,
                },
                None => RunState::Pending,
            };
        }
        decision
    }
}

/// No server is over-committed (a shared placement counts once).
fn check_fits(cluster: &Cluster, decision: &Decision) {
    let mut used = vec![0u32; cluster.nodes.len()];
    for a in &decision.run {
        if a.colocation.is_some_and(|c| c.partner < a.job) {
            continue;
        }
        for &(node, gpus) in &a.placement.slots {
            used[node.index()] += gpus;
        }
    }
    for (node, used) in cluster.nodes.iter().zip(used) {
        assert!(
            used <= node.gpus,
            "node {} over-committed: {used} > {}",
            node.id.0,
            node.gpus
        );
    }
}

/// The pairs a decision runs (smaller id first, sorted).
fn running_pairs(decision: &Decision) -> Vec<(JobId, JobId)> {
    let mut pairs: Vec<(JobId, JobId)> = decision
        .run
        .iter()
        .filter_map(|a| {
            a.colocation
                .filter(|c| a.job < c.partner)
                .map(|c| (a.job, c.partner))
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn normalized_packed_throughput_sums_over_types_and_is_zero_where_a_job_stalls() {
    // One type: 0.8 + 0.8 = 1.6 (pays); 0.3 + 0.3 = 0.6 (does not).
    assert!((normalized_packed_throughput(&[(0.8, 0.8)], &[1.0], &[1.0]) - 1.6).abs() < 1e-12);
    assert!((normalized_packed_throughput(&[(0.3, 0.3)], &[1.0], &[1.0]) - 0.6).abs() < 1e-12);
    // Relative to each job's solo speed on the type.
    assert!((normalized_packed_throughput(&[(0.3, 0.2)], &[0.5], &[0.4]) - 1.1).abs() < 1e-12);
    // Gavel sums over the GPU types: the same poor pair on two types reaches 1.2.
    assert!(
        (normalized_packed_throughput(&[(0.3, 0.3), (0.3, 0.3)], &[1.0, 1.0], &[1.0, 1.0]) - 1.2)
            .abs()
            < 1e-12
    );
    // A job that makes no progress sharing on some type: 0, whatever the other types give.
    assert_eq!(
        normalized_packed_throughput(&[(0.9, 0.9), (0.0, 0.5)], &[1.0, 1.0], &[1.0, 1.0]),
        0.0
    );
}

#[test]
fn equal_time_shares_and_no_pairs_when_the_cluster_is_not_over_subscribed() {
    // 2 V100s and 4 K80s, five one-GPU jobs that would pair well: 5 GPUs asked of 6, so Gandiva
    // time-slices: every job gets G_k / n of each type (2/5, 4/5), scaled to a total of 1 —
    // (1/3, 2/3) — whatever its speeds, and nobody shares.
    let mut nodes = Vec::new();
    for (t, count) in [(0u8, 2u32), (1, 4)] {
        for _ in 0..count {
            let id = NodeId(nodes.len() as u32);
            nodes.push(Node {
                id,
                name: format!("n{}", id.0),
                rack: RackId(0),
                gpu_type: arbiter_model::GpuTypeId(t),
                gpus: 1,
                cpus: 8,
                memory_gib: 64,
            });
        }
    }
    let cluster = Cluster::new(vec!["V100".into(), "K80".into()], nodes).expect("valid");
    let mut bench = Bench::new(cluster);
    for i in 0..5 {
        let mut spec = job(i, if i % 2 == 0 { "A" } else { "B" }, 1, 0, 1e12);
        spec.speed_by_gpu_type = vec![1.0, 0.2 + 0.15 * i as f64];
        bench.submit(spec);
    }
    let mut pairs = PairSpeeds::default();
    pairs.insert(
        ("A".into(), 1),
        ("B".into(), 1),
        vec![(0.8, 0.8), (0.8, 0.8)],
    );
    let mut policy = Gandiva::new(options(0), Some(Arc::new(pairs))).expect("builds");
    let x = policy.allocation_at(&bench.view(), SimTime::ZERO);
    assert_eq!(x.len(), 5);
    for row in x.values() {
        assert!(
            (row[0] - 1.0 / 3.0).abs() < 1e-12 && (row[1] - 2.0 / 3.0).abs() < 1e-12,
            "{row:?}"
        );
    }
    let mut policy = Gandiva::new(options(0), Some(speeds())).expect("builds");
    for round in 0..10 {
        let decision = bench.step(&mut policy, round * ROUND_S);
        assert_eq!(decision.run.len(), 5, "round {round}: every job runs");
        assert!(
            decision.run.iter().all(|a| a.colocation.is_none()),
            "round {round}: no sharing"
        );
    }
    assert!(policy.pairs().is_empty());
    assert_eq!(policy.pairs_formed(), 0);
}

#[test]
fn introspection_dissolves_pairs_that_do_not_pay_and_keeps_those_that_do() {
    // Two A and two B jobs on two GPUs (over-subscribed): random pairs. A–B pairs pay (1.6), A–A
    // and B–B do not (0.6). The pairs run until the next recomputation (a fifth job arrives);
    // there, introspection dissolves every pair that does not pay and keeps every one that does.
    let mut seeds_with_poor_pairs = 0;
    for seed in 0..16 {
        let mut bench = Bench::new(Cluster::homogeneous(1, 2, 1, 8, 64, "V100").expect("valid"));
        for i in 0..4 {
            bench.submit(job(i, if i < 2 { "A" } else { "B" }, 1, 0, 1e12));
        }
        let mut policy = Gandiva::new(options(seed), Some(speeds())).expect("builds");
        let first = bench.step(&mut policy, 0);
        let formed = policy.pairs();
        assert_eq!(
            formed.len(),
            2,
            "seed {seed}: four jobs of one size make two pairs: {formed:?}"
        );
        assert_eq!(
            running_pairs(&first),
            formed,
            "seed {seed}: both pairs run on the two GPUs"
        );
        // Jobs 0 and 1 are A, 2 and 3 are B.
        let pays = |(a, b): (JobId, JobId)| (a.0 < 2) != (b.0 < 2);
        for round in 1..5 {
            let decision = bench.step(&mut policy, round * ROUND_S);
            assert_eq!(
                running_pairs(&decision),
                formed,
                "seed {seed} round {round}: pairs kept until introspection"
            );
        }
        let poor = formed.iter().filter(|p| !pays(**p)).count() as u64;
        seeds_with_poor_pairs += u64::from(poor > 0);
        bench.submit(job(4, "A", 1, 5 * ROUND_S, 1e12));
        bench.step(&mut policy, 5 * ROUND_S);
        assert_eq!(
            policy.pairs_dissolved(),
            poor,
            "seed {seed}: {formed:?} -> {:?}",
            policy.pairs()
        );
        for pair in &formed {
            if pays(*pair) {
                assert!(
                    policy.pairs().contains(pair),
                    "seed {seed}: {pair:?} pays and is kept"
                );
            }
        }
    }
    assert!(
        seeds_with_poor_pairs > 0,
        "some seed draws a pair of a kind"
    );
}

#[test]
fn pairs_are_kept_across_rounds_and_recomputations() {
    // Four A jobs on two GPUs, sharing well: two pairs, each on its own GPU every round (lease
    // extended), through rounds without recomputation and through one that adds a job.
    let mut pairs = PairSpeeds::default();
    pairs.insert(("A".into(), 1), ("A".into(), 1), vec![(0.7, 0.7)]);
    let mut bench = Bench::new(Cluster::homogeneous(1, 2, 1, 8, 64, "V100").expect("valid"));
    for i in 0..4 {
        bench.submit(job(i, "A", 1, 0, 1e12));
    }
    let mut policy = Gandiva::new(options(3), Some(Arc::new(pairs))).expect("builds");
    let first = bench.step(&mut policy, 0);
    let formed = policy.pairs();
    assert_eq!(formed.len(), 2);
    let placement_of = |d: &Decision, id: JobId| {
        d.run
            .iter()
            .find(|a| a.job == id)
            .map(|a| a.placement.clone())
    };
    for round in 1..30 {
        let decision = bench.step(&mut policy, round * ROUND_S);
        assert_eq!(running_pairs(&decision), formed, "round {round}");
        for &(a, _) in &formed {
            assert_eq!(
                placement_of(&decision, a),
                placement_of(&first, a),
                "round {round}: a pair keeps its GPU"
            );
        }
    }
    assert_eq!(policy.recomputations(), 1);
    assert!(policy.lease_extensions() >= 2 * 29);
    // A fifth job: the recomputation keeps both pairs; the new job has no partner to pair with.
    bench.submit(job(4, "A", 1, 30 * ROUND_S, 1e12));
    bench.step(&mut policy, 30 * ROUND_S);
    assert_eq!(policy.pairs(), formed);
    assert_eq!(policy.pairs_dissolved(), 0);
    assert_eq!(policy.recomputations(), 2);
    // Three combinations take turns on two GPUs: the new job runs in some rounds, the pairs
    // still run together whenever they run.
    let mut new_job_ran = 0;
    for round in 31..60 {
        let decision = bench.step(&mut policy, round * ROUND_S);
        new_job_ran += u32::from(decision.run.iter().any(|a| a.job == JobId(4)));
        for a in &decision.run {
            if a.job != JobId(4) {
                let partner = a
                    .colocation
                    .expect("paired jobs run with their partner")
                    .partner;
                assert!(formed.contains(&(a.job.min(partner), a.job.max(partner))));
            }
        }
    }
    assert!(
        (5..=25).contains(&new_job_ran),
        "the single job ran {new_job_ran} of 29 rounds"
    );
}

/// Eight jobs of two types arriving over time on four GPUs; the pairs and decisions of 40 rounds.
fn trajectory(seed: u64) -> (Vec<Vec<(JobId, JobId)>>, Vec<Decision>) {
    let mut bench = Bench::new(Cluster::homogeneous(1, 2, 2, 8, 64, "V100").expect("valid"));
    let mut policy = Gandiva::new(options(seed), Some(speeds())).expect("builds");
    let (mut pairs, mut decisions) = (Vec::new(), Vec::new());
    for round in 0..40u64 {
        if round < 8 {
            bench.submit(job(
                round as u32,
                if round % 3 == 0 { "B" } else { "A" },
                1,
                round * ROUND_S,
                1e12,
            ));
        }
        decisions.push(bench.step(&mut policy, round * ROUND_S));
        pairs.push(policy.pairs());
    }
    (pairs, decisions)
}

#[test]
fn the_same_seed_gives_the_same_pairs_and_decisions() {
    let (pairs, decisions) = trajectory(11);
    assert!(
        pairs.iter().any(|p| !p.is_empty()),
        "the cluster gets over-subscribed and pairs form"
    );
    let (again_pairs, again_decisions) = trajectory(11);
    assert_eq!(pairs, again_pairs);
    assert_eq!(decisions, again_decisions);
    // The pairing is random: other seeds pair differently.
    assert!(
        (0..10).any(|seed| trajectory(seed).0 != pairs),
        "every seed paired alike"
    );
}

#[test]
fn a_job_is_migrated_to_free_a_server_for_a_gang() {
    // Two servers of 4 GPUs. Eight one-GPU jobs fill them (0–3 on server 0, 4–7 on server 1);
    // 0, 1, 4 and 5 finish, leaving two jobs on each server, and a 4-GPU job arrives. Gavel's
    // mechanism keeps the four jobs where they are and would spread the gang 2 + 2; Gandiva moves
    // the two jobs of server 0 to server 1 and gives the gang server 0.
    let mut bench = Bench::new(Cluster::homogeneous(1, 2, 4, 32, 256, "V100").expect("valid"));
    for i in 0..8 {
        bench.submit(job(i, "", 1, 0, 1e12));
    }
    let mut policy = Gandiva::new(options(0), None).expect("builds");
    let first = bench.step(&mut policy, 0);
    let node_of = |d: &Decision, id: u32| {
        d.run
            .iter()
            .find(|a| a.job == JobId(id))
            .map(|a| a.placement.slots.as_slice().to_vec())
    };
    for i in 0..8 {
        assert_eq!(
            node_of(&first, i),
            Some(vec![(NodeId(i / 4), 1)]),
            "job {i}"
        );
    }
    for id in [0, 1, 4, 5] {
        bench.finish(&mut policy, id, 100);
    }
    bench.submit(job(8, "", 4, 200, 1e12));
    let before: BTreeMap<JobId, Placement> = bench
        .jobs
        .iter()
        .filter_map(|j| j.placement().map(|p| (j.id, p.clone())))
        .collect();
    let decision = bench.step(&mut policy, ROUND_S);
    assert_eq!(decision.run.len(), 5, "everyone runs: 8 GPUs asked of 8");
    assert_eq!(
        node_of(&decision, 8),
        Some(vec![(NodeId(0), 4)]),
        "the gang gets a whole server"
    );
    let moved: Vec<JobId> = decision
        .run
        .iter()
        .filter(|a| before.get(&a.job).is_some_and(|p| *p != a.placement))
        .map(|a| a.job)
        .collect();
    assert_eq!(
        moved,
        vec![JobId(2), JobId(3)],
        "the two jobs of server 0 migrate"
    );
    for id in [2, 3, 6, 7] {
        assert_eq!(
            node_of(&decision, id),
            Some(vec![(NodeId(1), 1)]),
            "job {id}"
        );
    }
    assert_eq!(
        (policy.gangs_consolidated(), policy.jobs_migrated()),
        (1, 2)
    );
    // Next round everything stays put: no further migration.
    let next = bench.step(&mut policy, 2 * ROUND_S);
    let placements = |d: &Decision| {
        d.run
            .iter()
            .map(|a| (a.job, a.placement.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(placements(&next), placements(&decision));
    assert_eq!(policy.jobs_migrated(), 2);
}

#[test]
fn the_engine_carries_out_the_defragmenting_migration() {
    // The same story through the simulator: jobs 0, 1, 4, 5 finish at 100 s, the gang arrives at
    // 200 s. Gandiva migrates two jobs and runs the gang on one server; Gavel's LAS (no
    // defragmentation) spreads it and migrates nobody.
    let cluster = Cluster::homogeneous(1, 2, 4, 32, 256, "V100").expect("valid");
    let mut specs: Vec<JobSpec> = (0..8)
        .map(|i| {
            job(
                i,
                "",
                1,
                0,
                if [0, 1, 4, 5].contains(&i) {
                    100.0
                } else {
                    5_000.0
                },
            )
        })
        .collect();
    specs.push(job(8, "", 4, 200, 1_000.0));
    let config = PolicyConfig {
        rounds: options(0),
        ..PolicyConfig::default()
    };
    let sim = SimConfig {
        overhead: OverheadModel::None,
        round_s: Some(ROUND_S as f64),
        ..SimConfig::default()
    };
    let migrations = |kind: PolicyKind| -> Vec<u32> {
        let mut policy = build(kind, &config).expect("builds");
        let out = simulate(&cluster, &specs, policy.as_mut(), &sim).expect("runs");
        assert!(
            out.records
                .iter()
                .all(|r| r.outcome == JobOutcome::Completed),
            "{kind}"
        );
        out.records.iter().map(|r| r.migrations).collect()
    };
    assert_eq!(
        migrations(PolicyKind::Gandiva),
        vec![0, 0, 1, 1, 0, 0, 0, 0, 0]
    );
    assert_eq!(migrations(PolicyKind::MaxMinFairnessHet), vec![0; 9]);
}

#[test]
fn a_busy_mixed_workload_pairs_dissolves_and_defragments_through_the_engine() {
    // 24 GPUs on six 4-GPU servers; 120 jobs of 1, 2 or 4 GPUs and three types arriving over
    // 10 hours (a small linear congruential generator keeps the workload fixed).
    let cluster = Cluster::homogeneous(2, 3, 4, 32, 256, "V100").expect("valid");
    let mut state = 12345u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let jobs: Vec<JobSpec> = (0..120u32)
        .map(|i| {
            let gpus = [1, 1, 1, 2, 4][next(5) as usize];
            let model = ["A", "B", "C"][next(3) as usize];
            job(
                i,
                model,
                gpus,
                u64::from(i) * 300,
                600.0 + next(20_000) as f64,
            )
        })
        .collect();
    let mut speeds = PairSpeeds::default();
    for gpus in [1, 2, 4] {
        let key = |m: &str| (m.to_string(), gpus);
        speeds.insert(key("A"), key("B"), vec![(0.7, 0.6)]);
        speeds.insert(key("A"), key("A"), vec![(0.3, 0.3)]);
        speeds.insert(key("B"), key("C"), vec![(0.9, 0.2)]);
    }
    let mut policy = Gandiva::new(options(5), Some(Arc::new(speeds))).expect("builds");
    let sim = SimConfig {
        overhead: OverheadModel::None,
        round_s: Some(ROUND_S as f64),
        ..SimConfig::default()
    };
    let out = simulate(&cluster, &jobs, &mut policy, &sim).expect("runs");
    assert!(
        out.records
            .iter()
            .all(|r| r.outcome == JobOutcome::Completed)
    );
    assert!(
        out.records.iter().any(|r| r.colocated_s > 0.0),
        "some jobs shared GPUs"
    );
    assert!(
        policy.pairs_formed() > 0 && policy.pairs_dissolved() > 0,
        "{} formed, {} dissolved",
        policy.pairs_formed(),
        policy.pairs_dissolved()
    );
    assert!(
        policy.gangs_consolidated() > 0 && policy.jobs_migrated() > 0,
        "{} gangs, {} jobs moved",
        policy.gangs_consolidated(),
        policy.jobs_migrated()
    );
}

mod invariants {
    //! The engine's invariants (as in `properties.rs`) on workloads that make Gandiva pair,
    //! dissolve and defragment: multi-GPU servers, gangs, three job types with good, lopsided
    //! and unmeasured pairs.
    use super::*;
    use proptest::prelude::*;

    fn workload() -> impl Strategy<Value = (Cluster, Vec<JobSpec>)> {
        (1u32..3, 1u32..4, 1u32..9)
            .prop_flat_map(|(racks, nodes, gpus)| {
                let cluster =
                    Cluster::homogeneous(racks, nodes, gpus, 32, 256, "V100").expect("valid");
                let max_gpus = racks * nodes * gpus + 1;
                let jobs = proptest::collection::vec(
                    (0u64..2_000, 1u32..=max_gpus, 1u32..600_000, 0usize..4),
                    1..40,
                );
                (Just(cluster), jobs)
            })
            .prop_map(|(cluster, mut raw)| {
                raw.sort_by_key(|(submit, ..)| *submit);
                let jobs = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (submit_s, gpus, run_ms, model))| {
                        job(
                            i as u32,
                            ["A", "B", "C", ""][model],
                            gpus,
                            submit_s,
                            run_ms as f64 / 1000.0,
                        )
                    })
                    .collect();
                (cluster, jobs)
            })
    }

    /// A with B and A with A pay, B with C is lopsided (0.9 + 0.2 = 1.1), C with C and anything
    /// with A on 3 GPUs is not measured.
    fn pair_speeds() -> Arc<PairSpeeds> {
        let mut speeds = PairSpeeds::default();
        let key = |m: &str, g: u32| (m.to_string(), g);
        for gpus in [1, 2, 4, 5, 6, 7, 8] {
            speeds.insert(key("A", gpus), key("B", gpus), vec![(0.7, 0.6)]);
            speeds.insert(key("A", gpus), key("A", gpus), vec![(0.3, 0.3)]);
            speeds.insert(key("B", gpus), key("C", gpus), vec![(0.9, 0.2)]);
        }
        Arc::new(speeds)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

        /// Feasible (the engine checks every decision), every job that fits finishes, unshared
        /// jobs get exactly their GPU-seconds of work, and a second run is identical.
        #[test]
        fn gandiva_runs_are_feasible_complete_conserving_and_deterministic(
            (cluster, jobs) in workload(),
            rounds in prop_oneof![Just(None), Just(Some(60.0)), Just(Some(360.0))],
            recompute_interval_s in prop_oneof![Just(0.0), Just(1_920.0)],
            seed in 0u64..4,
        ) {
            let config = PolicyConfig {
                rounds: RoundOptions { round_s: 360.0, recompute_interval_s, seed, ..RoundOptions::default() },
                pair_speeds: Some(pair_speeds()),
                ..PolicyConfig::default()
            };
            let sim = SimConfig { overhead: OverheadModel::None, round_s: rounds, ..SimConfig::default() };
            let mut policy = build(PolicyKind::Gandiva, &config).expect("builds");
            let out = simulate(&cluster, &jobs, policy.as_mut(), &sim);
            prop_assert!(out.is_ok(), "{:?}", out.err());
            let out = out.expect("checked");
            for (spec, record) in jobs.iter().zip(&out.records) {
                if spec.gpus <= cluster.total_gpus() {
                    prop_assert_eq!(record.outcome, JobOutcome::Completed, "job {}", spec.id);
                    let stints = 1.0 + (record.preemptions + record.migrations) as f64;
                    let slack = 0.001 * stints * spec.gpus as f64 + 1e-6;
                    prop_assert!(record.colocated_s > 0.0 || (record.gpu_s_allocated - spec.gpu_seconds()).abs() <= slack,
                        "job {}: allocated {} GPU-s for {} of work", spec.id, record.gpu_s_allocated, spec.gpu_seconds());
                } else {
                    prop_assert_eq!(record.outcome, JobOutcome::Unplaceable);
                }
            }
            let mut again = build(PolicyKind::Gandiva, &config).expect("builds");
            prop_assert_eq!(&out.records, &simulate(&cluster, &jobs, again.as_mut(), &sim).expect("runs").records);
        }
    }
}
