//! Why a waiting job is not running, typed: the policy's own reasons and every place where the
//! daemon departs from what the policy decided. Turned into the words tenants read (the API's
//! `pending_reason`) here and nowhere else.

use crate::records::job::JobRecord;
use crate::records::jobs::ReasonSlot;
use arbiter_model::{PendingReason, QuotaHold};

/// Why a running job may not be stopped yet, and until when (Unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protection {
    /// Within its minimum run time.
    MinRun(u64),
    /// A round-based policy's round is not over.
    Round(u64),
}

impl Protection {
    /// When it ends (Unix ms).
    pub(crate) fn until_ms(self) -> u64 {
        match self {
            Protection::MinRun(t) | Protection::Round(t) => t,
        }
    }
}

/// Why a waiting job waits.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Hold {
    /// What the policy said (`LowerPriority` where it said nothing).
    Policy(PendingReason),
    /// A failed run's back-off: `failures` so far, retried in `retry_in_s`.
    BackingOff { failures: u32, retry_in_s: i64 },
    /// Its tenant's GPU quota holds it back: it is not offered to the policy.
    Quota(QuotaHold),
    /// The policy placed it, but its tenant's quota changed while the policy was deciding.
    QuotaChanged { quota: u32 },
    /// No node takes new runs (all are down or drained).
    NoUsableNode,
    /// An opportunistic job waits for idle GPUs (the policy never sees it).
    Opportunistic,
    /// It cannot run as its tenant's identity.
    Identity(String),
    /// The executor could not start its run.
    StartFailed(String),
    /// Placed elsewhere, its previous run has not ended yet.
    StillStopping,
    /// The policy shares GPUs between it and a running job, which the executor cannot do.
    SharingUnsupported {
        by: &'static str,
        gpus: Vec<u32>,
        with: Partner,
        executor: &'static str,
        hint: Option<&'static str>,
    },
    /// Opportunistic runs on its GPUs are yielding: its tenant's own (named) and others'.
    Yielding { own: Vec<u32>, others: bool },
    /// The job on its GPUs may not be preempted yet.
    Protected {
        holder: Partner,
        protection: Protection,
        left_s: f64,
    },
    /// A preempted job has not released its GPUs yet.
    Releasing,
    /// It depends on job `on` (of its tenant) as `kind` says (`afterok`, ..., `singleton`).
    Dependency { on: String, kind: &'static str },
    /// Its array has `limit` tasks running, as many as its `%limit` allows.
    ArrayLimit { array_id: u32, limit: u32 },
    /// The policy did not place it (`policy`), and a reservation keeps it off some nodes.
    Reserved { policy: PendingReason, what: String },
}

/// Another job, as a tenant may be told of it: its own job by id, another tenant's only as that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Partner {
    /// A job of the same tenant.
    Own(u32),
    /// Another tenant's job.
    Other,
}

impl Hold {
    /// The words for a job of `tenant` (shown to that tenant: nothing of another tenant's jobs
    /// but that they exist, nothing of their timing).
    #[cfg(test)]
    pub(crate) fn words(&self, tenant: &str) -> String {
        let mut out = String::new();
        self.write_words(tenant, &mut out);
        out
    }

    /// [`Hold::words`] into `out` (cleared first).
    fn write_words(&self, tenant: &str, out: &mut String) {
        out.clear();
        let text: String = match self {
            Hold::Policy(reason) => {
                out.push_str(reason.as_str());
                return;
            }
            Hold::BackingOff {
                failures,
                retry_in_s,
            } => format!("backing off after failed run {failures} (retry in {retry_in_s} s)"),
            Hold::Quota(hold) => hold.reason(tenant),
            Hold::QuotaChanged { quota } => {
                format!("tenant {tenant} is at its GPU quota ({quota})")
            }
            Hold::NoUsableNode => "no node takes new runs (all are down or drained)".into(),
            Hold::Dependency {
                on,
                kind: "singleton",
            } => format!("waiting for job {on}, an earlier job of the same name (singleton)"),
            Hold::Dependency { on, kind } => format!("waiting for job {on} ({kind})"),
            Hold::Reserved { policy, what } => format!("{policy}; kept off reserved nodes: {what}"),
            Hold::ArrayLimit { array_id, limit } => {
                format!("array {array_id} has {limit} tasks running, its limit (%{limit})")
            }
            Hold::Opportunistic => "opportunistic: waiting for idle GPUs".into(),
            Hold::Identity(e) => format!("cannot run as tenant {tenant}'s identity: {e}"),
            Hold::StartFailed(e) => {
                format!("the daemon could not start its run: {e}; retrying every round")
            }
            Hold::StillStopping => "waiting for its previous run to end before it moves".into(),
            Hold::SharingUnsupported {
                by,
                gpus,
                with,
                executor,
                hint,
            } => {
                let with = match with {
                    Partner::Own(id) => format!("job {id}"),
                    Partner::Other => "another tenant's job".into(),
                };
                let gpus: Vec<String> = gpus.iter().map(u32::to_string).collect();
                let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
                format!(
                    "the policy ({by}) shares GPUs {} between it and {with}, which the {executor} executor cannot do (it gives a GPU to one job at a time{hint}): waiting for them to be free",
                    gpus.join(",")
                )
            }
            Hold::Yielding { own, others } => {
                let mut names: Vec<String> = own.iter().map(|j| format!("job {j}")).collect();
                if *others {
                    names.push("another tenant's opportunistic job(s)".into());
                }
                format!("waiting for {} to yield their GPUs", names.join(", "))
            }
            Hold::Protected {
                holder: Partner::Other,
                protection: Protection::Round(_),
                ..
            } => "waiting for the round to end before another tenant's job may be preempted".into(),
            Hold::Protected {
                holder: Partner::Other,
                protection: Protection::MinRun(_),
                ..
            } => "waiting for another tenant's job's minimum run time before it may be preempted"
                .into(),
            Hold::Protected {
                holder: Partner::Own(p),
                protection: Protection::Round(_),
                left_s,
            } => {
                format!(
                    "waiting for the round to end ({left_s:.0} s) before job {p} may be preempted"
                )
            }
            Hold::Protected {
                holder: Partner::Own(p),
                protection: Protection::MinRun(_),
                left_s,
            } => {
                format!(
                    "waiting for job {p}'s minimum run time ({left_s:.0} s left) before it may be preempted"
                )
            }
            Hold::Releasing => "waiting for a preempted job to release its GPUs".into(),
        };
        out.push_str(&text);
    }
}

/// Says why `job` waits, writing the record only where the words changed (most waiting jobs
/// wait for the same reason as at the last round). Returns whether they changed.
pub(crate) fn set(job: &mut JobRecord, hold: &Hold) -> bool {
    set_reusing(ReasonSlot::of(job), hold, &mut String::new())
}

/// [`set`] on a job's reason alone, with a buffer for the words, for a pass over many jobs (no
/// allocation for a job whose reason did not change).
pub(crate) fn set_reusing(job: ReasonSlot<'_>, hold: &Hold, words: &mut String) -> bool {
    if let Hold::Policy(reason) = hold {
        // The same words for every job (most of a full queue's): compared, not written out.
        return crate::records::jobs::set_static_reason(job.reason, reason.as_str());
    }
    hold.write_words(job.tenant, words);
    crate::records::jobs::set_owned_reason(job.reason, words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_tenants_job_is_named_only_as_that_and_its_timing_not_at_all() {
        let other = Hold::Protected {
            holder: Partner::Other,
            protection: Protection::MinRun(123_000),
            left_s: 42.0,
        };
        let words = other.words("a");
        assert!(
            !words.contains("42")
                && !words.contains("job 7")
                && words.contains("another tenant's job"),
            "{words}"
        );
        let own = Hold::Protected {
            holder: Partner::Own(7),
            protection: Protection::MinRun(123_000),
            left_s: 42.0,
        };
        assert_eq!(
            own.words("a"),
            "waiting for job 7's minimum run time (42 s left) before it may be preempted"
        );
        let sharing = Hold::SharingUnsupported {
            by: "gandiva",
            gpus: vec![0, 1],
            with: Partner::Other,
            executor: "slurm",
            hint: Some("`[slurm] share_gpus = true` lets it"),
        };
        assert_eq!(
            sharing.words("a"),
            "the policy (gandiva) shares GPUs 0,1 between it and another tenant's job, which the slurm executor cannot do (it gives a GPU to one job at a time; `[slurm] share_gpus = true` lets it): waiting for them to be free"
        );
    }

    #[test]
    fn the_record_is_written_only_when_the_words_change() {
        let request = serde_json::from_str(r#"{"command": "true"}"#).expect("request");
        let mut job = JobRecord::submitted(0, "a", request, 0, String::new());
        assert!(set(&mut job, &Hold::Releasing));
        assert!(!set(&mut job, &Hold::Releasing));
        assert!(set(&mut job, &Hold::Policy(PendingReason::LowerPriority)));
        assert_eq!(
            job.pending_reason.as_deref(),
            Some("lower priority than the running jobs")
        );
    }
}
