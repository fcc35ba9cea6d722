//! `arbiter history export`: the daemon's finished and running jobs as a native trace, for
//! replaying last month's jobs under another policy or configuration (issue 30, item 4).
//!
//! What goes in is what a scheduler needs and nothing a tenant would mind in a shared file: the
//! submission time, tenant, user, name and job type, GPUs asked, the run time measured (the
//! seconds it held GPUs; a running job's so far plus what its progress says is left), its
//! steps, priority, deadline, class and dependencies. Never the command, environment, working
//! or checkpoint directories, or anything of the logs.

use arbiter_model::{Dependencies, JobId, JobSpec, SimTime};
use serde_json::Value;
use std::sync::Arc;

/// The jobs of `jobs` (the daemon's JSON records, as `GET /v1/jobs` gives them) that ran or
/// run, submitted at or after `since_unix_s`, as trace jobs, oldest first; submission times
/// are from the first one's. Returns them with that first submission (Unix seconds).
pub(super) fn export(jobs: &[Value], since_unix_s: Option<i64>) -> (Vec<JobSpec>, Option<i64>) {
    let mut kept: Vec<&Value> = jobs
        .iter()
        .filter(|j| j["runs"].as_u64().is_some_and(|r| r > 0))
        .filter(|j| {
            since_unix_s.is_none_or(|s| j["submitted_unix_s"].as_i64().is_some_and(|t| t >= s))
        })
        .collect();
    kept.sort_by_key(|j| {
        (
            j["submitted_unix_s"].as_i64().unwrap_or(0),
            j["id"].as_u64().unwrap_or(0),
        )
    });
    let origin = kept.first().and_then(|j| j["submitted_unix_s"].as_i64());
    let specs = kept
        .iter()
        .enumerate()
        .map(|(i, j)| spec(i as u32, j, origin.unwrap_or(0)))
        .collect();
    (specs, origin)
}

/// One job as a trace job (`index`: its dense id in the trace).
fn spec(index: u32, job: &Value, origin_unix_s: i64) -> JobSpec {
    let request = &job["request"];
    let submit_s =
        (job["submitted_unix_s"].as_i64().unwrap_or(origin_unix_s) - origin_unix_s).max(0) as f64;
    let gpus = request["gpus"].as_u64().unwrap_or(1).max(1) as u32;
    let mut spec = JobSpec::new(
        JobId(index),
        SimTime::from_secs_f64(submit_s),
        gpus,
        run_time_s(job),
    );
    spec.trace_id = job["id"].as_u64().unwrap_or(0).to_string();
    spec.tenant = job["tenant"].as_str().unwrap_or("").to_string();
    spec.user = request["user"].as_str().map(str::to_string);
    spec.name = request["name"].as_str().map(str::to_string);
    spec.model = request["job_type"].as_str().map(str::to_string);
    spec.priority = request["priority"].as_i64().unwrap_or(0) as i32;
    spec.iterations = job["total_steps"].as_u64();
    spec.deadline = request["deadline_unix_s"]
        .as_i64()
        .map(|d| SimTime::from_secs_f64((d - origin_unix_s).max(0) as f64));
    spec.class.name = request["priority_class"].as_str().map(Arc::from);
    // Dependencies name daemon job ids, which are the trace ids here.
    spec.dependency = request["dependency"]
        .as_str()
        .and_then(|d| Dependencies::parse(d).ok())
        .map(Arc::new);
    spec
}

/// Seconds of work: what the job held GPUs for; for one still running, plus what its reported
/// progress says is left.
fn run_time_s(job: &Value) -> f64 {
    let executed = job["executed_s"].as_f64().unwrap_or(0.0).max(0.0);
    let running = matches!(job["state"]["state"].as_str(), Some("running" | "stopping"));
    let left = match (
        running,
        job["total_steps"].as_u64(),
        job["progress"]["steps"].as_u64(),
        job["progress"]["throughput"].as_f64(),
    ) {
        (true, Some(total), Some(done), Some(rate)) if rate > 0.0 && total > done => {
            (total - done) as f64 / rate
        }
        _ => 0.0,
    };
    executed + left
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(id: u64, submitted: i64, runs: u64, executed_s: f64, state: &str) -> Value {
        json!({
            "id": id, "tenant": "team-a", "submitted_unix_s": submitted, "runs": runs, "executed_s": executed_s,
            "state": { "state": state },
            "request": {
                "command": "python train.py --token=SECRET-IN-COMMAND", "env": { "WANDB_API_KEY": "SECRET-IN-ENV" },
                "working_dir": "/home/alice/secret-project", "checkpoint_dir": "/ckpt/secret", "gpus": 2, "name": "resnet",
                "priority_class": "high", "dependency": "afterok:3", "user": "alice",
            },
        })
    }

    #[test]
    fn jobs_that_ran_become_a_trace_from_the_first_submission_without_commands_environments_or_paths()
     {
        let jobs = vec![
            job(5, 1_000_100, 1, 300.0, "succeeded"),
            job(3, 1_000_000, 2, 50.0, "failed"),
            job(7, 1_000_200, 0, 0.0, "cancelled"),
        ];
        let (specs, origin) = export(&jobs, None);
        assert_eq!(origin, Some(1_000_000));
        assert_eq!(
            specs
                .iter()
                .map(|s| (s.trace_id.as_str(), s.submit.as_secs_f64(), s.run_time_s))
                .collect::<Vec<_>>(),
            [("3", 0.0, 50.0), ("5", 100.0, 300.0)],
            "the cancelled job never ran"
        );
        assert_eq!(
            (
                specs[1].gpus,
                specs[1].class.name.as_deref(),
                specs[1].user.as_deref()
            ),
            (2, Some("high"), Some("alice"))
        );
        assert_eq!(
            specs[1].dependency.as_ref().map(|d| d.on[0].on.clone()),
            Some("3".to_string())
        );
        let mut csv = Vec::new();
        arbiter_trace::native::write(&mut csv, &specs).expect("writes");
        let text = String::from_utf8(csv).expect("utf-8");
        assert!(
            !text.contains("SECRET") && !text.contains("secret") && !text.contains("train.py"),
            "{text}"
        );
        let (recent, _) = export(&jobs, Some(1_000_050));
        assert_eq!(recent.len(), 1);
    }

    #[test]
    fn a_running_job_counts_what_its_progress_says_is_left() {
        let mut running = job(1, 0, 1, 100.0, "running");
        running["total_steps"] = json!(1000);
        running["progress"] = json!({ "steps": 400, "throughput": 2.0 });
        assert_eq!(run_time_s(&running), 400.0);
    }
}
