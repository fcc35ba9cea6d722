//! Decisions by changes (`Decision::keep_unlisted`) are an optimisation, never a different
//! schedule: every policy that answers by changes when the engine offers its current state
//! produces, over a whole simulation, exactly the records it produces when it must decide every
//! running job again at every event.

use arbiter_model::{ActiveJob, Cluster, Decision, JobSpec, SimTime};
use arbiter_policy::{
    PlacementStrategy, Policy, PolicyConfig, PolicyError, PolicyKind, SchedulerView, build,
};
use arbiter_sim::{FailureConfig, OverheadModel, SimConfig, SimOutput, simulate};

/// `inner`, but shown no current state (`blind`) or counting its decisions by changes.
struct Probe {
    inner: Box<dyn Policy>,
    blind: bool,
    decisions: usize,
    by_changes: usize,
}

impl Policy for Probe {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let view = SchedulerView {
            current: if self.blind { None } else { view.current },
            ..*view
        };
        let decision = self.inner.schedule(&view, now)?;
        self.decisions += 1;
        self.by_changes += usize::from(decision.keep_unlisted);
        Ok(decision)
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        self.inner.job_finished(spec, job, now);
    }

    fn quota_round(
        &self,
    ) -> Option<(
        &arbiter_policy::quotas::QuotaTree,
        &arbiter_policy::quotas::QuotaRound,
    )> {
        self.inner.quota_round()
    }
}

fn run(
    kind: PolicyKind,
    strategy: PlacementStrategy,
    cluster: &Cluster,
    jobs: &[JobSpec],
    config: &SimConfig,
    blind: bool,
) -> (SimOutput, usize, usize) {
    let policy_config = PolicyConfig {
        placement: strategy,
        ..PolicyConfig::default()
    };
    let mut probe = Probe {
        inner: build(kind, &policy_config).expect("builds"),
        blind,
        decisions: 0,
        by_changes: 0,
    };
    let out = simulate(cluster, jobs, &mut probe, config).expect("simulates");
    (out, probe.decisions, probe.by_changes)
}

#[test]
fn decisions_by_changes_give_the_same_simulation_as_whole_decisions() {
    // Four racks of eight 8-GPU nodes; Philly-like sizes (1 to 64 GPUs: multi-node and
    // multi-rack jobs too) offered at 90% and 130% of the cluster, so that queues form and
    // preemptive policies displace running jobs.
    let cluster = Cluster::homogeneous(4, 8, 8, 64, 512, "V100").expect("cluster");
    let strategies = [
        PlacementStrategy::Consolidated,
        PlacementStrategy::Relaxed { after_s: 600.0 },
        PlacementStrategy::Anywhere,
        PlacementStrategy::Spread,
    ];
    let kinds = [
        PolicyKind::Fifo,
        PolicyKind::Sjf,
        PolicyKind::Srtf,
        PolicyKind::Srsf,
        PolicyKind::Las,
    ];
    for (load, seed) in [(0.9, 1), (1.3, 2)] {
        let jobs =
            arbiter_trace::generator::philly_like(1_500, cluster.total_gpus(), load, seed).jobs;
        for (s, strategy) in strategies.iter().enumerate() {
            for kind in kinds {
                // Failures on one of the configurations: retried jobs re-enter the queue.
                let failures = (s == 0).then_some(FailureConfig {
                    probability_per_attempt: 0.05,
                    max_retries: 2,
                });
                let config = SimConfig {
                    overhead: OverheadModel::None,
                    failures,
                    seed,
                    ..SimConfig::default()
                };
                let (whole, n, none) = run(kind, *strategy, &cluster, &jobs, &config, true);
                let (changes, decisions, by_changes) =
                    run(kind, *strategy, &cluster, &jobs, &config, false);
                let what = format!("{} with {strategy:?} at load {load}", kind.name());
                assert_eq!(
                    none, 0,
                    "{what}: a policy shown no current state decided by changes"
                );
                assert_eq!(n, decisions, "{what}: scheduling points");
                assert_eq!(whole.records, changes.records, "{what}: job records differ");
                assert_eq!(whole.stats.events, changes.stats.events, "{what}: events");
                // The optimisation is used: below saturation most scheduling points decide by
                // changes (over it, a preemptive policy's queue rarely fits the free GPUs).
                let enough = if load < 1.0 {
                    by_changes * 2 > decisions
                } else {
                    by_changes > 0
                };
                assert!(
                    enough,
                    "{what}: only {by_changes} of {decisions} decisions by changes"
                );
            }
        }
    }
}

#[test]
fn under_a_quota_tree_the_present_gives_the_same_simulation_as_whole_rounds() {
    use arbiter_policy::quotas::{GpuQuota, QuotaGroup, Quotas};
    // Tenants t0..t3 by job; a tree with every kind of limit, so that jobs are held, borrow,
    // are reclaimed and are dropped at limits while the wrapper keeps the present.
    let cluster = Cluster::homogeneous(4, 8, 8, 64, 512, "V100").expect("cluster");
    let group = |name: &str, guaranteed, borrowing_limit, lending_limit| {
        QuotaGroup::all_gpus(
            name,
            None,
            GpuQuota {
                guaranteed,
                borrowing_limit,
                lending_limit,
            },
        )
    };
    let limited = [
        group("t0", 96, None, None),
        group("t1", 64, Some(32), None),
        group("t2", 64, None, Some(16)),
    ];
    // Guaranteed quotas alone (no limit can be overdrawn): the wrapper's shortcut for one
    // waiting job, which the simulator takes at nearly every arrival.
    let unlimited = [
        group("t0", 96, None, None),
        group("t1", 64, None, None),
        group("t2", 64, None, None),
    ];
    for (groups, load, seed) in [(&limited, 0.9, 3), (&limited, 1.3, 4), (&unlimited, 1.3, 5)] {
        let mut jobs =
            arbiter_trace::generator::philly_like(1_500, cluster.total_gpus(), load, seed).jobs;
        // In turns of a hundred jobs: a tenant's burst borrows what the others leave idle, and
        // the next tenant's reclaims it.
        for job in &mut jobs {
            job.tenant = format!("t{}", (job.id.0 / 100) % 4).into();
        }
        for kind in [
            PolicyKind::Fifo,
            PolicyKind::Sjf,
            PolicyKind::Srtf,
            PolicyKind::Las,
        ] {
            let config = SimConfig {
                overhead: OverheadModel::None,
                failures: Some(FailureConfig {
                    probability_per_attempt: 0.05,
                    max_retries: 2,
                }),
                seed,
                ..SimConfig::default()
            };
            let run = |blind: bool| {
                let inner = build(kind, &PolicyConfig::default()).expect("builds");
                let mut probe = Probe {
                    inner: Box::new(Quotas::new(groups, &cluster, inner).expect("tree")),
                    blind,
                    decisions: 0,
                    by_changes: 0,
                };
                let out = simulate(&cluster, &jobs, &mut probe, &config).expect("simulates");
                (out, probe.by_changes)
            };
            let ((whole, _), (kept, by_changes)) = (run(true), run(false));
            let what = format!("{} under quotas at load {load} (seed {seed})", kind.name());
            assert_eq!(whole.records, kept.records, "{what}: job records differ");
            assert_eq!(whole.stats.events, kept.stats.events, "{what}: events");
            assert_eq!(
                whole.stats.quota_reclaims, kept.stats.quota_reclaims,
                "{what}: reclaims"
            );
            assert!(
                whole.stats.quota_reclaims > 0 || load < 1.0,
                "{what}: nothing reclaimed"
            );
            assert!(by_changes > 0, "{what}: no decision by changes");
        }
    }
}
