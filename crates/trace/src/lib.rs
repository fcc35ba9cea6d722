//! Readers for public GPU-cluster traces, and Arbiter's native trace format.
//!
//! Every reader turns a file into a [`Trace`]: jobs sorted by submission time, numbered densely,
//! times as [`arbiter_model::SimTime`] milliseconds from the first submission. Units are converted
//! here, at the edge, once: Muri's traces are in milliseconds, everything else in seconds.
//!
//! Bad input is an error naming the file, the line and the field (`philly.csv:17: num_gpus: ...`),
//! never a panic. Readers know nothing about policies.
#![deny(missing_docs)]

pub mod analysis;
pub mod chronus;
pub mod cluster_spec;
mod csv_out;
mod error;
pub mod gavel;
pub mod generator;
pub mod muri;
pub mod native;
pub mod pai;
pub mod philly;
pub mod pollux;
mod rows;
pub mod synergy;
pub mod tiresias;

pub use error::TraceError;

use arbiter_model::{JobId, JobSpec, SimDuration, SimTime};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The trace formats Arbiter reads. The names are the CLI and scenario identifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// Philly as `philly.csv` (Pollux/Helios form): `timestamp,duration,num_gpus,gpu_time,cluster`.
    Philly,
    /// Tiresias' CSV: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval` (seconds).
    Tiresias,
    /// Muri's CSV: Tiresias' columns plus per-resource iteration times, all in milliseconds.
    Muri,
    /// Gavel's tab-separated `.trace` (10-column, or the older 7-column form).
    Gavel,
    /// Pollux's workload CSV: `name,time,application,num_replicas,batch_size`.
    Pollux,
    /// Chronus' deadline traces (minutes; SLO options per job).
    Chronus,
    /// Arbiter's native CSV (see [`native`]).
    Native,
}

impl TraceFormat {
    /// All formats, for help texts.
    pub const ALL: [TraceFormat; 7] = [
        TraceFormat::Philly,
        TraceFormat::Tiresias,
        TraceFormat::Muri,
        TraceFormat::Gavel,
        TraceFormat::Pollux,
        TraceFormat::Chronus,
        TraceFormat::Native,
    ];

    /// The identifier used in scenarios and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Philly => "philly",
            TraceFormat::Tiresias => "tiresias",
            TraceFormat::Muri => "muri",
            TraceFormat::Gavel => "gavel",
            TraceFormat::Pollux => "pollux",
            TraceFormat::Chronus => "chronus",
            TraceFormat::Native => "native",
        }
    }

    /// Parses an identifier.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Parses an identifier; an unknown one is refused naming the known ones.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
            format!(
                "unknown trace format `{name}`; expected one of: {}",
                names.join(", ")
            )
        })
    }
}

/// Options that change how a trace is read. Defaults read every format as-is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadOptions {
    /// Muri: multiply every iteration time by this factor. Muri's simulator multiplies by 1.015
    /// (a measured per-iteration overhead); `None` means 1.0.
    pub iteration_time_factor: Option<f64>,
    /// Gavel and Pollux: where to find throughput tables / model profiles. `None` uses the
    /// reader's default next to the trace.
    pub profiles: Option<std::path::PathBuf>,
}

/// A workload read from a trace: jobs sorted by submission time with dense ids.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Jobs in submission order; `jobs[i].id == JobId(i)`.
    pub jobs: Vec<JobSpec>,
    /// Wall-clock time (Unix seconds) of `SimTime::ZERO`, for traces with real timestamps.
    pub origin_unix_s: Option<i64>,
    /// Rows the reader left out on purpose, counted with why (Chronus' 0-GPU jobs).
    pub skipped: Vec<(usize, String)>,
}

impl Trace {
    /// Builds a trace from jobs in any order: sorts by submission time (stable, so ties keep file
    /// order), renumbers ids densely and shifts time so the first submission is at zero.
    pub fn from_jobs(mut jobs: Vec<JobSpec>, origin_unix_s: Option<i64>) -> Self {
        jobs.sort_by_key(|j| j.submit);
        let shift = jobs.first().map(|j| j.submit).unwrap_or(SimTime::ZERO);
        for (i, job) in jobs.iter_mut().enumerate() {
            job.id = JobId(i as u32);
            job.submit = SimTime(job.submit.0 - shift.0);
            job.deadline = job.deadline.map(|d| SimTime(d.0.saturating_sub(shift.0)));
            for option in &mut job.deadline_options {
                option.deadline = SimTime(option.deadline.0.saturating_sub(shift.0));
            }
        }
        let origin = origin_unix_s.map(|o| o + (shift.0 / 1000) as i64);
        Trace {
            jobs,
            origin_unix_s: origin,
            skipped: Vec::new(),
        }
    }

    /// Jobs on the trace's own time axis (not shifted to start at zero): for traces whose zero
    /// means something, such as Pollux's workloads (seconds from the start of the window, which a
    /// simulator stepping from zero in fixed intervals sees).
    pub fn from_jobs_keeping_times(mut jobs: Vec<JobSpec>) -> Self {
        jobs.sort_by_key(|j| j.submit);
        for (i, job) in jobs.iter_mut().enumerate() {
            job.id = JobId(i as u32);
        }
        Trace {
            jobs,
            origin_unix_s: None,
            skipped: Vec::new(),
        }
    }

    /// Keeps the jobs for which `keep` is true and renumbers them densely. Times are kept as they
    /// are, so tenants split out of one trace stay on one time axis.
    pub fn filter(self, mut keep: impl FnMut(&JobSpec) -> bool) -> Self {
        let mut jobs: Vec<JobSpec> = self.jobs.into_iter().filter(|j| keep(j)).collect();
        for (i, job) in jobs.iter_mut().enumerate() {
            job.id = JobId(i as u32);
        }
        Trace {
            jobs,
            origin_unix_s: self.origin_unix_s,
            skipped: self.skipped,
        }
    }

    /// Distinct tenants, sorted.
    pub fn tenants(&self) -> Vec<String> {
        let distinct: std::collections::BTreeSet<&str> =
            self.jobs.iter().map(|j| j.tenant.as_str()).collect();
        distinct.into_iter().map(str::to_string).collect()
    }

    /// Span from the first to the last submission.
    pub fn submit_span(&self) -> SimDuration {
        match (self.jobs.first(), self.jobs.last()) {
            (Some(a), Some(b)) => b.submit - a.submit,
            _ => SimDuration::ZERO,
        }
    }
}

/// Reads a trace file in the given format.
pub fn read(path: &Path, format: TraceFormat, options: &ReadOptions) -> Result<Trace, TraceError> {
    match format {
        TraceFormat::Philly => philly::read(path),
        TraceFormat::Tiresias => tiresias::read(path),
        TraceFormat::Muri => muri::read(path, options.iteration_time_factor.unwrap_or(1.0)),
        TraceFormat::Gavel => gavel::read(path, options.profiles.as_deref()),
        TraceFormat::Pollux => pollux::read(path, options.profiles.as_deref()),
        TraceFormat::Chronus => chronus::read(path),
        TraceFormat::Native => native::read(path),
    }
}
