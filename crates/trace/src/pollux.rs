//! Pollux's workload CSVs: `name,time,application,num_replicas,batch_size` (times in seconds).
//!
//! The workload gives no durations: Pollux derives them from per-model profiles. For rigid
//! (non-elastic) scheduling we estimate a job's run time from those profiles, documented here so
//! the estimate can be checked:
//! - iterations to finish = the `iteration` column of the last row of
//!   `<application>/validation-<batch_size>.csv` (the row at the model's final epoch);
//! - time per iteration = `step_time + sync_time` from `<application>/placements.csv` for the
//!   consolidated placement of `num_replicas` GPUs (4 GPUs per node, as on Pollux's T4 nodes:
//!   placement string of full nodes `4` plus the remainder), at the local batch size
//!   (`batch_size / num_replicas`) nearest to one that was measured;
//! - run time = iterations × time per iteration.
//!
//! The profiles folder is `simulator/traces/` of the Pollux artifact (found next to the
//! workload when not given).

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{JobId, JobSpec, SimTime};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-application profile data needed for the run-time estimate.
#[derive(Debug, Default)]
struct Profile {
    /// placement string → [(local batch size, seconds per iteration)]
    step_times: BTreeMap<String, Vec<(f64, f64)>>,
    /// total batch size → iterations to finish
    iterations: BTreeMap<u64, f64>,
}

fn load_profile(dir: &Path, app: &str) -> Result<Profile, TraceError> {
    let app_dir = dir.join(app);
    let mut profile = Profile::default();
    read_csv(
        &app_dir.join("placements.csv"),
        b',',
        |f| f.require(&["placement", "local_bsz", "step_time", "sync_time"]),
        |row| {
            let placement = row.get("placement")?.to_string();
            let local_bsz = row.non_negative("local_bsz")?;
            let secs = row.non_negative("step_time")? + row.non_negative("sync_time")?;
            profile.step_times.entry(placement).or_default().push((local_bsz, secs));
            Ok(())
        },
    )?;
    let entries = std::fs::read_dir(&app_dir).map_err(|source| TraceError::Io { path: app_dir.clone(), source })?;
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for file in files {
        let Some(bsz) = file
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("validation-"))
            .and_then(|n| n.strip_suffix(".csv"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let mut last = 0.0;
        read_csv(&file, b',', |f| f.require(&["iteration"]), |row| {
            last = row.non_negative("iteration")?;
            Ok(())
        })?;
        profile.iterations.insert(bsz, last);
    }
    Ok(profile)
}

fn placement_string(replicas: u32) -> String {
    let full = replicas / 4;
    let rest = replicas % 4;
    let mut s = "4".repeat(full as usize);
    if rest > 0 {
        s.push(char::from_digit(rest, 10).unwrap_or('1'));
    }
    s
}

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
            reason: "no Pollux profiles folder (traces/<model>/placements.csv) found near the workload".into(),
        })?,
    };
    let mut cache: BTreeMap<String, Profile> = BTreeMap::new();
    let mut jobs = Vec::new();
    read_csv(
        path,
        b',',
        |f| f.require(&["name", "time", "application", "num_replicas", "batch_size"]),
        |row| {
            let app = row.get("application")?.to_string();
            let replicas = row.gpu_count("num_replicas")?;
            let batch: u64 = row.parse("batch_size")?;
            let submit = row.non_negative("time")?;
            if !cache.contains_key(&app) {
                let profile = load_profile(&profile_dir, &app).map_err(|e| row.error("application", format!("`{app}`: {e}")))?;
                cache.insert(app.clone(), profile);
            }
            let profile = &cache[&app];
            let iterations = nearest(&profile.iterations, batch)
                .ok_or_else(|| row.error("batch_size", format!("no validation profile for `{app}`")))?;
            let local_bsz = batch as f64 / replicas as f64;
            let placement = placement_string(replicas);
            let step_s = profile
                .step_times
                .get(&placement)
                .or_else(|| profile.step_times.get("1"))
                .and_then(|points| {
                    points
                        .iter()
                        .min_by(|a, b| (a.0 - local_bsz).abs().total_cmp(&(b.0 - local_bsz).abs()))
                        .map(|p| p.1)
                })
                .ok_or_else(|| row.error("num_replicas", format!("no step-time profile for `{app}` on {placement}")))?;
            let mut job = JobSpec::new(JobId(jobs.len() as u32), SimTime::from_secs_f64(submit), replicas, iterations * step_s);
            job.trace_id = row.get("name")?.to_string();
            job.model = Some(app);
            job.iterations = Some(iterations as u64);
            jobs.push(job);
            Ok(())
        },
    )?;
    Ok(Trace::from_jobs(jobs, None))
}

/// The value at the key nearest to `key` (ties: the smaller key).
fn nearest(map: &BTreeMap<u64, f64>, key: u64) -> Option<f64> {
    map.iter().min_by_key(|(k, _)| k.abs_diff(key)).map(|(_, v)| *v)
}
