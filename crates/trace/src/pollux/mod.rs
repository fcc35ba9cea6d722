//! Pollux's workload CSVs: `name,time,application,num_replicas,batch_size` (times in seconds),
//! with the model profiles of Pollux's artifact (`simulator/traces/<model>/`).
//!
//! The workload gives no durations: Pollux's simulator derives a job's speed from its model's
//! profile, and so does this reader (module [`profile`], mirroring the artifact's
//! `applications.py`). Each job gets a [`Scaling`] that answers its speed on any placement:
//! - its batch configuration on `n` GPUs: the workload's total batch split into per-GPU batches
//!   and gradient-accumulation steps (`update_local_bsz` with a fixed batch size);
//! - seconds per iteration on the placement: step and sync time measured for that placement
//!   (placements of up to 4 nodes), interpolated along the local batch; for other placements,
//!   interpolated over (nodes, GPUs, local batch) like scipy's `LinearNDInterpolator`
//!   ([`delaunay`]); plus `accumulation steps × (step − sync)`;
//! - work: Σ over the model's epochs of training progress ÷ statistical efficiency at the total
//!   batch (Pollux's gain from the gradient statistics, `(var + sqr) / (var / scale + sqr)`),
//!   which the simulator's goodput integrates; the run time on a placement is work × seconds per
//!   iteration.
//!
//! `run_time_s` is the run time with the requested `num_replicas` GPUs packed onto 4-GPU nodes
//! (Pollux's T4 nodes). Jobs are elastic from 1 GPU to `batch_size ÷ smallest local batch` (NCF:
//! 1), the range Pollux's Optimus baseline uses; rigid policies give them `num_replicas`.
//!
//! The profiles folder is `simulator/traces/` of the Pollux artifact (found next to the
//! workload when not given).

mod delaunay;
mod profile;

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{
    GpuRange, JobId, JobSpec, PlacementSpeed, Scaling, SimTime, consolidated_shape,
};
use profile::Application;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

fn default_profiles(workload: &Path) -> Option<PathBuf> {
    let mut dir = workload.parent();
    for _ in 0..4 {
        let d = dir?;
        let candidate = d.join("traces");
        if candidate.join("cifar10").is_dir() {
            return Some(candidate);
        }
        dir = d.parent();
    }
    None
}

/// Reads a Pollux workload CSV, estimating run times from the profiles folder.
pub fn read(path: &Path, profiles: Option<&Path>) -> Result<Trace, TraceError> {
    let profile_dir = match profiles {
        Some(p) => p.to_path_buf(),
        None => default_profiles(path).ok_or_else(|| TraceError::File {
            path: path.to_path_buf(),
            reason:
                "no Pollux profiles folder (traces/<model>/placements.csv) found near the workload"
                    .into(),
        })?,
    };
    let mut apps: BTreeMap<String, Arc<Application>> = BTreeMap::new();
    let mut profiles: BTreeMap<(String, u64), Arc<BatchProfile>> = BTreeMap::new();
    let mut jobs = Vec::new();
    read_csv(
        path,
        b',',
        |f| f.require(&["name", "time", "application", "num_replicas", "batch_size"]),
        |row| {
            let model = row.get("application")?.to_string();
            let replicas = row.gpu_count("num_replicas")?;
            let batch: u64 = row.parse("batch_size")?;
            let submit = row.non_negative("time")?;
            if !apps.contains_key(&model) {
                let app = Application::load(&profile_dir, &model)
                    .map_err(|e| row.error("application", e.to_string()))?;
                apps.insert(model.clone(), Arc::new(app));
            }
            let app = &apps[&model];
            if (batch as f64) < app.init_batch || (batch as f64) > app.max_batch {
                return Err(row.error(
                    "batch_size",
                    format!(
                        "{batch} is outside {model}'s validated batch sizes {}..{}",
                        app.init_batch, app.max_batch
                    ),
                ));
            }
            let profile = profiles
                .entry((model.clone(), batch))
                .or_insert_with(|| {
                    Arc::new(BatchProfile {
                        app: app.clone(),
                        batch: batch as f64,
                        memo: Mutex::new(BTreeMap::new()),
                        predictions: Mutex::new(BTreeMap::new()),
                    })
                })
                .clone();
            let reference = consolidated_shape(replicas, POLLUX_GPUS_PER_NODE);
            let run_time_s = profile.time_on(&reference).ok_or_else(|| {
                row.error(
                    "num_replicas",
                    format!(
                        "{model}'s profile covers no run on {replicas} GPUs at batch size {batch}"
                    ),
                )
            })?;
            let reference_batch = app
                .batch_config(batch as f64, replicas)
                .total_batch(replicas);
            let (_, epoch_ends) = app.work_steps(reference_batch).ok_or_else(|| {
                row.error(
                    "batch_size",
                    format!("no gradient statistics for {model} at batch size {reference_batch}"),
                )
            })?;
            let most = if model == "ncf" {
                1
            } else {
                ((batch as f64 / app.min_local_bsz).floor() as u32).max(1)
            };
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                SimTime::from_secs_f64(submit),
                replicas,
                run_time_s,
            );
            job.trace_id = row.get("name")?.to_string();
            job.name = Some(job.trace_id.clone());
            job.iterations = app
                .iterations(batch as f64, app.max_epochs - 1)
                .map(|i| i.round() as u64);
            job.model = Some(model);
            job.elastic = Some(GpuRange { min: 1, max: most });
            job.scaling = Some(Scaling(Arc::new(PolluxJob {
                profile,
                run_time_s,
                epoch_ends,
            })));
            jobs.push(job);
            Ok(())
        },
    )?;
    Ok(Trace::from_jobs_keeping_times(jobs))
}

/// GPUs per node of Pollux's cluster (g4dn.12xlarge: 4 T4s), for the reference placement.
const POLLUX_GPUS_PER_NODE: u32 = 4;

/// One model at one total batch size: run time by placement shape, memoised (jobs of the same
/// model and batch size share it).
struct BatchProfile {
    app: Arc<Application>,
    batch: f64,
    memo: Mutex<BTreeMap<Vec<u32>, Option<f64>>>,
    /// Optimus's predictions by (GPUs, GPUs per node).
    predictions: Mutex<BTreeMap<(u32, u32), Option<f64>>>,
}

impl BatchProfile {
    /// Seconds to train from scratch on a placement of this shape (largest first).
    fn time_on(&self, shape: &[u32]) -> Option<f64> {
        memoised(&self.memo, shape.to_vec(), || {
            let replicas: u32 = shape.iter().sum();
            if replicas == 0 {
                return None;
            }
            let config = self.app.batch_config(self.batch, replicas);
            let iteration_s = self.app.iteration_s(shape, config)?;
            let (work, _) = self.app.work_steps(config.total_batch(replicas))?;
            Some(iteration_s * work).filter(|t| t.is_finite() && *t > 0.0)
        })
    }
}

/// `compute()` the first time `key` is asked for, the remembered answer after.
fn memoised<K: Ord, V: Copy>(
    memo: &Mutex<BTreeMap<K, V>>,
    key: K,
    compute: impl FnOnce() -> V,
) -> V {
    if let Some(known) = memo.lock().ok().and_then(|m| m.get(&key).copied()) {
        return known;
    }
    let value = compute();
    if let Ok(mut m) = memo.lock() {
        m.insert(key, value);
    }
    value
}

/// A job's view of its [`BatchProfile`]: speeds relative to its reference run time.
struct PolluxJob {
    profile: Arc<BatchProfile>,
    run_time_s: f64,
    /// Share of the work done at the end of each epoch (at the reference batch).
    epoch_ends: Vec<f64>,
}

impl PlacementSpeed for PolluxJob {
    fn speed(&self, shape: &[u32]) -> Option<f64> {
        self.profile.time_on(shape).map(|t| self.run_time_s / t)
    }

    fn remaining_iterations(&self, done: f64) -> Option<f64> {
        let app = &self.profile.app;
        let epoch = self
            .epoch_ends
            .iter()
            .filter(|end| **end <= done + 1e-12)
            .count();
        let last = app.max_epochs - 1;
        if epoch >= last {
            return Some(1.0);
        }
        Some(
            app.iterations(self.profile.batch, last)?
                - app.iterations(self.profile.batch, epoch)?,
        )
    }

    fn predicted_iteration_s(&self, gpus: u32, gpus_per_node: u32) -> Option<f64> {
        let app = &self.profile.app;
        memoised(&self.profile.predictions, (gpus, gpus_per_node), || {
            app.iteration_s(
                &consolidated_shape(gpus, gpus_per_node),
                app.optimus_batch_config(self.profile.batch, gpus),
            )
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} at batch size {}",
            self.profile.app.name, self.profile.batch
        )
    }
}
