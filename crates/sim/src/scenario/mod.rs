//! Scenarios: a TOML file that names traces, a cluster, policies, seeds and the measured window,
//! and may carry the published numbers it reproduces. [`Scenario::load`] reads one (with
//! `--set key=value` overrides), [`Scenario::run`] runs every (trace × tenant × policy × seed)
//! combination in parallel and returns rows in a deterministic order.
//!
//! Relative paths in a scenario are resolved against the scenario file's folder.

pub mod classes;
mod overrides;
mod placement;
mod policy_spec;
mod runner;

pub use placement::PlacementSpec;
pub use policy_spec::PolicySpec;

pub use overrides::apply_override;
pub use runner::{Comparison, PolicyFactory, ResultRow, within_tolerance};

use crate::engine::{SimConfig, SimError};
use crate::metrics::Window;
use arbiter_model::Cluster;
use arbiter_policy::{PolicyConfig, PolicyKind};
use arbiter_trace::gavel::ThroughputTable;
use arbiter_trace::generator::GavelWorkload;
use arbiter_trace::synergy::{SynergyProfiles, SynergyWorkload};
use arbiter_trace::{ReadOptions, Trace, TraceError, TraceFormat};
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
    /// A file the scenario names could not be read where its path led: the message says where
    /// that was and why (a relative path resolves against the scenario file's folder, not the
    /// current directory: `../data/x.csv` in `scenarios/a.toml` is `data/x.csv`).
    #[error("{message}")]
    Resolved {
        /// `FILE: cannot read KEY `GIVEN` at RESOLVED (how a relative path resolves)`.
        message: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A trace failed to load.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A simulation failed. (The error is part of the message, not a `source`, so that
    /// printing the chain does not repeat it.)
    #[error("{trace}/{policy}/{tenant}/seed {seed}: {error}")]
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
        error: SimError,
    },
    /// The caller asked the run to stop ([`Scenario::run_until`]) before every simulation ran.
    #[error("stopped before every simulation ran")]
    Stopped,
}

impl ScenarioError {
    /// The scenario key the error is about, where its message names one: a `--set` override's
    /// key, the key a parse error names (`... in `policy.horus``), or the key an invalid value's
    /// message starts with (`simulation.round_s must be > 0`, `policy `gittins` needs ...`).
    /// Front ends use it to tell a policy's problem from the scenario's.
    pub fn key(&self) -> Option<&str> {
        match self {
            ScenarioError::Override(message) => {
                let quoted = message.strip_prefix('`')?.split('`').next()?;
                Some(overrides::override_key(quoted).unwrap_or(quoted))
            }
            ScenarioError::Parse { message, .. } => key_in(message),
            ScenarioError::Invalid { message, .. } => {
                key_in(message).or_else(|| leading_key(message))
            }
            _ => None,
        }
    }
}

/// The key a TOML error names at its end: `... in `simulation.round_s``.
fn key_in(message: &str) -> Option<&str> {
    let start = message.rfind("in `")? + 4;
    message[start..].split('`').next()
}

/// The dotted key a message starts with (backquoted or not), if any.
fn leading_key(message: &str) -> Option<&str> {
    let text = message.strip_prefix('`').unwrap_or(message);
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
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
    /// This trace's own `[placement]` (the same keys), replacing the scenario's for its
    /// simulations: one workload listed under several names compares placement rules
    /// (`scenarios/philly-locality.toml`).
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    /// Which quota tree its simulations run under: a name of `[quota_trees]`, or `none`;
    /// absent: the scenario's `[[quota_groups]]` (if any). One workload listed under several
    /// names compares quota trees (`scenarios/philly-quotas.toml`).
    #[serde(default)]
    pub quotas: Option<String>,
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
    /// A heterogeneous cluster: GPUs per type (e.g. `{ k80 = 36, p100 = 36, v100 = 36 }`), on
    /// nodes of `gpus_per_node` GPUs each, all in one rack; replaces `racks`/`nodes_per_rack`
    /// and `gpu_type`.
    pub gpu_types: std::collections::BTreeMap<String, u32>,
    /// A Tiresias/Muri cluster-spec CSV (`num_switch,num_node_p_switch,num_gpu_p_node,
    /// num_cpu_p_node,mem_p_node`); replaces the sizes above.
    pub spec_file: Option<PathBuf>,
    /// A CSV with columns `vc,node num` (Helios' `philly_vc.csv`): simulate each listed tenant
    /// alone on that many nodes (in one rack), with the per-node sizes above. Tenants of the trace
    /// not listed are skipped.
    pub per_tenant_nodes: Option<PathBuf>,
    /// The nodes one by one (`[[cluster.nodes]]`), as a daemon's cluster is (`arbiter whatif`
    /// builds it from a daemon's configuration); replaces every other key of `[cluster]` but
    /// `cpus_per_node` and `memory_gib_per_node`, which a node without its own takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeEntry>,
}

/// One node, or `count` alike, of a cluster given node by node (`[[cluster.nodes]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// Its name (with `count` > 1: `NAME-0`, `NAME-1`, ...).
    pub name: String,
    /// The type of its GPUs (types are numbered by first appearance).
    pub gpu_type: String,
    /// GPUs.
    pub gpus: u32,
    /// CPU cores (default: `cluster.cpus_per_node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Memory, GiB (default: `cluster.memory_gib_per_node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<u32>,
    /// Rack (switch) name (racks are numbered by first appearance).
    #[serde(default = "default_rack")]
    pub rack: String,
    /// How many such nodes.
    #[serde(default = "one_node")]
    pub count: u32,
}

fn default_rack() -> String {
    "r0".into()
}

fn one_node() -> u32 {
    1
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
            gpu_types: std::collections::BTreeMap::new(),
            spec_file: None,
            per_tenant_nodes: None,
            nodes: Vec::new(),
        }
    }
}

impl ClusterSpec {
    /// `NODESxGPUS` (`8x8`): one rack of that many nodes with that many GPUs each, of type `GPU`,
    /// with the default CPUs and memory (`arbiter simulate --cluster`).
    pub fn nodes_x_gpus(text: &str) -> Result<ClusterSpec, String> {
        let (nodes, gpus) = text
            .split_once('x')
            .and_then(|(n, g)| Some((n.trim().parse::<u32>().ok()?, g.trim().parse::<u32>().ok()?)))
            .ok_or_else(|| format!("`{text}`: expected NODESxGPUS, e.g. 8x8"))?;
        Ok(ClusterSpec {
            racks: 1,
            nodes_per_rack: nodes,
            gpus_per_node: gpus,
            gpu_type: "GPU".into(),
            ..ClusterSpec::default()
        })
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

/// A trace ready to simulate.
#[derive(Clone, Debug)]
pub struct LoadedTrace {
    /// Name in results.
    pub name: String,
    /// The only seed it runs with (generated workloads), or `None` for every seed.
    pub seed: Option<u64>,
    /// The jobs.
    pub trace: Arc<Trace>,
    /// Its own placement settings, replacing the scenario's.
    pub placement: Option<PlacementSpec>,
    /// The quota tree its simulations run under.
    pub quotas: Option<Arc<Vec<arbiter_policy::quotas::QuotaGroup>>>,
}

/// Which generator a `[workload]` uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// Gavel's Philly-fitted generator (needs `throughputs`).
    #[default]
    Gavel,
    /// Synergy's generator (needs `profiles`).
    Synergy,
}

/// A generated workload: Gavel's Philly-fitted generator or Synergy's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Name used in results.
    #[serde(default = "default_workload_name")]
    pub name: String,
    /// Which generator.
    #[serde(default)]
    pub generator: Generator,
    /// Arrival rate, jobs per hour; 0: every job at t = 0.
    #[serde(default)]
    pub jobs_per_hour: Option<f64>,
    /// Jobs to generate.
    #[serde(default = "default_workload_jobs")]
    pub jobs: usize,
    /// Multi-GPU sizes (1/2/4/8 w.p. 0.70/0.10/0.15/0.05).
    #[serde(default)]
    pub multi_gpu: bool,
    /// Gavel: 20% of jobs get priority weight 5.
    #[serde(default)]
    pub priority_weights: bool,
    /// Gavel: SLO deadlines.
    #[serde(default)]
    pub slos: bool,
    /// Gavel: spread jobs over this many tenants.
    #[serde(default)]
    pub tenants: u32,
    /// Synergy: image / language / speech split, percent.
    #[serde(default = "default_class_split")]
    pub class_split: [f64; 3],
    /// Synergy: CPU cores per GPU the profiles are taken for (3, 4, 5, 6).
    #[serde(default = "default_cpu_gpu_ratio")]
    pub cpu_gpu_ratio: u32,
    /// Synergy: take GPU demands from this Philly trace (`philly.csv`) in turn instead of
    /// drawing them.
    #[serde(default)]
    pub gpu_demands_trace: Option<PathBuf>,
    /// Seeds: one job stream per seed, and the same seed drives the simulation; every policy
    /// sees the same stream for a seed. Defaults to the scenario's `seeds`.
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
}

fn default_workload_name() -> String {
    "generated".into()
}

fn default_workload_jobs() -> usize {
    1000
}

fn default_class_split() -> [f64; 3] {
    [20.0, 70.0, 10.0]
}

fn default_cpu_gpu_ratio() -> u32 {
    3
}

impl WorkloadSpec {
    /// Gavel's generator with these parameters.
    pub fn gavel(&self) -> GavelWorkload {
        GavelWorkload {
            jobs_per_hour: self.jobs_per_hour,
            jobs: self.jobs,
            multi_gpu: self.multi_gpu,
            priority_weights: self.priority_weights,
            slos: self.slos,
            tenants: self.tenants,
        }
    }

    /// Synergy's generator with these parameters.
    pub fn synergy(&self) -> SynergyWorkload {
        SynergyWorkload {
            jobs_per_hour: self.jobs_per_hour,
            jobs: self.jobs,
            multi_gpu: self.multi_gpu,
            class_split: self.class_split,
        }
    }
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
    /// Traces (or give a `[workload]` instead).
    #[serde(default)]
    pub trace: Vec<TraceSpec>,
    /// A generated workload, one job stream per seed (instead of traces).
    #[serde(default)]
    pub workload: Option<WorkloadSpec>,
    /// Per-GPU-type throughputs that give each job its speed on each GPU type of the cluster
    /// (jobs are matched by their model / job type and GPU count).
    #[serde(default)]
    pub throughputs: Option<PathBuf>,
    /// Synergy's model profiles (`models.json`): CPU/memory sensitivity per model.
    #[serde(default)]
    pub profiles: Option<PathBuf>,
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
    /// Priority classes (`[[priority_classes]]`): a higher class is served first and may
    /// preempt a lower, preemptible one; the policy orders jobs within a class. None: every job
    /// is in one class, as without.
    #[serde(default)]
    pub priority_classes: Vec<classes::ClassSpec>,
    /// The quota tree (`[[quota_groups]]`, as the daemon's): tenants under nested groups with
    /// guaranteed quotas, borrowing and lending limits per GPU type. None: no quotas.
    #[serde(default)]
    pub quota_groups: Vec<arbiter_policy::quotas::QuotaGroup>,
    /// Named quota trees a trace may pick (`quotas = "<name>"`), to compare trees side by side.
    #[serde(default)]
    pub quota_trees: std::collections::BTreeMap<String, Vec<arbiter_policy::quotas::QuotaGroup>>,
    /// Published numbers to print beside ours.
    #[serde(default)]
    pub published: Vec<Published>,
    /// On a shared cluster, also a row per tenant over its own jobs (its `util` is its share
    /// of the cluster's GPU time): how a tenant-fairness policy treated each one.
    #[serde(default)]
    pub tenant_rows: bool,
    /// Folder the file was read from (relative paths resolve against it).
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file itself.
    #[serde(skip)]
    pub file: PathBuf,
    /// What `--set` overrides changed in the simulated input, against the file alone: published
    /// numbers for a changed input are not comparable.
    #[serde(skip)]
    pub input_changes: InputChanges,
}

/// Top-level keys a `--set` may change without changing any simulated input.
const PRESENTATION_KEYS: [&str; 5] = [
    "name",
    "description",
    "policies",
    "published",
    "tenant_rows",
];

/// What `--set` overrides changed in the simulated input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InputChanges {
    /// The overrides of input keys (anything but `name`, `description`, `policies`, `published`),
    /// as given.
    pub overrides: Vec<String>,
    /// Something every trace shares changed (cluster, simulation, placement, policy, window,
    /// seeds, throughputs, profiles, workload), or the file alone could not be compared.
    pub all: bool,
    /// Traces (by result name) whose own entry changed or that the file does not have.
    pub traces: std::collections::BTreeSet<String>,
}

impl InputChanges {
    /// Why results for `trace` are not comparable with numbers taken on the file's input, or
    /// `None` if they are.
    pub fn not_comparable(&self, trace: &str) -> Option<String> {
        if !(self.all || self.traces.contains(trace)) {
            return None;
        }
        let sets: Vec<String> = self
            .overrides
            .iter()
            .map(|o| format!("--set {o}"))
            .collect();
        Some(format!("{} changed the input", sets.join(", ")))
    }

    /// Compares the scenario as overridden with the file alone (`None` if that does not load).
    fn between(base: Option<&Scenario>, scenario: &Scenario, overrides: &[String]) -> Self {
        let overrides: Vec<String> = overrides
            .iter()
            .filter(|o| {
                let top = overrides::override_key(o)
                    .and_then(|k| k.split('.').next())
                    .unwrap_or("");
                !PRESENTATION_KEYS.contains(&top)
            })
            .cloned()
            .collect();
        if overrides.is_empty() {
            return InputChanges::default();
        }
        let Some(base) = base else {
            return InputChanges {
                overrides,
                all: true,
                traces: Default::default(),
            };
        };
        let all = (
            &base.workload,
            &base.throughputs,
            &base.profiles,
            &base.cluster,
            &base.seeds,
        ) != (
            &scenario.workload,
            &scenario.throughputs,
            &scenario.profiles,
            &scenario.cluster,
            &scenario.seeds,
        ) || (
            &base.simulation,
            &base.placement,
            &base.policy,
            &base.window,
        ) != (
            &scenario.simulation,
            &scenario.placement,
            &scenario.policy,
            &scenario.window,
        );
        let traces = scenario
            .trace
            .iter()
            .filter(|t| !base.trace.iter().any(|b| b == *t))
            .map(TraceSpec::result_name)
            .collect();
        InputChanges {
            overrides,
            all,
            traces,
        }
    }
}

impl TraceSpec {
    /// The trace's name in results: `name`, or the file stem.
    pub fn result_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into())
        })
    }
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

impl Scenario {
    /// Reads a scenario file and applies overrides.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path, overrides)
    }

    /// Parses scenario text as if read from `path`. An error that a `--set` override causes is
    /// reported as coming from that override, not from the file.
    pub fn parse(text: &str, path: &Path, overrides: &[String]) -> Result<Self, ScenarioError> {
        let doc: toml::Table = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let error = match Self::build(&doc, path, overrides) {
            Ok(mut scenario) => {
                if !overrides.is_empty() {
                    let base = Self::build(&doc, path, &[]).ok();
                    scenario.input_changes =
                        InputChanges::between(base.as_ref(), &scenario, overrides);
                }
                return Ok(scenario);
            }
            Err(e @ ScenarioError::Override(_)) => return Err(e),
            Err(ScenarioError::Parse { message, .. }) if overrides.is_empty() => {
                // A value of the wrong type: read from the text again, whose error says the
                // line and column (the parsed table has no positions); the key stays named.
                let at_line = toml::from_str::<Scenario>(text).err();
                return Err(ScenarioError::Parse {
                    path: path.to_path_buf(),
                    message: match (at_line, key_in(&message)) {
                        (Some(e), Some(key)) => {
                            format!("{}\nin `{key}`", e.to_string().trim_end())
                        }
                        (Some(e), None) => e.to_string().trim_end().to_string(),
                        (None, _) => message,
                    },
                });
            }
            Err(e) => e,
        };
        Err(Self::blame_override(&doc, path, overrides, error))
    }

    /// The scenario from a parsed file plus overrides, checked.
    fn build(doc: &toml::Table, path: &Path, overrides: &[String]) -> Result<Self, ScenarioError> {
        let mut root = toml::Value::Table(doc.clone());
        for o in overrides {
            apply_override(&mut root, o)?;
        }
        let mut scenario: Scenario =
            root.try_into()
                .map_err(|e: toml::de::Error| ScenarioError::Parse {
                    path: path.to_path_buf(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        scenario.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        scenario.file = path.to_path_buf();
        scenario.check()?;
        Ok(scenario)
    }

    /// Finds the override behind `error` (the file with all overrides failed): the first one
    /// that breaks a file that is fine on its own, or else the one naming the key the error is
    /// about. Returns `error` unchanged when no override is to blame.
    fn blame_override(
        doc: &toml::Table,
        path: &Path,
        overrides: &[String],
        error: ScenarioError,
    ) -> ScenarioError {
        let message = |e: &ScenarioError| match e {
            ScenarioError::Parse { message, .. } | ScenarioError::Invalid { message, .. } => {
                Some(message.clone())
            }
            _ => None,
        };
        let culprit = if overrides.is_empty() {
            None
        } else if Self::build(doc, path, &[]).is_ok() {
            (1..=overrides.len()).find_map(|k| {
                Self::build(doc, path, &overrides[..k])
                    .err()
                    .map(|e| (&overrides[k - 1], message(&e)))
            })
        } else {
            // The file alone is broken too: blame an override only if the error names its key.
            let about = message(&error)
                .as_deref()
                .and_then(key_in)
                .map(str::to_string);
            about
                .and_then(|about| {
                    overrides.iter().rev().find(|o| {
                        let key: Vec<&str> = overrides::override_key(o)
                            .unwrap_or("")
                            .split('.')
                            .filter(|part| part.parse::<usize>().is_err())
                            .collect();
                        let key = key.join(".");
                        about == key || about.starts_with(&format!("{key}."))
                    })
                })
                .map(|o| (o, message(&error)))
        };
        match culprit {
            Some((assignment, Some(text))) => {
                let text = text.trim().replace("\nin `", " in `").replace('\n', " ");
                ScenarioError::Override(format!(
                    "`{assignment}`: {text}{}",
                    sequence_hint(assignment, &text)
                ))
            }
            _ => error,
        }
    }

    fn invalid(&self, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.file.clone(),
            message,
        }
    }

    fn check(&self) -> Result<(), ScenarioError> {
        match (self.trace.is_empty(), &self.workload) {
            (true, None) => {
                return Err(self.invalid("give [[trace]] entries or a [workload]".into()));
            }
            (false, Some(_)) => {
                return Err(
                    self.invalid("give either [[trace]] entries or a [workload], not both".into())
                );
            }
            (true, Some(w)) if w.generator == Generator::Gavel && self.throughputs.is_none() => {
                return Err(self.invalid(
                    "a Gavel [workload] needs `throughputs` (Gavel's simulation_throughputs.json)"
                        .into(),
                ));
            }
            (true, Some(w)) if w.generator == Generator::Synergy && self.profiles.is_none() => {
                return Err(self.invalid(
                    "a Synergy [workload] needs `profiles` (Synergy's models.json)".into(),
                ));
            }
            _ => {}
        }
        if self.policies.is_empty() {
            return Err(self.invalid("`policies` is empty".into()));
        }
        if self.seeds.is_empty() {
            return Err(self.invalid("`seeds` is empty".into()));
        }
        self.simulation
            .validate()
            .map_err(|m| self.invalid(format!("simulation.{m}")))?;
        self.placement
            .strategy()
            .map_err(|m| self.invalid(format!("placement.{m}")))?;
        for t in &self.trace {
            if let Some(p) = &t.placement {
                p.strategy().map_err(|m| {
                    self.invalid(format!("trace `{}`: placement.{m}", t.result_name()))
                })?;
            }
        }
        classes::check(&self.priority_classes).map_err(|m| self.invalid(m))?;
        for t in &self.trace {
            self.quota_groups_for(t.quotas.as_deref())
                .map_err(|m| self.invalid(format!("trace `{}`: {m}", t.result_name())))?;
        }
        // Each tree's shape now, naming the table; its GPU types and totals against each
        // trace's cluster when that is built.
        arbiter_policy::quotas::QuotaTree::check_shape(&self.quota_groups)
            .map_err(|m| self.invalid(format!("[[quota_groups]]: {m}")))?;
        for (name, groups) in &self.quota_trees {
            arbiter_policy::quotas::QuotaTree::check_shape(groups)
                .map_err(|m| self.invalid(format!("[[quota_trees.{name}]]: {m}")))?;
        }
        // The table itself was checked as it was read; each policy's overrides are checked here.
        for &kind in self.policy.per_policy.keys() {
            self.policy.config_for(kind).map_err(|m| self.invalid(m))?;
        }
        Ok(())
    }

    /// The quota tree a trace with `quotas` runs under (none: no quotas).
    pub fn quota_groups_for(
        &self,
        quotas: Option<&str>,
    ) -> Result<Option<Arc<Vec<arbiter_policy::quotas::QuotaGroup>>>, String> {
        match quotas {
            None if self.quota_groups.is_empty() => Ok(None),
            None => Ok(Some(Arc::new(self.quota_groups.clone()))),
            Some("none") => Ok(None),
            Some(name) => match self.quota_trees.get(name) {
                Some(groups) => Ok(Some(Arc::new(groups.clone()))),
                None => {
                    let known: Vec<&str> = self.quota_trees.keys().map(String::as_str).collect();
                    Err(format!(
                        "quotas = `{name}` names no [quota_trees.{name}] (defined: {})",
                        if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(", ")
                        }
                    ))
                }
            },
        }
    }

    /// Resolves a path relative to the scenario file.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// `read` of the file `key` names (`given`, resolved against the scenario file's folder); a
    /// file that cannot be opened there is refused saying where the path led and why there.
    fn read_resolved<T>(
        &self,
        key: &str,
        given: &Path,
        read: impl FnOnce(&Path) -> Result<T, TraceError>,
    ) -> Result<T, ScenarioError> {
        let resolved = self.resolve(given);
        read(&resolved).map_err(|e| match e {
            TraceError::Io { path, source } if path == resolved => {
                let base = if self.base_dir.as_os_str().is_empty() { Path::new(".") } else { self.base_dir.as_path() };
                let hint = if given.is_absolute() { String::new() } else { format!(" (a relative path resolves against the scenario file's folder, {}, not the current directory)", base.display()) };
                let message = format!("{}: cannot read {key} `{}` at {}{hint}", self.file.display(), given.display(), resolved.display());
                ScenarioError::Resolved { message, source }
            }
            other => other.into(),
        })
    }

    /// The policy configuration `kind` runs with: the `[policy]` table with `kind`'s overrides,
    /// the scenario's placement and round length, the Gittins prior's samples read.
    pub fn policy_config_for(&self, kind: PolicyKind) -> Result<PolicyConfig, ScenarioError> {
        let mut config = self.policy.config_for(kind).map_err(|m| self.invalid(m))?;
        config.placement = self
            .placement
            .strategy()
            .map_err(|m| self.invalid(format!("placement.{m}")))?;
        config.keep_placements = self.placement.keep_placements;
        if let Some(round_s) = self.simulation.round_s {
            config.rounds.round_s = round_s;
        }
        if let Some(prior) = &config.gittins.prior {
            config.gittins_prior_gpu_s = self.read_resolved(
                "policy.gittins.prior",
                prior,
                arbiter_trace::tiresias::read_gpu_time_prior,
            )?;
        } else if kind == PolicyKind::Gittins && config.gittins_prior_gpu_s.is_empty() {
            // (A caller may give the samples in memory: `policy.config.gittins_prior_gpu_s`.)
            return Err(self.invalid("policy `gittins` needs a prior: [policy.gittins] prior = \"a CSV of GPU-time samples\"".into()));
        }
        Ok(config)
    }

    /// The throughput table named by `throughputs`, if any.
    pub fn throughput_table(&self) -> Result<Option<ThroughputTable>, ScenarioError> {
        self.throughputs
            .as_ref()
            .map(|p| self.read_resolved("throughputs", p, ThroughputTable::read))
            .transpose()
    }

    /// Seeds the simulations run with.
    pub fn run_seeds(&self) -> &[u64] {
        self.workload
            .as_ref()
            .and_then(|w| w.seeds.as_deref())
            .unwrap_or(&self.seeds)
    }

    /// Loads and filters every trace, or generates the workload, where a generated stream belongs
    /// to one seed and a trace file to every seed.
    pub fn load_traces(
        &self,
        table: Option<&ThroughputTable>,
    ) -> Result<Vec<LoadedTrace>, ScenarioError> {
        let mut out = Vec::new();
        if let Some(workload) = &self.workload {
            let profiles = match workload.generator {
                Generator::Synergy => {
                    let path = self.profiles.as_ref().ok_or_else(|| {
                        self.invalid("a Synergy [workload] needs `profiles`".into())
                    })?;
                    Some(self.read_resolved("profiles", path, |p| {
                        SynergyProfiles::read(p, workload.cpu_gpu_ratio)
                    })?)
                }
                Generator::Gavel => None,
            };
            let demands = match &workload.gpu_demands_trace {
                Some(path) => {
                    let trace = self.read_resolved("workload.gpu_demands_trace", path, |p| {
                        arbiter_trace::read(p, TraceFormat::Philly, &ReadOptions::default())
                    })?;
                    Some(arbiter_trace::synergy::philly_gpu_demands(&trace))
                }
                None => None,
            };
            for &seed in self.run_seeds() {
                let trace = match (&profiles, workload.generator) {
                    (Some(profiles), _) => {
                        workload
                            .synergy()
                            .generate_with_demands(profiles, seed, demands.as_deref())
                    }
                    (None, _) => {
                        let table = table.ok_or_else(|| {
                            self.invalid("a Gavel [workload] needs `throughputs`".into())
                        })?;
                        workload.gavel().generate(table, seed)
                    }
                }
                .map_err(|m| self.invalid(format!("workload: {m}")))?;
                let trace = self.with_classes(trace, &workload.name)?;
                let quotas = self.quota_groups_for(None).map_err(|m| self.invalid(m))?;
                out.push(LoadedTrace {
                    name: workload.name.clone(),
                    seed: Some(seed),
                    trace: Arc::new(trace),
                    placement: None,
                    quotas,
                });
            }
            return Ok(out);
        }
        for (i, spec) in self.trace.iter().enumerate() {
            let path = self.resolve(&spec.path);
            let mut read = spec.read.clone();
            read.profiles = read.profiles.map(|p| self.resolve(&p));
            let mut trace = self.read_resolved(&format!("trace.{i}.path"), &spec.path, |p| {
                arbiter_trace::read(p, spec.format, &read)
            })?;
            let from = spec
                .submit_from
                .as_deref()
                .map(|s| parse_when(s, false))
                .transpose()
                .map_err(|m| self.invalid(m))?;
            let until = spec
                .submit_until
                .as_deref()
                .map(|s| parse_when(s, true))
                .transpose()
                .map_err(|m| self.invalid(m))?;
            if (from.is_some() || until.is_some()) && trace.origin_unix_s.is_none() {
                return Err(self.invalid(format!(
                    "{}: submit_from/submit_until need a trace with timestamps",
                    path.display()
                )));
            }
            if from.is_some() || until.is_some() || spec.tenants.is_some() {
                let origin = trace.origin_unix_s.unwrap_or(0);
                trace = trace.filter(|j| {
                    let t = origin + (j.submit.as_ms() / 1000) as i64;
                    from.is_none_or(|f| t >= f)
                        && until.is_none_or(|u| t < u)
                        && spec
                            .tenants
                            .as_ref()
                            .is_none_or(|ts| ts.iter().any(|t| *t == j.tenant))
                });
            }
            if let Some(max) = spec.max_jobs {
                let origin = trace.origin_unix_s;
                let mut jobs = trace.jobs;
                jobs.truncate(max);
                trace = Trace::from_jobs(jobs, origin);
            }
            let name = spec.result_name();
            let trace = self.with_classes(trace, &name)?;
            let quotas = self
                .quota_groups_for(spec.quotas.as_deref())
                .map_err(|m| self.invalid(format!("trace `{name}`: {m}")))?;
            out.push(LoadedTrace {
                name,
                seed: None,
                trace: Arc::new(trace),
                placement: spec.placement.clone(),
                quotas,
            });
        }
        Ok(out)
    }

    /// `trace` (named `name` in errors) with its jobs' priority classes (see [`classes::assign`]).
    fn with_classes(&self, trace: Trace, name: &str) -> Result<Trace, ScenarioError> {
        if self.priority_classes.is_empty() && trace.jobs.iter().all(|j| j.class.name.is_none()) {
            return Ok(trace);
        }
        let origin = trace.origin_unix_s;
        let mut jobs = trace.jobs;
        classes::assign(
            &self.priority_classes,
            &mut jobs,
            &format!("trace `{name}`"),
        )
        .map_err(|m| self.invalid(m))?;
        Ok(Trace::from_jobs(jobs, origin))
    }

    /// Gives every job its speed on each GPU type of `cluster` from the throughput table,
    /// relative to its V100 speed (run times are V100 times). Jobs need a model / job type the
    /// table knows.
    pub fn bind_speeds(
        &self,
        trace: &mut Trace,
        cluster: &Cluster,
        table: &ThroughputTable,
    ) -> Result<(), ScenarioError> {
        for job in &mut trace.jobs {
            let Some(model) = job.model.as_deref() else {
                return Err(self.invalid(format!(
                    "{} (trace id {}) has no job type to look up throughputs for",
                    job.id, job.trace_id
                )));
            };
            let speeds = [job.gpus, 8, 4, 2, 1]
                .into_iter()
                .filter(|g| *g <= job.gpus)
                .find_map(|g| {
                    table.relative_speeds(
                        model,
                        g,
                        &cluster.gpu_type_names,
                        arbiter_trace::generator::REFERENCE_GPU,
                    )
                })
                .ok_or_else(|| {
                    self.invalid(format!(
                        "{}: job type `{model}` on {} GPUs has no V100 throughput",
                        job.id, job.gpus
                    ))
                })?;
            job.speed_by_gpu_type = speeds;
        }
        Ok(())
    }

    fn heterogeneous_cluster(&self) -> Result<Cluster, ScenarioError> {
        let c = &self.cluster;
        if c.gpus_per_node == 0 {
            return Err(self.invalid("cluster.gpus_per_node must be >= 1".into()));
        }
        let names: Vec<String> = c.gpu_types.keys().cloned().collect();
        let mut nodes = Vec::new();
        for (t, (name, &gpus)) in c.gpu_types.iter().enumerate() {
            if gpus % c.gpus_per_node != 0 {
                return Err(self.invalid(format!(
                    "cluster.gpu_types.{name}: {gpus} GPUs is not a multiple of gpus_per_node {}",
                    c.gpus_per_node
                )));
            }
            for _ in 0..gpus / c.gpus_per_node {
                let id = arbiter_model::NodeId(nodes.len() as u32);
                nodes.push(arbiter_model::Node {
                    id,
                    name: format!("{name}-{}", id.0),
                    rack: arbiter_model::RackId(0),
                    gpu_type: arbiter_model::GpuTypeId(t as u8),
                    gpus: c.gpus_per_node,
                    cpus: c.cpus_per_node,
                    memory_gib: c.memory_gib_per_node,
                });
            }
        }
        Cluster::new(names, nodes).map_err(|e| self.invalid(format!("cluster: {e}")))
    }

    /// The cluster of `[[cluster.nodes]]`: GPU types and racks numbered by first appearance,
    /// nodes in order.
    fn listed_cluster(&self) -> Result<Cluster, ScenarioError> {
        let c = &self.cluster;
        let mut types: Vec<String> = Vec::new();
        let mut racks: Vec<String> = Vec::new();
        let mut nodes = Vec::new();
        let index_of =
            |list: &mut Vec<String>, name: &str| match list.iter().position(|t| t == name) {
                Some(i) => i,
                None => {
                    list.push(name.to_string());
                    list.len() - 1
                }
            };
        for (i, entry) in c.nodes.iter().enumerate() {
            if entry.gpus == 0 || entry.count == 0 {
                return Err(self.invalid(format!(
                    "cluster.nodes.{i}: a node has at least one GPU, and count at least 1"
                )));
            }
            let gpu_type = index_of(&mut types, &entry.gpu_type);
            let rack = index_of(&mut racks, &entry.rack);
            for k in 0..entry.count {
                let id = arbiter_model::NodeId(nodes.len() as u32);
                nodes.push(arbiter_model::Node {
                    id,
                    name: if entry.count == 1 {
                        entry.name.clone()
                    } else {
                        format!("{}-{k}", entry.name)
                    },
                    rack: arbiter_model::RackId(rack as u32),
                    gpu_type: arbiter_model::GpuTypeId(u8::try_from(gpu_type).map_err(|_| {
                        self.invalid("cluster.nodes: more than 256 GPU types".into())
                    })?),
                    gpus: entry.gpus,
                    cpus: entry.cpus.unwrap_or(c.cpus_per_node),
                    memory_gib: entry.memory_gib.unwrap_or(c.memory_gib_per_node),
                });
            }
        }
        Cluster::new(types, nodes).map_err(|e| self.invalid(format!("cluster.nodes: {e}")))
    }

    /// `(tenant, cluster)` pairs to run a trace on: `("all", the cluster)` or one per tenant.
    pub fn clusters_for(&self, trace: &Trace) -> Result<Vec<(String, Cluster)>, ScenarioError> {
        let c = &self.cluster;
        if !c.nodes.is_empty() {
            if !c.gpu_types.is_empty() || c.spec_file.is_some() || c.per_tenant_nodes.is_some() {
                return Err(self.invalid(
                    "cluster.nodes excludes gpu_types, spec_file and per_tenant_nodes".into(),
                ));
            }
            return Ok(vec![("all".into(), self.listed_cluster()?)]);
        }
        let make = |nodes: u32, racks: u32| {
            Cluster::homogeneous(
                racks,
                nodes,
                c.gpus_per_node,
                c.cpus_per_node,
                c.memory_gib_per_node,
                &c.gpu_type,
            )
            .map_err(|e| self.invalid(format!("cluster: {e}")))
        };
        if let (Some(_), Some(_)) = (&c.spec_file, &c.per_tenant_nodes) {
            return Err(self.invalid(
                "cluster.spec_file and cluster.per_tenant_nodes exclude each other".into(),
            ));
        }
        if !c.gpu_types.is_empty() {
            if c.spec_file.is_some() || c.per_tenant_nodes.is_some() {
                return Err(self
                    .invalid("cluster.gpu_types excludes spec_file and per_tenant_nodes".into()));
            }
            return Ok(vec![("all".into(), self.heterogeneous_cluster()?)]);
        }
        if let Some(file) = &c.spec_file {
            return Ok(vec![(
                "all".into(),
                self.read_resolved("cluster.spec_file", file, |p| {
                    arbiter_trace::cluster_spec::read(p, &c.gpu_type)
                })?,
            )]);
        }
        match &c.per_tenant_nodes {
            None => Ok(vec![("all".into(), make(c.nodes_per_rack, c.racks)?)]),
            Some(file) => {
                let sizes = self.read_resolved(
                    "cluster.per_tenant_nodes",
                    file,
                    arbiter_trace::philly::read_vc_sizes,
                )?;
                let present = trace.tenants();
                sizes
                    .into_iter()
                    .filter(|(t, _)| present.contains(t))
                    .map(|(t, nodes)| Ok((t, make(nodes, 1)?)))
                    .collect()
            }
        }
    }
}

/// A hint for a bare word given where a list is expected (`--set policies=las`).
fn sequence_hint(assignment: &str, message: &str) -> String {
    let Some((key, raw)) = assignment.split_once('=') else {
        return String::new();
    };
    let raw = raw.trim();
    if !message.contains("expected a sequence")
        || raw.starts_with(['[', '"', '\''])
        || raw.is_empty()
    {
        return String::new();
    }
    let items: Vec<String> = raw
        .split(',')
        .map(|item| format!("{:?}", item.trim()))
        .collect();
    format!(
        "; did you mean --set '{}=[{}]'?",
        key.trim(),
        items.join(", ")
    )
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

#[cfg(test)]
mod tests;
