//! The `[policy]` table of a scenario: every policy's parameters, with the simulator's defaults.

use arbiter_policy::{PolicyConfig, PolicyKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    /// Gittins quantum Δ, GPU-seconds.
    pub gittins_delta_gpu_s: f64,
    /// QSSF: recent jobs kept per history key.
    pub qssf_history: usize,
    /// Gavel: minimum seconds between allocation recomputations.
    pub recompute_interval_s: f64,
    /// Tenant weights for `hierarchical` (unlisted tenants weigh 1).
    pub tenant_weights: std::collections::BTreeMap<String, f64>,
    /// How `hierarchical` splits a tenant's share among its jobs: `fairness` or `fifo`.
    pub hierarchical_inner: String,
    /// Muri: most jobs interleaved on the same GPUs (`--packing_num`).
    pub muri_packing: usize,
    /// Muri: split groups slower than their members in turn (`--autopack`).
    pub muri_autopack: bool,
    /// Muri: the order of a group's jobs its interleaving assumes: `best` (Muri) or `worst`
    /// (its ablation).
    pub muri_order: String,
    /// Muri: merge groups by maximum-weight matching (`true`, Muri) or, for its ablation
    /// ("Muri-L w/o Blossom", `multi-resource-gpu-unaware`), each slot's jobs in list order.
    pub muri_blossom: bool,
    /// Themis (`themis`): fairness knob f; GPUs are offered to the `1 − f` fraction of jobs
    /// with the worst finish-time fairness.
    pub themis_f: f64,
    /// Themis (`themis`): lease length, seconds.
    pub themis_lease_s: f64,
    /// Horus: queued jobs looked at per step (k).
    pub horus_lookahead: usize,
    /// Horus: most predicted GPU utilization, percent, of the jobs sharing a GPU.
    pub horus_util_limit_pct: f64,
    /// Horus: most predicted GPU memory, GiB, of the jobs sharing a GPU.
    pub horus_memory_limit_gib: f64,
    /// Horus: a GPU's memory, GiB (the cost's denominator).
    pub horus_gpu_memory_gib: f64,
    /// Horus: most jobs on one GPU.
    pub horus_max_jobs_per_gpu: usize,
    /// Horus: a shared GPU slows each of its jobs to speed / (1 + this), where no measured pair
    /// speed applies.
    pub horus_interference: f64,
    /// Horus: predicted utilization, percent, of a job without stage times.
    pub horus_default_util_pct: f64,
    /// Horus: predicted GPU memory of every job, GiB.
    pub horus_job_memory_gib: f64,
    /// VTC: service charged when a job is handed GPUs, seconds of its GPUs; also how often it
    /// decides again while jobs wait.
    pub vtc_quantum_s: f64,
    /// VTC: the order inside a tenant: `fifo`, `srtf`, `sjf` or `las`.
    pub vtc_inner: arbiter_policy::vtc::VtcInner,
    /// Chronus: lease length, seconds.
    pub chronus_lease_s: f64,
    /// Chronus: also guarantee a soft job's later deadline options.
    pub chronus_later_options: bool,
    /// Chronus: branch-and-bound nodes per re-plan (0: never re-plan).
    pub chronus_mip_node_limit: u64,
    /// Chronus: the largest re-plan attempted, binary variables.
    pub chronus_mip_max_binaries: usize,
    /// `external`: the agent's command, run with `sh -c` (relative paths in it resolve against
    /// the directory `arbiter run` is started in).
    pub external_cmd: Option<String>,
    /// `external`: seconds the agent may take to answer one observation.
    pub external_timeout_s: f64,
    /// Keys of this table that apply to one policy only, e.g. `[policy.per_policy.muri-l]
    /// muri_autopack = true` (a published number produced with another setting than the rest).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub per_policy: BTreeMap<PolicyKind, toml::Table>,
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
            recompute_interval_s: d.rounds.recompute_interval_s,
            tenant_weights: d.tenant_weights,
            hierarchical_inner: "fairness".into(),
            muri_packing: d.muri.packing,
            muri_autopack: d.muri.autopack,
            muri_order: "best".into(),
            muri_blossom: d.muri.blossom,
            themis_f: d.themis.fairness_knob,
            themis_lease_s: d.themis.lease_s,
            horus_lookahead: d.horus.lookahead,
            horus_util_limit_pct: d.horus.util_limit_pct,
            horus_memory_limit_gib: d.horus.memory_limit_gib,
            horus_gpu_memory_gib: d.horus.gpu_memory_gib,
            horus_max_jobs_per_gpu: d.horus.max_jobs_per_gpu,
            horus_interference: d.horus.interference,
            horus_default_util_pct: d.horus.default_util_pct,
            horus_job_memory_gib: d.horus.job_memory_gib,
            vtc_quantum_s: d.vtc.quantum_s,
            vtc_inner: d.vtc.inner,
            chronus_lease_s: d.chronus.lease_s,
            chronus_later_options: d.chronus.later_options,
            chronus_mip_node_limit: d.chronus.mip_node_limit,
            chronus_mip_max_binaries: d.chronus.mip_max_binaries,
            external_cmd: None,
            external_timeout_s: 10.0,
            per_policy: BTreeMap::new(),
        }
    }
}

impl PolicySpec {
    /// The Horus settings of these keys.
    pub fn horus_config(&self) -> arbiter_policy::horus::HorusConfig {
        arbiter_policy::horus::HorusConfig {
            lookahead: self.horus_lookahead,
            util_limit_pct: self.horus_util_limit_pct,
            memory_limit_gib: self.horus_memory_limit_gib,
            gpu_memory_gib: self.horus_gpu_memory_gib,
            max_jobs_per_gpu: self.horus_max_jobs_per_gpu,
            interference: self.horus_interference,
            default_util_pct: self.horus_default_util_pct,
            job_memory_gib: self.horus_job_memory_gib,
        }
    }
}
