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
//! or checkpoint directories, or anything of the logs: the daemon's `GET /v1/history` has no
//! field for them ([`HistoryRecord`]).

use anyhow::Result;
use arbiter_daemon::records::history::HistoryRecord;
use arbiter_model::{Dependencies, JobId, JobSpec, SimTime};
use arbiter_trace::native::{ArrayTask, Recorded};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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

/// The jobs of `jobs` (as `GET /v1/history` gives them: those that ran or run) as a history,
/// oldest first; times are from the first one's submission.
pub(crate) fn export(jobs: &[HistoryRecord]) -> History {
    let mut kept: Vec<&HistoryRecord> = jobs.iter().filter(|j| j.runs > 0).collect();
    kept.sort_by_key(|j| (j.submitted_unix_s, j.id));
    let origin = kept.first().map(|j| j.submitted_unix_s);
    let origin_s = origin.unwrap_or(0);
    // What dependencies may name (looked up only where a job has one): the jobs exported, and
    // the arrays by id, with their tasks' ids (a dependency on a whole array).
    let any_dependency = kept.iter().any(|j| j.dependency.is_some());
    let exported: BTreeSet<u32> = if any_dependency {
        kept.iter().map(|j| j.id).collect()
    } else {
        BTreeSet::new()
    };
    let mut arrays: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for job in jobs.iter().filter(|_| any_dependency) {
        if let Some(a) = &job.array {
            arrays
                .entry(a.array_id)
                .or_default()
                .push((a.index, job.id));
        }
    }
    let refs = References {
        exported: &exported,
        arrays: &arrays,
    };
    // One shared name per tenant, as the trace readers give (not a million copies).
    let mut tenants = arbiter_model::TenantNames::default();
    let mut out = History {
        jobs: Vec::with_capacity(kept.len()),
        recorded: Vec::with_capacity(kept.len()),
        origin_unix_s: origin,
    };
    for (i, job) in kept.iter().enumerate() {
        let mut spec = spec(i as u32, job, origin_s, &refs);
        spec.tenant = tenants.get(&job.tenant);
        out.jobs.push(spec);
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
                let (Ok(array), Ok(index)) = (array.parse::<u32>(), index.parse::<u32>()) else {
                    return Vec::new();
                };
                self.arrays
                    .get(&array)
                    .and_then(|tasks| tasks.iter().find(|(i, _)| *i == index))
                    .map(|(_, id)| vec![*id])
                    .unwrap_or_default()
            }
            None => match text.parse::<u32>() {
                Ok(id) => match self.arrays.get(&id) {
                    Some(tasks) => tasks.iter().map(|(_, id)| *id).collect(),
                    None => vec![id],
                },
                Err(_) => Vec::new(),
            },
        };
        ids.into_iter()
            .filter(|id| self.exported.contains(id))
            .map(|id| id.to_string())
            .collect()
    }

    /// A job's dependencies over the exported trace ids (`None`: nothing left to wait for).
    fn dependencies(&self, text: &str) -> Option<Arc<Dependencies>> {
        let parsed = Dependencies::parse(text).ok()?;
        let mut on = Vec::new();
        for d in &parsed.on {
            for id in self.resolve(&d.on) {
                on.push(arbiter_model::Dependency {
                    kind: d.kind,
                    on: id,
                });
            }
        }
        (!on.is_empty() || parsed.singleton).then(|| {
            Arc::new(Dependencies {
                on,
                singleton: parsed.singleton,
            })
        })
    }
}

/// One job as a trace job (`index`: its dense id in the trace), its tenant left to the caller.
fn spec(index: u32, job: &HistoryRecord, origin_unix_s: i64, refs: &References<'_>) -> JobSpec {
    let submit_s = (job.submitted_unix_s - origin_unix_s).max(0) as f64;
    let mut spec = JobSpec::new(
        JobId(index),
        SimTime::from_secs_f64(submit_s),
        job.gpus.max(1),
        run_time_s(job),
    );
    spec.trace_id = job.id.to_string();
    spec.user = job.user.clone();
    spec.name = job.name.clone();
    spec.model = job.job_type.clone();
    spec.priority = job.priority;
    spec.iterations = job.total_steps;
    spec.deadline = job
        .deadline_unix_s
        // (A deadline years ahead is kept within what a history may hold.)
        .map(|d| {
            SimTime::from_secs_f64(
                ((d - origin_unix_s).max(0) as f64).min(arbiter_trace::native::MAX_SECONDS),
            )
        });
    spec.class.name = job.priority_class.as_deref().map(Arc::from);
    // Dependencies name daemon job ids, which are the trace ids here.
    spec.dependency = job.dependency.as_deref().and_then(|d| refs.dependencies(d));
    spec
}

/// What the daemon recorded of a job: its first start and its end, seconds from the trace's
/// zero; its progress rate; the GPU types it asked for; its array.
fn recorded(job: &HistoryRecord, origin_unix_s: i64) -> Recorded {
    let at = |unix_s: i64| (unix_s - origin_unix_s).max(0) as f64;
    let start = job.first_start_unix_s.map(at);
    // An end is only of a job whose start is known (a replay compares the two).
    let end = start
        .and(job.end_unix_s.map(at))
        .map(|e| e.max(start.unwrap_or(0.0)));
    Recorded {
        start_s: start,
        end_s: end,
        progress_rate: job.progress_rate.filter(|r| r.is_finite() && *r > 0.0),
        gpu_types: job.gpu_types.clone(),
        array: job.array.map(|a| ArrayTask {
            array_id: a.array_id.to_string(),
            index: a.index,
            max_running: a.max_running,
        }),
    }
}

/// Seconds of work: what the job held GPUs for; for one not ended yet, plus what its reported
/// progress says is left — at most what a history may hold ([`arbiter_trace::native::MAX_SECONDS`]:
/// a crawling job's estimate could be centuries, and the file would not read back).
fn run_time_s(job: &HistoryRecord) -> f64 {
    work_s(job).min(arbiter_trace::native::MAX_SECONDS)
}

/// [`run_time_s`] before the bound.
fn work_s(job: &HistoryRecord) -> f64 {
    let executed = if job.executed_s.is_finite() {
        job.executed_s.max(0.0)
    } else {
        0.0
    };
    let left = match (
        job.ended(),
        job.total_steps,
        job.progress_steps,
        job.progress_rate,
    ) {
        (false, Some(total), Some(done), Some(rate))
            if rate.is_finite() && rate > 0.0 && total > done =>
        {
            (total - done) as f64 / rate
        }
        _ => 0.0,
    };
    executed + left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, submitted: i64, runs: u32, executed_s: f64, state: &str) -> HistoryRecord {
        HistoryRecord {
            id,
            tenant: "team-a".into(),
            user: Some("alice".into()),
            name: Some("resnet".into()),
            state: serde_json::from_value(serde_json::json!(state)).expect("a state"),
            submitted_unix_s: submitted,
            gpus: 2,
            priority_class: Some("high".into()),
            dependency: Some("afterok:3".into()),
            runs,
            executed_s,
            first_start_unix_s: (runs > 0).then_some(submitted + 10),
            end_unix_s: (runs > 0 && !matches!(state, "running" | "queued" | "stopping"))
                .then_some(submitted + 10 + executed_s as i64),
            ..HistoryRecord::default()
        }
    }

    fn csv(history: &History) -> String {
        let mut out = Vec::new();
        history.write(&mut out).expect("writes");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn jobs_that_ran_become_a_trace_from_the_first_submission_with_their_start_and_end() {
        let jobs = [
            job(5, 1_000_100, 1, 300.0, "succeeded"),
            job(3, 1_000_000, 2, 50.0, "failed"),
            job(7, 1_000_200, 0, 0.0, "cancelled"),
        ];
        let h = export(&jobs);
        assert_eq!(h.origin_unix_s, Some(1_000_000));
        assert_eq!(
            h.jobs
                .iter()
                .map(|s| (s.trace_id.as_str(), s.submit.as_secs_f64(), s.run_time_s))
                .collect::<Vec<_>>(),
            [("3", 0.0, 50.0), ("5", 100.0, 300.0)],
            "the cancelled job never ran"
        );
        assert_eq!(
            (
                h.jobs[1].gpus,
                h.jobs[1].class.name.as_deref(),
                h.jobs[1].user.as_deref()
            ),
            (2, Some("high"), Some("alice"))
        );
        assert_eq!(
            h.jobs[1].dependency.as_ref().map(|d| d.on[0].on.clone()),
            Some("3".to_string())
        );
        assert_eq!(
            (h.recorded[0].start_s, h.recorded[0].end_s),
            (Some(10.0), Some(60.0))
        );
        assert_eq!(
            (h.recorded[1].start_s, h.recorded[1].end_s),
            (Some(110.0), Some(410.0))
        );
        let recent = export(&jobs[..1]);
        assert!(
            recent.jobs[0].dependency.is_none(),
            "job 3 is not in this export: its dependency held, and is dropped"
        );
        let text = csv(&h);
        assert!(text.lines().next().is_some_and(|header| header.ends_with("actual_start_s,actual_end_s,progress_rate,gpu_types,array_id,array_index,array_max_running")), "{text}");
    }

    #[test]
    fn a_job_not_ended_counts_what_its_progress_says_is_left_and_has_no_end() {
        let mut running = job(1, 0, 1, 100.0, "running");
        (
            running.total_steps,
            running.progress_steps,
            running.progress_rate,
        ) = (Some(1000), Some(400), Some(2.0));
        let h = export(&[running]);
        assert_eq!(h.jobs[0].run_time_s, 400.0);
        assert_eq!(
            (
                h.recorded[0].start_s,
                h.recorded[0].end_s,
                h.recorded[0].progress_rate
            ),
            (Some(10.0), None, Some(2.0))
        );
    }

    #[test]
    fn array_tasks_keep_their_array_and_a_dependency_on_an_array_waits_for_every_task() {
        let mut jobs = Vec::new();
        for (id, index) in [(10, 0), (11, 1), (12, 2)] {
            let mut t = job(id, 1_000, 1, 5.0, "succeeded");
            t.array = Some(arbiter_daemon::records::array::ArrayTask {
                array_id: 10,
                index,
                tasks: 3,
                max_running: Some(2),
            });
            t.dependency = None;
            jobs.push(t);
        }
        let mut after_all = job(13, 1_001, 1, 5.0, "succeeded");
        after_all.dependency = Some("afterok:10".into());
        let mut after_one = job(14, 1_001, 1, 5.0, "succeeded");
        after_one.dependency = Some("afterany:10_2".into());
        jobs.extend([after_all, after_one]);
        let h = export(&jobs);
        assert_eq!(
            h.recorded[1].array,
            Some(ArrayTask {
                array_id: "10".into(),
                index: 1,
                max_running: Some(2)
            })
        );
        let on = |i: usize| {
            h.jobs[i].dependency.as_ref().map(|d| {
                d.on.iter()
                    .map(|d| format!("{}:{}", d.kind, d.on))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            on(3),
            Some(vec![
                "afterok:10".into(),
                "afterok:11".into(),
                "afterok:12".into()
            ])
        );
        assert_eq!(on(4), Some(vec!["afterany:12".into()]));
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("hist.csv");
        std::fs::write(&path, csv(&h)).expect("write");
        let (trace, recorded) = arbiter_trace::native::read_history(&path).expect("reads back");
        assert_eq!((trace.jobs.len(), recorded), (5, h.recorded));
    }
}
