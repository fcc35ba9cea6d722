use super::*;
use crate::PlacementStrategy;
use crate::test_support::decide;
use arbiter_model::{Cluster, JobId, RunState};
use proptest::prelude::*;

fn options() -> GreedyOptions {
    GreedyOptions {
        preemptive: true,
        head_of_line_blocking: false,
        keep_placements: true,
        strategy: PlacementStrategy::Consolidated,
    }
}

/// Jobs stepped by hand: each decision's jobs run until the next one.
struct World {
    cluster: Cluster,
    specs: Vec<JobSpec>,
    jobs: Vec<ActiveJob>,
    now: SimTime,
}

impl World {
    fn new(gpus: u32) -> Self {
        World {
            cluster: Cluster::homogeneous(1, 1, gpus, 64, 512, "V100").expect("cluster"),
            specs: Vec::new(),
            jobs: Vec::new(),
            now: SimTime::ZERO,
        }
    }

    /// A job of `tenant` with `gpus` GPUs that never ends.
    fn submit(&mut self, tenant: &str, gpus: u32) -> JobId {
        let id = JobId(self.specs.len() as u32);
        let mut spec = JobSpec::new(id, self.now, gpus, 1e12);
        spec.tenant = tenant.into();
        self.jobs
            .push(ActiveJob::submitted(id, gpus, self.now, spec.run_time_s));
        self.specs.push(spec);
        id
    }

    /// One decision now, then `seconds` of running it.
    fn round(&mut self, policy: &mut Vtc, seconds: f64) {
        let decision = decide(policy, &self.cluster, &self.jobs, &self.specs, self.now);
        for job in &mut self.jobs {
            job.account(self.now);
            job.state = match decision.run.iter().find(|a| a.job == job.id) {
                Some(a) => RunState::Running {
                    placement: a.placement.clone(),
                    since: self.now,
                    speed: 1.0,
                },
                None => RunState::Pending,
            };
        }
        self.now = SimTime::from_ms(self.now.as_ms() + (seconds * 1000.0) as u64);
    }

    /// GPU-seconds each tenant received so far.
    fn service(&self) -> BTreeMap<String, f64> {
        let mut s = BTreeMap::new();
        for (job, spec) in self.jobs.iter().zip(&self.specs) {
            *s.entry(spec.tenant.to_string()).or_insert(0.0) += job.attained_gpu_s_at(self.now);
        }
        s
    }
}

#[test]
fn weights_are_respected_between_backlogged_tenants() {
    let weights = TenantWeights::from([("a".to_string(), 2.0), ("b".to_string(), 1.0)]);
    let mut vtc = Vtc::new(
        VtcConfig {
            quantum_s: 60.0,
            ..VtcConfig::default()
        },
        weights,
        options(),
    )
    .expect("valid");
    let mut w = World::new(3);
    for _ in 0..6 {
        w.submit("a", 1);
        w.submit("b", 1);
    }
    for _ in 0..30 {
        w.round(&mut vtc, 60.0);
    }
    let s = w.service();
    assert!(
        (s["a"] / s["b"] - 2.0).abs() < 0.1,
        "a gets twice b's service: {s:?}"
    );
}

#[test]
fn a_tenant_back_from_idle_has_no_banked_credit() {
    let mut vtc = Vtc::new(
        VtcConfig {
            quantum_s: 60.0,
            ..VtcConfig::default()
        },
        TenantWeights::new(),
        options(),
    )
    .expect("valid");
    let mut w = World::new(4);
    // `a` has the cluster to itself for an hour.
    for _ in 0..4 {
        w.submit("a", 1);
    }
    for _ in 0..60 {
        w.round(&mut vtc, 60.0);
    }
    // `b` arrives with four jobs: it is lifted to `a`'s counter, so they share from now on —
    // it does not get the whole cluster for an hour to catch up.
    for _ in 0..4 {
        w.submit("b", 1);
    }
    let before = w.service();
    for _ in 0..10 {
        w.round(&mut vtc, 60.0);
    }
    let after = w.service();
    let gained = |t: &str| after[t] - before.get(t).copied().unwrap_or(0.0);
    assert!(
        (gained("a") - gained("b")).abs() <= 60.0 + 1e-6,
        "equal shares after b's return: a {} b {}",
        gained("a"),
        gained("b")
    );
    assert!(
        vtc.counters()["b"] >= vtc.counters()["a"] - 120.0,
        "{:?}",
        vtc.counters()
    );
}

#[test]
fn counters_are_lifted_to_the_last_one_that_left_when_everyone_was_idle() {
    let mut vtc = Vtc::new(
        VtcConfig {
            quantum_s: 60.0,
            ..VtcConfig::default()
        },
        TenantWeights::new(),
        options(),
    )
    .expect("valid");
    let mut w = World::new(2);
    let a = w.submit("a", 2);
    for _ in 0..10 {
        w.round(&mut vtc, 60.0);
    }
    // `a` leaves (its job ends); later `b` arrives at an empty cluster, then `a` again.
    let job = w.jobs.remove(a.index());
    let spec = w.specs[a.index()].clone();
    vtc.job_finished(&spec, &job, w.now);
    w.specs.clear();
    w.round(&mut vtc, 60.0);
    let c_a = vtc.counters()["a"];
    assert!((c_a - 1200.0).abs() < 1e-6, "{c_a}");
    let mut b = JobSpec::new(JobId(1), w.now, 1, 1e12);
    b.tenant = "b".into();
    w.specs = vec![spec, b];
    w.jobs = vec![ActiveJob::submitted(JobId(1), 1, w.now, 1e12)];
    w.round(&mut vtc, 60.0);
    assert_eq!(
        vtc.counters()["b"],
        c_a,
        "b starts where the last tenant left, not at 0"
    );
}

#[test]
fn bad_settings_are_refused() {
    assert!(
        Vtc::new(
            VtcConfig {
                quantum_s: 0.0,
                ..VtcConfig::default()
            },
            TenantWeights::new(),
            options()
        )
        .is_err()
    );
    assert!(
        Vtc::new(
            VtcConfig::default(),
            TenantWeights::from([("a".to_string(), -1.0)]),
            options()
        )
        .is_err()
    );
}

#[test]
fn inside_a_tenant_the_inner_order_decides() {
    let mut vtc = Vtc::new(
        VtcConfig {
            quantum_s: 60.0,
            inner: VtcInner::Sjf,
        },
        TenantWeights::new(),
        options(),
    )
    .expect("valid");
    let mut w = World::new(1);
    w.submit("a", 1);
    let short = w.submit("a", 1);
    w.specs[short.index()].run_time_s = 10.0;
    w.jobs[short.index()].remaining_s = 10.0;
    let d = decide(&mut vtc, &w.cluster, &w.jobs, &w.specs, w.now);
    assert_eq!(d.run.iter().map(|a| a.job).collect::<Vec<_>>(), vec![short]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// VTC's fairness bound (the paper's Theorem 4.1: 2U, U the largest cost of one request):
    /// between tenants that stay backlogged, the weighted service differs by at most twice one
    /// round of the largest job (one bound fails: measured at round ends, it is reached). Jobs of
    /// one GPU, VTC's setting (a request is a unit of work). With gangs the bound does not hold
    /// for a work-conserving VTC, and this is why the test keeps to single GPUs: on 8 GPUs with
    /// tenants (weight 1, 1-GPU jobs), (3, 4-GPU), (3, 4-GPU), the first decision hands a 1-GPU
    /// job to the first tenant (all counters 0, name order) and a gang to the second, after
    /// which the third's gang no longer fits and the 3 GPUs left go to the 1-GPU tenant: weighted
    /// service [240, 80, 0] after one round, above 2 × 80. It is transient, not starvation (the
    /// third tenant is served from the next round, and the three are within one job's round of
    /// each other from the fourth on, measured over 40 rounds at 4, 8 and 16 GPUs); sizes that
    /// do not pack (3-GPU gangs on 8) give the gaps to whoever fits them for good.
    #[test]
    fn backlogged_tenants_service_differs_by_at_most_a_round_of_a_job(
        gpus in prop::sample::select(vec![4u32, 8, 16]),
        tenants in prop::collection::vec((1u32..4, Just(1u32), 0u32..1), 2..4),
        rounds in 10usize..60,
    ) {
        let quantum = 60.0;
        let weights: TenantWeights = tenants.iter().enumerate().map(|(t, (w, _, _))| (format!("t{t}"), f64::from(*w))).collect();
        let mut vtc = Vtc::new(VtcConfig { quantum_s: quantum, ..VtcConfig::default() }, weights.clone(), options()).expect("valid");
        let mut world = World::new(gpus);
        let mut largest: f64 = 0.0;
        for (t, (w, size, _)) in tenants.iter().enumerate() {
            // Enough jobs to stay backlogged: more GPUs than the cluster has.
            // At most half the cluster: a gang of the whole cluster against single GPUs is the
            // packing problem again (it runs only when every small job is stopped).
            let size = (*size).min(gpus / 2);
            for _ in 0..(gpus / size + 2) {
                world.submit(&format!("t{t}"), size);
            }
            largest = largest.max(f64::from(size) * quantum / f64::from(*w));
        }
        for _ in 0..rounds {
            world.round(&mut vtc, quantum);
            let s = world.service();
            let normalized: Vec<f64> = s.iter().map(|(t, x)| x / weights[t]).collect();
            let spread = normalized.iter().copied().fold(f64::MIN, f64::max) - normalized.iter().copied().fold(f64::MAX, f64::min);
            prop_assert!(spread <= 2.0 * largest + 1e-6, "weighted service {normalized:?} spread {spread} > 2 × {largest}");
        }
    }
}

/// Decayed fair share, by hand: one GPU, one waiting job per tenant. The counters are usage ÷
/// weight: a (300 GPU-s, weight 1) = 300 > b (100, weight 1) = 100, so b's job runs; with a
/// weighing 4, a = 75 < b = 100 and a's runs. Without fair share neither has received service
/// (a tie, broken by name: a).
#[test]
fn with_fair_share_the_lower_decayed_usage_per_weight_runs_first() {
    let fairshare = FairShareConfig {
        half_life_s: 3600.0,
    };
    let usage = TenantUsage::from([("a".to_string(), 300.0), ("b".to_string(), 100.0)]);
    let first_run = |weight_a: f64, fairshare: &FairShareConfig| {
        let weights = TenantWeights::from([("a".to_string(), weight_a)]);
        let mut vtc = build(
            &VtcConfig::default(),
            &weights,
            fairshare,
            crate::Placing {
                strategy: PlacementStrategy::Consolidated,
                keep_placements: true,
            },
        )
        .expect("valid");
        vtc.set_tenant_usage(&usage);
        let mut world = World::new(1);
        let (a, b) = (world.submit("a", 1), world.submit("b", 1));
        let decision = decide(
            &mut vtc,
            &world.cluster,
            &world.jobs,
            &world.specs,
            world.now,
        );
        assert_eq!(decision.run.len(), 1);
        (
            vtc.fairshare_half_life_s(),
            if decision.run[0].job == a {
                "a"
            } else if decision.run[0].job == b {
                "b"
            } else {
                "?"
            },
        )
    };
    assert_eq!(first_run(1.0, &fairshare), (Some(3600.0), "b"));
    assert_eq!(first_run(4.0, &fairshare), (Some(3600.0), "a"));
    assert_eq!(
        first_run(1.0, &FairShareConfig::default()),
        (None, "a"),
        "off: the usage given is ignored"
    );
    let bad = build(
        &VtcConfig::default(),
        &TenantWeights::new(),
        &FairShareConfig { half_life_s: -5.0 },
        crate::Placing {
            strategy: PlacementStrategy::Consolidated,
            keep_placements: true,
        },
    );
    assert!(
        bad.expect_err("refused")
            .to_string()
            .contains("fairshare.half_life_s")
    );
}
