//! Gavel's tab-separated `.trace` files and its throughput table.
//!
//! Two row forms, no header:
//! - 10 fields (current): `job_type, command, working_directory, num_steps_arg, needs_data_dir,
//!   total_steps, scale_factor, priority_weight, SLO, arrival_time`;
//! - 7 fields (older, e.g. the per-VC Philly traces): `job_type, command, num_steps_arg,
//!   needs_data_dir, total_steps, arrival_time, scale_factor`.
//!
//! A job's work is given in steps; its run time is `total_steps / throughput`, with the throughput
//! of its job type and scale factor on V100s (solo) from `simulation_throughputs.json` — the
//! same reference Gavel's generator uses to turn durations into steps. A scale factor the table
//! does not list for a type (multi-GPU Recommendation jobs) uses the largest listed one below it.

use crate::{Trace, TraceError};
use arbiter_model::{JobId, JobSpec, SimTime};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A job type at a scale factor, as Gavel keys its table.
pub type JobKey = (String, u32);

/// Throughputs (steps/s) read from Gavel's `simulation_throughputs.json`: solo, per
/// `(gpu type, job type, scale factor)`, and co-located pairs (space sharing), per
/// `(gpu type, job, other job)` giving both jobs' throughputs when they share a GPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThroughputTable {
    solo: BTreeMap<(String, String, u32), f64>,
    pairs: BTreeMap<(String, JobKey, JobKey), (f64, f64)>,
}

impl ThroughputTable {
    /// Reads Gavel's JSON table: `{gpu_type: {"('<job type>', <scale factor>)": {"null": solo, ...}}}`.
    pub fn read(path: &Path) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file_error = |reason: String| TraceError::File {
            path: path.to_path_buf(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| file_error(format!("invalid JSON: {e}")))?;
        let types = value
            .as_object()
            .ok_or_else(|| file_error("top level is not an object".into()))?;
        let mut solo = BTreeMap::new();
        let mut pairs = BTreeMap::new();
        for (gpu_type, jobs) in types {
            let jobs = jobs
                .as_object()
                .ok_or_else(|| file_error(format!("`{gpu_type}` is not an object")))?;
            for (key, entry) in jobs {
                let (job_type, scale) = parse_key(key).ok_or_else(|| {
                    file_error(format!(
                        "`{gpu_type}`: key `{key}` is not ('<job type>', <n>)"
                    ))
                })?;
                if let Some(tput) = entry.get("null").and_then(serde_json::Value::as_f64) {
                    solo.insert((gpu_type.clone(), job_type.clone(), scale), tput);
                }
                let Some(others) = entry.as_object() else {
                    continue;
                };
                for (other_key, both) in others {
                    if other_key == "null" {
                        continue;
                    }
                    let other = parse_key(other_key).ok_or_else(|| {
                        file_error(format!(
                            "`{gpu_type}` / `{key}`: key `{other_key}` is not ('<job type>', <n>)"
                        ))
                    })?;
                    let values = both
                        .as_array()
                        .and_then(|a| Some((a.first()?.as_f64()?, a.get(1)?.as_f64()?)));
                    let (mine, theirs) = values.ok_or_else(|| {
                        file_error(format!("`{gpu_type}` / `{key}` / `{other_key}`: expected [throughput, other throughput]"))
                    })?;
                    pairs.insert(
                        (gpu_type.clone(), (job_type.clone(), scale), other),
                        (mine, theirs),
                    );
                }
            }
        }
        Ok(ThroughputTable { solo, pairs })
    }

    /// Solo throughput of `job_type` at `scale_factor` GPUs on `gpu_type`, steps per second.
    pub fn solo(&self, gpu_type: &str, job_type: &str, scale_factor: u32) -> Option<f64> {
        self.solo
            .get(&(gpu_type.to_string(), job_type.to_string(), scale_factor))
            .copied()
    }

    /// Throughputs of `job` and `other` when they share GPUs of `gpu_type` (space sharing), as
    /// `(job's, other's)`; `None` if not measured. Zeros mean they cannot share.
    pub fn pair(&self, gpu_type: &str, job: &JobKey, other: &JobKey) -> Option<(f64, f64)> {
        self.pairs
            .get(&(gpu_type.to_string(), job.clone(), other.clone()))
            .copied()
    }

    /// Speeds of `job_type` at `scale_factor` on each of `gpu_types` (names matched
    /// case-insensitively), relative to its speed on `reference`: the per-type speed vector the
    /// engine runs the job at. A type the table does not measure gets 0 (the job cannot run
    /// there). `None` if the reference itself is unmeasured.
    pub fn relative_speeds(
        &self,
        job_type: &str,
        scale_factor: u32,
        gpu_types: &[String],
        reference: &str,
    ) -> Option<Vec<f64>> {
        let reference_tput = self
            .solo(reference, job_type, scale_factor)
            .filter(|t| *t > 0.0)?;
        Some(
            gpu_types
                .iter()
                .map(|t| {
                    self.solo(&t.to_ascii_lowercase(), job_type, scale_factor)
                        .unwrap_or(0.0)
                        / reference_tput
                })
                .collect(),
        )
    }

    /// Job types present for `gpu_type`, sorted.
    pub fn job_types(&self, gpu_type: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .solo
            .keys()
            .filter(|(g, _, _)| g == gpu_type)
            .map(|(_, j, _)| j.clone())
            .collect();
        v.dedup();
        v
    }
}

/// Parses `('ResNet-18 (batch size 16)', 1)`.
fn parse_key(key: &str) -> Option<(String, u32)> {
    let inner = key.trim().strip_prefix('(')?.strip_suffix(')')?;
    let (name, scale) = inner.rsplit_once(',')?;
    let name = name.trim().strip_prefix('\'')?.strip_suffix('\'')?;
    Some((name.to_string(), scale.trim().parse().ok()?))
}

/// Looks for `simulation_throughputs.json` in the trace's folder and up to four folders above it.
fn default_table_path(trace: &Path) -> Option<PathBuf> {
    let mut dir = trace.parent();
    for _ in 0..5 {
        let d = dir?;
        let candidate = d.join("simulation_throughputs.json");
        if candidate.is_file() {
            return Some(candidate);
        }
        let candidate = d.join("gavel").join("simulation_throughputs.json");
        if candidate.is_file() {
            return Some(candidate);
        }
        dir = d.parent();
    }
    None
}

/// Reads a Gavel trace; `table` is the throughput JSON (found next to the trace when `None`).
pub fn read(path: &Path, table: Option<&Path>) -> Result<Trace, TraceError> {
    let table_path = match table {
        Some(p) => p.to_path_buf(),
        None => default_table_path(path).ok_or_else(|| TraceError::File {
            path: path.to_path_buf(),
            reason:
                "no simulation_throughputs.json found near the trace; pass the throughput table"
                    .into(),
        })?,
    };
    let throughputs = ThroughputTable::read(&table_path)?;
    let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut jobs = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index as u64 + 1;
        if line.trim().is_empty() {
            continue;
        }
        let err = |field: &str, reason: String| TraceError::Field {
            path: path.to_path_buf(),
            line: line_no,
            field: field.to_string(),
            reason,
        };
        let fields: Vec<&str> = line.split('\t').collect();
        // (job_type, total_steps, scale_factor, priority_weight, SLO, arrival_time)
        let (job_type, steps, scale, priority, slo, arrival) = match fields.len() {
            10 => (
                fields[0],
                fields[5],
                fields[6],
                Some(fields[7]),
                Some(fields[8]),
                fields[9],
            ),
            7 => (fields[0], fields[4], fields[6], None, None, fields[5]),
            n => {
                return Err(err(
                    "row",
                    format!("expected 7 or 10 tab-separated fields, found {n}"),
                ));
            }
        };
        let steps: f64 = steps
            .trim()
            .parse()
            .map_err(|e| err("total_steps", format!("`{steps}`: {e}")))?;
        let scale: u32 = scale
            .trim()
            .parse()
            .map_err(|e| err("scale_factor", format!("`{scale}`: {e}")))?;
        let arrival: f64 = arrival
            .trim()
            .parse()
            .map_err(|e| err("arrival_time", format!("`{arrival}`: {e}")))?;
        if !(steps.is_finite() && steps >= 0.0) {
            return Err(err("total_steps", format!("`{steps}` must be >= 0")));
        }
        if !(arrival.is_finite() && arrival >= 0.0) {
            return Err(err("arrival_time", format!("`{arrival}` must be >= 0")));
        }
        if scale == 0 {
            return Err(err("scale_factor", "must be >= 1".into()));
        }
        // Some types (Recommendation) are only measured on one GPU although traces ask for more:
        // they are taken not to scale, i.e. the largest measured scale factor below is used.
        let measured = [scale, 8, 4, 2, 1]
            .into_iter()
            .filter(|s| *s <= scale)
            .find_map(|s| throughputs.solo("v100", job_type, s));
        let tput = measured.filter(|t| *t > 0.0).ok_or_else(|| {
            err(
                "job_type",
                format!(
                    "`{job_type}` at scale factor {scale} has no V100 throughput in {}",
                    table_path.display()
                ),
            )
        })?;
        let mut job = JobSpec::new(
            JobId(jobs.len() as u32),
            SimTime::from_secs_f64(arrival),
            scale,
            steps / tput,
        );
        job.trace_id = format!("line{line_no}");
        job.model = Some(job_type.to_string());
        job.iterations = Some(steps as u64);
        if let Some(text) = slo {
            let slo_s: f64 = text
                .trim()
                .parse()
                .map_err(|e| err("SLO", format!("`{text}`: {e}")))?;
            // -1 means no SLO; otherwise seconds from arrival.
            if slo_s > 0.0 {
                job.deadline = Some(SimTime::from_secs_f64(arrival + slo_s));
            }
        }
        if let Some(p) = priority {
            let w: f64 = p
                .trim()
                .parse()
                .map_err(|e| err("priority_weight", format!("`{p}`: {e}")))?;
            job.priority = w.round() as i32;
        }
        jobs.push(job);
    }
    Ok(Trace::from_jobs(jobs, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_throughputs_are_read() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/gavel/simulation_throughputs.json");
        let table = ThroughputTable::read(&path).expect("reads");
        let a = ("ResNet-18 (batch size 16)".to_string(), 1);
        let b = ("ResNet-18 (batch size 64)".to_string(), 1);
        let (mine, theirs) = table.pair("v100", &a, &b).expect("measured");
        assert!(mine > 0.0 && theirs > 0.0);
        // The same pair seen from the other job swaps the two numbers.
        let (theirs_back, mine_back) = table.pair("v100", &b, &a).expect("measured");
        assert!(
            (mine - mine_back).abs() < 1e-9 && (theirs - theirs_back).abs() < 1e-9,
            "{mine} {theirs} / {mine_back} {theirs_back}"
        );
    }

    #[test]
    fn throughput_keys_parse() {
        assert_eq!(
            parse_key("('ResNet-18 (batch size 16)', 1)"),
            Some(("ResNet-18 (batch size 16)".into(), 1))
        );
        assert_eq!(
            parse_key("('LM (batch size 5)', 8)"),
            Some(("LM (batch size 5)".into(), 8))
        );
        assert_eq!(parse_key("null"), None);
    }
}
