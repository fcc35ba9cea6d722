//! Job dependencies (`arbiter submit --dependency afterok:12`, Slurm's syntax and rules: see
//! `arbiter_model::dependency`). A job waiting on one is kept from the policy with the reason
//! "waiting for job 12 (afterok)"; one that can no longer be satisfied fails with Slurm's
//! `DependencyNeverSatisfied` reason. A job may name only its own tenant's jobs that exist when
//! it is submitted, so a dependency never points forward and cycles cannot be made.
//!
//! Only jobs whose dependencies still wait are looked at each round (`State::dependent`); one
//! satisfied stays satisfied (what it waited for has happened and cannot unhappen), so it leaves
//! the set and is an ordinary queued job from then on.

use crate::daemon::round::hold::{self, Hold};
use crate::daemon::{Daemon, State};
use crate::records::job::{FieldError, JobRecord, JobState};
use arbiter_model::{DependedOn, Dependencies, Verdict};
use std::collections::BTreeMap;

/// The dependencies of `request_text` for a job of `tenant` named `name`, checked against the
/// jobs on record: each named job must be the tenant's own (another tenant's id is "not found",
/// as one that does not exist: ids are not secret, but whose they are is), `singleton` needs a
/// name.
pub(crate) fn check(
    state: &State,
    tenant: &str,
    name: Option<&str>,
    request_text: &str,
) -> Result<Dependencies, FieldError> {
    let bad = |reason: String| FieldError {
        field: "dependency",
        reason,
    };
    let parsed = Dependencies::parse(request_text).map_err(bad)?;
    if parsed.singleton && name.is_none() {
        return Err(bad(
            "singleton waits for earlier jobs with the same name: give the job a name (--name)"
                .into(),
        ));
    }
    for d in &parsed.on {
        let own = job_of(state, &d.on)
            .and_then(|id| state.jobs.get(id as usize))
            .is_some_and(|j| j.tenant == tenant);
        if !own {
            return Err(bad(format!("job {} not found ({}:{})", d.on, d.kind, d.on)));
        }
    }
    Ok(parsed)
}

/// The queued jobs of `jobs` with dependencies, at start (they are judged again at the first
/// round; one satisfied then leaves the set).
pub(crate) fn waiting(jobs: &crate::records::jobs::Jobs) -> BTreeMap<u32, Dependencies> {
    let mut out = BTreeMap::new();
    for job in jobs.iter().filter(|j| matches!(j.state, JobState::Queued)) {
        let Some(text) = job.request.dependency.as_deref() else {
            continue;
        };
        match Dependencies::parse(text) {
            Ok(deps) => {
                out.insert(job.id, deps);
            }
            // Accepted once, so it parsed then: a record written by another version.
            Err(e) => tracing::warn!(
                job = job.id,
                "its dependency `{text}` no longer parses ({e}); it no longer waits on it"
            ),
        }
    }
    out
}

/// The job a dependency names: `12`, or task 7 of array 12 as `12_7`.
fn job_of(state: &State, text: &str) -> Option<u32> {
    match crate::records::array::parse_task_ref(text) {
        Some((array, index)) => crate::daemon::arrays::task_id(state, array, index),
        None => text.parse().ok(),
    }
}

/// Where the job (or array: all its tasks) a dependency names stands (`None`: no record).
fn stand(state: &State, text: &str) -> Option<DependedOn> {
    let id = job_of(state, text)?;
    match state
        .arrays
        .get(&id)
        .filter(|_| crate::records::array::parse_task_ref(text).is_none())
    {
        // Slurm: a dependency on an array is on every task of it.
        Some(array) => array_stand(
            array
                .ids()
                .map(|t| state.jobs.get(t as usize).map(job_stand)),
        ),
        None => state.jobs.get(id as usize).map(job_stand),
    }
}

/// All tasks together: succeeded when all did; ended otherwise when all ended and one did not
/// succeed; else started when one started (`None`: a task's record was pruned).
fn array_stand(tasks: impl Iterator<Item = Option<DependedOn>>) -> Option<DependedOn> {
    let (mut all_ended, mut all_ok, mut any_started) = (true, true, false);
    for task in tasks {
        match task? {
            DependedOn::Waiting => all_ended = false,
            DependedOn::Started => (all_ended, any_started) = (false, true),
            DependedOn::Succeeded => any_started = true,
            DependedOn::EndedNotOk { started } => {
                (all_ok, any_started) = (false, any_started || started)
            }
        }
    }
    Some(match (all_ended, all_ok, any_started) {
        (true, true, _) => DependedOn::Succeeded,
        (true, false, started) => DependedOn::EndedNotOk { started },
        (false, _, true) => DependedOn::Started,
        (false, _, false) => DependedOn::Waiting,
    })
}

/// Where a job stands for a job depending on it.
fn job_stand(job: &JobRecord) -> DependedOn {
    match job.state {
        JobState::Queued if job.runs == 0 => DependedOn::Waiting,
        JobState::Queued | JobState::Running { .. } | JobState::Stopping { .. } => {
            DependedOn::Started
        }
        JobState::Succeeded => DependedOn::Succeeded,
        JobState::Failed | JobState::Cancelled => DependedOn::EndedNotOk {
            started: job.runs > 0,
        },
    }
}

/// How job `id` ended, in words, for the reason a dependent job failed.
fn ended_words(state: &State, id: &str) -> &'static str {
    match stand(state, id) {
        None => "has no record any more (pruned)",
        Some(DependedOn::Succeeded) => "succeeded",
        Some(_)
            if state
                .arrays
                .contains_key(&job_of(state, id).unwrap_or(u32::MAX))
                && !id.contains('_') =>
        {
            "had a task that did not succeed"
        }
        Some(_) => match job_of(state, id)
            .and_then(|i| state.jobs.get(i as usize))
            .map(|j| &j.state)
        {
            Some(JobState::Cancelled) => "was cancelled",
            _ => "failed",
        },
    }
}

/// Per (tenant, name): the earliest of its jobs that has not ended (for `singleton`).
fn first_live_by_name(state: &State) -> BTreeMap<(&str, &str), u32> {
    let mut first = BTreeMap::new();
    for job in state.jobs.iter().filter(|j| !j.state.is_terminal()) {
        if let Some(name) = job.request.name.as_deref() {
            first.entry((job.tenant.as_str(), name)).or_insert(job.id);
        }
    }
    first
}

/// What a waiting job's dependencies allow now.
enum Settled {
    Free,
    Wait(Hold),
    Never(String),
}

fn settle(
    state: &State,
    job: &JobRecord,
    deps: &Dependencies,
    singles: &BTreeMap<(&str, &str), u32>,
) -> Settled {
    match deps.verdict(|id| stand(state, id)) {
        (Verdict::Never, Some(d)) => {
            return Settled::Never(format!(
                "DependencyNeverSatisfied: job {} {} ({}:{})",
                d.on,
                ended_words(state, &d.on),
                d.kind,
                d.on
            ));
        }
        (Verdict::Waiting, Some(d)) => {
            return Settled::Wait(Hold::Dependency {
                on: d.on.clone(),
                kind: d.kind.name(),
            });
        }
        _ => {}
    }
    if deps.singleton
        && let Some(name) = job.request.name.as_deref()
        && let Some(&first) = singles
            .get(&(job.tenant.as_str(), name))
            .filter(|&&first| first < job.id)
    {
        return Settled::Wait(Hold::Dependency {
            on: first.to_string(),
            kind: "singleton",
        });
    }
    Settled::Free
}

impl Daemon {
    /// Before the snapshot: frees the jobs whose dependencies now hold, tells the others why
    /// they wait, and fails those that can never start.
    pub(crate) fn settle_dependencies(&self, state: &mut State, now_s: i64) {
        if state.dependent.is_empty() {
            return;
        }
        let mut outcomes = Vec::new();
        {
            let singles = first_live_by_name(state);
            for (&id, deps) in &state.dependent {
                let Some(job) = state
                    .jobs
                    .get(id as usize)
                    .filter(|j| matches!(j.state, JobState::Queued))
                else {
                    outcomes.push((id, Settled::Free));
                    continue;
                };
                outcomes.push((id, settle(state, job, deps, &singles)));
            }
        }
        for (id, outcome) in outcomes {
            match outcome {
                Settled::Free => {
                    state.dependent.remove(&id);
                }
                Settled::Wait(why) => {
                    if let Some(job) = state.jobs.get_mut(id as usize) {
                        hold::set(job, &why);
                    }
                }
                Settled::Never(why) => {
                    state.dependent.remove(&id);
                    self.fail_queued(state, id, &why, now_s);
                }
            }
        }
    }

    /// Ends queued job `id` as failed, for `why`, durably (or at the next round, if the store is
    /// read-only now).
    fn fail_queued(&self, state: &mut State, id: u32, why: &str, now_s: i64) {
        let Some(job) = state.jobs.get(id as usize) else {
            return;
        };
        let mut failed = job.clone();
        failed.pending_reason = None;
        failed.transition(JobState::Failed, why, now_s);
        if let Err(e) = self.store.put_jobs(&[&failed]) {
            tracing::warn!(
                job = id,
                "failed ({why}) although the store refused the change (written later): {e}"
            );
            state.dirty.insert(id);
        }
        tracing::info!(job = id, "{why}");
        state.jobs[id as usize] = failed;
        state.job_ended_for_good(id);
    }
}
