//! Sweeps: run one scenario at several values of one key (e.g. `workload.jobs_per_hour` from 0.4
//! to 6.0) and write the results as CSV and JSON (the figures are `arbiter-report`'s).

use crate::metrics::{JobOutcome, Window};
use crate::scenario::{ResultRow, Scenario, ScenarioError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The results at one value of the swept key.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// The value as given (TOML text).
    pub value: String,
    /// The value as a number, for plotting.
    pub x: f64,
    /// Every simulation at this value.
    pub results: Vec<ResultRow>,
    /// JCTs of the measured jobs, per policy, pooled over seeds (for CDFs).
    #[serde(skip)]
    pub jcts_by_policy: BTreeMap<String, Vec<f64>>,
}

/// A whole sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// Scenario name.
    pub scenario: String,
    /// The swept key.
    pub key: String,
    /// One point per value, in the order given.
    pub points: Vec<SweepPoint>,
}

/// A sweep failed.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The scenario failed at one value.
    #[error("{key}={value}: {error}")]
    Scenario {
        /// Swept key.
        key: String,
        /// Value.
        value: String,
        /// What failed (part of the message, not a `source`, so a printed chain says it once).
        error: Box<ScenarioError>,
    },
    /// A value is not a number.
    #[error("sweep value `{0}` is not a number")]
    NotANumber(String),
    /// Writing output failed.
    #[error("writing {path}: {message}")]
    Output {
        /// File.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

/// Runs `file` once per value of `key` (on top of `overrides`). `progress(done, total)` is
/// called per value; `clock` as for [`Scenario::run`].
pub fn run(
    file: &Path,
    overrides: &[String],
    key: &str,
    values: &[String],
    progress: &(dyn Fn(usize, usize) + Sync),
    clock: &(dyn Fn() -> f64 + Sync),
) -> Result<Sweep, SweepError> {
    let mut points = Vec::new();
    let mut name = String::new();
    for (i, value) in values.iter().enumerate() {
        let x: f64 = value
            .trim()
            .parse()
            .map_err(|_| SweepError::NotANumber(value.clone()))?;
        let mut all = overrides.to_vec();
        all.push(format!("{key}={value}"));
        let wrap = |source| SweepError::Scenario {
            key: key.to_string(),
            value: value.clone(),
            error: Box::new(source),
        };
        let scenario = Scenario::load(file, &all).map_err(wrap)?;
        name = scenario.name.clone();
        let results = scenario.run(&|_, _| {}, clock).map_err(wrap)?;
        let jcts_by_policy = measured_jcts(&results, scenario.window);
        points.push(SweepPoint {
            value: value.clone(),
            x,
            results,
            jcts_by_policy,
        });
        progress(i + 1, values.len());
    }
    Ok(Sweep {
        scenario: name,
        key: key.to_string(),
        points,
    })
}

fn measured_jcts(rows: &[ResultRow], window: Window) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    // Aggregate rows carry no records, so each job is counted once.
    for row in rows {
        let jcts = out.entry(row.policy.name().to_string()).or_default();
        jcts.extend(
            row.records
                .iter()
                .filter(|r| window.contains(r.job) && r.outcome == JobOutcome::Completed)
                .filter_map(|r| r.jct_s()),
        );
    }
    out
}

impl Sweep {
    /// Mean average JCT over seeds (and traces/tenants) per policy, per point: `(policy, [(x, s)])`.
    pub fn mean_avg_jct(&self) -> BTreeMap<String, Vec<(f64, f64)>> {
        let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for point in &self.points {
            let mut by_policy: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for r in point.results.iter().filter(|r| r.tenant == "all") {
                by_policy
                    .entry(r.policy.name().to_string())
                    .or_default()
                    .push(r.summary.avg_jct_s);
            }
            for (policy, v) in by_policy {
                out.entry(policy)
                    .or_default()
                    .push((point.x, v.iter().sum::<f64>() / v.len() as f64));
            }
        }
        out
    }

    /// Writes `sweep.csv` and `sweep.json` into `dir`; returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, SweepError> {
        let io = |path: &Path, e: &dyn std::fmt::Display| SweepError::Output {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, &e))?;
        let mut written = Vec::new();

        let csv_path = dir.join("sweep.csv");
        let mut w = csv::Writer::from_path(&csv_path).map_err(|e| io(&csv_path, &e))?;
        w.write_record([
            self.key.as_str(),
            "trace",
            "policy",
            "tenant",
            "seed",
            "jobs",
            "avg_jct_s",
            "p50_jct_s",
            "p99_jct_s",
            "avg_queue_s",
            "makespan_s",
            "gpu_utilization",
            "unfinished",
            "unplaceable",
            "wall_s",
            "shared_gpu_fraction",
            "guest_gpu_fraction",
        ])
        .map_err(|e| io(&csv_path, &e))?;
        for p in &self.points {
            for r in &p.results {
                let s = &r.summary;
                w.write_record([
                    p.value.clone(),
                    r.trace.clone(),
                    r.policy.name().to_string(),
                    r.tenant.clone(),
                    r.seed.to_string(),
                    s.jobs.to_string(),
                    format!("{:.3}", s.avg_jct_s),
                    format!("{:.3}", s.p50_jct_s),
                    format!("{:.3}", s.p99_jct_s),
                    format!("{:.3}", s.avg_queue_s),
                    format!("{:.3}", s.makespan_s),
                    format!("{:.4}", s.gpu_utilization),
                    s.unfinished.to_string(),
                    s.unplaceable.to_string(),
                    format!("{:.3}", r.wall_s),
                    format!("{:.4}", s.shared_gpu_fraction),
                    format!("{:.4}", s.guest_gpu_fraction),
                ])
                .map_err(|e| io(&csv_path, &e))?;
            }
        }
        w.flush().map_err(|e| io(&csv_path, &e))?;
        written.push(csv_path);

        let json_path = dir.join("sweep.json");
        let json = serde_json::to_string_pretty(self).map_err(|e| io(&json_path, &e))?;
        std::fs::write(&json_path, json).map_err(|e| io(&json_path, &e))?;
        written.push(json_path);

        Ok(written)
    }
}
