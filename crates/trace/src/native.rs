//! Arbiter's native trace format: a CSV with one job per row.
//!
//! | column | meaning | required |
//! |---|---|---|
//! | `trace_id` | the job's id in its source | yes |
//! | `tenant` | team / virtual cluster | yes |
//! | `user`, `name`, `model` | optional strings (empty = none) | no |
//! | `submit_s` | submission, seconds from the trace start | yes |
//! | `gpus` | GPUs requested (a gang) | yes |
//! | `gpu_type` | required GPU type index (empty = any) | no |
//! | `run_time_s` | run time at full speed, seconds | yes |
//! | `iterations` | training iterations (empty = unknown) | no |
//! | `priority` | integer, larger first (empty = 0) | no |
//! | `restart_overhead_s` | start-up cost on every (re)start (empty = simulator default) | no |
//! | `deadline_s` | SLO: time the job should be done by, seconds from the trace start (empty = none) | no |
//! | `io_s`, `cpu_s`, `gpu_s` | one iteration's storage-I/O, CPU and GPU stage times, seconds (all three or none; Muri) | no |
//! | `iteration_s` | one iteration alone, seconds (empty = unknown) | no |
//! | `trace_duration_s` | the source trace's own duration column, seconds, where it differs from `run_time_s` (Muri-S) | no |
//! | `deadline_options` | a soft SLO's deadlines with their values, `seconds:value` separated by `;`, the first being `deadline_s` (Chronus) | no |
//! | `priority_class` | the job's priority class, by name; a scenario's `[[priority_classes]]` defines it (empty = none) | no |
//! | `dependency` | what the job waits for, Slurm's `--dependency` syntax over trace ids (`afterok:a1:a2,afterany:b`, `singleton`) (empty = nothing) | no |
//!
//! `arbiter trace convert` writes it from any other format; reading it back gives the same jobs.

use crate::rows::read_csv;
use crate::{Trace, TraceError};
use arbiter_model::{
    DeadlineOption, GpuTypeId, IterationStages, JobId, JobSpec, SimDuration, SimTime,
};
use std::io::Write;
use std::path::Path;

/// Column order of the native format.
pub const COLUMNS: [&str; 21] = [
    "trace_id",
    "tenant",
    "user",
    "name",
    "model",
    "submit_s",
    "gpus",
    "gpu_type",
    "run_time_s",
    "iterations",
    "priority",
    "restart_overhead_s",
    "deadline_s",
    "io_s",
    "cpu_s",
    "gpu_s",
    "iteration_s",
    "trace_duration_s",
    "deadline_options",
    "priority_class",
    "dependency",
];

/// Reads a native trace.
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let mut jobs = Vec::new();
    read_csv(
        path,
        b',',
        |file| file.require(&["trace_id", "tenant", "submit_s", "gpus", "run_time_s"]),
        |row| {
            let optional = |field: &str| -> Option<String> {
                row.get(field)
                    .ok()
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            let submit_s = row.non_negative("submit_s")?;
            let gpus = row.gpu_count("gpus")?;
            let run_time_s = row.non_negative("run_time_s")?;
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                SimTime::from_secs_f64(submit_s),
                gpus,
                run_time_s,
            );
            job.trace_id = row.get("trace_id")?.to_string();
            job.tenant = row.get("tenant")?.to_string();
            job.user = optional("user");
            job.name = optional("name");
            job.model = optional("model");
            if let Some(t) = optional("gpu_type") {
                let index: u8 = t
                    .parse()
                    .map_err(|e| row.error("gpu_type", format!("`{t}`: {e}")))?;
                job.gpu_type = Some(GpuTypeId(index));
            }
            if let Some(t) = optional("iterations") {
                job.iterations = Some(
                    t.parse()
                        .map_err(|e| row.error("iterations", format!("`{t}`: {e}")))?,
                );
            }
            if let Some(t) = optional("priority") {
                job.priority = t
                    .parse()
                    .map_err(|e| row.error("priority", format!("`{t}`: {e}")))?;
            }
            if optional("restart_overhead_s").is_some() {
                job.restart_overhead = Some(SimDuration::from_secs_f64(
                    row.non_negative("restart_overhead_s")?,
                ));
            }
            if optional("deadline_s").is_some() {
                job.deadline = Some(SimTime::from_secs_f64(row.non_negative("deadline_s")?));
            }
            let stages = ["io_s", "cpu_s", "gpu_s"].map(|f| optional(f).is_some());
            if stages.iter().any(|s| *s) {
                if !stages.iter().all(|s| *s) {
                    return Err(row.error(
                        "io_s",
                        "io_s, cpu_s and gpu_s come together (all three or none)",
                    ));
                }
                job.stages = Some(IterationStages {
                    io_s: row.non_negative("io_s")?,
                    cpu_s: row.non_negative("cpu_s")?,
                    gpu_s: row.non_negative("gpu_s")?,
                });
            }
            if optional("iteration_s").is_some() {
                job.iteration_s = Some(row.non_negative("iteration_s")?);
            }
            if optional("trace_duration_s").is_some() {
                job.trace_duration_s = Some(row.non_negative("trace_duration_s")?);
            }
            if let Some(text) = optional("deadline_options") {
                let parse = |item: &str| -> Option<DeadlineOption> {
                    let (at, value) = item.split_once(':')?;
                    let (at, value) = (
                        at.trim().parse::<f64>().ok()?,
                        value.trim().parse::<f64>().ok()?,
                    );
                    (at.is_finite() && at >= 0.0 && value.is_finite() && value > 0.0).then(|| {
                        DeadlineOption {
                            deadline: SimTime::from_secs_f64(at),
                            value,
                        }
                    })
                };
                job.deadline_options = text
                    .split(';')
                    .map(parse)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        row.error(
                            "deadline_options",
                            format!("`{text}`: expected seconds:value pairs separated by `;`"),
                        )
                    })?;
                if job.deadline.is_none() {
                    job.deadline = job.deadline_options.first().map(|o| o.deadline);
                }
            }
            if let Some(name) = optional("priority_class") {
                job.class.name = Some(name.as_str().into());
            }
            if let Some(text) = optional("dependency") {
                let parsed = arbiter_model::Dependencies::parse(&text)
                    .map_err(|e| row.error("dependency", e))?;
                job.dependency = Some(std::sync::Arc::new(parsed));
            }
            jobs.push(job);
            Ok(())
        },
    )?;
    Ok(Trace::from_jobs(jobs, None))
}

/// Writes jobs in the native format.
pub fn write(out: impl Write, jobs: &[JobSpec]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(COLUMNS)?;
    let opt = |s: &Option<String>| s.clone().unwrap_or_default();
    for job in jobs {
        w.write_record([
            job.trace_id.clone(),
            job.tenant.clone(),
            opt(&job.user),
            opt(&job.name),
            opt(&job.model),
            format_secs(job.submit.as_secs_f64()),
            job.gpus.to_string(),
            job.gpu_type.map(|t| t.0.to_string()).unwrap_or_default(),
            format!("{}", job.run_time_s),
            job.iterations.map(|i| i.to_string()).unwrap_or_default(),
            job.priority.to_string(),
            job.restart_overhead
                .map(|d| format_secs(d.as_secs_f64()))
                .unwrap_or_default(),
            job.deadline
                .map(|d| format_secs(d.as_secs_f64()))
                .unwrap_or_default(),
            job.stages
                .map(|s| format!("{}", s.io_s))
                .unwrap_or_default(),
            job.stages
                .map(|s| format!("{}", s.cpu_s))
                .unwrap_or_default(),
            job.stages
                .map(|s| format!("{}", s.gpu_s))
                .unwrap_or_default(),
            job.iteration_s.map(|s| format!("{s}")).unwrap_or_default(),
            job.trace_duration_s
                .map(|s| format!("{s}"))
                .unwrap_or_default(),
            job.deadline_options
                .iter()
                .map(|o| format!("{}:{}", format_secs(o.deadline.as_secs_f64()), o.value))
                .collect::<Vec<_>>()
                .join(";"),
            job.class.name.as_deref().unwrap_or_default().to_string(),
            job.dependency
                .as_deref()
                .map(dependency_text)
                .unwrap_or_default(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// Dependencies back in Slurm's syntax (`afterok:a:b,singleton`), one item per kind in order.
fn dependency_text(deps: &arbiter_model::Dependencies) -> String {
    let mut items: Vec<String> = Vec::new();
    for d in &deps.on {
        match items.last_mut() {
            Some(last) if last.starts_with(&format!("{}:", d.kind)) => {
                last.push(':');
                last.push_str(&d.on);
            }
            _ => items.push(format!("{}:{}", d.kind, d.on)),
        }
    }
    if deps.singleton {
        items.push("singleton".into());
    }
    items.join(",")
}

fn format_secs(s: f64) -> String {
    format!("{s}")
}
