//! `arbiter history export`: the daemon's finished and running jobs as a native trace, for
//! replaying last month's jobs under another policy or configuration (issue 30, item 4;
//! `arbiter whatif` compares the replay with what happened).
//!
//! What goes in is what a scheduler needs and nothing a tenant would mind in a shared file: the
//! submission time, tenant, user, name and job type, GPUs and GPU types asked, the run time
//! measured (the seconds it held GPUs; a job not ended yet, what it held so far plus what its
//! progress says is left), its steps, priority, deadline, class and dependencies; and what the
//! daemon observed — its first start, its end, its measured progress rate, its array and task
//! index ([`arbiter_trace::native::HISTORY_COLUMNS`]). Never the command, environment, working
//! or checkpoint directories, or anything of the logs: the pages of `GET /v1/jobs` are read
//! into [`ApiJob`], which has no field for them, so they are skipped unread.

use anyhow::{Context, Result};
use arbiter_model::{Dependencies, JobId, JobSpec, SimTime};
use arbiter_trace::native::{ArrayTask, Recorded};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One job as `GET /v1/jobs` shows it, the fields an export reads (every one optional: a
/// record of an older daemon lacks some).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiJob {
    pub id: u32,
    pub tenant: String,
    pub submitted_unix_s: i64,
    pub runs: u32,
    pub executed_s: f64,
    pub state: ApiState,
    pub request: ApiRequest,
    pub total_steps: Option<u64>,
    pub progress: Option<ApiProgress>,
    pub throughput_by_gpu_type: BTreeMap<String, f64>,
    pub history: Vec<ApiTransition>,
    pub history_omitted: u64,
    pub array: Option<ApiArray>,
}

/// A job's state, by name (`running`, `succeeded`, ...).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiState {
    pub state: String,
}

/// What was asked, without the command, environment or directories.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiRequest {
    pub gpus: u32,
    pub gpu_types: Vec<String>,
    pub user: Option<String>,
    pub name: Option<String>,
    pub job_type: Option<String>,
    pub priority: i32,
    pub deadline_unix_s: Option<i64>,
    pub priority_class: Option<String>,
    pub dependency: Option<String>,
}

/// The latest progress report.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiProgress {
    pub steps: u64,
    pub throughput: Option<f64>,
}

/// One transition of a job's history.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiTransition {
    pub at_unix_s: i64,
    pub to: String,
}

/// A task of a job array.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiArray {
    pub array_id: u32,
    pub index: u32,
    pub max_running: Option<u32>,
}

/// One page of `GET /v1/jobs`: its jobs and the id to ask after for the next (`None`: last).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiPage {
    pub jobs: Vec<ApiJob>,
    pub next_after: Option<u32>,
}

impl ApiPage {
    /// A page from the API's JSON text.
    pub(crate) fn parse(text: &str) -> Result<ApiPage> {
        serde_json::from_str(text).context("the daemon's job list is not the JSON this client reads (a daemon of another version?)")
    }
}

/// A history: trace jobs, what the daemon recorded of each (`recorded[i]` about `jobs[i]`),
/// and the Unix time of the trace's zero (the first submission exported).
#[derive(Debug, Default)]
pub(crate) struct History {
    pub jobs: Vec<JobSpec>,
    pub recorded: Vec<Recorded>,
    pub origin_unix_s: Option<i64>,
}

impl History {
    /// The history as a native trace with its history columns (CSV).
    pub(crate) fn write(&self, out: impl std::io::Write) -> Result<()> {
        arbiter_trace::native::write_history(out, &self.jobs, &self.recorded)?;
        Ok(())
    }
}

/// The jobs of `jobs` (the daemon's records, as `GET /v1/jobs` gives them) that ran or run,
/// submitted at or after `since_unix_s`, as a history, oldest first; times are from the first
/// one's submission.
pub(crate) fn export(jobs: &[ApiJob], since_unix_s: Option<i64>) -> History {
    let mut kept: Vec<&ApiJob> = jobs.iter().filter(|j| j.runs > 0).filter(|j| since_unix_s.is_none_or(|s| j.submitted_unix_s >= s)).collect();
    kept.sort_by_key(|j| (j.submitted_unix_s, j.id));
    let origin = kept.first().map(|j| j.submitted_unix_s);
    let origin_s = origin.unwrap_or(0);
    let exported: BTreeSet<u32> = kept.iter().map(|j| j.id).collect();
    // Arrays by id: their tasks' ids, for a dependency on a whole array.
    let mut arrays: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for job in jobs {
        if let Some(a) = &job.array {
            arrays.entry(a.array_id).or_default().push((a.index, job.id));
        }
    }
    let refs = References { exported: &exported, arrays: &arrays };
    let mut out = History { jobs: Vec::with_capacity(kept.len()), recorded: Vec::with_capacity(kept.len()), origin_unix_s: origin };
    for (i, job) in kept.iter().enumerate() {
        out.jobs.push(spec(i as u32, job, origin_s, &refs));
        out.recorded.push(recorded(job, origin_s));
    }
    out
}

/// What a dependency may name: the jobs exported, and the arrays' tasks ((index, id) pairs).
struct References<'a> {
    exported: &'a BTreeSet<u32>,
    arrays: &'a BTreeMap<u32, Vec<(u32, u32)>>,
}

impl References<'_> {
    /// The trace ids a dependency's text names: `12` (every task, if 12 is an array: Slurm's
    /// rule), `12_7` (task 7 of array 12); only jobs in the export. A job that ran had its
    /// dependencies hold, so one on a job left out (never ran, before `--since`, pruned) is
    /// dropped rather than kept as one the replay could never satisfy.
    fn resolve(&self, text: &str) -> Vec<String> {
        let ids: Vec<u32> = match text.split_once('_') {
            Some((array, index)) => {
                let (Ok(array), Ok(index)) = (array.parse::<u32>(), index.parse::<u32>()) else { return Vec::new() };
                self.arrays.get(&array).and_then(|tasks| tasks.iter().find(|(i, _)| *i == index)).map(|(_, id)| vec![*id]).unwrap_or_default()
            }
            None => match text.parse::<u32>() {
                Ok(id) => match self.arrays.get(&id) {
                    Some(tasks) => tasks.iter().map(|(_, id)| *id).collect(),
                    None => vec![id],
                },
                Err(_) => Vec::new(),
            },
        };
        ids.into_iter().filter(|id| self.exported.contains(id)).map(|id| id.to_string()).collect()
    }

    /// A job's dependencies over the exported trace ids (`None`: nothing left to wait for).
    fn dependencies(&self, text: &str) -> Option<Arc<Dependencies>> {
        let parsed = Dependencies::parse(text).ok()?;
        let mut on = Vec::new();
        for d in &parsed.on {
            for id in self.resolve(&d.on) {
                on.push(arbiter_model::Dependency { kind: d.kind, on: id });
            }
        }
        (!on.is_empty() || parsed.singleton).then(|| Arc::new(Dependencies { on, singleton: parsed.singleton }))
    }
}

/// One job as a trace job (`index`: its dense id in the trace).
fn spec(index: u32, job: &ApiJob, origin_unix_s: i64, refs: &References<'_>) -> JobSpec {
    let request = &job.request;
    let submit_s = (job.submitted_unix_s - origin_unix_s).max(0) as f64;
    let mut spec = JobSpec::new(JobId(index), SimTime::from_secs_f64(submit_s), request.gpus.max(1), run_time_s(job));
    spec.trace_id = job.id.to_string();
    spec.tenant = job.tenant.clone();
    spec.user = request.user.clone();
    spec.name = request.name.clone();
    spec.model = request.job_type.clone();
    spec.priority = request.priority;
    spec.iterations = job.total_steps;
    spec.deadline = request.deadline_unix_s.map(|d| SimTime::from_secs_f64((d - origin_unix_s).max(0) as f64));
    spec.class.name = request.priority_class.as_deref().map(Arc::from);
    // Dependencies name daemon job ids, which are the trace ids here.
    spec.dependency = request.dependency.as_deref().and_then(|d| refs.dependencies(d));
    spec
}

/// Whether a job has ended for good (its last transition is its end).
fn ended(job: &ApiJob) -> bool {
    !matches!(job.state.state.as_str(), "queued" | "running" | "stopping" | "")
}

/// What the daemon recorded of a job: its first start and its end, seconds from the trace's
/// zero; its progress rate; the GPU types it asked for; its array.
fn recorded(job: &ApiJob, origin_unix_s: i64) -> Recorded {
    let at = |unix_s: i64| (unix_s - origin_unix_s).max(0) as f64;
    // The history keeps its first transition (the submission) and the latest ones: with some
    // left out, the first start may be among them, and is not known.
    let start = (job.history_omitted == 0).then(|| job.history.iter().find(|t| t.to == "running").map(|t| at(t.at_unix_s))).flatten();
    let end = start.filter(|_| ended(job)).and_then(|_| job.history.last().map(|t| at(t.at_unix_s)));
    // The latest report's rate, else the smoothed one (of the first GPU type, by name).
    let usable = |r: &f64| r.is_finite() && *r > 0.0;
    let rate = job.progress.as_ref().and_then(|p| p.throughput).filter(usable).or_else(|| job.throughput_by_gpu_type.values().copied().find(usable));
    Recorded {
        start_s: start,
        end_s: end.map(|e| e.max(start.unwrap_or(0.0))),
        progress_rate: rate,
        gpu_types: job.request.gpu_types.clone(),
        array: job.array.as_ref().map(|a| ArrayTask { array_id: a.array_id.to_string(), index: a.index, max_running: a.max_running }),
    }
}

/// Seconds of work: what the job held GPUs for; for one not ended yet, plus what its reported
/// progress says is left.
fn run_time_s(job: &ApiJob) -> f64 {
    let executed = if job.executed_s.is_finite() { job.executed_s.max(0.0) } else { 0.0 };
    let left = match (ended(job), job.total_steps, job.progress.as_ref()) {
        (false, Some(total), Some(p)) => match p.throughput {
            Some(rate) if rate.is_finite() && rate > 0.0 && total > p.steps => (total - p.steps) as f64 / rate,
            _ => 0.0,
        },
        _ => 0.0,
    };
    executed + left
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn job(id: u64, submitted: i64, runs: u64, executed_s: f64, state: &str) -> Value {
        json!({
            "id": id, "tenant": "team-a", "submitted_unix_s": submitted, "runs": runs, "executed_s": executed_s,
            "state": { "state": state },
            "request": {
                "command": "python train.py --token=SECRET-IN-COMMAND", "env": { "WANDB_API_KEY": "SECRET-IN-ENV" },
                "working_dir": "/home/alice/secret-project", "checkpoint_dir": "/ckpt/secret", "gpus": 2, "name": "resnet",
                "priority_class": "high", "dependency": "afterok:3", "user": "alice",
            },
            "history": [
                { "at_unix_s": submitted, "to": "queued", "why": "submitted" },
                { "at_unix_s": submitted + 10, "to": "running", "why": "started on GPUs 0,1" },
                { "at_unix_s": submitted + 10 + executed_s as i64, "to": state, "why": "exit code 0" },
            ],
        })
    }

    fn api(jobs: &[Value]) -> Vec<ApiJob> {
        jobs.iter().map(|j| serde_json::from_value(j.clone()).expect("an API job")).collect()
    }

    fn csv(history: &History) -> String {
        let mut out = Vec::new();
        history.write(&mut out).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn jobs_that_ran_become_a_trace_from_the_first_submission_without_commands_environments_or_paths() {
        let jobs = api(&[job(5, 1_000_100, 1, 300.0, "succeeded"), job(3, 1_000_000, 2, 50.0, "failed"), job(7, 1_000_200, 0, 0.0, "cancelled")]);
        let h = export(&jobs, None);
        assert_eq!(h.origin_unix_s, Some(1_000_000));
        assert_eq!(h.jobs.iter().map(|s| (s.trace_id.as_str(), s.submit.as_secs_f64(), s.run_time_s)).collect::<Vec<_>>(), [("3", 0.0, 50.0), ("5", 100.0, 300.0)], "the cancelled job never ran");
        assert_eq!((h.jobs[1].gpus, h.jobs[1].class.name.as_deref(), h.jobs[1].user.as_deref()), (2, Some("high"), Some("alice")));
        assert_eq!(h.jobs[1].dependency.as_ref().map(|d| d.on[0].on.clone()), Some("3".to_string()));
        let text = csv(&h);
        assert!(!text.contains("SECRET") && !text.contains("secret") && !text.contains("train.py"), "{text}");
        let recent = export(&jobs, Some(1_000_050));
        assert_eq!(recent.jobs.len(), 1);
        assert!(recent.jobs[0].dependency.is_none(), "job 3 is not in this export: its dependency held, and is dropped");
    }

    #[test]
    fn the_first_start_and_the_end_are_recorded_from_the_history_in_seconds_from_the_first_submission() {
        let h = export(&api(&[job(3, 1_000_000, 1, 50.0, "succeeded"), job(5, 1_000_100, 1, 300.0, "running")]), None);
        assert_eq!((h.recorded[0].start_s, h.recorded[0].end_s), (Some(10.0), Some(60.0)));
        assert_eq!((h.recorded[1].start_s, h.recorded[1].end_s), (Some(110.0), None), "still running: no end");
        let mut omitted = job(3, 1_000_000, 1, 50.0, "succeeded");
        omitted["history_omitted"] = json!(40);
        let h = export(&api(&[omitted]), None);
        assert_eq!((h.recorded[0].start_s, h.recorded[0].end_s), (None, None), "the first start may be among the transitions left out");
    }

    #[test]
    fn a_running_job_counts_what_its_progress_says_is_left_and_its_rate_is_recorded() {
        let mut running = job(1, 0, 1, 100.0, "running");
        running["total_steps"] = json!(1000);
        running["progress"] = json!({ "steps": 400, "throughput": 2.0, "at_unix_s": 5 });
        let h = export(&api(&[running]), None);
        assert_eq!(h.jobs[0].run_time_s, 400.0);
        assert_eq!(h.recorded[0].progress_rate, Some(2.0));
    }

    #[test]
    fn array_tasks_keep_their_array_and_a_dependency_on_an_array_waits_for_every_task() {
        let mut tasks = Vec::new();
        for (id, index) in [(10, 0), (11, 1), (12, 2)] {
            let mut t = job(id, 1_000, 1, 5.0, "succeeded");
            t["array"] = json!({ "array_id": 10, "index": index, "tasks": 3, "max_running": 2 });
            t["request"]["dependency"] = Value::Null;
            tasks.push(t);
        }
        let mut after_all = job(13, 1_001, 1, 5.0, "succeeded");
        after_all["request"]["dependency"] = json!("afterok:10");
        let mut after_one = job(14, 1_001, 1, 5.0, "succeeded");
        after_one["request"]["dependency"] = json!("afterany:10_2");
        tasks.extend([after_all, after_one]);
        let h = export(&api(&tasks), None);
        assert_eq!(h.recorded[1].array, Some(ArrayTask { array_id: "10".into(), index: 1, max_running: Some(2) }));
        let on = |i: usize| h.jobs[i].dependency.as_ref().map(|d| d.on.iter().map(|d| format!("{}:{}", d.kind, d.on)).collect::<Vec<_>>());
        assert_eq!(on(3), Some(vec!["afterok:10".into(), "afterok:11".into(), "afterok:12".into()]));
        assert_eq!(on(4), Some(vec!["afterany:12".into()]));
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("hist.csv");
        std::fs::write(&path, csv(&h)).expect("write");
        let (trace, recorded) = arbiter_trace::native::read_history(&path).expect("reads back");
        assert_eq!((trace.jobs.len(), recorded), (5, h.recorded));
    }
}
