//! One model's profile from Pollux's artifact (`simulator/traces/<model>/`): step and gradient-sync
//! time by placement and local batch size (`placements.csv`, `scalability.csv`), and per epoch at
//! each validated total batch size the training progress, iterations and gradient statistics
//! (`validation-<batch>.csv`). The functions mirror the artifact's `applications.py` — the
//! simulator that produced Pollux's published numbers — so that a job's speed on a placement is
//! the one that simulator gives it.

use super::delaunay::DelaunayInterpolator;
use crate::TraceError;
use crate::rows::read_csv;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-model settings of the artifact's `APPLICATIONS` table: epochs to completion and, for
/// yolov3, a smaller largest local batch than its profile measured.
fn settings(model: &str) -> Option<(usize, Option<f64>)> {
    Some(match model {
        "bert" => (2, None),
        "cifar10" => (100, None),
        "ncf" => (10, None),
        "imagenet" => (90, None),
        "deepspeech2" => (80, None),
        "yolov3" => (50, Some(8.0)),
        _ => return None,
    })
}

/// The models Pollux's workloads use.
pub(crate) const MODELS: &str = "bert, cifar10, deepspeech2, imagenet, ncf, yolov3";

/// Per epoch at one validated batch size.
#[derive(Debug, Default)]
struct Validation {
    progress: Vec<f64>,
    iteration: Vec<f64>,
    grad_sqr: Vec<f64>,
    grad_var: Vec<f64>,
}

/// A batch configuration: per-GPU (atomic) batch and gradient-accumulation steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BatchConfig {
    pub atomic_bsz: f64,
    pub accum_steps: f64,
}

impl BatchConfig {
    /// The total batch on `replicas` GPUs (the ceilings may round it up from the one asked for).
    pub(crate) fn total_batch(&self, replicas: u32) -> f64 {
        f64::from(replicas) * self.atomic_bsz * (self.accum_steps + 1.0)
    }
}

/// A model's profile.
#[derive(Debug)]
pub(crate) struct Application {
    pub name: String,
    pub max_epochs: usize,
    pub init_batch: f64,
    pub max_batch: f64,
    pub min_local_bsz: f64,
    pub max_local_bsz: f64,
    validation: BTreeMap<u64, Validation>,
    /// Placement id (GPUs per node as digits, smallest rotation) → `(local batch, step, sync)`
    /// sorted by local batch.
    placements: BTreeMap<u64, Vec<(f64, f64, f64)>>,
    /// `(nodes, replicas, local batch)` → `(step, sync)`: the placements' means by node and
    /// replica count, then the multi-node scalability rows.
    spread: DelaunayInterpolator,
}

impl Application {
    /// Loads `dir/<model>/`.
    pub(crate) fn load(dir: &Path, model: &str) -> Result<Self, TraceError> {
        let (max_epochs, max_local_override) = settings(model).ok_or_else(|| TraceError::File {
            path: dir.join(model),
            reason: format!("unknown Pollux model `{model}` (known: {MODELS})"),
        })?;
        let app_dir = dir.join(model);
        let mut placements: BTreeMap<u64, Vec<(f64, f64, f64)>> = BTreeMap::new();
        // (nodes, replicas, local batch) → sums for the means, keyed exactly (values are integers).
        let mut means: BTreeMap<(u64, u64, u64), (f64, f64, f64)> = BTreeMap::new();
        read_csv(
            &app_dir.join("placements.csv"),
            b',',
            |f| f.require(&["placement", "local_bsz", "step_time", "sync_time"]),
            |row| {
                let placement = row.get("placement")?;
                let digits: Vec<u64> = placement
                    .chars()
                    .map(|c| c.to_digit(10).map(u64::from))
                    .collect::<Option<_>>()
                    .filter(|d: &Vec<u64>| !d.is_empty() && d.iter().all(|g| *g > 0))
                    .ok_or_else(|| {
                        row.error(
                            "placement",
                            format!("`{placement}` is not a string of per-node GPU counts 1-9"),
                        )
                    })?;
                let id: u64 = placement
                    .parse()
                    .map_err(|_| row.error("placement", "too long".to_string()))?;
                let local: u64 = row.parse("local_bsz")?;
                let (step, sync) = (
                    row.non_negative("step_time")?,
                    row.non_negative("sync_time")?,
                );
                placements
                    .entry(id)
                    .or_default()
                    .push((local as f64, step, sync));
                let key = (digits.len() as u64, digits.iter().sum(), local);
                let m = means.entry(key).or_insert((0.0, 0.0, 0.0));
                *m = (m.0 + step, m.1 + sync, m.2 + 1.0);
                Ok(())
            },
        )?;
        for rows in placements.values_mut() {
            rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let mut points = Vec::new();
        let mut values = Vec::new();
        for ((nodes, replicas, local), (step, sync, count)) in &means {
            points.push([*nodes as f64, *replicas as f64, *local as f64]);
            values.push([step / count, sync / count]);
        }
        read_csv(
            &app_dir.join("scalability.csv"),
            b',',
            |f| {
                f.require(&[
                    "num_nodes",
                    "num_replicas",
                    "local_bsz",
                    "step_time",
                    "sync_time",
                ])
            },
            |row| {
                points.push([
                    row.non_negative("num_nodes")?,
                    row.non_negative("num_replicas")?,
                    row.non_negative("local_bsz")?,
                ]);
                values.push([
                    row.non_negative("step_time")?,
                    row.non_negative("sync_time")?,
                ]);
                Ok(())
            },
        )?;
        let mut validation = BTreeMap::new();
        let entries = std::fs::read_dir(&app_dir).map_err(|source| TraceError::Io {
            path: app_dir.clone(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for file in files {
            let Some(batch) = file
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("validation-"))
                .and_then(|n| n.strip_suffix(".csv"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let mut v = Validation::default();
            read_csv(
                &file,
                b',',
                |f| f.require(&["progress", "iteration", "grad_sqr", "grad_var"]),
                |row| {
                    v.progress.push(row.non_negative("progress")?);
                    v.iteration.push(row.non_negative("iteration")?);
                    v.grad_sqr.push(row.non_negative("grad_sqr")?);
                    v.grad_var.push(row.non_negative("grad_var")?);
                    Ok(())
                },
            )?;
            if v.progress.len() < max_epochs {
                return Err(TraceError::File {
                    path: file,
                    reason: format!(
                        "{} rows, but {model} trains for {max_epochs} epochs",
                        v.progress.len()
                    ),
                });
            }
            validation.insert(batch, v);
        }
        let (Some(&init), Some(&max)) = (validation.keys().next(), validation.keys().next_back())
        else {
            return Err(TraceError::File {
                path: app_dir,
                reason: "no validation-<batch>.csv files".into(),
            });
        };
        let locals = placements.values().flatten().map(|r| r.0);
        let min_local_bsz = locals.clone().fold(f64::INFINITY, f64::min);
        let max_local_bsz = max_local_override.unwrap_or_else(|| locals.fold(0.0, f64::max));
        if !min_local_bsz.is_finite() {
            return Err(TraceError::File {
                path: app_dir.join("placements.csv"),
                reason: "no rows".into(),
            });
        }
        Ok(Application {
            name: model.to_string(),
            max_epochs,
            init_batch: init as f64,
            max_batch: max as f64,
            min_local_bsz,
            max_local_bsz,
            validation,
            placements,
            spread: DelaunayInterpolator::new(points, values),
        })
    }

    /// How a job with total batch `batch` runs on `replicas` GPUs (`update_local_bsz` with a
    /// fixed batch size): the local batch split into accumulation steps no larger than the
    /// largest local batch, at least two steps on one GPU above the initial batch, and no more
    /// than the largest validated batch in all.
    pub(crate) fn batch_config(&self, batch: f64, replicas: u32) -> BatchConfig {
        self.split_batch(batch, replicas, batch > self.init_batch)
    }

    /// The split Optimus's oracle predicts with (`predict_step_time`): as [`Self::batch_config`],
    /// but at least two accumulation steps on one GPU whatever the batch.
    pub(crate) fn optimus_batch_config(&self, batch: f64, replicas: u32) -> BatchConfig {
        self.split_batch(batch, replicas, true)
    }

    fn split_batch(&self, batch: f64, replicas: u32, accumulate_on_one: bool) -> BatchConfig {
        let n = f64::from(replicas.max(1));
        let local = (batch / n - 1e-8).ceil();
        let mut accum = (local / self.max_local_bsz - 1e-8).ceil() - 1.0;
        if replicas == 1 && accumulate_on_one {
            accum = accum.max(1.0);
        }
        let atomic = (local / (accum + 1.0) - 1e-8).ceil();
        let count = n * (accum + 1.0);
        BatchConfig {
            atomic_bsz: atomic.min((self.max_batch / count).trunc()),
            accum_steps: accum,
        }
    }

    /// `(step, sync)` seconds per iteration on a placement of this shape (GPUs per node, any
    /// order) at local batch `local`: interpolated along the local batch where the placement was
    /// measured, else over the Delaunay triangulation of (nodes ≤ 16, replicas, local batch).
    /// `None` outside what the profile covers.
    pub(crate) fn throughput(&self, shape: &[u32], local: f64) -> Option<(f64, f64)> {
        let shape: Vec<u32> = shape.iter().copied().filter(|g| *g > 0).collect();
        if shape.is_empty() {
            return None;
        }
        // The smallest rotation names the measurement (as the artifact normalises placements).
        let rotation = (0..shape.len())
            .map(|i| [&shape[i..], &shape[..i]].concat())
            .min()?;
        if rotation.iter().all(|g| *g <= 9) {
            let id = rotation
                .iter()
                .fold(0u64, |acc, g| acc * 10 + u64::from(*g));
            if let Some(rows) = self.placements.get(&id) {
                return interp1d(rows, local);
            }
        }
        let nodes = (shape.len() as f64).min(16.0);
        let replicas: u32 = shape.iter().sum();
        self.spread
            .value([nodes, f64::from(replicas), local])
            .map(|v| (v[0], v[1]))
    }

    /// Seconds per iteration including accumulation steps (`step + accum × (step − sync)`).
    pub(crate) fn iteration_s(&self, shape: &[u32], config: BatchConfig) -> Option<f64> {
        let (step, sync) = self.throughput(shape, config.atomic_bsz)?;
        Some(step + config.accum_steps * (step - sync))
    }

    /// Training progress at the start of `epoch` (the least over the validated batch sizes).
    fn progress(&self, epoch: usize) -> f64 {
        if epoch == 0 {
            return 0.0;
        }
        self.validation
            .values()
            .map(|v| v.progress[epoch - 1])
            .fold(f64::INFINITY, f64::min)
    }

    /// The validated batch sizes around `batch`, with `batch`'s weight on the upper one.
    fn bracket(&self, batch: f64) -> Option<(&Validation, &Validation, f64)> {
        let lower = self
            .validation
            .iter()
            .rev()
            .find(|(b, _)| **b as f64 <= batch)?;
        let upper = self.validation.iter().find(|(b, _)| **b as f64 >= batch)?;
        let weight = if lower.0 == upper.0 {
            0.0
        } else {
            (batch - *lower.0 as f64) / (*upper.0 as f64 - *lower.0 as f64)
        };
        Some((lower.1, upper.1, weight))
    }

    /// Iterations done after `epoch` at total batch `batch` (interpolated between validated
    /// batch sizes).
    pub(crate) fn iterations(&self, batch: f64, epoch: usize) -> Option<f64> {
        let (lo, hi, w) = self.bracket(batch)?;
        Some((1.0 - w) * lo.iteration[epoch] + w * hi.iteration[epoch])
    }

    /// Seconds of work per second of `iteration_s`: Σ over epochs of progress ÷ statistical
    /// efficiency at total batch `batch` (Pollux's gain `(var + sqr) / (var / scale + sqr)`, scale
    /// = batch ÷ initial batch). A job's run time on a placement is this × its iteration time.
    /// Also the cumulative share of it at each epoch's end.
    pub(crate) fn work_steps(&self, batch: f64) -> Option<(f64, Vec<f64>)> {
        let (lo, hi, w) = self.bracket(batch)?;
        let scale = batch / self.init_batch;
        let mut total = 0.0;
        let mut ends = Vec::with_capacity(self.max_epochs);
        for epoch in 0..self.max_epochs {
            let sqr = (1.0 - w) * lo.grad_sqr[epoch] + w * hi.grad_sqr[epoch];
            let var = (1.0 - w) * lo.grad_var[epoch] + w * hi.grad_var[epoch];
            let gain = (var + sqr) / (var / scale + sqr);
            if !(gain.is_finite() && gain > 0.0) {
                return None;
            }
            total += (self.progress(epoch + 1) - self.progress(epoch)) / gain;
            ends.push(total);
        }
        ends.iter_mut().for_each(|e| *e /= total);
        (total > 0.0).then_some((total, ends))
    }
}

/// Linear interpolation in sorted `(x, step, sync)` rows; `None` outside their range (scipy's
/// `interp1d` raises there).
fn interp1d(rows: &[(f64, f64, f64)], x: f64) -> Option<(f64, f64)> {
    let first = rows.first()?;
    let last = rows.last()?;
    if x < first.0 || x > last.0 {
        return None;
    }
    let i = rows.partition_point(|r| r.0 < x);
    let hi = rows[i.min(rows.len() - 1)];
    if hi.0 == x || i == 0 {
        return Some((hi.1, hi.2));
    }
    let lo = rows[i - 1];
    let t = (x - lo.0) / (hi.0 - lo.0);
    Some((lo.1 + t * (hi.1 - lo.1), lo.2 + t * (hi.2 - lo.2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interp1d_is_linear_between_rows_and_refuses_outside() {
        let rows = [(10.0, 1.0, 0.1), (20.0, 3.0, 0.3)];
        assert_eq!(interp1d(&rows, 10.0), Some((1.0, 0.1)));
        assert_eq!(interp1d(&rows, 20.0), Some((3.0, 0.3)));
        let (s, y) = interp1d(&rows, 15.0).expect("inside");
        assert!((s - 2.0).abs() < 1e-12 && (y - 0.2).abs() < 1e-12);
        assert_eq!(interp1d(&rows, 9.0), None);
        assert_eq!(interp1d(&rows, 21.0), None);
    }
}
