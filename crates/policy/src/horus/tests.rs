//! Horus stepped by hand: predictions, the cost, the limits, the look-ahead and the speeds.

use super::*;
use crate::test_support::step;
use arbiter_model::{IterationStages, NodeId};

/// A job of `gpus` GPUs whose GPU stage is `util_pct` % of a one-second iteration.
fn spec(id: u32, submit_s: u64, gpus: u32, util_pct: f64) -> JobSpec {
    let mut s = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, 1000.0);
    let gpu_s = util_pct / 100.0;
    s.stages = Some(IterationStages {
        io_s: 1.0 - gpu_s,
        cpu_s: 0.0,
        gpu_s,
    });
    s.iteration_s = Some(1.0);
    s
}

/// (job, placement, partner, speed) of every running job, by job id.
fn running(d: &Decision) -> Vec<(u32, String, Option<u32>, Option<f64>)> {
    let mut v: Vec<_> = d
        .run
        .iter()
        .map(|a| {
            (
                a.job.0,
                a.placement.to_string(),
                a.colocation.map(|c| c.partner.0),
                a.colocation.map(|c| c.speed),
            )
        })
        .collect();
    v.sort_by_key(|r| r.0);
    v
}

fn pending(d: &Decision, job: u32) -> Option<PendingReason> {
    d.pending.iter().find(|(j, _)| j.0 == job).map(|(_, r)| *r)
}

fn horus(config: HorusConfig) -> Horus {
    Horus::new(config, PlacementStrategy::Consolidated, None).expect("valid")
}

fn one_node(gpus: u32) -> Cluster {
    Cluster::homogeneous(1, 1, gpus, 32, 256, "V100").expect("valid")
}

const SLOW: f64 = 1.0 / 1.2;

#[test]
fn utilization_is_the_gpu_stages_share_of_an_iteration() {
    let config = HorusConfig::default();
    assert_eq!(
        predict(&spec(0, 0, 1, 40.0), &config),
        Prediction {
            util_pct: 40.0,
            memory_gib: 8.0
        }
    );
    // Muri's traces: the network share is iteration − stages, so the GPU share uses the iteration.
    let mut muri = JobSpec::new(JobId(1), SimTime::ZERO, 1, 10.0);
    muri.stages = Some(IterationStages {
        io_s: 0.703,
        cpu_s: 0.062,
        gpu_s: 0.017,
    });
    muri.iteration_s = Some(0.886);
    assert!((predict(&muri, &config).util_pct - 100.0 * 0.017 / 0.886).abs() < 1e-12);
    // No profile: the default, 100 %.
    assert_eq!(
        predict(&JobSpec::new(JobId(2), SimTime::ZERO, 1, 10.0), &config).util_pct,
        100.0
    );
}

#[test]
fn the_cost_is_horus_score_by_hand() {
    let config = HorusConfig::default();
    let idle = Prediction {
        util_pct: 0.0,
        memory_gib: 0.0,
    };
    let new = Prediction {
        util_pct: 30.0,
        memory_gib: 8.0,
    };
    // Idle GPU: 1.3 × 8/32 + |30 − 100| / 100 + 0 = 0.325 + 0.7.
    assert!((gpu_cost(idle, 0, new, &config) - 1.025).abs() < 1e-12);
    // One job of 60 %, 8 GiB: 1.3 × 16/32 + |90 − 100| / 100 + 1 = 0.65 + 0.1 + 1.
    let one = Prediction {
        util_pct: 60.0,
        memory_gib: 8.0,
    };
    assert!((gpu_cost(one, 1, new, &config) - 1.75).abs() < 1e-12);
    // Over 100 %: the excess weighs 1.6: 0.65 + 1.6 × 20 / 100 + 1.
    let busy = Prediction {
        util_pct: 90.0,
        memory_gib: 8.0,
    };
    assert!((gpu_cost(busy, 1, new, &config) - 1.97).abs() < 1e-12);
}

#[test]
fn a_job_shares_a_gpu_only_under_the_utilization_limit() {
    // One GPU: job 0 (60 %) runs; job 1 (30 %) joins it (90 % <= 100 %); job 2 (35 %) would
    // make 125 % and waits.
    let cluster = one_node(1);
    let specs = vec![
        spec(0, 0, 1, 60.0),
        spec(1, 1, 1, 30.0),
        spec(2, 2, 1, 35.0),
    ];
    let mut policy = horus(HorusConfig::default());
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    assert_eq!(running(&d0), vec![(0, "node0:1".to_string(), None, None)]);
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1, 2], &d0);
    assert_eq!(
        running(&d1),
        vec![
            (0, "node0:1".to_string(), Some(1), Some(SLOW)),
            (1, "node0:1".to_string(), Some(0), Some(SLOW))
        ]
    );
    assert_eq!(pending(&d1, 2), Some(PendingReason::InsufficientGpus));
    // Job 2 fits beside job 0 (95 %) once job 1 has left.
    let d2 = step(&mut policy, &cluster, &specs, &[0, 2], &d1);
    assert_eq!(
        running(&d2),
        vec![
            (0, "node0:1".to_string(), Some(2), Some(SLOW)),
            (2, "node0:1".to_string(), Some(0), Some(SLOW))
        ]
    );
    // A higher limit lets three share (0 + 30 + 60 = 90 %, then job 2 would be the fourth), and
    // no more than three ever do.
    let mut loose = horus(HorusConfig {
        util_limit_pct: 300.0,
        ..HorusConfig::default()
    });
    let d = step(&mut loose, &cluster, &specs, &[0], &Decision::default());
    let mut four = specs.clone();
    four.push(spec(3, 3, 1, 0.0));
    let d = step(&mut loose, &cluster, &four, &[0, 1, 2, 3], &d);
    assert_eq!(d.run.len(), 3);
    assert_eq!(pending(&d, 2), Some(PendingReason::InsufficientGpus));
    let mut many = horus(HorusConfig {
        util_limit_pct: 300.0,
        ..HorusConfig::default()
    });
    let d = step(&mut many, &cluster, &specs, &[0], &Decision::default());
    assert_eq!(
        step(&mut many, &cluster, &specs, &[0, 1, 2], &d).run.len(),
        3,
        "125 % under a 300 % limit"
    );
}

#[test]
fn a_job_shares_a_gpu_only_under_the_memory_limit() {
    // 16 GiB each: two make 32 GiB, over 32 GiB − 500 MiB.
    let cluster = one_node(1);
    let specs = vec![spec(0, 0, 1, 10.0), spec(1, 1, 1, 10.0)];
    let mut policy = horus(HorusConfig {
        job_memory_gib: 16.0,
        ..HorusConfig::default()
    });
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1], &d0);
    assert_eq!(d1.run.len(), 1);
    assert_eq!(pending(&d1, 1), Some(PendingReason::InsufficientGpus));
    // 15 GiB each fit (30 GiB).
    let mut policy = horus(HorusConfig {
        job_memory_gib: 15.0,
        ..HorusConfig::default()
    });
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    assert_eq!(
        step(&mut policy, &cluster, &specs, &[0, 1], &d0).run.len(),
        2
    );
}

#[test]
fn an_idle_gpu_is_preferred_to_a_shared_one() {
    // Two GPUs, job 0 on one: job 1 takes the idle one (cost 1.025 < 1.75 by hand).
    let cluster = one_node(2);
    let specs = vec![spec(0, 0, 1, 60.0), spec(1, 1, 1, 30.0)];
    let mut policy = horus(HorusConfig::default());
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1], &d0);
    assert_eq!(
        running(&d1),
        vec![
            (0, "node0:1".to_string(), None, None),
            (1, "node0:1".to_string(), None, None)
        ]
    );
    assert_eq!(policy.groups().len(), 2, "two GPUs, one job each");
}

#[test]
fn the_cheapest_shared_gpu_is_chosen() {
    // Two GPUs busy: job 0 at 70 %, job 1 at 20 %. Job 2 (30 %) costs 1.3 × 16/32 + 0 + 1 = 1.65
    // beside job 0 (100 %) and 0.65 + 0.5 + 1 = 2.15 beside job 1 (50 %): job 0's GPU.
    let cluster = one_node(2);
    let specs = vec![
        spec(0, 0, 1, 70.0),
        spec(1, 0, 1, 20.0),
        spec(2, 1, 1, 30.0),
    ];
    let mut policy = horus(HorusConfig::default());
    let d0 = step(&mut policy, &cluster, &specs, &[0, 1], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1, 2], &d0);
    let r = running(&d1);
    assert_eq!(r[2].2, Some(0), "job 2 shares with job 0: {r:?}");
    assert_eq!(r[1].2, None);
}

#[test]
fn the_queue_starts_the_lowest_predicted_utilization_first() {
    // One idle GPU, two jobs: the later, lighter one starts; the other cannot join it
    // (90 % + 50 % > 100 %) and waits.
    let cluster = one_node(1);
    let specs = vec![spec(0, 0, 1, 90.0), spec(1, 5, 1, 50.0)];
    let mut policy = horus(HorusConfig::default());
    let d = step(&mut policy, &cluster, &specs, &[0, 1], &Decision::default());
    assert_eq!(running(&d), vec![(1, "node0:1".to_string(), None, None)]);
    assert_eq!(pending(&d, 0), Some(PendingReason::InsufficientGpus));
}

#[test]
fn the_lookahead_starts_a_later_job_that_fits() {
    // Two GPUs, job 0 (50 %) on one. Queue by utilization: job 1 (10 %, 2 GPUs) cannot start —
    // one GPU idle, and it may join only an equal gang — so job 2 (20 %, 1 GPU), next in the
    // window, takes the idle GPU.
    let cluster = one_node(2);
    let specs = vec![
        spec(0, 0, 1, 50.0),
        spec(1, 1, 2, 10.0),
        spec(2, 2, 1, 20.0),
    ];
    let mut policy = horus(HorusConfig::default());
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1, 2], &d0);
    assert_eq!(
        running(&d1),
        vec![
            (0, "node0:1".to_string(), None, None),
            (2, "node0:1".to_string(), None, None)
        ]
    );
    assert_eq!(pending(&d1, 1), Some(PendingReason::InsufficientGpus));
    // A window of one sees only job 1: job 2 waits behind it.
    let mut narrow = horus(HorusConfig {
        lookahead: 1,
        ..HorusConfig::default()
    });
    let d0 = step(&mut narrow, &cluster, &specs, &[0], &Decision::default());
    let d1 = step(&mut narrow, &cluster, &specs, &[0, 1, 2], &d0);
    assert_eq!(running(&d1), vec![(0, "node0:1".to_string(), None, None)]);
    assert_eq!(pending(&d1, 2), Some(PendingReason::BlockedByHeadOfLine));
}

#[test]
fn a_gang_joins_only_an_equal_gang() {
    // Two nodes of two GPUs, both busy with 2-GPU gangs at 30 %: a 2-GPU job joins the first
    // gang (equal cost, first unit); a 1-GPU job cannot join either.
    let cluster = Cluster::homogeneous(1, 2, 2, 32, 256, "V100").expect("valid");
    let specs = vec![
        spec(0, 0, 2, 30.0),
        spec(1, 0, 2, 30.0),
        spec(2, 1, 2, 30.0),
        spec(3, 2, 1, 10.0),
    ];
    let mut policy = horus(HorusConfig::default());
    let d0 = step(&mut policy, &cluster, &specs, &[0, 1], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1, 2, 3], &d0);
    let r = running(&d1);
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(
        (r[0].2, r[2].2, r[2].1.as_str()),
        (Some(2), Some(0), "node0:2")
    );
    assert_eq!(pending(&d1, 3), Some(PendingReason::InsufficientGpus));
}

#[test]
fn interference_slows_both_jobs_and_ends_with_the_sharing() {
    let cluster = one_node(1);
    let specs = vec![spec(0, 0, 1, 40.0), spec(1, 1, 1, 40.0)];
    let mut policy = horus(HorusConfig {
        interference: 0.5,
        ..HorusConfig::default()
    });
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1], &d0);
    let speeds: Vec<Option<f64>> = running(&d1).iter().map(|r| r.3).collect();
    assert_eq!(speeds, vec![Some(1.0 / 1.5), Some(1.0 / 1.5)]);
    // Job 0 finishes: job 1 runs alone again, at full speed.
    let d2 = step(&mut policy, &cluster, &specs, &[1], &d1);
    assert_eq!(running(&d2), vec![(1, "node0:1".to_string(), None, None)]);
}

#[test]
fn measured_pair_speeds_replace_the_factor() {
    use crate::mechanisms::colocation::PairSpeeds;
    let cluster = one_node(1);
    let mut specs = vec![
        spec(0, 0, 1, 40.0),
        spec(1, 1, 1, 40.0),
        spec(2, 2, 1, 10.0),
    ];
    specs[0].model = Some("A".into());
    specs[1].model = Some("B".into());
    specs[2].model = Some("C".into());
    let mut pairs = PairSpeeds::default();
    pairs.insert(("A".into(), 1), ("B".into(), 1), vec![(0.7, 0.6)]);
    pairs.insert(("A".into(), 1), ("C".into(), 1), vec![(0.0, 0.0)]);
    let mut policy = Horus::new(
        HorusConfig::default(),
        PlacementStrategy::Consolidated,
        Some(Arc::new(pairs)),
    )
    .expect("valid");
    let d0 = step(&mut policy, &cluster, &specs, &[0], &Decision::default());
    // C measured not to run beside A: it waits; B joins at its measured speed.
    let d1 = step(&mut policy, &cluster, &specs, &[0, 2], &d0);
    assert_eq!(d1.run.len(), 1);
    let d1 = step(&mut policy, &cluster, &specs, &[0, 1], &d0);
    let speeds: Vec<Option<f64>> = running(&d1).iter().map(|r| r.3).collect();
    assert_eq!(speeds, vec![Some(0.7), Some(0.6)]);
}

#[test]
fn running_jobs_are_never_moved_and_unknown_ones_run_alone() {
    // Two running jobs the policy never placed, with equal placements on a 2-GPU node: they are
    // taken as alone (a placement counts GPUs, it does not name them), and kept where they are.
    let cluster = one_node(2);
    let specs = vec![
        spec(0, 0, 1, 10.0),
        spec(1, 0, 1, 10.0),
        spec(2, 1, 1, 10.0),
    ];
    let on = Placement::single(NodeId(0), 1);
    let last = Decision {
        run: vec![
            Assignment::exclusive(JobId(0), on.clone()),
            Assignment::exclusive(JobId(1), on),
        ],
        ..Default::default()
    };
    let mut policy = horus(HorusConfig::default());
    let d = step(&mut policy, &cluster, &specs, &[0, 1, 2], &last);
    let r = running(&d);
    assert_eq!(
        (r[0].2, r[1].2, r[2].2),
        (Some(2), None, Some(0)),
        "job 2 joins the first of them only: {r:?}"
    );
}

#[test]
fn a_job_that_can_never_fit_holds_no_window_slot() {
    let cluster = one_node(1);
    let specs = vec![spec(0, 0, 4, 0.0), spec(1, 1, 1, 50.0)];
    let mut policy = horus(HorusConfig {
        lookahead: 1,
        ..HorusConfig::default()
    });
    let d = step(&mut policy, &cluster, &specs, &[0, 1], &Decision::default());
    assert_eq!(running(&d), vec![(1, "node0:1".to_string(), None, None)]);
    assert_eq!(pending(&d, 0), Some(PendingReason::NeverFits));
}

#[test]
fn bad_settings_are_refused_with_their_key() {
    let bad = [
        HorusConfig {
            lookahead: 0,
            ..HorusConfig::default()
        },
        HorusConfig {
            util_limit_pct: 0.0,
            ..HorusConfig::default()
        },
        HorusConfig {
            memory_limit_gib: f64::NAN,
            ..HorusConfig::default()
        },
        HorusConfig {
            max_jobs_per_gpu: 5,
            ..HorusConfig::default()
        },
        HorusConfig {
            interference: -0.1,
            ..HorusConfig::default()
        },
        HorusConfig {
            job_memory_gib: -1.0,
            ..HorusConfig::default()
        },
    ];
    for config in bad {
        let e = config.validate().expect_err("refused");
        assert!(e.starts_with("horus."), "{e}");
        assert!(Horus::new(config, PlacementStrategy::Consolidated, None).is_err());
    }
    HorusConfig::default()
        .validate()
        .expect("defaults are valid");
}
