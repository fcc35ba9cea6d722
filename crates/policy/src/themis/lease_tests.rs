use super::*;
use crate::test_support::decide;
use arbiter_model::{Cluster, JobId, NodeId, Placement, RunState};

fn at(s: u64) -> SimTime {
    SimTime::from_ms(s * 1000)
}

fn spec(id: u32, submit_s: u64, gpus: u32, run_s: f64) -> JobSpec {
    JobSpec::new(JobId(id), at(submit_s), gpus, run_s)
}

fn pending(spec: &JobSpec) -> ActiveJob {
    ActiveJob::submitted(spec.id, spec.gpus, spec.submit, spec.run_time_s)
}

/// Running since `since_s` on node 0, brought up to date at `now_s`.
fn running(spec: &JobSpec, since_s: u64, now_s: u64) -> ActiveJob {
    let mut job = pending(spec);
    job.state = RunState::Running {
        placement: Placement::single(NodeId(0), spec.gpus),
        since: at(since_s),
        speed: 1.0,
    };
    job.accounted_at = at(since_s);
    job.first_start = Some(at(since_s));
    job.account(at(now_s));
    job
}

fn themis(fairness_knob: f64, lease_s: f64) -> Themis {
    Themis::new(
        ThemisConfig {
            fairness_knob,
            lease_s,
        },
        PlacementStrategy::Consolidated,
    )
    .expect("valid knobs")
}

fn one_node() -> Cluster {
    Cluster::homogeneous(1, 1, 4, 32, 64, "V100").expect("valid")
}

fn ids(decision: &Decision) -> Vec<u32> {
    let mut ids: Vec<u32> = decision.run.iter().map(|a| a.job.0).collect();
    ids.sort();
    ids
}

#[test]
fn rho_is_shared_time_over_time_alone_on_a_fair_share() {
    // 4 GPUs, 2 jobs: a 4-GPU job's share is 2 GPUs, rate 1/2: T_independent = 2 × 100 s.
    // At t = 50, never run: T_shared = 50 + 100 = 150 → ρ_run = 0.75; one 10 s lease more: 0.8.
    let s = spec(0, 0, 4, 100.0);
    assert_eq!(rho_now(&pending(&s), &s, at(50), 10.0, 4, 2), (0.75, 0.8));
    // Running: its remaining work shrinks.
    let (run, _) = rho_now(&running(&s, 0, 50), &s, at(50), 10.0, 4, 2);
    assert_eq!(run, (50.0 + 50.0) / 200.0);
}

#[test]
fn a_lease_protects_its_holder_until_it_expires() {
    let cluster = one_node();
    let specs = vec![spec(0, 0, 4, 1000.0), spec(1, 100, 4, 1000.0)];
    let mut policy = themis(0.8, 600.0);
    let d = decide(&mut policy, &cluster, &[pending(&specs[0])], &specs, at(0));
    assert_eq!((ids(&d), d.wake_at), (vec![0], Some(at(600))));
    // t = 100: J1 arrives and is worse off, but J0's lease runs until 600.
    let jobs = [running(&specs[0], 0, 100), pending(&specs[1])];
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(100));
    assert_eq!((ids(&d), d.wake_at), (vec![0], Some(at(600))));
    // t = 600: the lease expired. T_independent = 2000 s for both (4 GPUs of 4, two jobs);
    // ρ_wait: J1 (500 + 1000 + 600)/2000 = 1.05, J0 (600 + 400 + 600)/2000 = 0.8. With f = 0.8
    // only ⌈0.2 × 2⌉ = 1 job bids, J1; it wins alone (no payment: a full lease).
    let jobs = [running(&specs[0], 0, 600), pending(&specs[1])];
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(600));
    assert_eq!((ids(&d), d.wake_at), (vec![1], Some(at(1200))));
    assert_eq!(d.pending, vec![(JobId(0), PendingReason::LowerPriority)]);
}

#[test]
fn a_winner_pays_with_a_shorter_lease() {
    // All three bid (f = 0). Valuations (ρ_wait/ρ_run = (T + lease)/T, T = time since arrival +
    // work left): J1 (4 GPUs, 100 s) 2.0; J2 and J3 (2 GPUs, 400 s) 1.25 each, 1.5625 together.
    // J1 wins the 4 GPUs; without it J2 and J3 would have run: it keeps 1/1.5625 = 0.64 of its
    // 100 s lease, which rounds to 3 of the lease's 4 ticks: 75 s.
    let cluster = one_node();
    let specs = vec![
        spec(0, 0, 4, 100.0),
        spec(1, 0, 2, 400.0),
        spec(2, 0, 2, 400.0),
    ];
    let mut policy = themis(0.0, 100.0);
    let jobs: Vec<ActiveJob> = specs.iter().map(pending).collect();
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(0));
    assert_eq!(ids(&d), vec![0]);
    assert_eq!(d.wake_at, Some(at(75)));
}

#[test]
fn gpus_the_auction_leaves_go_to_the_other_jobs() {
    // f = 0.5: of two jobs only the worse off bids (J1: ρ_wait 61 against J0's 1.6); it takes 2
    // of the 4 GPUs and J0 gets the other 2 as leftovers, on a full lease.
    let cluster = one_node();
    let specs = vec![spec(0, 0, 2, 1000.0), spec(1, 0, 2, 10.0)];
    let mut policy = themis(0.5, 600.0);
    let jobs: Vec<ActiveJob> = specs.iter().map(pending).collect();
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(0));
    assert_eq!(ids(&d), vec![0, 1]);
    assert_eq!(policy.lease_end[0], Some(at(600)));
    assert_eq!(d.wake_at, Some(at(600)));
}

#[test]
fn a_renewed_lease_keeps_the_same_gpus_and_a_finished_job_forgets_its_lease() {
    let cluster = Cluster::homogeneous(1, 2, 4, 32, 64, "V100").expect("valid");
    let specs = vec![spec(0, 0, 2, 1000.0)];
    let mut policy = themis(0.8, 60.0);
    let mut job = pending(&specs[0]);
    job.state = RunState::Running {
        placement: Placement::single(NodeId(1), 2),
        since: at(0),
        speed: 1.0,
    };
    // No lease known (as after a restart): it competes, wins alone and stays where it is.
    let d = decide(&mut policy, &cluster, &[job.clone()], &specs, at(60));
    assert_eq!(d.run[0].placement, Placement::single(NodeId(1), 2));
    assert_eq!(d.wake_at, Some(at(120)));
    policy.job_finished(&specs[0], &job, at(100));
    assert_eq!(policy.lease_end[0], None);
}

#[test]
fn a_gang_larger_than_the_cluster_never_fits() {
    let cluster = one_node();
    let specs = vec![spec(0, 0, 8, 10.0), spec(1, 0, 1, 10.0)];
    let mut policy = themis(0.0, 60.0);
    let jobs: Vec<ActiveJob> = specs.iter().map(pending).collect();
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(0));
    assert_eq!(ids(&d), vec![1]);
    assert_eq!(d.pending, vec![(JobId(0), PendingReason::NeverFits)]);
}

#[test]
fn lease_ends_fall_on_quarter_lease_ticks() {
    // 600 s leases: ticks every 150 s.
    assert_eq!(lease_end(at(0), 1.0, 600.0), at(600));
    assert_eq!(lease_end(at(600), 1.0, 600.0), at(1200));
    // Granted between ticks: counted from the next tick.
    assert_eq!(lease_end(at(700), 1.0, 600.0), at(1350));
    // Fractions round to the nearest tick, at least one.
    assert_eq!(lease_end(at(0), 0.64, 600.0), at(450));
    assert_eq!(lease_end(at(0), 0.9, 600.0), at(600));
    assert_eq!(lease_end(at(0), 0.01, 600.0), at(150));
    // Absurd inputs saturate instead of overflowing.
    assert_eq!(lease_end(at(5), 1.0, 1e300), SimTime::from_ms(u64::MAX));
}
