//! Scenarios: a TOML file that names traces, a cluster, policies, seeds and the measured window,
//! and may carry the published numbers it reproduces. [`Scenario::load`] reads one (with
//! `--set key=value` overrides), [`Scenario::run`] runs every (trace × tenant × policy × seed)
//! combination in parallel and returns rows in a deterministic order.
//!
//! Relative paths in a scenario are resolved against the scenario file's folder.

use crate::engine::{simulate, SimConfig, SimError};
use crate::metrics::{JobRecord, Summary, Window};
use arbiter_model::Cluster;
use arbiter_policy::{build, PlacementStrategy, PolicyConfig, PolicyKind};
use arbiter_trace::{ReadOptions, Trace, TraceError, TraceFormat};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// A scenario could not be loaded or run.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// File could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// TOML syntax or schema error.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (with line and key).
        message: String,
    },
    /// A `--set` override is malformed.
    #[error("--set {0}")]
    Override(String),
    /// A value is out of range or inconsistent.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A trace failed to load.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A simulation failed.
    #[error("{trace}/{policy}/{tenant}/seed {seed}: {source}")]
    Sim {
        /// Trace name.
        trace: String,
        /// Policy.
        policy: PolicyKind,
        /// Tenant.
        tenant: String,
        /// Seed.
        seed: u64,
        /// The error.
        source: SimError,
    },
}

/// One trace of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// Name used in results (defaults to the file stem).
    #[serde(default)]
    pub name: Option<String>,
    /// File format.
    pub format: TraceFormat,
    /// File path.
    pub path: PathBuf,
    /// Reader options (Muri's iteration-time factor, profile folders).
    #[serde(flatten)]
    pub read: ReadOptions,
    /// Keep jobs submitted at or after this date/time (`YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS`;
    /// traces with timestamps only).
    #[serde(default)]
    pub submit_from: Option<String>,
    /// Keep jobs submitted before this date/time (exclusive; a bare date means the end of that day).
    #[serde(default)]
    pub submit_until: Option<String>,
    /// Keep only these tenants.
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
    /// Keep only the first N jobs (after the other filters).
    #[serde(default)]
    pub max_jobs: Option<usize>,
}

/// The cluster: either one homogeneous cluster, or one cluster per tenant sized from a CSV.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSpec {
    /// Racks (switches).
    pub racks: u32,
    /// Nodes per rack.
    pub nodes_per_rack: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// CPU cores per node.
    pub cpus_per_node: u32,
    /// Memory per node, GiB.
    pub memory_gib_per_node: u32,
    /// GPU type name.
    pub gpu_type: String,
    /// A Tiresias/Muri cluster-spec CSV (`num_switch,num_node_p_switch,num_gpu_p_node,
    /// num_cpu_p_node,mem_p_node`); replaces the sizes above.
    pub spec_file: Option<PathBuf>,
    /// A CSV with columns `vc,node num` (Helios' `philly_vc.csv`): simulate each listed tenant
    /// alone on that many nodes (in one rack), with the per-node sizes above. Tenants of the trace
    /// not listed are skipped.
    pub per_tenant_nodes: Option<PathBuf>,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            racks: 1,
            nodes_per_rack: 8,
            gpus_per_node: 8,
            cpus_per_node: 64,
            memory_gib_per_node: 512,
            gpu_type: "V100".into(),
            spec_file: None,
            per_tenant_nodes: None,
        }
    }
}

/// Placement settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementSpec {
    /// `consolidated`, `spread`, `relaxed` or `anywhere`.
    pub strategy: String,
    /// For `relaxed`: seconds of waiting after which locality is given up.
    pub relax_after_s: f64,
    /// Preemptive policies keep a continuing job's GPUs (true) or re-place all jobs each time.
    pub keep_placements: bool,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec { strategy: "consolidated".into(), relax_after_s: 600.0, keep_placements: true }
    }
}

/// Policy parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySpec {
    /// Tiresias queue limits, GPU-seconds.
    pub las_queue_limits_gpu_s: Vec<f64>,
    /// Number of Tiresias queues.
    pub las_queues: usize,
    /// Tiresias starvation factor (0 = off).
    pub starvation_factor: f64,
    /// CSV with a `duration` column of job sizes in GPU-seconds (the Gittins prior).
    pub gittins_prior: Option<PathBuf>,
    /// Gittins quantum for the last queue, GPU-seconds.
    pub gittins_delta_gpu_s: f64,
    /// QSSF: recent jobs kept per history key.
    pub qssf_history: usize,
}

impl Default for PolicySpec {
    fn default() -> Self {
        let d = PolicyConfig::default();
        PolicySpec {
            las_queue_limits_gpu_s: d.las.queue_limits_gpu_s,
            las_queues: d.las.queues,
            starvation_factor: d.las.starvation_factor,
            gittins_prior: None,
            gittins_delta_gpu_s: d.gittins_delta_gpu_s,
            qssf_history: d.qssf_history,
        }
    }
}

/// A published number a scenario reproduces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// Trace name.
    pub trace: String,
    /// Policy.
    pub policy: PolicyKind,
    /// Tenant (`all` by default).
    #[serde(default = "all_tenants")]
    pub tenant: String,
    /// Metric name: `avg_jct_s`, `p50_jct_s`, `p99_jct_s`, `avg_queue_s`, `makespan_s`.
    pub metric: String,
    /// The published value.
    pub value: f64,
    /// Where it was published.
    #[serde(default)]
    pub source: Option<String>,
    /// Acceptable relative difference (e.g. 0.05); informational.
    #[serde(default)]
    pub tolerance: Option<f64>,
}

fn all_tenants() -> String {
    "all".into()
}

/// A whole scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Scenario name.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: Option<String>,
    /// Traces.
    pub trace: Vec<TraceSpec>,
    /// Cluster.
    #[serde(default)]
    pub cluster: ClusterSpec,
    /// Policies to compare.
    pub policies: Vec<PolicyKind>,
    /// Seeds (each policy runs once per seed).
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Engine settings.
    #[serde(default)]
    pub simulation: SimConfig,
    /// Placement.
    #[serde(default)]
    pub placement: PlacementSpec,
    /// Policy parameters.
    #[serde(default)]
    pub policy: PolicySpec,
    /// Measured window of job ids.
    #[serde(default)]
    pub window: Window,
    /// Published numbers to print beside ours.
    #[serde(default)]
    pub published: Vec<Published>,
    /// Folder the file was read from (relative paths resolve against it).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file itself.
    #[serde(skip)]
    pub file: PathBuf,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

/// One result row (the `--json` schema).
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
    /// Completed jobs measured.
    pub jobs: usize,
    /// Mean JCT, seconds.
    pub avg_jct_s: f64,
    /// Median JCT.
    pub p50_jct_s: f64,
    /// p95 JCT.
    pub p95_jct_s: f64,
    /// p99 JCT.
    pub p99_jct_s: f64,
    /// Mean queueing delay.
    pub avg_queue_s: f64,
    /// Makespan.
    pub makespan_s: f64,
    /// GPU utilization.
    pub gpu_utilization: f64,
    /// Preemptions per job.
    pub preemptions_per_job: f64,
    /// Jobs that never finished.
    pub unfinished: usize,
    /// Jobs that failed for good.
    pub failed: usize,
    /// Engine events.
    pub events: u64,
    /// Wall-clock seconds this simulation took (reporting only; never fed to a policy).
    pub wall_s: f64,
    /// GPUs simulated (the sum over tenants for an aggregate row).
    pub capacity_gpus: u32,
    /// Per-job records (not serialized in the summary).
    #[serde(skip)]
    pub records: Vec<JobRecord>,
}

impl ResultRow {
    fn from_summary(trace: String, policy: PolicyKind, tenant: String, seed: u64, summary: &Summary) -> Self {
        ResultRow {
            trace,
            policy,
            tenant,
            seed,
            jobs: summary.jobs,
            avg_jct_s: summary.avg_jct_s,
            p50_jct_s: summary.p50_jct_s,
            p95_jct_s: summary.p95_jct_s,
            p99_jct_s: summary.p99_jct_s,
            avg_queue_s: summary.avg_queue_s,
            makespan_s: summary.makespan_s,
            gpu_utilization: summary.gpu_utilization,
            preemptions_per_job: summary.preemptions_per_job,
            unfinished: summary.unfinished,
            failed: summary.failed,
            events: 0,
            wall_s: 0.0,
            capacity_gpus: 0,
            records: Vec::new(),
        }
    }
}

/// Adds, after each (trace, policy, seed) group of per-tenant rows, a row for tenant `all`
/// computed over the union of their jobs (as Helios reports its "all" row). Utilization is over
/// the summed capacity.
fn with_aggregates(rows: Vec<ResultRow>, window: Window) -> Vec<ResultRow> {
    let mut keys: Vec<(String, PolicyKind, u64)> = rows.iter().map(|r| (r.trace.clone(), r.policy, r.seed)).collect();
    keys.sort();
    keys.dedup();
    let mut out = rows.clone();
    for (trace, policy, seed) in keys {
        let group: Vec<&ResultRow> = rows.iter().filter(|r| r.trace == trace && r.policy == policy && r.seed == seed).collect();
        let records: Vec<JobRecord> = group.iter().flat_map(|r| r.records.iter().cloned()).collect();
        let capacity: u32 = group.iter().map(|r| r.capacity_gpus).sum();
        // Allocation over the union: utilization of the summed clusters over the common span.
        let summary = Summary::compute(&records, window, capacity);
        let mut row = ResultRow::from_summary(trace, policy, "all".into(), seed, &summary);
        row.events = group.iter().map(|r| r.events).sum();
        row.wall_s = group.iter().map(|r| r.wall_s).sum();
        row.capacity_gpus = capacity;
        out.push(row);
    }
    out
}

impl ResultRow {
    /// The value of a named metric.
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "avg_jct_s" => self.avg_jct_s,
            "p50_jct_s" => self.p50_jct_s,
            "p95_jct_s" => self.p95_jct_s,
            "p99_jct_s" => self.p99_jct_s,
            "avg_queue_s" => self.avg_queue_s,
            "makespan_s" => self.makespan_s,
            "gpu_utilization" => self.gpu_utilization,
            _ => return None,
        })
    }
}

/// A published number next to ours (mean over seeds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Trace.
    pub trace: String,
    /// Policy.
    pub policy: PolicyKind,
    /// Tenant.
    pub tenant: String,
    /// Metric.
    pub metric: String,
    /// Published value.
    pub published: f64,
    /// Ours (mean over seeds), if the scenario ran that combination.
    pub ours: Option<f64>,
    /// (ours − published) / published.
    pub relative_diff: Option<f64>,
    /// Tolerance from the scenario.
    pub tolerance: Option<f64>,
    /// Source.
    pub source: Option<String>,
}

/// Applies a `key=value` override to a TOML document. Keys are dotted paths; a numeric segment
/// indexes an array (`trace.0.path`). The value is parsed as TOML (`3`, `true`, `[1, 2]`,
/// `"text"`), falling back to a plain string.
pub fn apply_override(root: &mut toml::Value, assignment: &str) -> Result<(), ScenarioError> {
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| ScenarioError::Override(format!("`{assignment}`: expected key=value")))?;
    let key = key.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::Override(format!("`{key}`: empty key segment")));
    }
    let mut current: &mut toml::Value = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        current = match current {
            toml::Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), value);
                    return Ok(());
                }
                t.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let index: usize = part
                    .parse()
                    .map_err(|_| ScenarioError::Override(format!("`{key}`: `{part}` must be an array index")))?;
                let len = a.len();
                let slot = a
                    .get_mut(index)
                    .ok_or_else(|| ScenarioError::Override(format!("`{key}`: index {index} out of range (len {len})")))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(ScenarioError::Override(format!("`{key}`: `{part}` is inside a non-table value"))),
        };
    }
    Ok(())
}

impl Scenario {
    /// Reads a scenario file and applies overrides.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { path: path.to_path_buf(), source })?;
        Self::parse(&text, path, overrides)
    }

    /// Parses scenario text as if read from `path`.
    pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Self, ScenarioError> {
        let parse_err = |message: String| ScenarioError::Parse { path: path.to_path_buf(), message };
        let doc: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let mut root = toml::Value::Table(doc);
        for o in overrides {
            apply_override(&mut root, o)?;
        }
        let mut scenario: Scenario = root.try_into().map_err(|e: toml::de::Error| parse_err(e.to_string()))?;
        scenario.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        scenario.file = path.to_path_buf();
        scenario.check()?;
        Ok(scenario)
    }

    fn invalid(&self, message: String) -> ScenarioError {
        ScenarioError::Invalid { path: self.file.clone(), message }
    }

    fn check(&self) -> Result<(), ScenarioError> {
        if self.trace.is_empty() {
            return Err(self.invalid("no [[trace]] given".into()));
        }
        if self.policies.is_empty() {
            return Err(self.invalid("`policies` is empty".into()));
        }
        if self.seeds.is_empty() {
            return Err(self.invalid("`seeds` is empty".into()));
        }
        self.placement_strategy()?;
        Ok(())
    }

    /// Resolves a path relative to the scenario file.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() { p.to_path_buf() } else { self.base_dir.join(p) }
    }

    fn placement_strategy(&self) -> Result<PlacementStrategy, ScenarioError> {
        Ok(match self.placement.strategy.as_str() {
            "consolidated" => PlacementStrategy::Consolidated,
            "spread" => PlacementStrategy::Spread,
            "anywhere" => PlacementStrategy::Anywhere,
            "relaxed" => PlacementStrategy::Relaxed { after_s: self.placement.relax_after_s },
            other => {
                return Err(self.invalid(format!(
                    "placement.strategy `{other}` is not one of consolidated, spread, relaxed, anywhere"
                )))
            }
        })
    }

    /// The policy configuration this scenario implies (reads the Gittins prior if named).
    pub fn policy_config(&self) -> Result<PolicyConfig, ScenarioError> {
        let mut config = PolicyConfig {
            placement: self.placement_strategy()?,
            keep_placements: self.placement.keep_placements,
            ..PolicyConfig::default()
        };
        config.las.queue_limits_gpu_s = self.policy.las_queue_limits_gpu_s.clone();
        config.las.queues = self.policy.las_queues;
        config.las.starvation_factor = self.policy.starvation_factor;
        config.gittins_delta_gpu_s = self.policy.gittins_delta_gpu_s;
        config.qssf_history = self.policy.qssf_history;
        if let Some(prior) = &self.policy.gittins_prior {
            config.gittins_prior_gpu_s = read_prior(&self.resolve(prior))?;
        } else if self.policies.contains(&PolicyKind::Gittins) {
            return Err(self.invalid("policy `gittins` needs policy.gittins_prior (a CSV of GPU-time samples)".into()));
        }
        Ok(config)
    }

    /// Loads and filters every trace: `(name, trace)`.
    pub fn load_traces(&self) -> Result<Vec<(String, Arc<Trace>)>, ScenarioError> {
        let mut out = Vec::new();
        for spec in &self.trace {
            let path = self.resolve(&spec.path);
            let mut read = spec.read.clone();
            read.profiles = read.profiles.map(|p| self.resolve(&p));
            let mut trace = arbiter_trace::read(&path, spec.format, &read)?;
            let from = spec.submit_from.as_deref().map(|s| parse_when(s, false)).transpose().map_err(|m| self.invalid(m))?;
            let until = spec.submit_until.as_deref().map(|s| parse_when(s, true)).transpose().map_err(|m| self.invalid(m))?;
            if (from.is_some() || until.is_some()) && trace.origin_unix_s.is_none() {
                return Err(self.invalid(format!("{}: submit_from/submit_until need a trace with timestamps", path.display())));
            }
            if from.is_some() || until.is_some() || spec.tenants.is_some() {
                let origin = trace.origin_unix_s.unwrap_or(0);
                trace = trace.filter(|j| {
                    let t = origin + (j.submit.as_ms() / 1000) as i64;
                    from.is_none_or(|f| t >= f)
                        && until.is_none_or(|u| t < u)
                        && spec.tenants.as_ref().is_none_or(|ts| ts.contains(&j.tenant))
                });
            }
            if let Some(max) = spec.max_jobs {
                let origin = trace.origin_unix_s;
                let mut jobs = trace.jobs;
                jobs.truncate(max);
                trace = Trace::from_jobs(jobs, origin);
            }
            let name = spec.name.clone().unwrap_or_else(|| {
                path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "trace".into())
            });
            out.push((name, Arc::new(trace)));
        }
        Ok(out)
    }

    /// `(tenant, cluster)` pairs to run a trace on: `("all", the cluster)` or one per tenant.
    pub fn clusters_for(&self, trace: &Trace) -> Result<Vec<(String, Cluster)>, ScenarioError> {
        let c = &self.cluster;
        let make = |nodes: u32, racks: u32| {
            Cluster::homogeneous(racks, nodes, c.gpus_per_node, c.cpus_per_node, c.memory_gib_per_node, &c.gpu_type)
                .map_err(|e| self.invalid(format!("cluster: {e}")))
        };
        if let (Some(_), Some(_)) = (&c.spec_file, &c.per_tenant_nodes) {
            return Err(self.invalid("cluster.spec_file and cluster.per_tenant_nodes exclude each other".into()));
        }
        if let Some(file) = &c.spec_file {
            return Ok(vec![("all".into(), arbiter_trace::cluster_spec::read(&self.resolve(file), &c.gpu_type)?)]);
        }
        match &c.per_tenant_nodes {
            None => Ok(vec![("all".into(), make(c.nodes_per_rack, c.racks)?)]),
            Some(file) => {
                let sizes = read_tenant_sizes(&self.resolve(file))?;
                let present = trace.tenants();
                sizes
                    .into_iter()
                    .filter(|(t, _)| present.contains(t))
                    .map(|(t, nodes)| Ok((t, make(nodes, 1)?)))
                    .collect()
            }
        }
    }

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
        let config = self.policy_config()?;
        let traces = self.load_traces()?;
        struct Task {
            trace: String,
            jobs: Arc<Trace>,
            tenant: String,
            cluster: Arc<Cluster>,
            policy: PolicyKind,
            seed: u64,
        }
        let mut tasks = Vec::new();
        for (name, trace) in &traces {
            for (tenant, cluster) in self.clusters_for(trace)? {
                let jobs = if tenant == "all" {
                    Arc::clone(trace)
                } else {
                    let t = tenant.clone();
                    Arc::new((**trace).clone().filter(|j| j.tenant == t))
                };
                let cluster = Arc::new(cluster);
                for &policy in &self.policies {
                    for &seed in &self.seeds {
                        tasks.push(Task {
                            trace: name.clone(),
                            jobs: Arc::clone(&jobs),
                            tenant: tenant.clone(),
                            cluster: Arc::clone(&cluster),
                            policy,
                            seed,
                        });
                    }
                }
            }
        }
        let total = tasks.len();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let rows: Vec<ResultRow> = tasks
            .par_iter()
            .map(|task| {
                let sim_err = |source| ScenarioError::Sim {
                    trace: task.trace.clone(),
                    policy: task.policy,
                    tenant: task.tenant.clone(),
                    seed: task.seed,
                    source,
                };
                let mut policy = build(task.policy, &config)
                    .map_err(|e| sim_err(SimError::Config(e.to_string())))?;
                let sim_config = SimConfig { seed: task.seed, ..self.simulation.clone() };
                let started = clock();
                let output = simulate(&task.cluster, &task.jobs.jobs, policy.as_mut(), &sim_config).map_err(sim_err)?;
                let wall_s = clock() - started;
                let summary = Summary::compute(&output.records, self.window, output.capacity_gpus);
                let finished = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                progress(finished, total);
                let mut row = ResultRow::from_summary(task.trace.clone(), task.policy, task.tenant.clone(), task.seed, &summary);
                row.events = output.stats.events;
                Ok(ResultRow { wall_s, capacity_gpus: output.capacity_gpus, records: output.records, ..row })
            })
            .collect::<Result<_, ScenarioError>>()?;
        Ok(if self.cluster.per_tenant_nodes.is_some() { with_aggregates(rows, self.window) } else { rows })
    }

    /// Published numbers next to ours (averaged over seeds).
    pub fn compare(&self, rows: &[ResultRow]) -> Vec<Comparison> {
        self.published
            .iter()
            .map(|p| {
                let values: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.trace == p.trace && r.policy == p.policy && r.tenant == p.tenant)
                    .filter_map(|r| r.metric(&p.metric))
                    .collect();
                let ours = (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
                Comparison {
                    trace: p.trace.clone(),
                    policy: p.policy,
                    tenant: p.tenant.clone(),
                    metric: p.metric.clone(),
                    published: p.value,
                    ours,
                    relative_diff: ours.map(|o| (o - p.value) / p.value),
                    tolerance: p.tolerance,
                    source: p.source.clone(),
                }
            })
            .collect()
    }
}

/// `YYYY-MM-DD` (start of day, or end of day when `end_of_day`) or `YYYY-MM-DD HH:MM:SS`, as
/// Unix seconds.
fn parse_when(text: &str, end_of_day: bool) -> Result<i64, String> {
    if let Some(t) = arbiter_trace::philly::parse_timestamp(text) {
        return Ok(t);
    }
    arbiter_trace::philly::parse_timestamp(&format!("{text} 00:00:00"))
        .map(|t| if end_of_day { t + 86_400 } else { t })
        .ok_or_else(|| format!("`{text}` is not YYYY-MM-DD or YYYY-MM-DD HH:MM:SS"))
}

/// Reads a one-column CSV of GPU-time samples (`duration` header, Tiresias' `yarn-gput*.csv`).
pub fn read_prior(path: &Path) -> Result<Vec<f64>, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { path: path.to_path_buf(), source })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: f64 = line.parse().map_err(|e| ScenarioError::Parse {
            path: path.to_path_buf(),
            message: format!("line {}: duration: `{line}`: {e}", i + 1),
        })?;
        out.push(v);
    }
    Ok(out)
}

/// Reads `vc,node num` rows.
pub fn read_tenant_sizes(path: &Path) -> Result<Vec<(String, u32)>, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io { path: path.to_path_buf(), source })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |m: String| ScenarioError::Parse { path: path.to_path_buf(), message: format!("line {}: {m}", i + 1) };
        let (vc, nodes) = line.split_once(',').ok_or_else(|| bad("expected `vc,node num`".into()))?;
        let nodes: u32 = nodes.trim().parse().map_err(|e| bad(format!("node num: `{nodes}`: {e}")))?;
        out.push((vc.trim().to_string(), nodes));
    }
    Ok(out)
}
