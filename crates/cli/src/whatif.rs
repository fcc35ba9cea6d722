//! `arbiter whatif`: "what would this policy have done to last month's jobs?" A daemon's history
//! (`arbiter history export`: each job's submission, size and measured run time, and when it
//! really started and ended) is replayed in the simulator on the cluster of a daemon
//! configuration under a policy, and the replay is set beside what happened: JCT, queueing
//! delay by tenant and by job size, utilization.
//!
//! The configuration becomes a scenario in one place, [`scenario_of_config`]; the simulation is
//! the scenario runner's (`Scenario::run_traces`), so `arbiter whatif --scenario FILE` (a
//! scenario whose `[[trace]]` is the history, `format = "native"`) compares the same way.
//! The simulator never sees what happened: the actual times are read beside the jobs
//! ([`arbiter_trace::native::read_history`]) and only compared afterwards.

use crate::table::{Align, render, secs};
use anyhow::{Context, Result, anyhow, bail};
use arbiter_daemon::config::{ExecutorKind, ServeConfig};
use arbiter_daemon::records::topology::{NodeSpec, Topology};
use arbiter_model::JobSpec;
use arbiter_policy::PolicyKind;
use arbiter_sim::StopFlag;
use arbiter_sim::metrics::{JobOutcome, JobRecord, percentile};
use arbiter_sim::scenario::{LoadedTrace, ResultRow, Scenario};
use arbiter_trace::TraceFormat;
use arbiter_trace::analysis::SIZE_CLASSES;
use arbiter_trace::native::Recorded;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `arbiter whatif` (see `--help`).
#[derive(clap::Args, Debug)]
pub struct WhatifArgs {
    /// The history: `arbiter history export --since 30d --out hist.csv` on the daemon (a native
    /// trace with each job's actual start and end).
    #[arg(required_unless_present = "scenario")]
    pub history: Option<PathBuf>,
    /// The policy to replay under (`arbiter policies` lists them); default: the configuration's
    /// own `policy`, which shows how closely the simulator reproduces your daemon.
    #[arg(long)]
    pub policy: Option<PolicyKind>,
    /// The daemon's configuration (`arbiter serve --config`): its cluster (`gpus`, `cpus`,
    /// `memory_gib`, or with `executor = "slurm"` the partition's nodes by `sinfo`),
    /// `round_s`, priority classes and fair share. Default: the daemon's defaults (`gpus =
    /// "auto"`: this machine's GPUs by nvidia-smi), said in the output.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The daemon's quota tree, as `arbiter quota export > quotas.toml` writes it
    /// (`[[quota_groups]]`): the replay enforces it as the daemon does.
    #[arg(long, value_name = "FILE")]
    pub quotas: Option<PathBuf>,
    /// Replay on NODES nodes of GPUS GPUs each (`4x8`) instead of the configuration's cluster,
    /// of its GPU type where all its GPUs have one (else type `gpu`).
    #[arg(long, value_name = "NODESxGPUS")]
    pub cluster: Option<String>,
    /// Replay a scenario instead, whose `[[trace]]` entries are histories (`format = "native"`,
    /// `path = "hist.csv"`): every policy of its `policies`, on its cluster, each compared.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["history", "policy", "config", "cluster", "quotas"])]
    pub scenario: Option<PathBuf>,
    /// Change a key of the scenario the configuration becomes (or of --scenario's), as `arbiter
    /// run --set` does: `--set simulation.restart_overhead_s=30`, `--set
    /// 'policy.tenant_weights={ team-a = 2.0 }'`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Also write each job's actual and simulated start and end (CSV) here.
    #[arg(long, value_name = "FILE")]
    pub jobs_csv: Option<PathBuf>,
    /// Also write a report into this folder: index.html (self-contained) with the tables and
    /// the JCT and queueing-delay CDFs, actual against simulated; figures as SVG and PNG.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// One job: what happened, and what the simulation did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobPair {
    /// Its id in the history (the daemon's job id).
    pub trace_id: String,
    /// Tenant.
    pub tenant: String,
    /// GPUs.
    pub gpus: u32,
    /// Submission, seconds from the history's start.
    pub submit_s: f64,
    /// Seconds it held GPUs (the history's measured run time).
    pub run_time_s: f64,
    /// First start, as it happened.
    pub actual_start_s: Option<f64>,
    /// End, as it happened (`None`: not ended when exported).
    pub actual_end_s: Option<f64>,
    /// First start in the simulation.
    pub simulated_start_s: Option<f64>,
    /// End in the simulation (`None`: unfinished there).
    pub simulated_end_s: Option<f64>,
    /// GPU-seconds it kept busy in the simulation.
    #[serde(skip)]
    pub simulated_busy_gpu_s: f64,
    /// How it ended in the simulation.
    #[serde(skip)]
    pub simulated_outcome: JobOutcome,
}

impl JobPair {
    /// Whether both sides have its start and end.
    fn comparable(&self) -> bool {
        self.actual_start_s.is_some()
            && self.actual_end_s.is_some()
            && self.simulated_start_s.is_some()
            && self.simulated_end_s.is_some()
    }
}

/// JCT and queueing delay of one side, over the jobs compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Mean JCT (end − submission), seconds.
    pub avg_jct_s: f64,
    /// Median JCT.
    pub p50_jct_s: f64,
    /// 95th percentile JCT.
    pub p95_jct_s: f64,
    /// Mean queueing delay (first start − submission).
    pub avg_queue_s: f64,
    /// Median queueing delay.
    pub p50_queue_s: f64,
    /// 95th percentile queueing delay.
    pub p95_queue_s: f64,
    /// From the first submission to the last end.
    pub makespan_s: f64,
    /// The compared jobs' GPU-seconds over the cluster's GPUs × the makespan.
    pub gpu_utilization: f64,
}

/// One group of jobs (a tenant, a size) on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The tenant, or the size (`1`, `2-4`, `5-8`, `>8` GPUs).
    pub name: String,
    /// Jobs compared.
    pub jobs: usize,
    /// Mean queueing delay as it happened, seconds.
    pub actual_avg_queue_s: f64,
    /// ... in the simulation.
    pub simulated_avg_queue_s: f64,
    /// Mean JCT as it happened, seconds.
    pub actual_avg_jct_s: f64,
    /// ... in the simulation.
    pub simulated_avg_jct_s: f64,
}

/// Jobs of the history left out of the comparison, by why.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Left {
    /// Running (or waiting again after a preemption) when exported: no actual end yet.
    pub not_ended_at_export: usize,
    /// The daemon no longer knew its first start (its history was cut).
    pub start_unknown: usize,
    /// Unfinished in the simulation (still waiting or running when nothing else could happen).
    pub unfinished_in_simulation: usize,
    /// Never placeable on this cluster (more GPUs than it has of a type the job may use).
    pub unplaceable_in_simulation: usize,
    /// Its dependencies could never hold in the simulation (a job it named is not in the
    /// history, is itself, or waits on it in turn; or the job it needed failed).
    pub dependency_never_satisfied: usize,
}

/// A whole comparison: one history replayed under one policy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The history (the file's name, or the scenario's trace name).
    pub trace: String,
    /// The policy replayed.
    pub policy: String,
    /// The seed.
    pub seed: u64,
    /// The cluster, in words, and where it came from.
    pub cluster: String,
    /// GPUs of that cluster.
    pub capacity_gpus: u32,
    /// Jobs in the history.
    pub jobs: usize,
    /// Jobs compared: ended in the history and in the simulation.
    pub compared: usize,
    /// The others, by why.
    pub left_out: Left,
    /// As it happened.
    pub actual: Side,
    /// As simulated.
    pub simulated: Side,
    /// By tenant, in name order.
    pub by_tenant: Vec<Group>,
    /// By size, smallest first (sizes without a job left out).
    pub by_size: Vec<Group>,
    /// Each job (`--jobs-csv` writes them; not in `--json`).
    #[serde(skip)]
    pub pairs: Vec<JobPair>,
}

/// The nodes a daemon with `config` would schedule on, as `arbiter serve` finds them, with
/// where they came from in words (`source` names the configuration). The local executor: this
/// machine as declared (`gpus = "4xa100"`) or found (`auto`: nvidia-smi; `cpus`/`memory_gib` 0:
/// this machine's); Slurm: the partition's nodes by `sinfo`.
pub fn nodes_of_config(config: &ServeConfig, source: &str) -> Result<(Vec<NodeSpec>, String)> {
    use arbiter_daemon::config;
    if config.executor == ExecutorKind::Slurm {
        let cli = arbiter_daemon::executor::slurm::cli::SlurmCli {
            partition: config.slurm.partition.clone(),
            bin_dir: config.slurm.bin_dir.clone(),
            timeout: std::time::Duration::from_secs_f64(config.slurm.command_timeout_s),
        };
        let nodes = arbiter_daemon::executor::slurm::nodes_of(&cli).map_err(|e| {
            anyhow!("{source}: executor = \"slurm\": the cluster is partition {}'s nodes, which sinfo could not list here ({e}); run where Slurm answers, or give --cluster NODESxGPUS", config.slurm.partition)
        })?;
        let described = describe(&nodes);
        return Ok((
            nodes,
            format!(
                "{described} (Slurm partition {} by sinfo, {source})",
                config.slurm.partition
            ),
        ));
    }
    let (gpus, how) = match config::parse_gpus(&config.gpus)
        .map_err(|e| anyhow!("{source}: {e}"))?
    {
        Some(declared) => (declared, format!("gpus = \"{}\"", config.gpus)),
        None => {
            let found = config::detect_gpus();
            if found.is_empty() {
                bail!(
                    "{source}: gpus = \"auto\", and nvidia-smi finds no GPU on this machine: give the configuration of the daemon whose history this is (--config arbiter.toml, with gpus = \"8xa100\"), or --cluster NODESxGPUS"
                );
            }
            (
                found,
                "gpus = \"auto\": this machine's, by nvidia-smi".to_string(),
            )
        }
    };
    let (host_cpus, host_memory) = config::detect_host();
    let cpus = if config.cpus > 0 {
        config.cpus
    } else {
        host_cpus
    };
    let memory_gib = if config.memory_gib > 0 {
        config.memory_gib
    } else {
        host_memory
    };
    let nodes = Topology::machine("machine", &gpus, cpus, memory_gib);
    Topology::new(nodes.clone()).map_err(|e| anyhow!("{source}: {e}"))?;
    let described = describe(&nodes);
    Ok((nodes, format!("{described} ({how}, {source})")))
}

/// `NODESxGPUS` (`--cluster`) as nodes `n0`, `n1`, ... of GPU type `gpu_type`, with the
/// scenario's default CPUs and memory per node.
pub fn nodes_x_gpus(text: &str, gpu_type: &str) -> Result<(Vec<NodeSpec>, String)> {
    let spec = arbiter_sim::scenario::ClusterSpec::nodes_x_gpus(text)
        .map_err(|m| anyhow!("--cluster {m}"))?;
    if spec.nodes_per_rack == 0 || spec.gpus_per_node == 0 {
        bail!("--cluster `{text}`: at least one node of at least one GPU");
    }
    let nodes: Vec<NodeSpec> = (0..spec.nodes_per_rack)
        .map(|i| NodeSpec {
            name: format!("n{i}"),
            gpu_type: gpu_type.into(),
            devices: (0..spec.gpus_per_node).collect(),
            cpus: spec.cpus_per_node,
            memory_gib: spec.memory_gib_per_node,
            rack: "r0".into(),
        })
        .collect();
    let described = describe(&nodes);
    Ok((nodes, format!("{described} (--cluster {text})")))
}

/// The GPU type every node has, if they share one.
fn one_gpu_type(nodes: &[NodeSpec]) -> Option<String> {
    let first = nodes.first()?;
    nodes
        .iter()
        .all(|n| n.gpu_type == first.gpu_type)
        .then(|| first.gpu_type.clone())
}

/// Nodes in words: `1 node: machine (8 a100 GPUs, 64 CPUs, 512 GiB)`, or counts by GPU type.
fn describe(nodes: &[NodeSpec]) -> String {
    if let [n] = nodes {
        return format!(
            "1 node: {} ({} {} GPUs, {} CPUs, {} GiB)",
            n.name,
            n.devices.len(),
            n.gpu_type,
            n.cpus,
            n.memory_gib
        );
    }
    let mut by_type: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in nodes {
        let e = by_type.entry(n.gpu_type.as_str()).or_default();
        e.0 += 1;
        e.1 += n.devices.len();
    }
    let parts: Vec<String> = by_type
        .iter()
        .map(|(t, (n, g))| format!("{g} {t} GPUs on {n}"))
        .collect();
    format!("{} nodes: {}", nodes.len(), parts.join(", "))
}

/// The scenario a daemon with `config` on `nodes` is, replaying the history at `history` under
/// `policy`, with `overrides` (`--set KEY=VALUE`) applied. The one place where a daemon's
/// settings become simulator settings:
///
/// - the cluster: `nodes` one by one (`[[cluster.nodes]]`), as the daemon sees them;
/// - rounds: the policy is called at every submission and job end, and every `round_s`; Gavel's
///   recomputation interval and VTC's quantum are one round, as the daemon sets them
///   (`policy_support::policy_config`); no restart overhead (the history's run times already
///   hold what restarts cost);
/// - `[[priority_classes]]`: the configured classes (a history's job in a class no longer
///   configured counts in the default class, as in the daemon: [`with_config`]);
/// - `fairshare`: the decayed fair share's half-life; `gittins_prior` (or the daemon's bundled
///   prior); `policy_cmd` and `policy_timeout_s` (`external`: the same agent decides).
///
/// - the quota tree: the file `quotas` names, as `arbiter quota export` writes the daemon's
///   (`[[quota_groups]]`; the daemon keeps its tree in its store, not in the configuration).
///
/// Not modelled (said in the guide): `min_run_s` (the daemon protects a new run from preemption
/// for it), tenants' weights (the daemon's store; `--set 'policy.tenant_weights={ a = 2.0 }'`).
pub fn scenario_of_config(
    config: &ServeConfig,
    nodes: &[NodeSpec],
    history: &Path,
    policy: PolicyKind,
    quotas: Option<&Path>,
    overrides: &[String],
) -> Result<Scenario> {
    use toml::{Table, Value};
    let table = |pairs: Vec<(&str, Value)>| -> Value {
        Value::Table(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Table>(),
        )
    };
    let node_entries: Vec<Value> = nodes
        .iter()
        .map(|n| {
            table(vec![
                ("name", Value::String(n.name.clone())),
                ("gpu_type", Value::String(n.gpu_type.clone())),
                ("gpus", Value::Integer(n.devices.len() as i64)),
                ("cpus", Value::Integer(i64::from(n.cpus))),
                ("memory_gib", Value::Integer(i64::from(n.memory_gib))),
                ("rack", Value::String(n.rack.clone())),
            ])
        })
        .collect();
    let round_s = Value::Float(config.round_s);
    let mut policy_table = vec![
        (
            "gavel",
            table(vec![("recompute_interval_s", round_s.clone())]),
        ),
        ("vtc", table(vec![("quantum_s", round_s.clone())])),
    ];
    if let Some(half_life_s) = config.fairshare_half_life_s().map_err(|e| anyhow!("{e}"))? {
        policy_table.push((
            "fairshare",
            table(vec![("half_life_s", Value::Float(half_life_s))]),
        ));
    }
    if let Some(command) = &config.policy_cmd {
        policy_table.push((
            "external",
            table(vec![
                ("command", Value::String(command.clone())),
                ("timeout_s", Value::Float(config.policy_timeout_s)),
            ]),
        ));
    }
    if let Some(prior) = &config.gittins_prior {
        policy_table.push((
            "gittins",
            table(vec![("prior", Value::String(prior.display().to_string()))]),
        ));
    }
    let classes: Vec<Value> = config
        .priority_classes
        .iter()
        .map(|c| {
            table(vec![
                ("name", Value::String(c.name.clone())),
                ("value", Value::Integer(i64::from(c.value))),
                ("preemptible", Value::Boolean(c.preemptible)),
            ])
        })
        .collect();
    let history = std::path::absolute(history).with_context(|| history.display().to_string())?;
    let doc = table(vec![
        ("name", Value::String("whatif".into())),
        (
            "description",
            Value::String(format!(
                "{} replayed on a daemon's cluster",
                history.display()
            )),
        ),
        (
            "policies",
            Value::Array(vec![Value::String(policy.name().into())]),
        ),
        (
            "trace",
            Value::Array(vec![table(vec![
                ("name", Value::String("history".into())),
                ("format", Value::String("native".into())),
                ("path", Value::String(history.display().to_string())),
            ])]),
        ),
        (
            "cluster",
            table(vec![("nodes", Value::Array(node_entries))]),
        ),
        (
            "simulation",
            table(vec![
                ("round_s", round_s),
                ("restart_overhead_s", Value::Float(0.0)),
            ]),
        ),
        ("policy", table(policy_table)),
        ("priority_classes", Value::Array(classes)),
    ]);
    let mut doc = doc;
    if let (Some(path), Value::Table(root)) = (quotas, &mut doc) {
        let groups = read_quota_file(path)?;
        root.insert(
            "quota_groups".into(),
            Value::try_from(&groups).context("the quota tree")?,
        );
    }
    let text = toml::to_string(&doc).context("the scenario of the configuration")?;
    let mut scenario = Scenario::parse(&text, Path::new("whatif.toml"), overrides)?;
    if policy == PolicyKind::Gittins && config.gittins_prior.is_none() {
        // The daemon's bundled prior, as `arbiter serve` uses it.
        scenario.policy.config.gittins_prior_gpu_s =
            arbiter_daemon::daemon::policy_support::gittins_prior(None).map_err(|e| anyhow!(e))?;
    }
    Ok(scenario)
}

/// A `--quotas` file's groups (as `arbiter quota export` writes them), read as the scenario
/// will read them, so that a mistake names this file, its line and column (a value of the wrong
/// type, an unknown key), and with the tree's shape checked here (children above their parent,
/// cycles, limits); what needs the cluster is checked when the replay binds the tree.
fn read_quota_file(path: &Path) -> Result<Vec<arbiter_policy::quotas::QuotaGroup>> {
    #[derive(serde::Deserialize)]
    struct QuotaFile {
        quota_groups: Option<Vec<arbiter_policy::quotas::QuotaGroup>>,
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: QuotaFile = toml::from_str(&text)
        .map_err(|e| anyhow!("{}: {}", path.display(), e.to_string().trim_end()))?;
    let groups = file.quota_groups.ok_or_else(|| {
        anyhow!("{}: no [[quota_groups]] (write the daemon's with `arbiter quota export > quotas.toml`)", path.display())
    })?;
    arbiter_policy::quotas::QuotaTree::check_shape(&groups)
        .map_err(|m| anyhow!("{}: [[quota_groups]]: {m}", path.display()))?;
    Ok(groups)
}

/// The history's jobs as the daemon with `config` would have seen them: in the configured
/// priority class (an unconfigured one: the default class, as the daemon does), and able to run
/// only on the GPU types they asked for, by name, on a cluster of `gpu_types` (none of them
/// there: a job that cannot be placed, which the runner warns about).
pub fn with_config(
    jobs: &mut [JobSpec],
    recorded: &[Recorded],
    config: Option<&ServeConfig>,
    gpu_types: &[String],
) -> Result<()> {
    let classes = config
        .map(|c| c.priority_classes())
        .transpose()
        .map_err(|e| anyhow!("{e}"))?;
    for (job, r) in jobs.iter_mut().zip(recorded) {
        if let Some(classes) = &classes {
            job.class = classes.job_class(job.class.name.as_deref());
        }
        if !r.gpu_types.is_empty() {
            job.speed_by_gpu_type = gpu_types
                .iter()
                .map(|t| {
                    if r.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(t)) {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
        }
    }
    Ok(())
}

/// Each job of a simulation beside what happened to it (`recorded_of` finds a simulated job's
/// record in the history).
pub fn pairs<'a>(
    records: &[JobRecord],
    recorded_of: impl Fn(&JobRecord) -> Option<&'a Recorded>,
) -> Vec<JobPair> {
    records
        .iter()
        .filter_map(|r| {
            let h = recorded_of(r)?;
            let finished = r.outcome == JobOutcome::Completed;
            Some(JobPair {
                trace_id: r.trace_id.clone(),
                tenant: r.tenant.to_string(),
                gpus: r.gpus,
                submit_s: r.submit_s,
                run_time_s: r.run_time_s,
                actual_start_s: h.start_s,
                actual_end_s: h.end_s,
                simulated_start_s: r.first_start_s.filter(|_| finished),
                simulated_end_s: r.finish_s.filter(|_| finished),
                simulated_busy_gpu_s: r.busy_gpu_s,
                simulated_outcome: r.outcome,
            })
        })
        .collect()
}

/// The comparison of `pairs` (a simulation of history `trace` under `policy`, seed `seed`, on
/// `capacity_gpus` GPUs described as `cluster`).
pub fn compare(
    trace: &str,
    policy: &str,
    seed: u64,
    cluster: &str,
    capacity_gpus: u32,
    pairs: Vec<JobPair>,
) -> Comparison {
    let mut left = Left::default();
    for p in &pairs {
        if p.actual_start_s.is_none() {
            left.start_unknown += 1;
        } else if p.actual_end_s.is_none() {
            left.not_ended_at_export += 1;
        } else if p.simulated_end_s.is_none() {
            match p.simulated_outcome {
                JobOutcome::Unplaceable => left.unplaceable_in_simulation += 1,
                JobOutcome::DependencyNeverSatisfied => left.dependency_never_satisfied += 1,
                _ => left.unfinished_in_simulation += 1,
            }
        }
    }
    let compared: Vec<&JobPair> = pairs.iter().filter(|p| p.comparable()).collect();
    let actual = side(&compared, capacity_gpus, |p| {
        (
            p.actual_start_s,
            p.actual_end_s,
            p.run_time_s * f64::from(p.gpus),
        )
    });
    let simulated = side(&compared, capacity_gpus, |p| {
        (
            p.simulated_start_s,
            p.simulated_end_s,
            p.simulated_busy_gpu_s,
        )
    });
    // One pass: sums per tenant and per size.
    let mut tenants: BTreeMap<&str, Sums> = BTreeMap::new();
    let mut sizes = [Sums::default(); SIZE_CLASSES.len()];
    for p in &compared {
        tenants.entry(p.tenant.as_str()).or_default().add(p);
        if let Some(k) = SIZE_CLASSES
            .iter()
            .position(|(_, low, high)| (*low..=*high).contains(&p.gpus))
        {
            sizes[k].add(p);
        }
    }
    let by_tenant = tenants.into_iter().map(|(t, sums)| sums.group(t)).collect();
    let by_size = SIZE_CLASSES
        .iter()
        .zip(sizes)
        .filter(|(_, sums)| sums.jobs > 0)
        .map(|((name, _, _), sums)| sums.group(name))
        .collect();
    Comparison {
        trace: trace.to_string(),
        policy: policy.to_string(),
        seed,
        cluster: cluster.to_string(),
        capacity_gpus,
        jobs: pairs.len(),
        compared: compared.len(),
        left_out: left,
        actual,
        simulated,
        by_tenant,
        by_size,
        pairs,
    }
}

/// One side's numbers: `of` gives a job's (start, end, GPU-seconds busy) on that side.
fn side(
    pairs: &[&JobPair],
    capacity_gpus: u32,
    of: impl Fn(&JobPair) -> (Option<f64>, Option<f64>, f64),
) -> Side {
    if pairs.is_empty() {
        return Side::default();
    }
    let mut jcts = Vec::with_capacity(pairs.len());
    let mut queues = Vec::with_capacity(pairs.len());
    let (mut first_submit, mut last_end, mut busy) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
    for p in pairs {
        let (start, end, gpu_s) = of(p);
        let (Some(start), Some(end)) = (start, end) else {
            continue;
        };
        jcts.push(end - p.submit_s);
        queues.push((start - p.submit_s).max(0.0));
        first_submit = first_submit.min(p.submit_s);
        last_end = last_end.max(end);
        busy += gpu_s;
    }
    jcts.sort_by(f64::total_cmp);
    queues.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let makespan_s = (last_end - first_submit).max(0.0);
    let window = makespan_s * f64::from(capacity_gpus);
    Side {
        avg_jct_s: mean(&jcts),
        p50_jct_s: percentile(&jcts, 0.5),
        p95_jct_s: percentile(&jcts, 0.95),
        avg_queue_s: mean(&queues),
        p50_queue_s: percentile(&queues, 0.5),
        p95_queue_s: percentile(&queues, 0.95),
        makespan_s,
        gpu_utilization: if window > 0.0 { busy / window } else { 0.0 },
    }
}

/// A group's sums on both sides: queueing delays and JCTs of the jobs compared.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    jobs: usize,
    actual_queue_s: f64,
    simulated_queue_s: f64,
    actual_jct_s: f64,
    simulated_jct_s: f64,
}

impl Sums {
    /// Adds a job compared (both sides have its start and end).
    fn add(&mut self, p: &JobPair) {
        let since_submit = |t: Option<f64>| t.map_or(0.0, |t| t - p.submit_s);
        self.jobs += 1;
        self.actual_queue_s += since_submit(p.actual_start_s);
        self.simulated_queue_s += since_submit(p.simulated_start_s);
        self.actual_jct_s += since_submit(p.actual_end_s);
        self.simulated_jct_s += since_submit(p.simulated_end_s);
    }

    /// The group's means.
    fn group(self, name: &str) -> Group {
        let n = self.jobs.max(1) as f64;
        Group {
            name: name.to_string(),
            jobs: self.jobs,
            actual_avg_queue_s: self.actual_queue_s / n,
            simulated_avg_queue_s: self.simulated_queue_s / n,
            actual_avg_jct_s: self.actual_jct_s / n,
            simulated_avg_jct_s: self.simulated_jct_s / n,
        }
    }
}

/// `arbiter whatif`.
pub fn run(args: WhatifArgs, json: bool) -> Result<()> {
    if let (Some(out), Some(history)) = (&args.jobs_csv, &args.history)
        && same_file(out, history)
    {
        bail!(
            "--jobs-csv {} is the history itself: it would be overwritten; write the jobs elsewhere",
            out.display()
        );
    }
    let comparisons = match &args.scenario {
        Some(file) => from_scenario(file, &args.overrides)?,
        None => vec![from_config(&args)?],
    };
    if let Some(path) = &args.jobs_csv {
        write_jobs_csv(path, &comparisons)?;
    }
    if let Some(dir) = &args.report {
        let page = report(&comparisons).write(dir)?;
        eprintln!("wrote {}", page.display());
    }
    if json {
        let out = if comparisons.len() == 1 {
            serde_json::to_value(&comparisons[0])?
        } else {
            serde_json::to_value(&comparisons)?
        };
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let texts: Vec<String> = comparisons.iter().map(text).collect();
        outln!("{}", texts.join("\n"));
    }
    Ok(())
}

/// Whether two paths name one file (an output path that does not exist yet names none).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A history replayed on the cluster of a configuration (`arbiter whatif hist.csv ...`).
fn from_config(args: &WhatifArgs) -> Result<Comparison> {
    let history = args.history.as_deref().ok_or_else(|| {
        anyhow!("give the history (arbiter history export --out hist.csv), or --scenario FILE")
    })?;
    let (config, source) = match &args.config {
        Some(path) => (ServeConfig::read(path)?, path.display().to_string()),
        None => (
            ServeConfig::default(),
            "the daemon's default configuration: no --config".to_string(),
        ),
    };
    config.validate().with_context(|| source.clone())?;
    let policy = match args.policy {
        Some(p) => p,
        None => config.policy_kind()?,
    };
    let (nodes, cluster) = match &args.cluster {
        // Of the configuration's GPU type where it names one (jobs that asked for it by name
        // then run there), else `gpu`.
        Some(text) => {
            let typed = args
                .config
                .as_ref()
                .and_then(|_| nodes_of_config(&config, &source).ok())
                .and_then(|(nodes, _)| one_gpu_type(&nodes));
            nodes_x_gpus(text, typed.as_deref().unwrap_or("gpu"))?
        }
        None => nodes_of_config(&config, &source)?,
    };
    let cluster = match &args.quotas {
        Some(path) => format!("{cluster}; quota tree of {}", path.display()),
        None => cluster,
    };
    replay(
        history,
        &config,
        policy,
        &nodes,
        &cluster,
        args.quotas.as_deref(),
        &args.overrides,
    )
}

/// History `history` replayed under `policy` by a daemon with `config` on `nodes` (described as
/// `cluster`), compared with what happened.
#[allow(clippy::too_many_arguments)]
pub fn replay(
    history: &Path,
    config: &ServeConfig,
    policy: PolicyKind,
    nodes: &[NodeSpec],
    cluster: &str,
    quotas: Option<&Path>,
    overrides: &[String],
) -> Result<Comparison> {
    if let Some(o) = overrides
        .iter()
        .find(|o| o.trim_start().starts_with("trace"))
    {
        bail!(
            "--set `{o}`: here the history is the whole trace; to replay part of it (max_jobs, tenants, submit_from), write a scenario whose [[trace]] names it and give --scenario"
        );
    }
    let (mut trace, recorded) = arbiter_trace::native::read_history(history)?;
    if recorded.iter().all(|r| r.start_s.is_none()) {
        bail!(
            "{}: no job has an actual start (actual_start_s): not a history from `arbiter history export`, nothing to compare with",
            history.display()
        );
    }
    let scenario = scenario_of_config(config, nodes, history, policy, quotas, overrides)?;
    let types: Vec<String> = Topology::new(nodes.to_vec())
        .map_err(|e| anyhow!(e))?
        .cluster()
        .gpu_type_names
        .clone();
    with_config(&mut trace.jobs, &recorded, Some(config), &types)?;
    let loaded = LoadedTrace {
        name: "history".into(),
        seed: None,
        trace: Arc::new(trace),
        placement: None,
        quotas: scenario.quota_groups_for(None).map_err(|m| anyhow!(m))?,
    };
    let rows = simulate(&scenario, &[loaded])?;
    let row = rows
        .into_iter()
        .find(|r| r.tenant == "all")
        .ok_or_else(|| anyhow!("the simulation gave no result"))?;
    // The jobs' order is the file's (sorted by submission), as the simulation numbers them.
    let pairs = pairs(&row.records, |r| recorded.get(r.job as usize));
    let name = history.file_name().map_or_else(
        || history.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(compare(
        &name,
        policy.name(),
        row.seed,
        cluster,
        row.capacity_gpus,
        pairs,
    ))
}

/// A scenario's histories, replayed as the scenario says (`arbiter whatif --scenario FILE`).
fn from_scenario(file: &Path, overrides: &[String]) -> Result<Vec<Comparison>> {
    let scenario = Scenario::load(file, overrides)?;
    let table = scenario.throughput_table()?;
    let mut traces = scenario.load_traces(table.as_ref())?;
    // What the daemon recorded, by trace (result name) and trace id.
    let mut recorded: BTreeMap<String, BTreeMap<String, Recorded>> = BTreeMap::new();
    for spec in scenario
        .trace
        .iter()
        .filter(|t| t.format == TraceFormat::Native)
    {
        let (trace, columns) = arbiter_trace::native::read_history(&scenario.resolve(&spec.path))?;
        if columns.iter().any(|r| r.start_s.is_some()) {
            recorded.insert(
                spec.result_name(),
                trace
                    .jobs
                    .into_iter()
                    .map(|j| j.trace_id)
                    .zip(columns)
                    .collect(),
            );
        }
    }
    if recorded.is_empty() {
        bail!(
            "{}: no [[trace]] is a history (format = \"native\" with actual_start_s and actual_end_s: arbiter history export)",
            file.display()
        );
    }
    for loaded in &mut traces {
        let Some(by_id) = recorded.get(&loaded.name) else {
            continue;
        };
        let types = scenario
            .clusters_for(&loaded.trace)?
            .first()
            .map(|(_, c)| c.gpu_type_names.clone())
            .unwrap_or_default();
        let mut trace = (*loaded.trace).clone();
        let columns: Vec<Recorded> = trace
            .jobs
            .iter()
            .map(|j| by_id.get(&j.trace_id).cloned().unwrap_or_default())
            .collect();
        with_config(&mut trace.jobs, &columns, None, &types)?;
        loaded.trace = Arc::new(trace);
    }
    let rows = simulate(&scenario, &traces)?;
    let mut out = Vec::new();
    // The simulations' own rows: the whole cluster's, or each tenant's on its own cluster (not
    // the rows derived from them: per tenant or per class of a shared cluster, aggregates).
    let per_tenant = scenario.cluster.per_tenant_nodes.is_some();
    for row in rows
        .iter()
        .filter(|r| !r.records.is_empty() && (r.tenant == "all") != per_tenant)
    {
        let Some(by_id) = recorded.get(&row.trace) else {
            continue;
        };
        let pairs = pairs(&row.records, |r| by_id.get(&r.trace_id));
        let cluster = format!(
            "{} GPUs ({}, tenant {})",
            row.capacity_gpus,
            file.display(),
            row.tenant
        );
        out.push(compare(
            &row.trace,
            row.policy.name(),
            row.seed,
            &cluster,
            row.capacity_gpus,
            pairs,
        ));
    }
    Ok(out)
}

/// Runs the scenario's simulations of `traces`, with a progress bar on a terminal.
fn simulate(scenario: &Scenario, traces: &[LoadedTrace]) -> Result<Vec<ResultRow>> {
    let bar = crate::progress_bar(true, "whatif");
    let origin = std::time::Instant::now();
    let rows = scenario.run_traces(
        traces,
        None,
        &crate::advance(&bar),
        &|| origin.elapsed().as_secs_f64(),
        &StopFlag::default(),
        None,
    )?;
    bar.finish_and_clear();
    crate::print_warnings(&rows);
    Ok(rows)
}

/// A relative change, `+12.3%` (`-` where the actual value is 0).
fn change(actual: f64, simulated: f64) -> String {
    if actual.abs() < 1e-9 {
        return if simulated.abs() < 1e-9 {
            "0%".into()
        } else {
            "-".into()
        };
    }
    format!("{:+.1}%", (simulated - actual) / actual * 100.0)
}

/// The headline rows: (name, actual, simulated) in seconds.
fn headline(c: &Comparison) -> [(&'static str, f64, f64); 7] {
    let (a, s) = (&c.actual, &c.simulated);
    [
        ("avg JCT s", a.avg_jct_s, s.avg_jct_s),
        ("median JCT s", a.p50_jct_s, s.p50_jct_s),
        ("p95 JCT s", a.p95_jct_s, s.p95_jct_s),
        ("avg queue s", a.avg_queue_s, s.avg_queue_s),
        ("median queue s", a.p50_queue_s, s.p50_queue_s),
        ("p95 queue s", a.p95_queue_s, s.p95_queue_s),
        ("makespan s", a.makespan_s, s.makespan_s),
    ]
}

/// The utilization row's cells: actual, simulated, change in points.
fn utilization_cells(c: &Comparison) -> [String; 3] {
    let (a, s) = (c.actual.gpu_utilization, c.simulated.gpu_utilization);
    [
        format!("{:.1}%", a * 100.0),
        format!("{:.1}%", s * 100.0),
        format!("{:+.1} pt", (s - a) * 100.0),
    ]
}

/// The comparison as text: the headline numbers, then by tenant and by size.
pub fn text(c: &Comparison) -> String {
    let mut out = format!(
        "what-if: {} replayed under {} (seed {})\ncluster: {}\n",
        c.trace, c.policy, c.seed, c.cluster
    );
    let l = &c.left_out;
    let mut left = Vec::new();
    for (n, why) in [
        (l.not_ended_at_export, "not ended at export"),
        (l.start_unknown, "first start unknown"),
        (l.unfinished_in_simulation, "unfinished in the simulation"),
        (
            l.unplaceable_in_simulation,
            "never placeable on this cluster",
        ),
        (
            l.dependency_never_satisfied,
            "with dependencies that never hold (an unknown job, itself, a cycle, or a failure)",
        ),
    ] {
        if n > 0 {
            left.push(format!("{n} {why}"));
        }
    }
    out.push_str(&format!(
        "jobs: {} compared of {}{}\n\n",
        c.compared,
        c.jobs,
        if left.is_empty() {
            String::new()
        } else {
            format!(" ({})", left.join(", "))
        }
    ));
    let mut rows: Vec<Vec<String>> = headline(c)
        .iter()
        .map(|(name, x, y)| vec![name.to_string(), secs(*x), secs(*y), change(*x, *y)])
        .collect();
    let [a, s, d] = utilization_cells(c);
    rows.push(vec!["GPU utilization".into(), a, s, d]);
    out.push_str(&render(
        &[
            ("", Align::Left),
            ("actual", Align::Right),
            ("simulated", Align::Right),
            ("change", Align::Right),
        ],
        &rows,
    ));
    for (title, groups) in [("tenant", &c.by_tenant), ("GPUs", &c.by_size)] {
        let rows: Vec<Vec<String>> = groups
            .iter()
            .map(|g| {
                vec![
                    g.name.clone(),
                    g.jobs.to_string(),
                    secs(g.actual_avg_queue_s),
                    secs(g.simulated_avg_queue_s),
                    change(g.actual_avg_queue_s, g.simulated_avg_queue_s),
                    secs(g.actual_avg_jct_s),
                    secs(g.simulated_avg_jct_s),
                    change(g.actual_avg_jct_s, g.simulated_avg_jct_s),
                ]
            })
            .collect();
        out.push_str(&format!("\nby {title} (averages):\n"));
        let head = [
            (title, Align::Left),
            ("jobs", Align::Right),
            ("queue s actual", Align::Right),
            ("simulated", Align::Right),
            ("change", Align::Right),
            ("JCT s actual", Align::Right),
            ("simulated", Align::Right),
            ("change", Align::Right),
        ];
        out.push_str(&render(&head, &rows));
    }
    out
}

/// Each job of every comparison, actual beside simulated (CSV).
fn write_jobs_csv(path: &Path, comparisons: &[Comparison]) -> Result<()> {
    use std::io::Write as _;
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let opt = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    // Tenants and ids are the daemon's names (letters, digits, `-_.`); quoted anyway.
    let quoted = |t: &str| {
        if t.contains([',', '"', '\n']) {
            format!("\"{}\"", t.replace('"', "\"\""))
        } else {
            t.to_string()
        }
    };
    writeln!(
        w,
        "trace,policy,seed,trace_id,tenant,gpus,submit_s,run_time_s,actual_start_s,actual_end_s,simulated_start_s,simulated_end_s"
    )?;
    for c in comparisons {
        for p in &c.pairs {
            let cells = [
                quoted(&c.trace),
                c.policy.clone(),
                c.seed.to_string(),
                quoted(&p.trace_id),
                quoted(&p.tenant),
                p.gpus.to_string(),
                format!("{}", p.submit_s),
                format!("{}", p.run_time_s),
                opt(p.actual_start_s),
                opt(p.actual_end_s),
                opt(p.simulated_start_s),
                opt(p.simulated_end_s),
            ];
            writeln!(w, "{}", cells.join(","))?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The report: each comparison's tables, then its JCT and queueing-delay CDFs, actual against
/// simulated.
fn report(comparisons: &[Comparison]) -> arbiter_report::Report {
    use arbiter_report::chart::{Axis, Format, Line, LineChart};
    use arbiter_report::{Figure, Mark, Section, Table, figures, run::MIN_DELAY_S, slug};
    type Of = fn(&JobPair) -> Option<f64>;
    let cell = |t: String| (t, Mark::None);
    let mut sections = Vec::new();
    for c in comparisons {
        sections.push(Section::Heading(format!(
            "{} under {} (seed {})",
            c.trace, c.policy, c.seed
        )));
        sections.push(Section::Text(format!(
            "Cluster: {}. {} jobs compared of {}.",
            c.cluster, c.compared, c.jobs
        )));
        let mut rows: Vec<Vec<(String, Mark)>> = headline(c)
            .iter()
            .map(|(name, x, y)| {
                vec![
                    cell(name.to_string()),
                    cell(secs(*x)),
                    cell(secs(*y)),
                    cell(change(*x, *y)),
                ]
            })
            .collect();
        let [a, s, d] = utilization_cells(c);
        rows.push(vec![
            cell("GPU utilization".into()),
            cell(a),
            cell(s),
            cell(d),
        ]);
        sections.push(Section::Table(Table {
            head: ["", "actual", "simulated", "change"]
                .map(String::from)
                .to_vec(),
            rows,
        }));
        for (title, groups) in [("tenant", &c.by_tenant), ("GPUs", &c.by_size)] {
            let head = [
                title,
                "jobs",
                "avg queue s actual",
                "simulated",
                "avg JCT s actual",
                "simulated",
            ]
            .map(String::from)
            .to_vec();
            let rows = groups
                .iter()
                .map(|g| {
                    vec![
                        cell(g.name.clone()),
                        cell(g.jobs.to_string()),
                        cell(secs(g.actual_avg_queue_s)),
                        cell(secs(g.simulated_avg_queue_s)),
                        cell(secs(g.actual_avg_jct_s)),
                        cell(secs(g.simulated_avg_jct_s)),
                    ]
                })
                .collect();
            sections.push(Section::Text(format!("By {title}:")));
            sections.push(Section::Table(Table { head, rows }));
        }
        let compared: Vec<&JobPair> = c.pairs.iter().filter(|p| p.comparable()).collect();
        let caption = format!(
            "{} · {} · Arbiter {}",
            c.trace,
            c.policy,
            arbiter_report::VERSION
        );
        let charts: [(&str, &str, Axis, Of, Of); 2] = [
            (
                "jct-cdf",
                "JCT CDF",
                Axis::log("job completion time (log)", Format::Seconds),
                |p| Some(p.actual_end_s? - p.submit_s),
                |p| Some(p.simulated_end_s? - p.submit_s),
            ),
            (
                "queue-cdf",
                "queueing delay CDF",
                Axis::log(
                    "queueing delay (log; under 1 s drawn at 1 s)",
                    Format::Seconds,
                ),
                |p| Some((p.actual_start_s? - p.submit_s).max(MIN_DELAY_S)),
                |p| Some((p.simulated_start_s? - p.submit_s).max(MIN_DELAY_S)),
            ),
        ];
        for (id, title, x, actual, simulated) in charts {
            let lines = vec![
                Line {
                    label: "actual".into(),
                    points: figures::cdf(compared.iter().filter_map(|p| actual(p))),
                },
                Line {
                    label: format!("simulated ({})", c.policy),
                    points: figures::cdf(compared.iter().filter_map(|p| simulated(p))),
                },
            ];
            let chart = LineChart {
                title: format!("{}: {title}", c.trace),
                caption: caption.clone(),
                x,
                y: Axis::fraction("jobs"),
                lines,
            };
            if chart.has_data() {
                sections.push(Section::Figure(Figure {
                    id: slug(&[&c.trace, &c.policy, &c.seed.to_string(), id]),
                    svg: chart.to_svg(),
                }));
            }
        }
    }
    arbiter_report::Report {
        title: "what-if: actual against simulated".into(),
        facts: vec![("Arbiter".into(), arbiter_report::VERSION.into())],
        sections,
    }
}

#[cfg(test)]
mod tests;
