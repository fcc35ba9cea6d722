//! Muri's grouping on a hand-made example, stepped by hand.

use super::*;
use arbiter_model::{Cluster, IterationStages};
use std::collections::BTreeSet;

/// A single-GPU job of `run_s` seconds whose iteration is `io_s` of storage I/O and `gpu_s` of
/// GPU (no CPU).
fn spec(id: u32, run_s: f64, io_s: f64, gpu_s: f64) -> JobSpec {
    let mut s = JobSpec::new(JobId(id), SimTime::ZERO, 1, run_s);
    s.stages = Some(IterationStages {
        io_s,
        cpu_s: 0.0,
        gpu_s,
    });
    s.iteration_s = Some(io_s + gpu_s);
    s.trace_duration_s = Some(run_s);
    s
}

/// The groups of a decision (each ring of partners, its job numbers sorted), checked to share
/// their GPUs.
fn groups_of(decision: &Decision) -> Vec<Vec<u32>> {
    let by_job: BTreeMap<JobId, &Assignment> = decision.run.iter().map(|a| (a.job, a)).collect();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut seen = BTreeSet::new();
    for a in &decision.run {
        if !seen.insert(a.job) {
            continue;
        }
        let mut ring = vec![a.job.0];
        let mut at = a.colocation.map_or(a.job, |c| c.partner);
        while at != a.job {
            assert!(seen.insert(at));
            assert_eq!(
                by_job[&at].placement, a.placement,
                "a group shares its GPUs"
            );
            ring.push(at.0);
            at = by_job[&at].colocation.expect("grouped").partner;
        }
        ring.sort();
        groups.push(ring);
    }
    groups.sort();
    groups
}

/// Eight one-GPU jobs, I/O-bound (even ids: 2 s of I/O, 1 s of GPU) and GPU-bound (odd).
fn eight_specs() -> Vec<JobSpec> {
    (0..8)
        .map(|i| {
            if i % 2 == 0 {
                spec(i, 100.0 + i as f64, 2.0, 1.0)
            } else {
                spec(i, 100.0 + i as f64, 1.0, 2.0)
            }
        })
        .collect()
}

/// [`eight_specs`], all waiting on one node of `gpus` GPUs: Muri-S decides once with `config`.
fn eight_jobs_on(gpus: u32, config: MuriConfig) -> Decision {
    let cluster = Cluster::homogeneous(1, 1, gpus, 16, 64, "V100").expect("valid");
    let specs = eight_specs();
    let jobs: Vec<ActiveJob> = specs
        .iter()
        .map(|s| ActiveJob::submitted(s.id, 1, s.submit, s.run_time_s))
        .collect();
    let view = SchedulerView {
        cluster: &cluster,
        jobs: &jobs,
        specs: &specs,
        current: None,
    };
    let mut muri = Muri::new(MuriRanking::RemainingService, config).expect("valid");
    muri.schedule(&view, SimTime::ZERO).expect("decides")
}

#[test]
fn the_fast_matching_over_shapes_groups_the_eight_jobs_as_the_exact_one_does() {
    // Forced over shapes for every class (fast_above_groups = 0): two shapes (I/O- and
    // GPU-bound); round one pairs every I/O-bound job with a GPU-bound one, round two pairs of
    // pairs — two groups of four, two of each kind, as Muri's blossom groups them.
    let fast = MuriConfig {
        matching: MuriMatching::Fast,
        fast_above_groups: 0,
        ..MuriConfig::default()
    };
    let groups = groups_of(&eight_jobs_on(2, fast));
    assert_eq!(groups.len(), 2, "{groups:?}");
    for g in &groups {
        assert_eq!(g.len(), 4);
        assert_eq!(g.iter().filter(|j| *j % 2 == 0).count(), 2, "{g:?}");
    }
    assert_eq!(
        groups.len(),
        groups_of(&eight_jobs_on(2, MuriConfig::default())).len()
    );
}

#[test]
fn where_the_cluster_holds_every_candidate_no_group_is_merged_either_way() {
    // Eight GPUs for eight one-GPU jobs: no pair would be merged, so neither matching runs
    // (the exact one without autopack, the fast one always) and every job runs alone.
    for matching in [MuriMatching::Exact, MuriMatching::Fast] {
        let config = MuriConfig {
            matching,
            ..MuriConfig::default()
        };
        let decision = eight_jobs_on(8, config);
        assert_eq!(decision.run.len(), 8);
        assert!(
            decision.run.iter().all(|a| a.colocation.is_none()),
            "{matching:?}"
        );
    }
}

#[test]
fn eight_jobs_on_two_gpus_pair_io_with_gpu_work_then_merge_pairs_into_fours() {
    // Eight single-GPU jobs, all waiting, on one node of two GPUs: Muri-S walks them shortest
    // first; job 0 opens a slot of four candidates (0-3), job 4 fits beside it and opens the
    // next (4-7): eight candidates for two GPUs. Round one matches singles: an I/O-bound job
    // (even ids: 2 s of I/O, 1 s of GPU) overlaps a GPU-bound one (odd ids: 1 s of I/O, 2 s of
    // GPU) best, so the matching pairs evens with odds, and all four pairs merge (demand 8 →
    // 4). Round two merges pairs into fours (4 → 2), which fit: two groups of four, each on one
    // GPU, two I/O-bound and two GPU-bound jobs in each.
    let decision = eight_jobs_on(2, MuriConfig::default());
    assert_eq!(decision.run.len(), 8, "{decision:?}");
    let groups = groups_of(&decision);
    assert_eq!(groups.len(), 2, "{groups:?}");
    for g in &groups {
        assert_eq!(g.len(), 4);
        assert_eq!(
            g.iter().filter(|j| *j % 2 == 0).count(),
            2,
            "two I/O-bound jobs in {g:?}"
        );
    }
    // One GPU each, and every member at the group's interleaved speed.
    let placements: BTreeSet<String> = decision
        .run
        .iter()
        .map(|a| a.placement.to_string())
        .collect();
    assert_eq!(
        placements.len(),
        1,
        "both groups take one GPU of node 0: {placements:?}"
    );
    let by_job: BTreeMap<JobId, &Assignment> = decision.run.iter().map(|a| (a.job, a)).collect();
    let specs = eight_specs();
    for g in &groups {
        let members: Vec<&JobSpec> = g.iter().map(|&j| &specs[j as usize]).collect();
        let together = group_time(&members, JobOrder::Best, GroupFactors::MURI);
        // Interleaving beats taking turns (4 × 3 s), even with Muri's factor for four jobs.
        assert!(together < 12.0, "{together}");
        for &j in g {
            let speed = by_job[&JobId(j)].colocation.expect("grouped").speed;
            assert_eq!(speed, 3.0 / together);
        }
    }
}

#[test]
fn without_blossom_each_slot_merges_into_its_first_job_while_demand_exceeds_capacity() {
    // Six one-GPU candidates in two slots of four (0-3, 4-5), demand 6 on 4 GPUs: job 1 and then
    // job 2 join job 0 (demand 5, then 4); job 3 stays alone, listed before its slot's group;
    // slot two needs no merge: 5 alone, then 4.
    let singles: BTreeMap<u32, Vec<Group>> = BTreeMap::from([(
        1,
        (0..6)
            .map(|i| Group {
                jobs: smallvec::smallvec![i],
                gpus: 1,
            })
            .collect(),
    )]);
    let mut required = 6;
    let merged = merge_slots_in_order(&[1], &singles, 4, &mut required, 4);
    let jobs: Vec<Vec<usize>> = merged[&1].iter().map(|g| g.jobs.to_vec()).collect();
    assert_eq!(jobs, vec![vec![3], vec![0, 1, 2], vec![5], vec![4]]);
    assert_eq!(required, 4);
}

#[test]
fn without_blossom_four_jobs_slow_down_by_muris_1_3_instead_of_1_37() {
    let s = |io_s, cpu_s, gpu_s| Stages { io_s, cpu_s, gpu_s };
    let four = [
        s(0.0006, 0.419, 0.049),
        s(0.769, 0.057, 0.01),
        s(0.0006, 0.419, 0.049),
        s(0.769, 0.057, 0.01),
    ];
    let with = crate::muri::interleave::iteration_time_with_s(
        &four,
        1.0,
        JobOrder::Best,
        GroupFactors::MURI,
    );
    let without = crate::muri::interleave::iteration_time_with_s(
        &four,
        1.0,
        JobOrder::Best,
        GroupFactors::MURI_WITHOUT_BLOSSOM,
    );
    assert!((with / without - 1.37 / 1.3).abs() < 1e-12);
    // The group of Muri's trace3 at 674,521 s (its Python prints 1.5945812807881774 s).
    assert!((without - 1.5945812807881774).abs() < 1e-12, "{without}");
}
