use super::*;
use crate::test_support::{cluster, spec_with, step};
use arbiter_model::{JobClass, JobId, NodeId, Placement};
use std::collections::BTreeMap;

fn class(name: &str, value: i32, preemptible: bool) -> JobClass {
    JobClass {
        name: Some(Arc::from(name)),
        value,
        preemptible,
    }
}

fn spec_in(id: u32, submit_s: u64, gpus: u32, run_s: f64, class: &JobClass) -> JobSpec {
    let mut spec = spec_with(id, submit_s, gpus, run_s);
    spec.class = class.clone();
    spec
}

fn classes(kind: PolicyKind) -> PriorityClasses {
    PriorityClasses::new(kind, PolicyConfig::default()).expect("builds")
}

fn runs(decision: &Decision) -> Vec<u32> {
    let mut ids: Vec<u32> = decision.run.iter().map(|a| a.job.0).collect();
    ids.sort();
    ids
}

#[test]
fn one_class_schedules_exactly_as_the_policy_alone() {
    let c = cluster(2, 4);
    let specs: Vec<JobSpec> = (0..6)
        .map(|i| spec_with(i, u64::from(i), 1 + i % 3, 100.0 * f64::from(6 - i)))
        .collect();
    let live: Vec<u32> = (0..6).collect();
    for kind in [PolicyKind::Fifo, PolicyKind::Sjf, PolicyKind::Srtf] {
        let mut alone = build(kind, &PolicyConfig::default()).expect("builds");
        let mut wrapped = classes(kind);
        let (mut a, mut b) = (Decision::default(), Decision::default());
        for _ in 0..3 {
            a = step(alone.as_mut(), &c, &specs, &live, &a);
            b = step(&mut wrapped, &c, &specs, &live, &b);
            assert_eq!(a, b, "{kind:?}");
        }
    }
}

#[test]
fn a_higher_class_preempts_a_lower_preemptible_one() {
    let (high, low) = (class("high", 100, false), class("low", 10, true));
    let c = cluster(1, 4);
    let specs = vec![
        spec_in(0, 0, 4, 1000.0, &low),
        spec_in(1, 5, 2, 10.0, &high),
    ];
    let mut policy = classes(PolicyKind::Fifo);
    let first = step(&mut policy, &c, &specs, &[0], &Decision::default());
    assert_eq!(runs(&first), vec![0]);
    // FIFO alone never preempts: the low job would keep all four GPUs.
    let second = step(&mut policy, &c, &specs, &[0, 1], &first);
    assert_eq!(
        runs(&second),
        vec![1],
        "the high job takes the GPUs of the low one, which waits"
    );
}

#[test]
fn a_lower_class_that_is_not_preemptible_keeps_its_gpus() {
    let (high, fixed) = (class("high", 100, false), class("steady", 10, false));
    let c = cluster(1, 4);
    let specs = vec![
        spec_in(0, 0, 4, 1000.0, &fixed),
        spec_in(1, 5, 2, 10.0, &high),
    ];
    let mut policy = classes(PolicyKind::Fifo);
    let first = step(&mut policy, &c, &specs, &[0], &Decision::default());
    let second = step(&mut policy, &c, &specs, &[0, 1], &first);
    assert_eq!(runs(&second), vec![0]);
}

#[test]
fn free_gpus_are_used_before_any_lower_job_is_preempted() {
    let (high, low) = (class("high", 100, false), class("low", 10, true));
    // Node 0 full with a low job, node 1 free: the high job goes to node 1 and nobody waits.
    let c = cluster(2, 4);
    let specs = vec![
        spec_in(0, 0, 4, 1000.0, &low),
        spec_in(1, 5, 4, 10.0, &high),
    ];
    let mut policy = classes(PolicyKind::Fifo);
    let first = step(&mut policy, &c, &specs, &[0], &Decision::default());
    assert_eq!(first.run[0].placement, Placement::single(NodeId(0), 4));
    let second = step(&mut policy, &c, &specs, &[0, 1], &first);
    assert_eq!(runs(&second), vec![0, 1]);
    let high_at = second
        .run
        .iter()
        .find(|a| a.job == JobId(1))
        .map(|a| a.placement.clone());
    assert_eq!(high_at, Some(Placement::single(NodeId(1), 4)));
}

#[test]
fn the_policy_orders_jobs_inside_a_class_and_higher_classes_go_first() {
    let (high, low) = (class("high", 100, true), class("low", 10, true));
    let c = cluster(1, 2);
    // All submitted together, one GPU each, two GPUs: the two high jobs run whatever their
    // length; among the low ones SJF would pick the shortest next.
    let specs = vec![
        spec_in(0, 0, 1, 5.0, &low),
        spec_in(1, 0, 1, 500.0, &high),
        spec_in(2, 0, 1, 400.0, &high),
        spec_in(3, 0, 1, 1.0, &low),
    ];
    let mut policy = classes(PolicyKind::Sjf);
    let decision = step(&mut policy, &c, &specs, &[0, 1, 2, 3], &Decision::default());
    assert_eq!(runs(&decision), vec![1, 2]);
    let mut policy = classes(PolicyKind::Sjf);
    let decision = step(
        &mut policy,
        &Cluster::clone(&cluster(1, 3)),
        &specs,
        &[0, 1, 2, 3],
        &Decision::default(),
    );
    assert_eq!(
        runs(&decision),
        vec![1, 2, 3],
        "the third GPU goes to the shortest low job"
    );
}

#[test]
fn an_external_agent_is_refused_with_classes() {
    let err = PriorityClasses::new(PolicyKind::External, PolicyConfig::default())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("built-in policy"), "{err}");
}

proptest::proptest! {
    // (About a third of the cases have a higher class waiting and are set aside.)
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 1024,
        max_global_rejects: 1_000_000,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Where only the lowest class has jobs waiting, `fifo` and `sjf` decide it by changes on
    /// the present (every class's runs kept where they are) and start the same jobs in the same
    /// places as the classes decided in turn on copies of the cluster, with the same host shares.
    #[test]
    fn the_lowest_class_alone_waiting_is_decided_by_changes_as_in_turn(
        first in proptest::collection::vec((0u8..3, 1u32..5, 1u32..2000), 2..12),
        later in proptest::collection::vec((1u32..5, 1u32..2000), 1..10),
        sjf in proptest::bool::ANY,
    ) {
        let kind = if sjf { PolicyKind::Sjf } else { PolicyKind::Fifo };
        let levels = [class("high", 100, false), class("mid", 50, true), class("low", 10, true)];
        let c = cluster(3, 4);
        // A first decision over jobs of any class; then jobs of the lowest class arrive.
        let mut specs: Vec<JobSpec> = first
            .iter()
            .enumerate()
            .map(|(i, &(l, g, run))| spec_in(i as u32, i as u64, g, f64::from(run), &levels[usize::from(l)]))
            .collect();
        let live: Vec<u32> = (0..specs.len() as u32).collect();
        let before = step(&mut classes(kind), &c, &specs, &live, &Decision::default());
        let low = levels.iter().rev().find(|l| specs.iter().any(|s| s.class.value == l.value)).expect("a class");
        for &(g, run) in &later {
            let id = specs.len() as u32;
            specs.push(spec_in(id, u64::from(id), g, f64::from(run), low));
        }
        let live: Vec<u32> = (0..specs.len() as u32).collect();
        let jobs = crate::test_support::active(&specs, &live, &before);
        let lowest = jobs.iter().map(|j| specs[j.id.index()].class.value).min();
        proptest::prop_assume!(jobs.iter().filter(|j| !j.is_running()).all(|j| Some(specs[j.id.index()].class.value) == lowest));
        let mut free = arbiter_model::Occupancy::new(&c);
        for p in jobs.iter().filter_map(ActiveJob::placement) {
            free.allocate(p).expect("fits");
        }
        let queued: Vec<u32> = (0..jobs.len() as u32).filter(|&i| !jobs[i as usize].is_running()).collect();
        let present = crate::Current { free: &free, queued: &queued, positions: None };
        let view = |current| SchedulerView { cluster: &c, jobs: &jobs, specs: &specs, current };
        let in_turn = classes(kind).schedule(&view(None), SimTime::ZERO).expect("decides");
        let by_changes = classes(kind).schedule(&view(Some(present)), SimTime::ZERO).expect("decides");
        proptest::prop_assert!(by_changes.keep_unlisted, "decided by changes");
        // In turn, every run is kept where it is; what starts is what by changes starts.
        let runs: BTreeMap<u32, &Placement> = jobs.iter().filter_map(|j| j.placement().map(|p| (j.id.0, p))).collect();
        let mut started = BTreeMap::new();
        for a in &in_turn.run {
            match runs.get(&a.job.0) {
                Some(p) => proptest::prop_assert_eq!(*p, &a.placement, "job {} moved", a.job.0),
                None => {
                    started.insert(a.job.0, (a.placement.clone(), a.host));
                }
            }
        }
        proptest::prop_assert_eq!(in_turn.run.len() - started.len(), runs.len(), "every run kept");
        let changed: BTreeMap<u32, _> = by_changes.run.iter().map(|a| (a.job.0, (a.placement.clone(), a.host))).collect();
        proptest::prop_assert_eq!(changed, started);
    }
}

proptest::proptest! {
    /// The classes kept between events (the caller keeps the present and positions, as the
    /// simulator does) are what counting every active job's spec gives, through arrivals at the
    /// end of the queue, starts, ends handed to `job_finished`, and ends not handed over.
    #[test]
    fn kept_classes_are_what_counting_the_specs_gives(
        steps in proptest::collection::vec((0u8..4, 0u8..3, 0usize..64), 1..80),
    ) {
        let levels = [class("high", 100, false), class("mid", 50, true), class("low", 10, true)];
        let c = cluster(2, 4);
        let specs: Vec<JobSpec> = (0..steps.len() as u32)
            .map(|i| spec_in(i, u64::from(i), 1, 100.0, &levels[usize::from(steps[i as usize].1)]))
            .collect();
        let free = arbiter_model::Occupancy::new(&c);
        let mut kept = ActiveClasses::default();
        let mut jobs: Vec<ActiveJob> = Vec::new();
        let mut queued: Vec<u32> = Vec::new();
        for (i, &(what, _, pick)) in steps.iter().enumerate() {
            // 0, 1: a job arrives; 2: one ends as the engine reports it; 3: one ends unseen.
            if what < 2 || jobs.is_empty() {
                queued.push(jobs.len() as u32);
                let s = &specs[i];
                jobs.push(ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s));
            } else {
                let at = pick % jobs.len();
                let gone = jobs.swap_remove(at);
                if what == 2 {
                    kept.finished(gone.id);
                }
                queued = (0..jobs.len() as u32).filter(|&at| !jobs[at as usize].is_running()).collect();
            }
            // Some waiting jobs start (a running job is shown with a placement).
            if pick % 3 == 0 && let Some(&at) = queued.first() {
                jobs[at as usize].state = RunState::Running {
                    placement: Placement::single(NodeId(0), 1),
                    since: SimTime::ZERO,
                    speed: 1.0,
                };
                queued.remove(0);
            }
            let mut positions = vec![u32::MAX; specs.len()];
            for (at, job) in jobs.iter().enumerate() {
                positions[job.id.index()] = at as u32;
            }
            let current = crate::Current { free: &free, queued: &queued, positions: Some(&positions) };
            let view = SchedulerView { cluster: &c, jobs: &jobs, specs: &specs, current: Some(current) };
            kept.refresh(&view);
            let mut fresh = ActiveClasses::default();
            fresh.count_again(&view, None);
            proptest::prop_assert_eq!(&kept.counts, &fresh.counts);
            proptest::prop_assert_eq!(kept.highest_waiting(&view), fresh.highest_waiting(&view));
        }
    }
}

proptest::proptest! {
    /// A class's copy of the cluster rounds CPUs and memory down by the cast alone: the same
    /// whole number as `floor()` then the cast, for every input (negative, fractional, huge,
    /// infinite, NaN).
    #[test]
    fn the_cast_rounds_down_as_floor_does(x in proptest::num::f64::ANY) {
        proptest::prop_assert_eq!(x as u32, x.floor() as u32);
    }
}
