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
//!
//! Read strictly (docs/trace-formats.md): a header of these columns only, each once (a near
//! miss is named: "did you mean `dependency`?"); no row longer than the header (an unquoted
//! comma); `trace_id` and `tenant` non-empty, trace ids unique; names without control
//! characters; no time or duration above [`MAX_SECONDS`]. The file is read once (a pipe works).

use crate::csv_out::CsvOut;
use crate::rows::{LongRows, Row, read_csv_bytes};
use crate::{Trace, TraceError};
use arbiter_model::{
    ArrayLimit, DeadlineOption, GpuTypeId, IterationStages, JobId, JobSpec, SimDuration, SimTime,
    TenantNames,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The longest time or duration the native format reads, in seconds: ten years of 365 days.
/// Times are whole milliseconds in a `u64` on the simulator's axis, and a replay of more than a
/// decade is certainly a unit mistake (epoch seconds or milliseconds where seconds from the
/// trace's start belong): every time-like column above it is refused, naming the line.
pub const MAX_SECONDS: f64 = 315_360_000.0;

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

/// Columns a daemon's history adds to [`COLUMNS`] (see the module docs), in order.
pub const HISTORY_COLUMNS: [&str; 7] = [
    "actual_start_s",
    "actual_end_s",
    "progress_rate",
    "gpu_types",
    "array_id",
    "array_index",
    "array_max_running",
];

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
    // Read once, then parsed from memory: a pipe (`/dev/stdin`, `<(...)`) cannot be read twice.
    let bytes = whole_file(path)?;
    // Sized once (lines bound the rows): a million jobs grown by doubling would copy their
    // specs over and over.
    let rows = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut jobs = Vec::with_capacity(rows);
    let mut recorded = Vec::with_capacity(rows);
    // Each job's line, for an error naming two lines (a trace id given twice).
    let mut lines: Vec<u64> = Vec::with_capacity(rows);
    // Each column's index, looked up once (by name in every row, a million rows' lookups cost
    // more than their parsing).
    let names: [&str; ALL] = std::array::from_fn(|i| {
        if i < COLUMNS.len() {
            COLUMNS[i]
        } else {
            HISTORY_COLUMNS[i - COLUMNS.len()]
        }
    });
    let columns = std::cell::OnceCell::new();
    let mut tenants = TenantNames::default();
    read_csv_bytes(
        path,
        &bytes,
        b',',
        LongRows::Refused,
        |file| {
            file.check_columns("native", &names)?;
            file.require(&["trace_id", "tenant", "submit_s", "gpus", "run_time_s"])?;
            columns.get_or_init(|| file.indices(names));
            Ok(())
        },
        |row| {
            let Some(c) = columns.get() else {
                return Err(row.error("row", "read before its header"));
            };
            let text = |i: usize| row.present(c[i]);
            // An optional name, refused with a character that acts on a terminal.
            let owned = |i: usize| {
                text(i)
                    .map(|t| printable(row, names[i], t).map(str::to_string))
                    .transpose()
            };
            // A column known present (its text is there) as seconds.
            let number = |i: usize| seconds(row, c[i], names[i]);
            let required = |i: usize| {
                let t = row.at(c[i].unwrap_or(usize::MAX), names[i])?;
                if t.is_empty() {
                    return Err(row.error(names[i], "empty (every job has one)"));
                }
                printable(row, names[i], t)
            };
            let submit_s = number(SUBMIT_S)?;
            let gpus = row.gpu_count_at(c[GPUS].unwrap_or(usize::MAX), names[GPUS])?;
            let run_time_s = number(RUN_TIME_S)?;
            let mut job = JobSpec::new(
                JobId(jobs.len() as u32),
                SimTime::from_secs_f64(submit_s),
                gpus,
                run_time_s,
            );
            job.trace_id = required(TRACE_ID)?.to_string();
            job.tenant = tenants.get(required(TENANT)?);
            job.user = owned(USER)?;
            job.name = owned(NAME)?;
            job.model = owned(MODEL)?;
            if let Some(t) = text(GPU_TYPE) {
                let index: u8 = t
                    .parse()
                    .map_err(|e| row.error("gpu_type", format!("`{t}`: {e}")))?;
                job.gpu_type = Some(GpuTypeId(index));
            }
            if let Some(t) = text(ITERATIONS) {
                job.iterations = Some(
                    t.parse()
                        .map_err(|e| row.error("iterations", format!("`{t}`: {e}")))?,
                );
            }
            if let Some(t) = text(PRIORITY) {
                job.priority = t
                    .parse()
                    .map_err(|e| row.error("priority", format!("`{t}`: {e}")))?;
            }
            if text(RESTART_OVERHEAD_S).is_some() {
                job.restart_overhead =
                    Some(SimDuration::from_secs_f64(number(RESTART_OVERHEAD_S)?));
            }
            if text(DEADLINE_S).is_some() {
                job.deadline = Some(SimTime::from_secs_f64(number(DEADLINE_S)?));
            }
            let stages = [IO_S, CPU_S, GPU_S].map(|f| text(f).is_some());
            if stages.iter().any(|s| *s) {
                if !stages.iter().all(|s| *s) {
                    return Err(row.error(
                        "io_s",
                        "io_s, cpu_s and gpu_s come together (all three or none)",
                    ));
                }
                job.stages = Some(IterationStages {
                    io_s: number(IO_S)?,
                    cpu_s: number(CPU_S)?,
                    gpu_s: number(GPU_S)?,
                });
            }
            if text(ITERATION_S).is_some() {
                job.iteration_s = Some(number(ITERATION_S)?);
            }
            if text(TRACE_DURATION_S).is_some() {
                job.trace_duration_s = Some(number(TRACE_DURATION_S)?);
            }
            if let Some(text) = text(DEADLINE_OPTIONS) {
                let parse = |item: &str| -> Option<(f64, f64)> {
                    let (at, value) = item.split_once(':')?;
                    let (at, value) = (
                        at.trim().parse::<f64>().ok()?,
                        value.trim().parse::<f64>().ok()?,
                    );
                    (at.is_finite() && at >= 0.0 && value.is_finite() && value > 0.0)
                        .then_some((at, value))
                };
                job.deadline_options = text
                    .split(';')
                    .map(|item| {
                        let (at, value) = parse(item).ok_or_else(|| {
                            row.error(
                                "deadline_options",
                                format!("`{text}`: expected seconds:value pairs separated by `;`"),
                            )
                        })?;
                        Ok(DeadlineOption {
                            deadline: SimTime::from_secs_f64(within_bound(
                                row,
                                "deadline_options",
                                at,
                            )?),
                            value,
                        })
                    })
                    .collect::<Result<Vec<_>, TraceError>>()?;
                if job.deadline.is_none() {
                    job.deadline = job.deadline_options.first().map(|o| o.deadline);
                }
            }
            if let Some(name) = text(PRIORITY_CLASS) {
                job.class.name = Some(printable(row, "priority_class", name)?.into());
            }
            if let Some(text) = text(DEPENDENCY) {
                let parsed = arbiter_model::Dependencies::parse(text)
                    .map_err(|e| row.error("dependency", e))?;
                job.dependency = Some(std::sync::Arc::new(parsed));
            }
            recorded.push(history_columns(row, c, job.submit.as_secs_f64())?);
            jobs.push(job);
            lines.push(row.line());
            Ok(())
        },
    )?;
    drop(bytes);
    // A trace id names one job (a dependency on a twice-given id would wait on both).
    if !increasing_numbers(jobs.iter().map(|j| j.trace_id.as_str())) {
        let mut ids = std::collections::HashSet::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            if !ids.insert(job.trace_id.as_str()) {
                let first = jobs
                    .iter()
                    .position(|j| j.trace_id == job.trace_id)
                    .unwrap_or(i);
                return Err(TraceError::Field {
                    path: path.to_path_buf(),
                    line: lines[i],
                    field: "trace_id".into(),
                    reason: format!(
                        "`{}` is the trace id of line {} too (a trace id names one job)",
                        job.trace_id, lines[first]
                    ),
                });
            }
        }
    }
    set_array_limits(path, &mut jobs, &recorded, &lines)?;
    drop(lines);
    // In submission order (stably, as `Trace::from_jobs` sorts), so that the recorded columns
    // stay beside their jobs (a history is written in that order: nothing to move); then shifted
    // as the jobs are.
    if !jobs.windows(2).all(|w| w[0].submit <= w[1].submit) {
        let mut pairs: Vec<(JobSpec, Recorded)> = jobs.into_iter().zip(recorded).collect();
        pairs.sort_by_key(|(job, _)| job.submit);
        (jobs, recorded) = pairs.into_iter().unzip();
    }
    let shift_s = jobs.first().map_or(0.0, |job| job.submit.as_secs_f64());
    if shift_s > 0.0 {
        for o in &mut recorded {
            o.start_s = o.start_s.map(|s| s - shift_s);
            o.end_s = o.end_s.map(|s| s - shift_s);
        }
    }
    Ok((Trace::from_jobs(jobs, None), recorded))
}

/// Gives each task of an array with a running limit (`array_max_running`) that limit
/// ([`JobSpec::array_limit`]), the limited arrays numbered in the order they first appear, so
/// that the replay holds tasks back as the daemon did. Tasks of one array that give different
/// limits are refused (`lines[i]`: job `i`'s line).
fn set_array_limits(
    path: &Path,
    jobs: &mut [JobSpec],
    recorded: &[Recorded],
    lines: &[u64],
) -> Result<(), TraceError> {
    let show = |limit: Option<u32>| limit.map_or_else(|| "none".to_string(), |n| n.to_string());
    // Per array id: its limit, the line that gave it, and its number when limited.
    let mut arrays: BTreeMap<&str, (Option<u32>, u64, Option<u32>)> = BTreeMap::new();
    let mut limited = 0;
    for (i, task) in recorded.iter().enumerate() {
        let Some(task) = &task.array else {
            continue;
        };
        let (limit, line, number) = *arrays.entry(task.array_id.as_str()).or_insert_with(|| {
            let number = task.max_running.map(|_| {
                limited += 1;
                limited - 1
            });
            (task.max_running, lines[i], number)
        });
        if limit != task.max_running {
            return Err(TraceError::Field {
                path: path.to_path_buf(),
                line: lines[i],
                field: "array_max_running".into(),
                reason: format!(
                    "`{}`: array `{}` has limit {} on line {line} (one limit per array)",
                    show(task.max_running),
                    task.array_id,
                    show(limit)
                ),
            });
        }
        if let (Some(max_running), Some(array)) = (limit, number) {
            jobs[i].array_limit = Some(ArrayLimit { array, max_running });
        }
    }
    Ok(())
}

/// Whether `ids` are whole numbers written canonically (no sign, no leading zero) in strictly
/// increasing order, as `arbiter history export` writes the daemon's job ids: then no two are
/// the same text, and a million ids need no set to show it.
fn increasing_numbers<'a>(ids: impl Iterator<Item = &'a str>) -> bool {
    let mut last: Option<u64> = None;
    for id in ids {
        let canonical =
            id.bytes().all(|b| b.is_ascii_digit()) && (id == "0" || !id.starts_with('0'));
        let Some(n) = id.parse::<u64>().ok().filter(|_| canonical) else {
            return false;
        };
        if last.is_some_and(|l| n <= l) {
            return false;
        }
        last = Some(n);
    }
    true
}

/// Columns of the native format and of a history, by their place in [`COLUMNS`] and then
/// [`HISTORY_COLUMNS`] (the reader looks their indices up once).
const ALL: usize = COLUMNS.len() + HISTORY_COLUMNS.len();
const TRACE_ID: usize = 0;
const TENANT: usize = 1;
const USER: usize = 2;
const NAME: usize = 3;
const MODEL: usize = 4;
const SUBMIT_S: usize = 5;
const GPUS: usize = 6;
const GPU_TYPE: usize = 7;
const RUN_TIME_S: usize = 8;
const ITERATIONS: usize = 9;
const PRIORITY: usize = 10;
const RESTART_OVERHEAD_S: usize = 11;
const DEADLINE_S: usize = 12;
const IO_S: usize = 13;
const CPU_S: usize = 14;
const GPU_S: usize = 15;
const ITERATION_S: usize = 16;
const TRACE_DURATION_S: usize = 17;
const DEADLINE_OPTIONS: usize = 18;
const PRIORITY_CLASS: usize = 19;
const DEPENDENCY: usize = 20;
const ACTUAL_START_S: usize = 21;
const ACTUAL_END_S: usize = 22;
const PROGRESS_RATE: usize = 23;
const GPU_TYPES: usize = 24;
const ARRAY_ID: usize = 25;
const ARRAY_INDEX: usize = 26;
const ARRAY_MAX_RUNNING: usize = 27;

/// A row's [`HISTORY_COLUMNS`] (`c`: every column's index), checked: times not before the
/// submission (`submit_s`), the end not before the start, a positive rate, an array index with
/// its array.
fn history_columns(
    row: &Row<'_>,
    c: &[Option<usize>; ALL],
    submit_s: f64,
) -> Result<Recorded, TraceError> {
    let text = |i: usize| row.present(c[i]);
    let number = |i: usize, name: &str| row.non_negative_at(c[i].unwrap_or(usize::MAX), name);
    let mut o = Recorded::default();
    if text(ACTUAL_START_S).is_some() {
        let start = seconds(row, c[ACTUAL_START_S], "actual_start_s")?;
        if start < submit_s {
            return Err(row.error(
                "actual_start_s",
                format!("`{start}` is before the job's submission ({submit_s} s)"),
            ));
        }
        // (Whole milliseconds, as the submission is: a start in the same instant waited 0 s.)
        o.start_s = Some(SimTime::from_secs_f64(start).as_secs_f64());
    }
    if text(ACTUAL_END_S).is_some() {
        let end = seconds(row, c[ACTUAL_END_S], "actual_end_s")?;
        let Some(start) = o.start_s else {
            return Err(row.error(
                "actual_end_s",
                "an end needs actual_start_s (a job ends after it started)",
            ));
        };
        if end < start {
            return Err(row.error(
                "actual_end_s",
                format!("`{end}` is before the job's start ({start} s)"),
            ));
        }
        o.end_s = Some(SimTime::from_secs_f64(end).as_secs_f64());
    }
    if let Some(text) = text(GPU_TYPES) {
        printable(row, "gpu_types", text)?;
        o.gpu_types = text.split(';').map(|t| t.trim().to_string()).collect();
        if o.gpu_types.iter().any(String::is_empty) {
            return Err(row.error(
                "gpu_types",
                format!("`{text}`: GPU type names separated by `;`"),
            ));
        }
    }
    if text(PROGRESS_RATE).is_some() {
        let rate = number(PROGRESS_RATE, "progress_rate")?;
        if rate == 0.0 {
            return Err(row.error(
                "progress_rate",
                "`0`: a measured rate is > 0 steps per second (leave it empty for none)",
            ));
        }
        o.progress_rate = Some(rate);
    }
    match (text(ARRAY_ID), text(ARRAY_INDEX)) {
        (None, None) => {
            if text(ARRAY_MAX_RUNNING).is_some() {
                return Err(row.error(
                    "array_max_running",
                    "a limit needs array_id and array_index",
                ));
            }
        }
        (Some(array_id), Some(index)) => {
            let index: u32 = index
                .parse()
                .map_err(|e| row.error("array_index", format!("`{index}`: {e}")))?;
            let max_running = match text(ARRAY_MAX_RUNNING) {
                None => None,
                Some(n) => match n.parse::<u32>() {
                    Ok(n) if n > 0 => Some(n),
                    _ => {
                        return Err(row.error(
                            "array_max_running",
                            format!("`{n}`: a number of tasks, at least 1"),
                        ));
                    }
                },
            };
            o.array = Some(ArrayTask {
                array_id: printable(row, "array_id", array_id)?.to_string(),
                index,
                max_running,
            });
        }
        (Some(_), None) => {
            return Err(row.error("array_index", "missing: a task of an array has its index"));
        }
        (None, Some(_)) => {
            return Err(row.error("array_id", "missing: a task index needs its array's id"));
        }
    }
    Ok(o)
}

/// The file at `path`, read whole (once: it may be a pipe); an empty file, or a UTF-16 one,
/// refused as such rather than as a header without the format's columns.
fn whole_file(path: &Path) -> Result<Vec<u8>, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let refused = |reason: &str| TraceError::File {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    if body.starts_with(&[0xff, 0xfe]) || body.starts_with(&[0xfe, 0xff]) {
        return Err(refused(
            "the file is UTF-16 (it starts with a UTF-16 byte-order mark); a trace is UTF-8 text",
        ));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(refused(
            "the file is empty (a native trace starts with its header: trace_id,tenant,submit_s,gpus,run_time_s,...)",
        ));
    }
    Ok(bytes)
}

/// The column `field` (at `index`, known present) as seconds: a finite number >= 0, at most
/// [`MAX_SECONDS`].
fn seconds(row: &Row<'_>, index: Option<usize>, field: &str) -> Result<f64, TraceError> {
    let s = row.non_negative_at(index.unwrap_or(usize::MAX), field)?;
    within_bound(row, field, s)
}

/// `s` seconds of the column `field`, refused above [`MAX_SECONDS`].
fn within_bound(row: &Row<'_>, field: &str, s: f64) -> Result<f64, TraceError> {
    if s > MAX_SECONDS {
        // `1e300` as that, not its 301 digits.
        let shown = if s < 1e16 {
            format!("{s}")
        } else {
            format!("{s:e}")
        };
        return Err(row.error(
            field,
            format!(
                "`{shown}` s is more than 10 years ({MAX_SECONDS} s): times are seconds from the \
                 trace's start, not epoch seconds or milliseconds"
            ),
        ));
    }
    Ok(s)
}

/// The bidirectional controls (Unicode's `Bidi_Control`): they reorder what a terminal shows.
const BIDI_CONTROLS: [char; 12] = [
    '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// `text`, the column `field`'s, refused when it holds a character that acts on the terminal
/// it is printed to rather than showing (ESC, BEL, BS, TAB, NUL, ...: any control character),
/// breaks the line there (U+2028, U+2029), reorders it (direction controls) or hides (zero-width
/// space, word joiner, BOM). Names are shown in terminals and reports (`arbiter whatif`).
fn printable<'t>(row: &Row<'_>, field: &str, text: &'t str) -> Result<&'t str, TraceError> {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Ok(text);
    }
    let what = |c: char| {
        if c.is_control() {
            Some("control character")
        } else if BIDI_CONTROLS.contains(&c) {
            Some("direction control character")
        } else if matches!(c, '\u{2028}' | '\u{2029}') {
            Some("line or paragraph separator")
        } else if matches!(c, '\u{200b}' | '\u{2060}' | '\u{feff}') {
            Some("invisible character")
        } else {
            None
        }
    };
    match text.chars().find_map(|c| what(c).map(|w| (c, w))) {
        Some((c, w)) => Err(row.error(
            field,
            format!(
                "contains the {w} {} (names are shown in terminals)",
                c.escape_unicode()
            ),
        )),
        None => Ok(text),
    }
}

/// Writes jobs in the native format.
pub fn write(out: impl Write, jobs: &[JobSpec]) -> Result<(), csv::Error> {
    let mut w = CsvOut::new(out);
    for column in COLUMNS {
        w.text(column);
    }
    w.end()?;
    for job in jobs {
        write_columns(&mut w, job);
        w.end()?;
    }
    w.finish()?;
    Ok(())
}

/// Writes a daemon's history: the native columns, then [`HISTORY_COLUMNS`] from `recorded`
/// (`recorded[i]` is about `jobs[i]`; a job without one gets empty columns).
pub fn write_history(
    out: impl Write,
    jobs: &[JobSpec],
    recorded: &[Recorded],
) -> Result<(), csv::Error> {
    let mut w = CsvOut::new(out);
    for column in COLUMNS.iter().chain(HISTORY_COLUMNS.iter()) {
        w.text(column);
    }
    w.end()?;
    let none = Recorded::default();
    for (i, job) in jobs.iter().enumerate() {
        let o = recorded.get(i).unwrap_or(&none);
        write_columns(&mut w, job);
        let array = o.array.as_ref();
        secs(&mut w, o.start_s);
        secs(&mut w, o.end_s);
        secs(&mut w, o.progress_rate);
        match o.gpu_types.as_slice() {
            [] => w.empty(),
            [one] => w.text(one),
            types => w.text(&types.join(";")),
        }
        w.text(array.map_or("", |a| a.array_id.as_str()));
        int(&mut w, array.map(|a| a.index));
        int(&mut w, array.and_then(|a| a.max_running));
        w.end()?;
    }
    w.finish()?;
    Ok(())
}

/// Seconds as the format writes them (`f64`'s shortest form that reads back the same); empty
/// for `None`.
fn secs<W: Write>(w: &mut CsvOut<W>, value: Option<f64>) {
    match value {
        // Whole seconds (most of a history's times) as the integer they are: the same text as
        // `f64`'s (which has no `.0` and no exponent), without its shortest-digits search.
        Some(v) if is_whole(v) => w.int(v as i64),
        Some(v) => w.float(v),
        None => w.empty(),
    }
}

/// Whether `f64`'s text of `v` is that of the integer `v as i64`.
fn is_whole(v: f64) -> bool {
    v.fract() == 0.0 && v.abs() < 1e15 && !(v == 0.0 && v.is_sign_negative())
}

/// An integer, empty for `None`.
fn int<W: Write>(w: &mut CsvOut<W>, value: Option<impl itoa::Integer>) {
    match value {
        Some(v) => w.int(v),
        None => w.empty(),
    }
}

/// One job's [`COLUMNS`], as fields of the record being written.
fn write_columns<W: Write>(w: &mut CsvOut<W>, job: &JobSpec) {
    w.text(&job.trace_id);
    w.text(job.tenant.as_str());
    w.text(job.user.as_deref().unwrap_or(""));
    w.text(job.name.as_deref().unwrap_or(""));
    w.text(job.model.as_deref().unwrap_or(""));
    secs(w, Some(job.submit.as_secs_f64()));
    w.int(job.gpus);
    int(w, job.gpu_type.map(|t| t.0));
    secs(w, Some(job.run_time_s));
    int(w, job.iterations);
    w.int(job.priority);
    secs(w, job.restart_overhead.map(|d| d.as_secs_f64()));
    secs(w, job.deadline.map(|d| d.as_secs_f64()));
    secs(w, job.stages.map(|s| s.io_s));
    secs(w, job.stages.map(|s| s.cpu_s));
    secs(w, job.stages.map(|s| s.gpu_s));
    secs(w, job.iteration_s);
    secs(w, job.trace_duration_s);
    if job.deadline_options.is_empty() {
        w.empty();
    } else {
        let options = job
            .deadline_options
            .iter()
            .map(|o| format!("{}:{}", format_secs(o.deadline.as_secs_f64()), o.value))
            .collect::<Vec<_>>()
            .join(";");
        w.text(&options);
    }
    w.text(job.class.name.as_deref().unwrap_or_default());
    match job.dependency.as_deref() {
        Some(d) => w.text(&dependency_text(d)),
        None => w.empty(),
    }
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
        let jobs = vec![
            job("7", 0.0, 2, 100.0),
            job("8", 5.0, 1, 40.0),
            job("9", 6.0, 1, 40.0),
        ];
        let recorded = vec![
            Recorded {
                start_s: Some(1.0),
                end_s: Some(101.0),
                progress_rate: Some(12.5),
                gpu_types: vec!["a100".into(), "h100".into()],
                array: None,
            },
            Recorded {
                start_s: Some(5.0),
                end_s: None,
                array: Some(ArrayTask {
                    array_id: "8".into(),
                    index: 0,
                    max_running: Some(2),
                }),
                ..Recorded::default()
            },
            Recorded {
                array: Some(ArrayTask {
                    array_id: "8".into(),
                    index: 1,
                    max_running: Some(2),
                }),
                ..Recorded::default()
            },
        ];
        let mut text = Vec::new();
        write_history(&mut text, &jobs, &recorded).expect("writes");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(
            text.starts_with(&format!(
                "{},{}",
                COLUMNS.join(","),
                HISTORY_COLUMNS.join(",")
            )),
            "{text}"
        );
        let (_dir, path) = file(&text);
        let (trace, back) = read_history(&path).expect("reads");
        assert_eq!(back, recorded);
        assert_eq!(
            trace
                .jobs
                .iter()
                .map(|j| j.trace_id.as_str())
                .collect::<Vec<_>>(),
            ["7", "8", "9"]
        );
        // The simulator's reader: the same jobs, nothing of the history on them.
        assert_eq!(read(&path).expect("reads").jobs, trace.jobs);
    }

    #[test]
    fn the_readers_column_places_are_the_columns_names() {
        let names: Vec<&str> = COLUMNS
            .iter()
            .chain(HISTORY_COLUMNS.iter())
            .copied()
            .collect();
        assert_eq!(names.len(), ALL);
        for (place, name) in [
            (TRACE_ID, "trace_id"),
            (SUBMIT_S, "submit_s"),
            (GPUS, "gpus"),
            (RUN_TIME_S, "run_time_s"),
            (DEPENDENCY, "dependency"),
            (ACTUAL_START_S, "actual_start_s"),
            (ARRAY_MAX_RUNNING, "array_max_running"),
        ] {
            assert_eq!(names[place], name);
        }
        for (place, name) in [
            (TENANT, "tenant"),
            (USER, "user"),
            (NAME, "name"),
            (MODEL, "model"),
            (GPU_TYPE, "gpu_type"),
            (ITERATIONS, "iterations"),
            (PRIORITY, "priority"),
        ] {
            assert_eq!(names[place], name);
        }
        for (place, name) in [
            (RESTART_OVERHEAD_S, "restart_overhead_s"),
            (DEADLINE_S, "deadline_s"),
            (IO_S, "io_s"),
            (CPU_S, "cpu_s"),
            (GPU_S, "gpu_s"),
            (ITERATION_S, "iteration_s"),
        ] {
            assert_eq!(names[place], name);
        }
        for (place, name) in [
            (TRACE_DURATION_S, "trace_duration_s"),
            (DEADLINE_OPTIONS, "deadline_options"),
            (PRIORITY_CLASS, "priority_class"),
            (ACTUAL_END_S, "actual_end_s"),
            (PROGRESS_RATE, "progress_rate"),
            (GPU_TYPES, "gpu_types"),
            (ARRAY_ID, "array_id"),
            (ARRAY_INDEX, "array_index"),
        ] {
            assert_eq!(names[place], name);
        }
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
        let header = format!(
            "trace_id,tenant,submit_s,gpus,run_time_s,{}",
            HISTORY_COLUMNS.join(",")
        );
        let (_dir, path) = file(&format!(
            "{header}\nlate,t,110,1,5,120,125,,,,,\nearly,t,100,1,5,100,105,,,,,\n"
        ));
        let (trace, recorded) = read_history(&path).expect("reads");
        assert_eq!(trace.jobs[0].trace_id, "early");
        assert_eq!(
            (recorded[0].start_s, recorded[0].end_s),
            (Some(0.0), Some(5.0))
        );
        assert_eq!(
            (recorded[1].start_s, recorded[1].end_s),
            (Some(20.0), Some(25.0))
        );
    }

    #[test]
    fn bad_history_columns_name_the_file_line_and_field() {
        let header = format!(
            "trace_id,tenant,submit_s,gpus,run_time_s,{}",
            HISTORY_COLUMNS.join(",")
        );
        for (row, says) in [
            (
                "a,t,10,1,5,9,20,,,,,",
                "hist.csv:2: actual_start_s: `9` is before the job's submission (10 s)",
            ),
            (
                "a,t,10,1,5,12,11,,,,,",
                "hist.csv:2: actual_end_s: `11` is before the job's start (12 s)",
            ),
            (
                "a,t,10,1,5,,11,,,,,",
                "hist.csv:2: actual_end_s: an end needs actual_start_s",
            ),
            (
                "a,t,10,1,5,soon,,,,,,",
                "hist.csv:2: actual_start_s: `soon`",
            ),
            ("a,t,10,1,5,,,0,,,,", "hist.csv:2: progress_rate: `0`"),
            (
                "a,t,10,1,5,,,-3,,,,",
                "hist.csv:2: progress_rate: `-3` must be a finite number >= 0",
            ),
            ("a,t,10,1,5,,,,,4,,", "hist.csv:2: array_index: missing"),
            ("a,t,10,1,5,,,,,,4,", "hist.csv:2: array_id: missing"),
            ("a,t,10,1,5,,,,,4,x,", "hist.csv:2: array_index: `x`"),
            ("a,t,10,1,5,,,,,4,1,0", "hist.csv:2: array_max_running: `0`"),
            (
                "a,t,10,1,5,,,,,,,3",
                "hist.csv:2: array_max_running: a limit needs array_id",
            ),
            (
                "a,t,10,1,5,,,,a100;;h100,,,",
                "hist.csv:2: gpu_types: `a100;;h100`",
            ),
        ] {
            let (_dir, path) = file(&format!("{header}\n{row}\n"));
            let e = read_history(&path).expect_err(row).to_string();
            assert!(e.contains(says), "{row}: {e}");
            // The simulator's reader refuses it the same way.
            assert!(read(&path).expect_err(row).to_string().contains(says));
        }
    }

    /// The error reading `text` as a history (and, the same, as a plain trace).
    fn refused(text: &str) -> String {
        let (_dir, path) = file(text);
        let e = read_history(&path).expect_err(text).to_string();
        assert_eq!(read(&path).expect_err(text).to_string(), e);
        e
    }

    const HEADER: &str = "trace_id,tenant,submit_s,gpus,run_time_s,actual_start_s,actual_end_s";

    #[test]
    fn a_row_longer_than_the_header_is_refused_naming_its_line() {
        // An unquoted dependency with a comma spills into a field no column holds.
        let e = refused(&format!(
            "{HEADER},dependency\n1,a,0,1,10,0,10,\n2,a,1,1,10,10,20,afterok:1,afterok:999\n"
        ));
        assert!(
            e.contains("hist.csv:3: row: 9 fields, but the header has 8 columns")
                && e.contains("quoted"),
            "{e}"
        );
        // Quoted, it reads.
        let (_dir, path) = file(&format!(
            "{HEADER},dependency\n1,a,0,1,10,0,10,\n2,a,1,1,10,10,20,\"afterok:1,afterany:1\"\n"
        ));
        assert!(read_history(&path).is_ok());
    }

    #[test]
    fn unknown_misspelt_and_twice_named_columns_are_refused() {
        for (header, says) in [
            (
                format!("{HEADER},depedency"),
                "hist.csv:1: depedency: unknown column; did you mean `dependency`?",
            ),
            (
                "trace_id,tenant,submit_s,gpus,run_time_s,actual_start,actual_end".into(),
                "hist.csv:1: actual_start: unknown column; did you mean `actual_start_s`?",
            ),
            (
                "trace_id,Tenant,submit_s,gpus,run_time_s".into(),
                "hist.csv:1: Tenant: unknown column; did you mean `tenant`?",
            ),
            (
                format!("{HEADER},bogus"),
                "hist.csv:1: bogus: unknown column: not one of the native format's (trace_id, tenant,",
            ),
            (
                "trace_id,tenant,submit_s,gpus,run_time_s,run_time_s".into(),
                "hist.csv:1: run_time_s: the header names this column twice (columns 5 and 6)",
            ),
            (
                format!("{HEADER},"),
                "hist.csv:1: header: column 8 has no name",
            ),
        ] {
            let e = refused(&format!("{header}\n1,a,0,1,10,0,10,-5\n"));
            assert!(e.contains(says), "{header}: {e}");
        }
    }

    #[test]
    fn empty_required_fields_and_twice_given_trace_ids_are_refused() {
        let e = refused(&format!("{HEADER}\n1,,0,1,10,0,10\n"));
        assert!(e.contains("hist.csv:2: tenant: empty"), "{e}");
        let e = refused(&format!("{HEADER}\n1,a,0,1,10,0,10\n  ,a,1,1,10,1,11\n"));
        assert!(e.contains("hist.csv:3: trace_id: empty"), "{e}");
        let e = refused(&format!(
            "{HEADER},dependency\n1,a,0,1,10,0,10,\n2,a,1,1,10,10,20,\n\n1,a,2,1,10,20,30,\n3,a,3,1,10,30,40,afterok:1\n"
        ));
        assert!(
            e.contains("hist.csv:5: trace_id: `1` is the trace id of line 2 too"),
            "{e}"
        );
        // The lines are the file's, blank lines (skipped) and a byte-order mark or not.
        let e = refused(&format!(
            "\u{feff}\n{HEADER}\n\n\n1,a,0,1,10,0,10\n\n1,a,1,1,10,1,11\n"
        ));
        assert!(
            e.contains("hist.csv:7: trace_id: `1` is the trace id of line 5 too"),
            "{e}"
        );
    }

    #[test]
    fn seconds_are_written_as_f64_writes_them() {
        for v in [
            0.0,
            -0.0,
            1.0,
            -5.0,
            21226.0,
            0.5,
            1e-3,
            1790000000.25,
            999999999999999.0,
            1e15,
            1e16,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NAN,
        ] {
            let mut w = CsvOut::new(Vec::new());
            secs(&mut w, Some(v));
            w.end().expect("in memory");
            let mut text = Vec::new();
            w.finish_into(&mut text);
            assert_eq!(
                String::from_utf8(text).expect("utf-8"),
                format!("{v}\n"),
                "{v:?}"
            );
        }
    }

    #[test]
    fn tasks_of_a_limited_array_carry_its_limit_and_disagreeing_limits_are_refused() {
        let header = format!("{HEADER},array_id,array_index,array_max_running");
        let (_dir, path) = file(&format!(
            "{header}\n1,a,0,1,10,0,10,1,0,2\n2,a,0,1,10,0,10,1,1,2\n3,a,0,1,10,0,10,,,\n4,a,0,1,10,0,10,4,0,\n5,a,0,1,10,0,10,5,0,1\n"
        ));
        let limits: Vec<Option<ArrayLimit>> = read(&path)
            .expect("reads")
            .jobs
            .iter()
            .map(|j| j.array_limit)
            .collect();
        let limit = |array, max_running| Some(ArrayLimit { array, max_running });
        assert_eq!(limits, [limit(0, 2), limit(0, 2), None, None, limit(1, 1)]);
        let e = refused(&format!(
            "{header}\n1,a,0,1,10,0,10,1,0,2\n2,a,0,1,10,0,10,1,1,3\n"
        ));
        assert!(
            e.contains("hist.csv:3: array_max_running: `3`: array `1` has limit 2 on line 2"),
            "{e}"
        );
    }

    #[test]
    fn only_canonical_increasing_numbers_skip_the_set_of_trace_ids() {
        let increasing = |ids: &[&str]| increasing_numbers(ids.iter().copied());
        assert!(increasing(&[]));
        assert!(increasing(&["0", "1", "7", "18446744073709551615"]));
        // Each of these goes to the set (which tells duplicates from distinct texts).
        assert!(!increasing(&["1", "1"]));
        assert!(!increasing(&["2", "1"]));
        assert!(!increasing(&["1", "01"]), "`01` is not `1`'s text");
        assert!(!increasing(&["00"]));
        assert!(!increasing(&["+1"]));
        assert!(!increasing(&["1", "a"]));
        assert!(!increasing(&["18446744073709551616"]));
        // Distinct texts of one number are two jobs; the same text twice is refused.
        let (_dir, path) = file(&format!("{HEADER}\n1,a,0,1,10,0,10\n01,a,1,1,10,1,11\n"));
        assert_eq!(read_history(&path).expect("two jobs").0.jobs.len(), 2);
        let e = refused(&format!(
            "{HEADER}\n1,a,0,1,10,0,10\n2,a,1,1,10,1,11\n2,a,2,1,10,2,12\n"
        ));
        assert!(
            e.contains("hist.csv:4: trace_id: `2` is the trace id of line 3 too"),
            "{e}"
        );
    }

    #[test]
    fn names_with_control_characters_are_refused() {
        let header =
            format!("{HEADER},user,name,model,priority_class,gpu_types,array_id,array_index");
        for (row, says) in [
            (
                "1,ev\u{1b}[31mil,0,1,10,0,10,,,,,,,",
                "hist.csv:2: tenant: contains the control character \\u{1b}",
            ),
            (
                "1,a\u{7}b,0,1,10,0,10,,,,,,,",
                "tenant: contains the control character \\u{7}",
            ),
            (
                "1,a\u{8}b,0,1,10,0,10,,,,,,,",
                "tenant: contains the control character \\u{8}",
            ),
            (
                "1,a\tb,0,1,10,0,10,,,,,,,",
                "tenant: contains the control character \\u{9}",
            ),
            (
                "1,a\u{0}b,0,1,10,0,10,,,,,,,",
                "tenant: contains the control character \\u{0}",
            ),
            (
                "1,a\u{7f},0,1,10,0,10,,,,,,,",
                "tenant: contains the control character \\u{7f}",
            ),
            (
                "1,a\u{202e}b,0,1,10,0,10,,,,,,,",
                "tenant: contains the direction control character \\u{202e}",
            ),
            (
                "1\u{1b},a,0,1,10,0,10,,,,,,,",
                "hist.csv:2: trace_id: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,u\u{1b},,,,,,",
                "hist.csv:2: user: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,,n\u{7},,,,,",
                "hist.csv:2: name: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,,,m\u{8},,,,",
                "hist.csv:2: model: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,,,,c\u{1b},,,",
                "hist.csv:2: priority_class: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,,,,,a100;h\u{1b},,",
                "hist.csv:2: gpu_types: contains the control character",
            ),
            (
                "1,a,0,1,10,0,10,,,,,,1\u{1b},0",
                "hist.csv:2: array_id: contains the control character",
            ),
        ] {
            let e = refused(&format!("{header}\n{row}\n"));
            assert!(e.contains(says), "{row:?}: {e}");
        }
        // Other languages' letters are names like any.
        let (_dir, path) = file(&format!("{header}\n1,équipe-東京,0,1,10,0,10,josé,,,,,,\n"));
        let (trace, _) = read_history(&path).expect("reads");
        assert_eq!(trace.jobs[0].tenant.as_str(), "équipe-東京");
    }

    #[test]
    fn times_above_ten_years_are_refused_as_a_unit_mistake() {
        let header = format!(
            "{HEADER},restart_overhead_s,deadline_s,io_s,cpu_s,gpu_s,iteration_s,trace_duration_s,deadline_options"
        );
        for (row, field) in [
            ("2,a,1e15,1,10,,,,,,,,,,", "submit_s"),
            ("2,a,1732838400000,1,10,,,,,,,,,,", "submit_s"),
            ("2,a,1,1,1e300,,,,,,,,,,", "run_time_s: `1e300` s"),
            ("2,a,1,1,10,1,1e300,,,,,,,,", "actual_end_s"),
            ("2,a,1,1,10,1e300,,,,,,,,,", "actual_start_s"),
            ("2,a,1,1,10,,,1e9,,,,,,,", "restart_overhead_s"),
            ("2,a,1,1,10,,,,1e9,,,,,,", "deadline_s"),
            ("2,a,1,1,10,,,,,1e9,1,1,,,", "io_s"),
            ("2,a,1,1,10,,,,,1,1e9,1,,,", "cpu_s"),
            ("2,a,1,1,10,,,,,1,1,1e9,,,", "gpu_s"),
            ("2,a,1,1,10,,,,,,,,1e9,,", "iteration_s"),
            ("2,a,1,1,10,,,,,,,,,1e9,", "trace_duration_s"),
            ("2,a,1,1,10,,,,,,,,,,100:1;1e9:0.5", "deadline_options"),
        ] {
            let e = refused(&format!("{header}\n1,a,0,1,10,,,,,,,,,,\n{row}\n"));
            assert!(
                e.contains(&format!("hist.csv:3: {field}"))
                    && e.contains("s is more than 10 years (315360000 s)")
                    && e.contains("epoch seconds or milliseconds"),
                "{row}: {e}"
            );
        }
        // Ten years exactly is a time like any.
        let (_dir, path) = file(&format!(
            "{header}\n1,a,0,1,315360000,0,315360000,,315360000,,,,,,315360000:1\n"
        ));
        assert!(read_history(&path).is_ok());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn recorded_times_are_whole_milliseconds_as_submissions_are() {
        let (_dir, path) = file(
            "trace_id,tenant,submit_s,gpus,run_time_s,actual_start_s,actual_end_s\n\
             1,a,0.0004,1,10,0.0004,10.0004\n",
        );
        let (trace, recorded) = read_history(&path).expect("reads");
        let queued = recorded[0].start_s.expect("started") - trace.jobs[0].submit.as_secs_f64();
        assert_eq!(queued, 0.0, "started as it was submitted");
        assert_eq!(recorded[0].end_s, Some(10.0));
    }

    #[test]
    fn a_pipe_is_read_once() {
        use std::io::Write as _;
        use std::os::fd::AsRawFd;
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer
            .write_all(format!("{HEADER}\n1,a,0,1,10,0,10\n2,a,5,1,10,10,20\n").as_bytes())
            .expect("written");
        drop(writer);
        // What `<(cat hist.csv)` names: opened again, the pipe has nothing left.
        let path = std::path::PathBuf::from(format!("/dev/fd/{}", reader.as_raw_fd()));
        let (trace, recorded) = read_history(&path).expect("reads the pipe");
        assert_eq!((trace.jobs.len(), recorded[1].end_s), (2, Some(20.0)));
        drop(reader);
    }

    #[test]
    fn an_empty_file_is_refused_as_empty() {
        for text in ["", "\n\n", "\u{feff}", " \r\n"] {
            let e = refused(text);
            assert!(e.contains("hist.csv: the file is empty"), "{text:?}: {e}");
        }
        let (_dir, path) = file("");
        std::fs::write(&path, [0xff, 0xfe, b't', 0]).expect("write");
        let e = read_history(&path).expect_err("UTF-16").to_string();
        assert!(e.contains("hist.csv: the file is UTF-16"), "{e}");
    }

    #[test]
    fn a_field_that_is_not_utf8_is_named_by_its_column() {
        let (_dir, path) = file("");
        let mut bytes = format!("{HEADER}\n1,a,0,1,10,0,10\n2,").into_bytes();
        bytes.extend([0xff, 0xfe]);
        bytes.extend(b",1,1,10,1,11\n");
        std::fs::write(&path, &bytes).expect("write");
        let e = read_history(&path).expect_err("not UTF-8").to_string();
        assert!(e.contains("hist.csv:3: tenant: not valid UTF-8"), "{e}");
        std::fs::write(&path, b"trace_id,ten\xffant\n").expect("write");
        let e = read_history(&path).expect_err("not UTF-8").to_string();
        assert!(
            e.contains("hist.csv:1: header: column 2 is not valid UTF-8"),
            "{e}"
        );
    }
}
