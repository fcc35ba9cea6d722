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
//!
//! A daemon's history (`arbiter history export`) adds the columns of [`HISTORY_COLUMNS`], what
//! the daemon *observed* of each job beside what it asked for — the actual side of a what-if
//! (`arbiter whatif`). All optional; a file without them reads as before, and the simulator
//! never sees them ([`read`] checks and drops them, [`read_history`] returns them as
//! [`Recorded`]; `arbiter whatif` maps `gpu_types` onto the cluster it replays on):
//!
//! | column | meaning |
//! |---|---|
//! | `actual_start_s` | its first start, seconds from the trace start (empty = never started, or not known) |
//! | `actual_end_s` | its end (succeeded, failed, cancelled), seconds from the trace start (empty = not ended when exported) |
//! | `progress_rate` | steps per second its progress reports measured (empty = it reported none) |
//! | `gpu_types` | the GPU types it asked for, by name, separated by `;` (empty = any) |
//! | `array_id` | the trace id of its job array (the array's first task), when it is a task of one |
//! | `array_index` | its task index in that array (`ARBITER_ARRAY_TASK_ID`; with `array_id`) |
//! | `array_max_running` | the array's `%N`: at most this many of its tasks ran at once (empty = no limit) |

use crate::rows::{read_csv, Row};
use crate::{Trace, TraceError};
use arbiter_model::{DeadlineOption, GpuTypeId, IterationStages, JobId, JobSpec, SimDuration, SimTime};
use std::io::Write;
use std::path::Path;

/// Column order of the native format.
pub const COLUMNS: [&str; 21] = [
    "trace_id", "tenant", "user", "name", "model", "submit_s", "gpus", "gpu_type", "run_time_s",
    "iterations", "priority", "restart_overhead_s", "deadline_s", "io_s", "cpu_s", "gpu_s", "iteration_s",
    "trace_duration_s", "deadline_options", "priority_class", "dependency",
];

/// Columns a daemon's history adds to [`COLUMNS`] (see the module docs), in order.
pub const HISTORY_COLUMNS: [&str; 7] = ["actual_start_s", "actual_end_s", "progress_rate", "gpu_types", "array_id", "array_index", "array_max_running"];

/// What a daemon recorded of one job beyond what the simulator reads (a history's
/// [`HISTORY_COLUMNS`]): the actual side of a what-if, and the GPU types asked for by name.
/// Times are seconds on the trace's axis (its first submission at zero).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    /// Its first start (`None`: it never started, or the daemon no longer knew when).
    pub start_s: Option<f64>,
    /// Its end (`None`: it was still running when exported).
    pub end_s: Option<f64>,
    /// Steps per second its progress reports measured.
    pub progress_rate: Option<f64>,
    /// The GPU types it asked for, by name (empty: any). Names, not the `gpu_type` column's
    /// index: which index a type has depends on the cluster it is replayed on.
    pub gpu_types: Vec<String>,
    /// The job array it is a task of.
    pub array: Option<ArrayTask>,
}

impl Recorded {
    /// Whether nothing was recorded (a trace that is not a history).
    pub fn is_empty(&self) -> bool {
        *self == Recorded::default()
    }
}

/// A job's place in a job array (Slurm's `--array`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayTask {
    /// The array's trace id (its first task's).
    pub array_id: String,
    /// Its task index.
    pub index: u32,
    /// At most this many of the array's tasks run at once (`%N`); `None`: no limit.
    pub max_running: Option<u32>,
}

/// Reads a native trace (a history's columns are checked, then dropped).
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    read_history(path).map(|(trace, _)| trace)
}

/// Reads a native trace with what a daemon recorded of each job: `recorded[i]` is about
/// `trace.jobs[i]` (empty for a trace that is not a history).
pub fn read_history(path: &Path) -> Result<(Trace, Vec<Recorded>), TraceError> {
    let mut jobs = Vec::new();
    let mut recorded = Vec::new();
    read_csv(
        path,
        b',',
        |file| file.require(&["trace_id", "tenant", "submit_s", "gpus", "run_time_s"]),
        |row| {
            let optional = |field: &str| -> Option<String> {
                row.get(field).ok().filter(|s| !s.is_empty()).map(str::to_string)
            };
            let submit_s = row.non_negative("submit_s")?;
            let gpus = row.gpu_count("gpus")?;
            let run_time_s = row.non_negative("run_time_s")?;
            let mut job = JobSpec::new(JobId(jobs.len() as u32), SimTime::from_secs_f64(submit_s), gpus, run_time_s);
            job.trace_id = row.get("trace_id")?.to_string();
            job.tenant = row.get("tenant")?.to_string();
            job.user = optional("user");
            job.name = optional("name");
            job.model = optional("model");
            if let Some(t) = optional("gpu_type") {
                let index: u8 = t.parse().map_err(|e| row.error("gpu_type", format!("`{t}`: {e}")))?;
                job.gpu_type = Some(GpuTypeId(index));
            }
            if let Some(t) = optional("iterations") {
                job.iterations = Some(t.parse().map_err(|e| row.error("iterations", format!("`{t}`: {e}")))?);
            }
            if let Some(t) = optional("priority") {
                job.priority = t.parse().map_err(|e| row.error("priority", format!("`{t}`: {e}")))?;
            }
            if optional("restart_overhead_s").is_some() {
                job.restart_overhead = Some(SimDuration::from_secs_f64(row.non_negative("restart_overhead_s")?));
            }
            if optional("deadline_s").is_some() {
                job.deadline = Some(SimTime::from_secs_f64(row.non_negative("deadline_s")?));
            }
            let stages = ["io_s", "cpu_s", "gpu_s"].map(|f| optional(f).is_some());
            if stages.iter().any(|s| *s) {
                if !stages.iter().all(|s| *s) {
                    return Err(row.error("io_s", "io_s, cpu_s and gpu_s come together (all three or none)"));
                }
                job.stages = Some(IterationStages { io_s: row.non_negative("io_s")?, cpu_s: row.non_negative("cpu_s")?, gpu_s: row.non_negative("gpu_s")? });
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
                    let (at, value) = (at.trim().parse::<f64>().ok()?, value.trim().parse::<f64>().ok()?);
                    (at.is_finite() && at >= 0.0 && value.is_finite() && value > 0.0).then(|| DeadlineOption { deadline: SimTime::from_secs_f64(at), value })
                };
                job.deadline_options = text
                    .split(';')
                    .map(parse)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| row.error("deadline_options", format!("`{text}`: expected seconds:value pairs separated by `;`")))?;
                if job.deadline.is_none() {
                    job.deadline = job.deadline_options.first().map(|o| o.deadline);
                }
            }
            if let Some(name) = optional("priority_class") {
                job.class.name = Some(name.as_str().into());
            }
            if let Some(text) = optional("dependency") {
                let parsed = arbiter_model::Dependencies::parse(&text).map_err(|e| row.error("dependency", e))?;
                job.dependency = Some(std::sync::Arc::new(parsed));
            }
            recorded.push(history_columns(row, job.submit.as_secs_f64(), &optional)?);
            jobs.push(job);
            Ok(())
        },
    )?;
    // Sorted by submission here (stably, as `Trace::from_jobs` sorts), so that the recorded
    // columns stay beside their jobs; then shifted as the jobs are.
    let mut pairs: Vec<(JobSpec, Recorded)> = jobs.into_iter().zip(recorded).collect();
    pairs.sort_by_key(|(job, _)| job.submit);
    let shift_s = pairs.first().map_or(0.0, |(job, _)| job.submit.as_secs_f64());
    let (jobs, mut recorded): (Vec<JobSpec>, Vec<Recorded>) = pairs.into_iter().unzip();
    if shift_s > 0.0 {
        for o in &mut recorded {
            o.start_s = o.start_s.map(|s| s - shift_s);
            o.end_s = o.end_s.map(|s| s - shift_s);
        }
    }
    Ok((Trace::from_jobs(jobs, None), recorded))
}

/// A row's [`HISTORY_COLUMNS`], checked: times not before the submission (`submit_s`), the end
/// not before the start, a positive rate, an array index with its array.
fn history_columns(row: &Row<'_>, submit_s: f64, optional: &dyn Fn(&str) -> Option<String>) -> Result<Recorded, TraceError> {
    let mut o = Recorded::default();
    if optional("actual_start_s").is_some() {
        let start = row.non_negative("actual_start_s")?;
        if start < submit_s {
            return Err(row.error("actual_start_s", format!("`{start}` is before the job's submission ({submit_s} s)")));
        }
        o.start_s = Some(start);
    }
    if optional("actual_end_s").is_some() {
        let end = row.non_negative("actual_end_s")?;
        let Some(start) = o.start_s else {
            return Err(row.error("actual_end_s", "an end needs actual_start_s (a job ends after it started)"));
        };
        if end < start {
            return Err(row.error("actual_end_s", format!("`{end}` is before the job's start ({start} s)")));
        }
        o.end_s = Some(end);
    }
    if let Some(text) = optional("gpu_types") {
        o.gpu_types = text.split(';').map(|t| t.trim().to_string()).collect();
        if o.gpu_types.iter().any(String::is_empty) {
            return Err(row.error("gpu_types", format!("`{text}`: GPU type names separated by `;`")));
        }
    }
    if optional("progress_rate").is_some() {
        let rate = row.non_negative("progress_rate")?;
        if rate == 0.0 {
            return Err(row.error("progress_rate", "`0`: a measured rate is > 0 steps per second (leave it empty for none)"));
        }
        o.progress_rate = Some(rate);
    }
    match (optional("array_id"), optional("array_index")) {
        (None, None) => {
            if optional("array_max_running").is_some() {
                return Err(row.error("array_max_running", "a limit needs array_id and array_index"));
            }
        }
        (Some(array_id), Some(index)) => {
            let index: u32 = index.parse().map_err(|e| row.error("array_index", format!("`{index}`: {e}")))?;
            let max_running = match optional("array_max_running") {
                None => None,
                Some(n) => match n.parse::<u32>() {
                    Ok(n) if n > 0 => Some(n),
                    _ => return Err(row.error("array_max_running", format!("`{n}`: a number of tasks, at least 1"))),
                },
            };
            o.array = Some(ArrayTask { array_id, index, max_running });
        }
        (Some(_), None) => return Err(row.error("array_index", "missing: a task of an array has its index")),
        (None, Some(_)) => return Err(row.error("array_id", "missing: a task index needs its array's id")),
    }
    Ok(o)
}

/// Writes jobs in the native format.
pub fn write(out: impl Write, jobs: &[JobSpec]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(COLUMNS)?;
    for job in jobs {
        w.write_record(columns(job))?;
    }
    w.flush()?;
    Ok(())
}

/// Writes a daemon's history: the native columns, then [`HISTORY_COLUMNS`] from `recorded`
/// (`recorded[i]` is about `jobs[i]`; a job without one gets empty columns).
pub fn write_history(out: impl Write, jobs: &[JobSpec], recorded: &[Recorded]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(COLUMNS.iter().chain(HISTORY_COLUMNS.iter()))?;
    let none = Recorded::default();
    for (i, job) in jobs.iter().enumerate() {
        let o = recorded.get(i).unwrap_or(&none);
        let opt = |v: Option<f64>| v.map(format_secs).unwrap_or_default();
        let array = o.array.as_ref();
        let history = [
            opt(o.start_s),
            opt(o.end_s),
            opt(o.progress_rate),
            o.gpu_types.join(";"),
            array.map(|a| a.array_id.clone()).unwrap_or_default(),
            array.map(|a| a.index.to_string()).unwrap_or_default(),
            array.and_then(|a| a.max_running).map(|n| n.to_string()).unwrap_or_default(),
        ];
        w.write_record(columns(job).into_iter().chain(history))?;
    }
    w.flush()?;
    Ok(())
}

/// One job's [`COLUMNS`].
fn columns(job: &JobSpec) -> [String; 21] {
    let opt = |s: &Option<String>| s.clone().unwrap_or_default();
    [
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
        job.restart_overhead.map(|d| format_secs(d.as_secs_f64())).unwrap_or_default(),
        job.deadline.map(|d| format_secs(d.as_secs_f64())).unwrap_or_default(),
        job.stages.map(|s| format!("{}", s.io_s)).unwrap_or_default(),
        job.stages.map(|s| format!("{}", s.cpu_s)).unwrap_or_default(),
        job.stages.map(|s| format!("{}", s.gpu_s)).unwrap_or_default(),
        job.iteration_s.map(|s| format!("{s}")).unwrap_or_default(),
        job.trace_duration_s.map(|s| format!("{s}")).unwrap_or_default(),
        job.deadline_options.iter().map(|o| format!("{}:{}", format_secs(o.deadline.as_secs_f64()), o.value)).collect::<Vec<_>>().join(";"),
        job.class.name.as_deref().unwrap_or_default().to_string(),
        job.dependency.as_deref().map(dependency_text).unwrap_or_default(),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, submit_s: f64, gpus: u32, run_s: f64) -> JobSpec {
        let mut j = JobSpec::new(JobId(0), SimTime::from_secs_f64(submit_s), gpus, run_s);
        j.trace_id = id.into();
        j.tenant = "team-a".into();
        j
    }

    fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("hist.csv");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn a_history_round_trips_with_what_was_recorded_and_reads_as_a_plain_trace() {
        let jobs = vec![job("7", 0.0, 2, 100.0), job("8", 5.0, 1, 40.0), job("9", 6.0, 1, 40.0)];
        let recorded = vec![
            Recorded { start_s: Some(1.0), end_s: Some(101.0), progress_rate: Some(12.5), gpu_types: vec!["a100".into(), "h100".into()], array: None },
            Recorded { start_s: Some(5.0), end_s: None, array: Some(ArrayTask { array_id: "8".into(), index: 0, max_running: Some(2) }), ..Recorded::default() },
            Recorded { array: Some(ArrayTask { array_id: "8".into(), index: 1, max_running: Some(2) }), ..Recorded::default() },
        ];
        let mut text = Vec::new();
        write_history(&mut text, &jobs, &recorded).expect("writes");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(text.starts_with(&format!("{},{}", COLUMNS.join(","), HISTORY_COLUMNS.join(","))), "{text}");
        let (_dir, path) = file(&text);
        let (trace, back) = read_history(&path).expect("reads");
        assert_eq!(back, recorded);
        assert_eq!(trace.jobs.iter().map(|j| j.trace_id.as_str()).collect::<Vec<_>>(), ["7", "8", "9"]);
        // The simulator's reader: the same jobs, nothing of the history on them.
        assert_eq!(read(&path).expect("reads").jobs, trace.jobs);
    }

    #[test]
    fn a_trace_without_the_history_columns_reads_as_before_with_nothing_recorded() {
        let mut text = Vec::new();
        write(&mut text, &[job("1", 0.0, 1, 10.0)]).expect("writes");
        let (_dir, path) = file(&String::from_utf8(text).expect("utf-8"));
        let (trace, recorded) = read_history(&path).expect("reads");
        assert_eq!((trace.jobs.len(), recorded.len()), (1, 1));
        assert!(recorded[0].is_empty());
        // And the oldest form: the required columns alone.
        let (_dir, path) = file("trace_id,tenant,submit_s,gpus,run_time_s\na,t,0,1,5\n");
        assert!(read_history(&path).expect("reads").1[0].is_empty());
    }

    #[test]
    fn recorded_times_stay_with_their_jobs_when_rows_are_out_of_order_and_shift_with_them() {
        let header = format!("trace_id,tenant,submit_s,gpus,run_time_s,{}", HISTORY_COLUMNS.join(","));
        let (_dir, path) = file(&format!("{header}\nlate,t,110,1,5,120,125,,,,,\nearly,t,100,1,5,100,105,,,,,\n"));
        let (trace, recorded) = read_history(&path).expect("reads");
        assert_eq!(trace.jobs[0].trace_id, "early");
        assert_eq!((recorded[0].start_s, recorded[0].end_s), (Some(0.0), Some(5.0)));
        assert_eq!((recorded[1].start_s, recorded[1].end_s), (Some(20.0), Some(25.0)));
    }

    #[test]
    fn bad_history_columns_name_the_file_line_and_field() {
        let header = format!("trace_id,tenant,submit_s,gpus,run_time_s,{}", HISTORY_COLUMNS.join(","));
        for (row, says) in [
            ("a,t,10,1,5,9,20,,,,,", "hist.csv:2: actual_start_s: `9` is before the job's submission (10 s)"),
            ("a,t,10,1,5,12,11,,,,,", "hist.csv:2: actual_end_s: `11` is before the job's start (12 s)"),
            ("a,t,10,1,5,,11,,,,,", "hist.csv:2: actual_end_s: an end needs actual_start_s"),
            ("a,t,10,1,5,soon,,,,,,", "hist.csv:2: actual_start_s: `soon`"),
            ("a,t,10,1,5,,,0,,,,", "hist.csv:2: progress_rate: `0`"),
            ("a,t,10,1,5,,,-3,,,,", "hist.csv:2: progress_rate: `-3` must be a finite number >= 0"),
            ("a,t,10,1,5,,,,,4,,", "hist.csv:2: array_index: missing"),
            ("a,t,10,1,5,,,,,,4,", "hist.csv:2: array_id: missing"),
            ("a,t,10,1,5,,,,,4,x,", "hist.csv:2: array_index: `x`"),
            ("a,t,10,1,5,,,,,4,1,0", "hist.csv:2: array_max_running: `0`"),
            ("a,t,10,1,5,,,,,,,3", "hist.csv:2: array_max_running: a limit needs array_id"),
            ("a,t,10,1,5,,,,a100;;h100,,,", "hist.csv:2: gpu_types: `a100;;h100`"),
        ] {
            let (_dir, path) = file(&format!("{header}\n{row}\n"));
            let e = read_history(&path).expect_err(row).to_string();
            assert!(e.contains(says), "{row}: {e}");
            // The simulator's reader refuses it the same way.
            assert!(read(&path).expect_err(row).to_string().contains(says));
        }
    }
}
