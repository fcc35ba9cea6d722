use super::*;
use crate::test_support::decide;
use arbiter_model::{Cluster, NodeId, Placement, RunState};

fn term(since_arrival_s: f64, work_s: f64, isolated: f64, gpus: u32) -> FtfTerm {
    FtfTerm {
        since_arrival_s,
        work_s,
        isolated,
        gpus,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn rho_is_time_since_arrival_plus_work_at_the_allocation_over_the_denominator() {
    let t = term(10.0, 30.0, 20.0, 1);
    assert_eq!(t.rho(1.0), 2.0);
    assert_eq!(t.rho(0.5), 3.5);
    assert_eq!(t.floor_at(3.5), 0.5);
    assert_eq!(
        t.floor_at(1.0),
        1.0,
        "a ρ below ρ(1) needs more than the whole gang: capped at 1"
    );
}

#[test]
fn a_binding_capacity_equalises_rho_and_the_allocation_is_unique() {
    // Two identical jobs on one GPU: ρ = 1/x each, x1 + x2 <= 1 → x = 1/2, ρ = 2.
    let a = min_max_allocation(
        &[term(0.0, 100.0, 100.0, 1), term(0.0, 100.0, 100.0, 1)],
        1.0,
    )
    .expect("solves");
    assert!(a.capacity_bound);
    assert!(
        close(a.rho, 2.0) && close(a.x[0], 0.5) && close(a.x[1], 0.5),
        "{a:?}"
    );
    // ρ1 = 1/x1, ρ2 = (1 + 1/x2), g2 = 2, capacity 2: at ρ = τ, x1 = 1/τ, x2 = 1/(τ − 1), and
    // 1/τ + 2/(τ − 1) = 2 gives 2τ² − 5τ + 1 = 0, τ = (5 + √17)/4.
    let a = min_max_allocation(
        &[term(0.0, 100.0, 100.0, 1), term(100.0, 100.0, 100.0, 2)],
        2.0,
    )
    .expect("solves");
    let tau = (5.0 + 17f64.sqrt()) / 4.0;
    assert!(a.capacity_bound);
    assert!(close(a.rho, tau), "{a:?}");
    assert!(
        close(a.x[0], 1.0 / tau) && close(a.x[1], 1.0 / (tau - 1.0)),
        "{a:?}"
    );
    assert!(a.x[0] + 2.0 * a.x[1] <= 2.0);
}

#[test]
fn spare_capacity_puts_the_bottleneck_at_one_and_the_others_at_the_analytic_centre() {
    // A: ρ(1) = 1 (the bottleneck); B: ρ(x) = 0.5/x, floor 0.5 at τ = 1. Ten GPUs: plenty.
    let terms = [term(0.0, 100.0, 100.0, 1), term(0.0, 50.0, 100.0, 1)];
    let a = min_max_allocation(&terms, 10.0).expect("solves");
    assert!(!a.capacity_bound);
    assert_eq!((a.rho, a.x[0]), (1.0, 1.0));
    // B maximises 2 ln(x − 0.5) + ln(1 − x) + ln(9 − x): the stationarity condition holds...
    let x = a.x[1];
    let gradient = 2.0 / (x - 0.5) - 1.0 / (1.0 - x) - 1.0 / (9.0 - x);
    assert!(gradient.abs() < 1e-9, "x = {x}, gradient {gradient}");
    // ...and no point of a fine grid does better.
    let barrier = |x: f64| 2.0 * (x - 0.5).ln() + (1.0 - x).ln() + (9.0 - x).ln();
    let best = (1..10_000)
        .map(|i| 0.5 + 0.5 * i as f64 / 10_000.0)
        .map(barrier)
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(barrier(x) >= best - 1e-12);
    // Without the capacity term the centre is two thirds of the way from the floor to 1.
    let far = min_max_allocation(&terms, 1e12).expect("solves");
    assert!((far.x[1] - (2.0 + 0.5) / 3.0).abs() < 1e-9, "{far:?}");
    // Every job keeps ρ at or below the optimum.
    for (t, x) in terms.iter().zip(&a.x) {
        assert!(t.rho(*x) <= a.rho * (1.0 + 1e-12));
    }
}

#[test]
fn identical_jobs_get_identical_allocations() {
    let terms = [
        term(5.0, 10.0, 40.0, 2),
        term(0.0, 100.0, 100.0, 1),
        term(0.0, 100.0, 100.0, 1),
        term(5.0, 10.0, 40.0, 2),
    ];
    for capacity in [2.0, 64.0] {
        let a = min_max_allocation(&terms, capacity).expect("solves");
        assert_eq!(a.x[1], a.x[2]);
        assert_eq!(a.x[0], a.x[3]);
        assert!(
            terms
                .iter()
                .zip(&a.x)
                .map(|(t, x)| t.gpus as f64 * x)
                .sum::<f64>()
                <= capacity * (1.0 + 1e-12)
        );
    }
}

#[test]
fn malformed_terms_fall_back_to_muris_equal_weights() {
    assert_eq!(min_max_allocation(&[term(0.0, 1.0, 0.0, 1)], 4.0), None);
    assert_eq!(
        min_max_allocation(&[term(f64::NAN, 1.0, 1.0, 1)], 4.0),
        None
    );
    assert_eq!(min_max_allocation(&[term(0.0, 1.0, 1.0, 1)], 0.0), None);
    // A job without work left is not malformed: its ρ is constant.
    let a = min_max_allocation(&[term(3.0, 0.0, 0.0, 1), term(0.0, 10.0, 10.0, 1)], 4.0)
        .expect("solves");
    assert_eq!(a.rho, 1.0);
    assert!(a.x[0] > 0.0 && a.x[0] < 1.0);
}

#[test]
fn ranking_puts_never_run_jobs_first_then_allocation_over_service_then_deficit() {
    // The deficit is computed before this point's credit.
    assert_eq!(ranking_key(0.25, 0.0, 7.0), (0.25e9, 7.0, 0.25));
    assert_eq!(ranking_key(0.5, 10.0, 4.0), (0.05, -6.0, 0.5));
    let keys = [
        ranking_key(0.5, 10.0, 4.0), // 0.05, deficit −6
        ranking_key(0.25, 0.0, 0.0), // never ran
        ranking_key(0.25, 5.0, 9.0), // 0.05, deficit 4: ahead of job 0
        ranking_key(0.5, 10.0, 4.0), // ties job 0 exactly: stays behind it
        ranking_key(0.9, 1.0, 0.0),  // 0.9
    ];
    assert_eq!(rank_order(&keys), vec![1, 4, 2, 0, 3]);
    // Equal sort value and deficit: the larger allocation first.
    assert_eq!(rank_order(&[(1.0, 0.0, 0.2), (1.0, 0.0, 0.4)]), vec![1, 0]);
}

fn cluster() -> Cluster {
    Cluster::homogeneous(1, 1, 4, 32, 64, "V100").expect("valid")
}

fn spec(id: u32, submit_s: u64, gpus: u32, run_s: f64) -> JobSpec {
    let mut spec = JobSpec::new(JobId(id), SimTime::from_ms(submit_s * 1000), gpus, run_s);
    spec.iteration_s = Some(0.5);
    spec
}

fn running(spec: &JobSpec, since_s: u64) -> ActiveJob {
    let mut job = ActiveJob::submitted(spec.id, spec.gpus, spec.submit, spec.run_time_s);
    let since = SimTime::from_ms(since_s * 1000);
    job.state = RunState::Running {
        placement: Placement::single(NodeId(0), spec.gpus),
        since,
        speed: 1.0,
    };
    job.accounted_at = since;
    job.first_start = Some(since);
    job
}

fn pending(spec: &JobSpec) -> ActiveJob {
    ActiveJob::submitted(spec.id, spec.gpus, spec.submit, spec.run_time_s)
}

fn at(s: u64) -> SimTime {
    SimTime::from_ms(s * 1000)
}

#[test]
fn a_newcomer_that_never_ran_displaces_a_job_that_did() {
    let cluster = cluster();
    let specs = vec![spec(0, 0, 4, 100.0), spec(1, 10, 2, 100.0)];
    let mut policy = ThemisMuri::new();
    let first = decide(&mut policy, &cluster, &[pending(&specs[0])], &specs, at(0));
    assert_eq!(first.run.len(), 1);
    // t = 10: J0 ran 10 s (180 of 200 iterations left), J1 arrives. Shares: ceil(4/2) = 2 GPUs,
    // f0 = 1/2, f1 = 1. C0 = (200 − 180)/1 = 20, so ρ0(x) = (10 + 90/x)/380, ρ1(x) = (100/x)/200:
    // J1 is the bottleneck (ρ1(1) = 0.5) at x = 1, J0's floor at 0.5 is exactly 1/2 and fills the
    // cluster. J1 never ran: it ranks first and takes 2 GPUs; J0's 4 no longer fit.
    let jobs = [running(&specs[0], 0), pending(&specs[1])];
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(10));
    assert_eq!(
        d.run.iter().map(|a| a.job).collect::<Vec<_>>(),
        vec![JobId(1)]
    );
    assert_eq!(d.pending, vec![(JobId(0), PendingReason::LowerPriority)]);
    let (s0, s1) = (policy.state[0], policy.state[1]);
    assert!(close(s0.cumulative_isolated, 20.0), "{s0:?}");
    assert_eq!(s1.cumulative_isolated, 0.0);
    assert_eq!(s0.previous, Some((180.0, 0.5)));
    // Credits for the 10 s since the previous event, the newcomer's included (Muri's quirk).
    assert!(
        close(s0.time_should_received, 0.5 * 10.0) && close(s1.time_should_received, 10.0),
        "{s0:?} {s1:?}"
    );
    // The next point's list: largest gang first.
    assert_eq!(policy.list, vec![JobId(0), JobId(1)]);
}

#[test]
fn a_completion_that_empties_the_cluster_still_counts_as_an_event() {
    let cluster = cluster();
    let specs = vec![spec(0, 0, 1, 100.0), spec(1, 150, 1, 100.0)];
    let mut policy = ThemisMuri::new();
    decide(&mut policy, &cluster, &[pending(&specs[0])], &specs, at(0));
    let mut done = running(&specs[0], 0);
    done.account(at(100));
    policy.job_finished(&specs[0], &done, at(100));
    assert!(policy.list.is_empty());
    let d = decide(
        &mut policy,
        &cluster,
        &[pending(&specs[1])],
        &specs,
        at(150),
    );
    assert_eq!(d.run.len(), 1);
    // Alone at x = 1, credited for the 50 s since the completion (not the 150 s since t = 0).
    assert!(
        close(policy.state[1].time_should_received, 50.0),
        "{:?}",
        policy.state[1]
    );
}

#[test]
fn the_dry_run_picks_in_rank_order_and_the_real_placement_goes_by_gang_size() {
    // Two nodes of 4. Rank: J2 and J3 never ran (2 GPUs each; J3 waited longer, so it is the
    // bottleneck), J0 (4 GPUs, ran 100 s) and J1 (1 GPU, ran 10 s) did.
    let cluster = Cluster::homogeneous(1, 2, 4, 32, 64, "V100").expect("valid");
    let specs = vec![
        spec(0, 0, 4, 1000.0),
        spec(1, 0, 1, 1000.0),
        spec(2, 100, 2, 1000.0),
        spec(3, 50, 2, 1000.0),
    ];
    let mut policy = ThemisMuri::new();
    let mut j1 = running(&specs[1], 90);
    j1.state = RunState::Running {
        placement: Placement::single(NodeId(1), 1),
        since: at(90),
        speed: 1.0,
    };
    let jobs = [
        running(&specs[0], 0),
        j1,
        pending(&specs[2]),
        pending(&specs[3]),
    ];
    let d = decide(&mut policy, &cluster, &jobs, &specs, at(100));
    // Dry run: J2 and J3 fill node 0; then J1 (x/10 s of service beats J0's x/100 s) takes
    // node 1, and J0's 4 GPUs no longer fit anywhere. Real placement, largest first: the two
    // 2-GPU jobs on node 0, J1 on node 1.
    let mut run: Vec<(JobId, NodeId)> = d
        .run
        .iter()
        .map(|a| (a.job, a.placement.slots[0].0))
        .collect();
    run.sort();
    assert_eq!(
        run,
        vec![
            (JobId(1), NodeId(1)),
            (JobId(2), NodeId(0)),
            (JobId(3), NodeId(0))
        ]
    );
    assert_eq!(d.pending, vec![(JobId(0), PendingReason::LowerPriority)]);
    assert_eq!((policy.list[0], policy.list[3]), (JobId(0), JobId(1)));
}
