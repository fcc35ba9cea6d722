//! A job as the cluster's history gives it (`GET /v1/history`, admin only; `arbiter history
//! export`, `arbiter whatif`): what a replay needs — when it was submitted, by whom, what it asked
//! for, how long it held GPUs, when it first started and when it ended, its measured progress
//! rate, its array — and nothing a tenant would mind in a file shared with the other tenants:
//! [`HistoryRecord`] has no field for the command, the environment, the directories or anything
//! of the logs, so none can leak through it.
//!
//! Typed and small (a few hundred bytes of JSON a job, against a few kilobytes for `GET /v1/jobs`):
//! a million jobs' history is rendered and read in seconds.

use crate::records::array::ArrayTask;
use crate::records::job::{JobRecord, StateKind};
use serde::{Deserialize, Serialize};

/// One job of the history.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryRecord {
    /// The job's id.
    pub id: u32,
    /// Its tenant.
    pub tenant: String,
    /// Who in the tenant submitted it, as the client said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its job type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    /// Its state now (`succeeded`, `running`, ...).
    pub state: StateKind,
    /// Unix seconds of its submission.
    pub submitted_unix_s: i64,
    /// GPUs it asked for.
    pub gpus: u32,
    /// GPU types it may run on (empty: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_types: Vec<String>,
    /// Its priority.
    pub priority: i32,
    /// Its deadline, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_unix_s: Option<i64>,
    /// Its priority class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Its dependencies, as submitted (Slurm's syntax over job ids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// Runs started.
    pub runs: u32,
    /// Seconds it held GPUs over all runs, the one going on included.
    pub executed_s: f64,
    /// Total steps, if the job said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_steps: Option<u64>,
    /// Steps done, as its latest progress report said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_steps: Option<u64>,
    /// Steps per second its progress reports measured (the latest report's, else the smoothed
    /// rate of the first GPU type it ran on, by name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_rate: Option<f64>,
    /// Unix seconds of its first start (`None`: it never started, or the transitions kept no
    /// longer reach back to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_start_unix_s: Option<i64>,
    /// Unix seconds it ended (succeeded, failed, cancelled); `None` while it has not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_unix_s: Option<i64>,
    /// The job array it is a task of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayTask>,
}

impl HistoryRecord {
    /// What the history gives of `job` at `now_unix_s`.
    pub fn of(job: &JobRecord, now_unix_s: i64) -> Self {
        let r = &job.request;
        let usable = |rate: &f64| rate.is_finite() && *rate > 0.0;
        let rate = job
            .progress
            .as_ref()
            .and_then(|p| p.throughput)
            .filter(usable)
            .or_else(|| job.throughput_by_gpu_type.values().copied().find(usable));
        // The history keeps the first transition (the submission) and the latest ones: with some
        // left out, the first start may be among them.
        let first_start_unix_s = (job.history_omitted == 0)
            .then(|| {
                job.history
                    .iter()
                    .find(|t| t.to == StateKind::Running)
                    .map(|t| t.at_unix_s)
            })
            .flatten();
        let end_unix_s = job
            .state
            .is_terminal()
            .then(|| job.history.last().map(|t| t.at_unix_s))
            .flatten();
        HistoryRecord {
            id: job.id,
            tenant: job.tenant.clone(),
            user: r.user.clone(),
            name: r.name.clone(),
            job_type: r.job_type.clone(),
            state: job.state.kind(),
            submitted_unix_s: job.submitted_unix_s,
            gpus: r.gpus,
            gpu_types: r.gpu_types.clone(),
            priority: r.priority,
            deadline_unix_s: r.deadline_unix_s,
            priority_class: r.priority_class.clone(),
            dependency: r.dependency.clone(),
            runs: job.runs,
            executed_s: job.executed_s_at(now_unix_s),
            total_steps: job.total_steps,
            progress_steps: job.progress.as_ref().map(|p| p.steps),
            progress_rate: rate,
            first_start_unix_s,
            end_unix_s,
            array: job.array,
        }
    }

    /// Whether it has ended for good.
    pub fn ended(&self) -> bool {
        !matches!(
            self.state,
            StateKind::Queued | StateKind::Running | StateKind::Stopping
        )
    }
}

/// A page of `GET /v1/history`: its jobs, and the id to ask after for the next (`None`: the
/// last page).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryPage {
    /// The jobs, in id order.
    pub jobs: Vec<HistoryRecord>,
    /// Ask `?after=` this for the next page.
    pub next_after: Option<u32>,
}

/// One page of the history: from `jobs` (in id order), those that ran, submitted at or after
/// `since_unix_s`, at most `limit`; with whether more follow (the next page starts after the
/// last id of this one).
pub fn page<'a>(
    jobs: impl Iterator<Item = &'a JobRecord>,
    since_unix_s: i64,
    limit: usize,
    now_unix_s: i64,
) -> (Vec<HistoryRecord>, bool) {
    let mut ran = jobs
        .filter(|j| j.runs > 0 && j.submitted_unix_s >= since_unix_s)
        .peekable();
    let records: Vec<HistoryRecord> = ran
        .by_ref()
        .take(limit.max(1))
        .map(|j| HistoryRecord::of(j, now_unix_s))
        .collect();
    (records, ran.peek().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::{JobState, SubmitRequest};

    fn job(id: u32, submitted_s: i64, ran: bool) -> JobRecord {
        let request: SubmitRequest = serde_json::from_value(serde_json::json!({
            "command": "python train.py --token=SECRET-IN-COMMAND", "env": { "WANDB_API_KEY": "SECRET-IN-ENV" },
            "working_dir": "/home/alice/secret-project", "checkpoint_dir": "/ckpt/secret", "gpus": 2, "name": "resnet",
            "priority_class": "high", "dependency": "afterok:3", "user": "alice", "gpu_types": ["a100"],
        }))
        .expect("a request");
        let mut job = JobRecord::submitted(
            id,
            "team-a",
            request,
            submitted_s as u64 * 1000,
            "a token's hash".into(),
        );
        if ran {
            job.transition(
                JobState::Running {
                    gpus: vec![0, 1],
                    pid: 7,
                    started_unix_s: submitted_s + 10,
                },
                "started on GPUs 0,1",
                submitted_s + 10,
            );
            job.runs = 1;
            job.executed_s = 50.0;
            job.transition(JobState::Succeeded, "exit code 0", submitted_s + 60);
        }
        job
    }

    #[test]
    fn a_job_in_the_history_has_its_start_end_and_request_and_no_command_environment_or_path() {
        let record = HistoryRecord::of(&job(3, 1_000, true), 2_000);
        assert_eq!(
            (
                record.first_start_unix_s,
                record.end_unix_s,
                record.executed_s
            ),
            (Some(1_010), Some(1_060), 50.0)
        );
        assert_eq!(
            (
                record.gpus,
                record.gpu_types.as_slice(),
                record.priority_class.as_deref(),
                record.user.as_deref()
            ),
            (2, &["a100".to_string()][..], Some("high"), Some("alice"))
        );
        assert!(record.ended());
        let text = serde_json::to_string(&record).expect("JSON");
        assert!(
            !text.contains("SECRET")
                && !text.contains("secret")
                && !text.contains("train.py")
                && !text.contains("token"),
            "{text}"
        );
        let back: HistoryRecord = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, record);
    }

    #[test]
    fn a_page_holds_the_jobs_that_ran_since_a_time_and_says_whether_more_follow() {
        let jobs = [
            job(0, 1_000, true),
            job(1, 1_100, false),
            job(2, 1_200, true),
            job(3, 1_300, true),
        ];
        let (first, more) = page(jobs.iter(), 1_000, 2, 5_000);
        assert_eq!(
            (first.iter().map(|r| r.id).collect::<Vec<_>>(), more),
            (vec![0, 2], true),
            "job 1 never ran"
        );
        let (rest, more) = page(jobs.iter().skip(3), 1_000, 2, 5_000);
        assert_eq!((rest.len(), more), (1, false));
        let (recent, _) = page(jobs.iter(), 1_150, 10, 5_000);
        assert_eq!(recent.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 3]);
    }
}
