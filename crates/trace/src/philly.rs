//! Philly as `philly.csv` (the Pollux/Helios derivation of Microsoft's 2017 log):
//! `timestamp,duration,num_gpus,gpu_time,cluster`, one row per job, `timestamp` the submission as
//! local time `YYYY-MM-DD HH:MM:SS`, `duration` run seconds, `cluster` the virtual cluster (our
//! tenant). The file has no user or job-name columns.

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{JobId, JobSpec, SimTime, TenantNames};
use chrono::NaiveDateTime;
use std::path::Path;

/// Parses a Philly timestamp into Unix seconds (the log's local time, read as if UTC: only
/// differences matter).
pub fn parse_timestamp(text: &str) -> Option<i64> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

/// Reads `philly.csv`.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let mut rows: Vec<(i64, JobSpec)> = Vec::new();
    let mut tenants = TenantNames::default();
    read_csv(
        path,
        b',',
        |file| file.require(&["timestamp", "duration", "num_gpus", "cluster"]),
        |row| {
            let stamp = row.get("timestamp")?;
            let unix_s = parse_timestamp(stamp).ok_or_else(|| {
                row.error(
                    "timestamp",
                    format!("`{stamp}` is not `YYYY-MM-DD HH:MM:SS`"),
                )
            })?;
            let duration_s = row.non_negative("duration")?;
            let gpus = row.gpu_count("num_gpus")?;
            let tenant = row.get("cluster")?;
            if tenant.is_empty() {
                return Err(row.error("cluster", "empty virtual-cluster name"));
            }
            let mut job = JobSpec::new(JobId(rows.len() as u32), SimTime::ZERO, gpus, duration_s);
            job.trace_id = format!("line{}", row.line());
            job.tenant = tenants.get(tenant);
            rows.push((unix_s, job));
            Ok(())
        },
    )?;
    let origin = rows.iter().map(|(t, _)| *t).min().unwrap_or(0);
    let jobs = rows
        .into_iter()
        .map(|(t, mut job)| {
            job.submit = SimTime::from_ms(((t - origin) as u64) * 1000);
            job
        })
        .collect();
    Ok(Trace::from_jobs(jobs, Some(origin)))
}

/// Reads per-VC cluster sizes: Helios' `philly_vc.csv`, columns `vc,node num`.
pub fn read_vc_sizes(path: &Path) -> Result<Vec<(String, u32)>, TraceError> {
    let mut sizes = Vec::new();
    read_csv(
        path,
        b',',
        |f| f.require(&["vc", "node num"]),
        |row| {
            let vc = row.get("vc")?.to_string();
            let nodes: u32 = row.parse("node num")?;
            if nodes == 0 {
                return Err(row.error("node num", "must be >= 1"));
            }
            sizes.push((vc, nodes));
            Ok(())
        },
    )?;
    Ok(sizes)
}
