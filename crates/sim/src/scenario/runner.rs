//! Running a scenario: every (trace × tenant × policy × seed) in parallel, result rows, the
//! aggregate rows of per-tenant runs, and published numbers next to ours.

use super::{LoadedTrace, Published, Scenario, ScenarioError};
use crate::StopFlag;
use crate::engine::{SimConfig, SimError, simulate};
use crate::ideal::simulate_ideal;
use crate::metrics::{JobRecord, Summary, Window};
use crate::timeline::{QuotaLayout, QuotaReclaim, RunSegment};
use crate::unplaceable::UnplaceableJobs;
use arbiter_model::Cluster;
use arbiter_policy::mechanisms::colocation::PairSpeeds;
use arbiter_policy::{Policy, PolicyConfig, PolicyError, PolicyKind, build, build_gavel};
use arbiter_trace::Trace;
use arbiter_trace::gavel::ThroughputTable;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One result row (the `--json` schema): which simulation, then its [`Summary`] flattened in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Trace name.
    pub trace: String,
    /// Policy.
    pub policy: PolicyKind,
    /// Tenant, or `all`.
    pub tenant: String,
    /// Seed.
    pub seed: u64,
    /// The metrics (`jobs`, `avg_jct_s`, `p50_jct_s`, ... at the top level of the JSON row).
    #[serde(flatten)]
    pub summary: Summary,
    /// Engine events.
    pub events: u64,
    /// Wall-clock seconds this simulation took (reporting only; never fed to a policy).
    pub wall_s: f64,
    /// GPUs simulated (the sum over tenants for an aggregate row).
    pub capacity_gpus: u32,
    /// Share of GPU time left idle while jobs waited (fragmentation; capacity-weighted over
    /// tenants for an aggregate row).
    pub stranded_gpu_fraction: f64,
    /// Running jobs its quota tree reclaimed for their owners' guaranteed quota (absent from
    /// the JSON without a quota tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_reclaims: Option<u64>,
    /// Per-job records (not serialized in the summary).
    #[serde(skip)]
    pub records: Vec<JobRecord>,
    /// Things a front end should tell the user on stderr (e.g. jobs that can never run on the
    /// cluster); repeated on every row of the same (trace, tenant), so deduplicate.
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// What ran where and when (not serialized); recorded only with
    /// `simulation.record_timeline` (reports), and only on the rows of simulations (not on
    /// per-tenant or aggregate rows).
    #[serde(skip)]
    pub timeline: Vec<RunSegment>,
    /// Under a quota tree: each job it reclaimed, when (not serialized; `quota_reclaims`
    /// counts them). A per-tenant or per-class row has its own jobs' reclaims.
    #[serde(skip)]
    pub reclaimed: Vec<QuotaReclaim>,
    /// Under a quota tree: the tree's leaves with their quotas and tenants, for reports (not
    /// serialized); only on the rows of simulations, as the timeline.
    #[serde(skip)]
    pub quota_tree: Option<Arc<QuotaLayout>>,
}

/// Adds, after each row of a shared cluster, one row per tenant over that tenant's jobs (tenants
/// in name order); utilization is over the shared capacity and the whole run's span: the
/// tenant's share of the cluster's GPU time, so that the tenants' rows add up to the cluster's
/// (over each tenant's own span, a tenant active for a day of a week-long run read 60% where
/// the cluster read 16%).
fn with_tenant_rows(rows: Vec<ResultRow>, window: Window) -> Vec<ResultRow> {
    with_rows_by(rows, window, |r| Some(r.tenant.to_string()))
}

/// After each row, a row per priority class over its jobs, named `class:<name>` in the tenant
/// column (its `util` is the class's share of the cluster's GPU time).
fn with_class_rows(rows: Vec<ResultRow>, window: Window) -> Vec<ResultRow> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        // Only the rows over all tenants: a class row of a tenant row would be a third level.
        if row.tenant == "all" {
            out.extend(with_rows_by(vec![row], window, |r| {
                r.priority_class.as_ref().map(|c| format!("class:{c}"))
            }));
        } else {
            out.push(row);
        }
    }
    out
}

/// After each row, a row per group of its jobs (`group` names a job's; `None`: in none).
fn with_rows_by(
    rows: Vec<ResultRow>,
    window: Window,
    group: impl Fn(&JobRecord) -> Option<String>,
) -> Vec<ResultRow> {
    let mut out = Vec::with_capacity(rows.len());
    for mut row in rows {
        let span = crate::metrics::RunSpan::of(&row.records);
        let mut by_group: std::collections::BTreeMap<String, Vec<JobRecord>> =
            std::collections::BTreeMap::new();
        for r in &row.records {
            if let Some(g) = group(r) {
                by_group.entry(g).or_default().push(r.clone());
            }
        }
        let records = std::mem::take(&mut row.records);
        let timeline = std::mem::take(&mut row.timeline);
        let reclaimed = std::mem::take(&mut row.reclaimed);
        let template = ResultRow {
            events: 0,
            wall_s: 0.0,
            stranded_gpu_fraction: 0.0,
            quota_reclaims: None,
            warnings: Vec::new(),
            quota_tree: None,
            ..row.clone()
        };
        row.records = records;
        row.timeline = timeline;
        row.reclaimed = reclaimed;
        let under_quotas = row.quota_reclaims.is_some();
        let row_reclaimed = row.reclaimed.clone();
        out.push(row);
        out.extend(by_group.into_iter().map(|(tenant, records)| {
            let mut summary = Summary::compute(&records, window, template.capacity_gpus);
            (
                summary.gpu_utilization,
                summary.shared_gpu_fraction,
                summary.guest_gpu_fraction,
            ) = span.utilization(&records, template.capacity_gpus);
            // Under a quota tree, the reclaims of the group's own jobs.
            let reclaimed: Vec<QuotaReclaim> = if under_quotas {
                let jobs: std::collections::BTreeSet<u32> = records.iter().map(|r| r.job).collect();
                row_reclaimed
                    .iter()
                    .filter(|r| jobs.contains(&r.job))
                    .copied()
                    .collect()
            } else {
                Vec::new()
            };
            ResultRow {
                tenant,
                summary,
                records,
                quota_reclaims: under_quotas.then_some(reclaimed.len() as u64),
                reclaimed,
                ..template.clone()
            }
        }));
    }
    out
}

/// Adds, after each (trace, policy, seed) group of per-tenant rows, a row for tenant `all`
/// computed over the union of their jobs (as Helios reports its "all" row). Utilization is over
/// the summed capacity.
fn with_aggregates(rows: Vec<ResultRow>, window: Window) -> Vec<ResultRow> {
    let mut keys: Vec<(String, PolicyKind, u64)> = rows
        .iter()
        .map(|r| (r.trace.clone(), r.policy, r.seed))
        .collect();
    keys.sort();
    keys.dedup();
    let mut out = rows.clone();
    for (trace, policy, seed) in keys {
        let group: Vec<&ResultRow> = rows
            .iter()
            .filter(|r| r.trace == trace && r.policy == policy && r.seed == seed)
            .collect();
        let records: Vec<JobRecord> = group
            .iter()
            .flat_map(|r| r.records.iter().cloned())
            .collect();
        let capacity: u32 = group.iter().map(|r| r.capacity_gpus).sum();
        // Allocation over the union: utilization of the summed clusters over the common span.
        out.push(ResultRow {
            trace,
            policy,
            tenant: "all".into(),
            seed,
            summary: Summary::compute(&records, window, capacity),
            events: group.iter().map(|r| r.events).sum(),
            stranded_gpu_fraction: {
                let capacity: f64 = group.iter().map(|r| r.capacity_gpus as f64).sum();
                let weighted: f64 = group
                    .iter()
                    .map(|r| r.stranded_gpu_fraction * r.capacity_gpus as f64)
                    .sum();
                if capacity > 0.0 {
                    weighted / capacity
                } else {
                    0.0
                }
            },
            wall_s: group.iter().map(|r| r.wall_s).sum(),
            capacity_gpus: capacity,
            quota_reclaims: group.iter().map(|r| r.quota_reclaims).sum(),
            records: Vec::new(),
            warnings: Vec::new(),
            timeline: Vec::new(),
            reclaimed: Vec::new(),
            quota_tree: None,
        });
    }
    out
}

/// Builds a simulation's policy for [`Scenario::run_with`].
pub type PolicyFactory<'a> =
    dyn Fn(PolicyKind, &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> + Sync + 'a;

/// A published number next to ours (mean over seeds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The published number as the scenario gives it (`trace`, `policy`, `tenant`, `metric`,
    /// `value`, `source`, `tolerance`).
    #[serde(flatten)]
    pub published: Published,
    /// Ours (mean over seeds), if the scenario ran that combination.
    pub ours: Option<f64>,
    /// (ours − published) / published; `None` when not comparable.
    pub relative_diff: Option<f64>,
    /// Whether ours was measured on the published input: false when a `--set` changed the
    /// trace, cluster or settings (e.g. `trace.0.max_jobs`).
    pub comparable: bool,
    /// Why not, when not comparable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_comparable_because: Option<String>,
    /// Whether ours is within the published number's `tolerance`; `None` where there is no
    /// tolerance or nothing to compare.
    #[serde(default)]
    pub within_tolerance: Option<bool>,
}

/// Whether a relative difference `diff` is within `tolerance` (both as fractions; a hair of
/// slack so that a difference printed as exactly the tolerance counts as within it).
pub fn within_tolerance(diff: Option<f64>, tolerance: Option<f64>) -> Option<bool> {
    Some(diff?.abs() <= tolerance? + 1e-12)
}

impl Scenario {
    /// Runs every combination in parallel. `progress` is called once per finished simulation
    /// with (done, total); `clock` returns seconds from any fixed origin and is used only to
    /// report each simulation's `wall_s` (the simulator itself never reads a clock; pass
    /// `&|| 0.0` for none). Rows come back in (trace, tenant, policy, seed) order, followed by
    /// the aggregate rows of per-tenant runs.
    pub fn run(
        &self,
        progress: &(dyn Fn(usize, usize) + Sync),
        clock: &(dyn Fn() -> f64 + Sync),
    ) -> Result<Vec<ResultRow>, ScenarioError> {
        self.run_until(progress, clock, &StopFlag::default())
    }

    /// [`Scenario::run`] that a caller can stop: once `stop` is raised no simulation starts,
    /// those running stop at their next step of virtual time, and the run returns
    /// [`ScenarioError::Stopped`]. The Python bindings stop on Ctrl-C this way.
    pub fn run_until(
        &self,
        progress: &(dyn Fn(usize, usize) + Sync),
        clock: &(dyn Fn() -> f64 + Sync),
        stop: &StopFlag,
    ) -> Result<Vec<ResultRow>, ScenarioError> {
        self.run_with(progress, clock, stop, None)
    }

    /// [`Scenario::run_until`] with each simulation's policy built by `factory` instead of
    /// [`arbiter_policy::build`] (given the kind and its configuration, seed and placement set
    /// for the simulation): the Python bindings run a policy written in Python this way, under
    /// the kind `external`. With a factory the simulations run one at a time, in order, on the
    /// calling thread (the policy it builds may share state between them).
    pub fn run_with(
        &self,
        progress: &(dyn Fn(usize, usize) + Sync),
        clock: &(dyn Fn() -> f64 + Sync),
        stop: &StopFlag,
        factory: Option<&PolicyFactory<'_>>,
    ) -> Result<Vec<ResultRow>, ScenarioError> {
        let configs = self.policy_configs()?;
        let table = self.throughput_table()?;
        let traces = self.load_traces(table.as_ref())?;
        self.run_loaded(
            &configs,
            &traces,
            table.as_ref(),
            progress,
            clock,
            stop,
            factory,
        )
    }

    /// Every policy's configuration, by kind.
    fn policy_configs(&self) -> Result<BTreeMap<PolicyKind, PolicyConfig>, ScenarioError> {
        self.policies
            .iter()
            .map(|&kind| Ok((kind, self.policy_config_for(kind)?)))
            .collect()
    }

    /// [`Scenario::run_with`] on traces the caller loaded (`arbiter whatif` reads a daemon's
    /// history itself, with what the daemon recorded beside each job) instead of the scenario's
    /// own `[[trace]]` entries; `table` is [`Scenario::throughput_table`]'s.
    pub fn run_traces(
        &self,
        traces: &[LoadedTrace],
        table: Option<&ThroughputTable>,
        progress: &(dyn Fn(usize, usize) + Sync),
        clock: &(dyn Fn() -> f64 + Sync),
        stop: &StopFlag,
        factory: Option<&PolicyFactory<'_>>,
    ) -> Result<Vec<ResultRow>, ScenarioError> {
        self.run_loaded(
            &self.policy_configs()?,
            traces,
            table,
            progress,
            clock,
            stop,
            factory,
        )
    }

    /// Runs every simulation of `traces`.
    #[allow(clippy::too_many_arguments)]
    fn run_loaded(
        &self,
        configs: &BTreeMap<PolicyKind, PolicyConfig>,
        traces: &[LoadedTrace],
        table: Option<&ThroughputTable>,
        progress: &(dyn Fn(usize, usize) + Sync),
        clock: &(dyn Fn() -> f64 + Sync),
        stop: &StopFlag,
        factory: Option<&PolicyFactory<'_>>,
    ) -> Result<Vec<ResultRow>, ScenarioError> {
        let tasks = self.tasks(traces, table)?;
        let total = tasks.len();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let run_task = |task: &Task| -> Result<ResultRow, ScenarioError> {
            let row = self.run_task(task, &configs[&task.policy], factory, stop, clock)?;
            let finished = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(finished, total);
            Ok(row)
        };
        // Tasks of the largest traces first, each pulled by the next free thread: the longest
        // simulations start early instead of being left for the end on one thread. The rows
        // (and the first error) keep the task order.
        let mut order: Vec<usize> = (0..tasks.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(tasks[i].jobs.jobs.len()));
        let mut indexed: Vec<(usize, Result<ResultRow, ScenarioError>)> = match factory {
            Some(_) => (0..tasks.len()).map(|i| (i, run_task(&tasks[i]))).collect(),
            None => order
                .into_iter()
                .par_bridge()
                .map(|i| (i, run_task(&tasks[i])))
                .collect(),
        };
        if stop.is_raised() {
            return Err(ScenarioError::Stopped);
        }
        indexed.sort_by_key(|(i, _)| *i);
        let rows = indexed
            .into_iter()
            .map(|(_, row)| row)
            .collect::<Result<Vec<ResultRow>, ScenarioError>>()?;
        let rows = if self.cluster.per_tenant_nodes.is_some() {
            with_aggregates(rows, self.window)
        } else if self.tenant_rows {
            with_tenant_rows(rows, self.window)
        } else {
            rows
        };
        Ok(if self.priority_classes.is_empty() {
            rows
        } else {
            with_class_rows(rows, self.window)
        })
    }

    /// One simulation per trace × tenant × policy × seed, each with its inputs bound (speeds,
    /// slowdowns, pair speeds) and the warnings of its trace.
    fn tasks(
        &self,
        traces: &[LoadedTrace],
        table: Option<&ThroughputTable>,
    ) -> Result<Vec<Task>, ScenarioError> {
        let mut tasks = Vec::new();
        for loaded in traces {
            let (name, trace_seed, trace) = (&loaded.name, &loaded.seed, &loaded.trace);
            let placement_spec = loaded.placement.as_ref().unwrap_or(&self.placement);
            let placement = match &loaded.placement {
                Some(p) => Some((
                    p.strategy()
                        .map_err(|m| self.invalid(format!("trace `{name}`: placement.{m}")))?,
                    p.keep_placements,
                )),
                None => None,
            };
            for (tenant, cluster) in self.clusters_for(trace)? {
                // The whole trace shared as it is where nothing is bound to its jobs (a
                // million-job history is not copied); else a copy to bind to.
                let binds = placement_spec.slowdown_per_extra_node > 0.0 || table.is_some();
                let jobs = if tenant == "all" && !binds {
                    Arc::clone(trace)
                } else {
                    let mut jobs = if tenant == "all" {
                        (**trace).clone()
                    } else {
                        let t = tenant.clone();
                        (**trace).clone().filter(|j| j.tenant == t)
                    };
                    let gpus_per_node = cluster.nodes.iter().map(|n| n.gpus).max().unwrap_or(1);
                    placement_spec.bind_slowdown(&mut jobs.jobs, gpus_per_node);
                    if let Some(table) = &table {
                        self.bind_speeds(&mut jobs, &cluster, table)?;
                    }
                    Arc::new(jobs)
                };
                let mut pair_speeds = None;
                if let Some(table) = &table
                    && self.policies.iter().any(|p| p.needs_pair_speeds())
                {
                    pair_speeds = Some(Arc::new(pair_speeds_for(&jobs, &cluster, table)));
                }
                let context = if tenant == "all" {
                    name.clone()
                } else {
                    format!("{name}/{tenant}")
                };
                let warnings: Arc<Vec<String>> = Arc::new(
                    UnplaceableJobs::count(&cluster, &jobs.jobs)
                        .warning(&context)
                        .into_iter()
                        .collect(),
                );
                let cluster = Arc::new(cluster);
                let seeds: Vec<u64> = match trace_seed {
                    Some(s) => vec![*s],
                    None => self.run_seeds().to_vec(),
                };
                for &policy in &self.policies {
                    for &seed in &seeds {
                        tasks.push(Task {
                            trace: name.clone(),
                            jobs: Arc::clone(&jobs),
                            tenant: tenant.clone(),
                            cluster: Arc::clone(&cluster),
                            policy,
                            seed,
                            pair_speeds: pair_speeds.clone(),
                            warnings: Arc::clone(&warnings),
                            placement,
                            quotas: loaded.quotas.clone(),
                        });
                    }
                }
            }
        }
        Ok(tasks)
    }

    /// Runs one simulation with its policy's configuration (`factory` building the policy, if
    /// given).
    fn run_task(
        &self,
        task: &Task,
        config: &PolicyConfig,
        factory: Option<&PolicyFactory<'_>>,
        stop: &StopFlag,
        clock: &(dyn Fn() -> f64 + Sync),
    ) -> Result<ResultRow, ScenarioError> {
        if stop.is_raised() {
            return Err(ScenarioError::Stopped);
        }
        let sim_err = |error| match error {
            SimError::Stopped(_) => ScenarioError::Stopped,
            error => ScenarioError::Sim {
                trace: task.trace.clone(),
                policy: task.policy,
                tenant: task.tenant.clone(),
                seed: task.seed,
                error,
            },
        };
        let mut task_config = config.clone();
        task_config.rounds.seed = task.seed;
        task_config.pair_speeds = task.pair_speeds.clone();
        if let Some((strategy, keep)) = task.placement {
            task_config.placement = strategy;
            task_config.keep_placements = keep;
        }
        let built = match factory {
            Some(factory) => factory(task.policy, &task_config),
            None if !self.priority_classes.is_empty() => {
                arbiter_policy::mechanisms::classes::PriorityClasses::new(
                    task.policy,
                    task_config.clone(),
                )
                .map(|p| Box::new(p) as Box<dyn arbiter_policy::Policy>)
            }
            None => build(task.policy, &task_config),
        };
        let built = match (&task.quotas, built) {
            (Some(groups), Ok(inner)) => {
                arbiter_policy::quotas::Quotas::new(groups, &task.cluster, inner)
                    .map(|q| Box::new(q) as Box<dyn arbiter_policy::Policy>)
            }
            (_, built) => built,
        };
        let mut policy = built.map_err(|e| sim_err(SimError::Config(e.to_string())))?;
        let sim_config = SimConfig {
            seed: task.seed,
            stop_when_finished: self.window.stop_when_done.then_some(self.window),
            stop: stop.clone(),
            ..self.simulation.clone()
        };
        let started = clock();
        if sim_config.ideal && task.policy == PolicyKind::MaxMinFairnessPacked {
            return Err(sim_err(SimError::Config(
                "simulation.ideal does not model space sharing (max-min-fairness-packed)".into(),
            )));
        }
        let output = if sim_config.ideal {
            let mut gavel = build_gavel(task.policy, &task_config)
                .map_err(|e| sim_err(SimError::Config(e.to_string())))?
                .ok_or_else(|| {
                    sim_err(SimError::Config(format!(
                        "simulation.ideal needs a Gavel allocation policy, not {}",
                        task.policy
                    )))
                })?;
            simulate_ideal(&task.cluster, &task.jobs.jobs, &mut gavel, &sim_config)
                .map_err(sim_err)?
        } else {
            simulate(&task.cluster, &task.jobs.jobs, policy.as_mut(), &sim_config)
                .map_err(sim_err)?
        };
        let wall_s = clock() - started;
        let summary = Summary::compute(&output.records, self.window, output.capacity_gpus);
        let quota_tree = policy.quota_round().map(|(tree, _)| {
            Arc::new(QuotaLayout::of(
                tree,
                &task.cluster,
                task.jobs.jobs.iter().map(|j| j.tenant.as_str()),
            ))
        });
        Ok(ResultRow {
            trace: task.trace.clone(),
            policy: task.policy,
            tenant: task.tenant.clone(),
            seed: task.seed,
            summary,
            events: output.stats.events,
            stranded_gpu_fraction: output.stats.stranded_gpu_fraction(output.capacity_gpus),
            quota_reclaims: task.quotas.as_ref().map(|_| output.stats.quota_reclaims),
            wall_s,
            capacity_gpus: output.capacity_gpus,
            records: output.records,
            warnings: task.warnings.to_vec(),
            timeline: output.timeline,
            reclaimed: output.quota_reclaims,
            quota_tree,
        })
    }

    /// Published numbers next to ours (averaged over seeds). Where `--set` overrides changed a
    /// trace's input (its entry, or the cluster and settings every trace shares), its comparisons
    /// are marked not comparable and have no relative difference.
    pub fn compare(&self, rows: &[ResultRow]) -> Vec<Comparison> {
        self.published
            .iter()
            .map(|p| {
                let values: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.trace == p.trace && r.policy == p.policy && r.tenant == p.tenant)
                    .filter_map(|r| r.summary.metric(&p.metric))
                    .collect();
                let ours =
                    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
                let because = self.input_changes.not_comparable(&p.trace);
                let relative_diff = ours
                    .filter(|_| because.is_none())
                    .map(|o| (o - p.value) / p.value);
                Comparison {
                    published: p.clone(),
                    ours,
                    relative_diff,
                    comparable: because.is_none(),
                    not_comparable_because: because.clone(),
                    within_tolerance: within_tolerance(relative_diff, p.tolerance),
                }
            })
            .collect()
    }
}

/// Co-location speeds for every pair of job types in `trace`, on each GPU type of `cluster`,
/// from the throughput table's pair measurements: each job's shared throughput divided by its
/// solo throughput on the reference GPU (V100), the unit job speeds are in. A type where the
/// pair is not measured gets (0, 0): they do not share there.
pub fn pair_speeds_for(trace: &Trace, cluster: &Cluster, table: &ThroughputTable) -> PairSpeeds {
    let keys: std::collections::BTreeSet<(String, u32)> = trace
        .jobs
        .iter()
        .filter_map(|j| j.model.clone().map(|m| (m, j.gpus)))
        .collect();
    let reference = |key: &(String, u32)| {
        table
            .solo(arbiter_trace::generator::REFERENCE_GPU, &key.0, key.1)
            .filter(|t| *t > 0.0)
    };
    let mut speeds = PairSpeeds::default();
    for a in &keys {
        for b in keys.range(a.clone()..) {
            let (Some(ref_a), Some(ref_b)) = (reference(a), reference(b)) else {
                continue;
            };
            let per_type: Vec<(f64, f64)> = cluster
                .gpu_type_names
                .iter()
                .map(|t| {
                    table
                        .pair(&t.to_ascii_lowercase(), a, b)
                        .map_or((0.0, 0.0), |(x, y)| (x / ref_a, y / ref_b))
                })
                .collect();
            if per_type.iter().any(|(x, y)| *x > 0.0 && *y > 0.0) {
                speeds.insert(a.clone(), b.clone(), per_type);
            }
        }
    }
    speeds
}
/// One simulation of a scenario run.
struct Task {
    trace: String,
    jobs: Arc<Trace>,
    tenant: String,
    cluster: Arc<Cluster>,
    policy: PolicyKind,
    seed: u64,
    pair_speeds: Option<Arc<PairSpeeds>>,
    warnings: Arc<Vec<String>>,
    /// The trace's own placement (strategy, keep placements), replacing the scenario's.
    placement: Option<(arbiter_policy::PlacementStrategy, bool)>,
    /// The quota tree it runs under.
    quotas: Option<Arc<Vec<arbiter_policy::quotas::QuotaGroup>>>,
}
