//! Webhook events and the outbox that keeps them until they are delivered.
//!
//! ```text
//!   job write (store txn) ──► events of its new transitions ──► outbox row (same txn)
//!                                                                  │
//!   daemon/webhooks.rs: per tenant, oldest first ◄─────────────────┘ ──► POST ──► 2xx: row removed
//! ```
//!
//! An event is recorded in the very transaction that records the job's state change, so a crash
//! can lose neither the change nor its event; a row leaves the outbox only after its receiver
//! answered 2xx, so a crash mid-delivery sends it again (at least once: receivers deduplicate by
//! the event's `id`). Which transitions were turned into events is counted per job (`seen`), in
//! the same transaction too, so none is recorded twice.
//!
//! The outbox is bounded per tenant ([`OutboxMemory::capacity`]): beyond it an event is dropped and
//! counted, and the scheduling round that made it goes on. Jobs never wait for a receiver.

use crate::records::job::{JobRecord, StateKind, StopReason, Transition};
use crate::security::webhook::Secret;
use redb::{ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Events waiting: `<tenant>/<sequence, 20 digits>` → the event's JSON (the body sent). Keys sort
/// by tenant, then in the order the events were made.
pub(crate) const OUTBOX: TableDefinition<&str, &str> = TableDefinition::new("webhook_outbox");
/// Per job: how many of its transitions (counted from its submission) were considered.
pub(crate) const SEEN: TableDefinition<u32, u64> = TableDefinition::new("webhook_seen");
/// Per tenant: its webhook ([`WebhookTarget`], JSON).
pub(crate) const TARGETS: TableDefinition<&str, &str> = TableDefinition::new("webhooks");
/// Per tenant: how its receiver fares ([`Health`], JSON).
pub(crate) const HEALTH: TableDefinition<&str, &str> = TableDefinition::new("webhook_health");
/// The meta key of the next outbox sequence number.
pub(crate) const NEXT_SEQ: &str = "next_webhook_seq";
/// The meta key saying `SEEN` covers every job (set once, when the table is first filled).
pub(crate) const SEEN_READY: &str = "webhook_seen_ready";

/// The version of the event body's schema (`version` in every body).
pub const SCHEMA_VERSION: u32 = 1;

/// A job state change, as POSTed to its tenant's webhook (schema [`SCHEMA_VERSION`]; documented in
/// docs/webhooks.md). It carries no command line, environment or path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebhookEvent {
    /// Schema version.
    pub version: u32,
    /// Unique per job and transition (`<job>-<n>`: the job's n-th transition since its
    /// submission): the idempotency key. A redelivery carries the same id.
    pub id: String,
    /// `started`, `preempted`, `succeeded`, `failed` or `cancelled`.
    pub event: EventKind,
    /// The job's tenant (the webhook's own: a webhook carries no other tenant's jobs).
    pub tenant: String,
    /// The job's id.
    pub job_id: u32,
    /// The job's name, if it has one.
    pub name: Option<String>,
    /// The state it left.
    pub from: Option<StateKind>,
    /// The state it entered.
    pub to: StateKind,
    /// Why (as its history says: `exit code 1; retries used up`, `started on host:0,1`).
    pub reason: String,
    /// When, Unix seconds.
    pub time_unix_s: i64,
    /// The run's exit code, on `succeeded` and `failed` when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// What happened to the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// A run started (to `running`).
    Started,
    /// Its run was asked to checkpoint and give up its GPUs (to `stopping`); it goes back to the
    /// queue once the run has stopped.
    Preempted,
    /// Ended with exit code 0.
    Succeeded,
    /// Ended for good otherwise (retries used up, over its run-time limit).
    Failed,
    /// Cancelled.
    Cancelled,
}

impl EventKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::Preempted => "preempted",
            EventKind::Succeeded => "succeeded",
            EventKind::Failed => "failed",
            EventKind::Cancelled => "cancelled",
        }
    }

    /// The event a transition makes, if any (a failed run that is retried, a preempted run
    /// back in the queue, a cancel being carried out make none).
    fn of(transition: &Transition) -> Option<Self> {
        match transition.to {
            StateKind::Running => Some(EventKind::Started),
            // The stop's reason is the transition's text (`StopReason::as_str`).
            StateKind::Stopping if transition.why == StopReason::Preempted.as_str() => {
                Some(EventKind::Preempted)
            }
            StateKind::Succeeded => Some(EventKind::Succeeded),
            StateKind::Failed => Some(EventKind::Failed),
            StateKind::Cancelled => Some(EventKind::Cancelled),
            StateKind::Queued | StateKind::Stopping => None,
        }
    }
}

/// Transitions a job has made since its submission (its submission included).
pub fn transitions_made(job: &JobRecord) -> u64 {
    job.history_omitted + job.history.len() as u64
}

/// The events of `job`'s transitions number `seen` onwards (0 is its submission, which makes
/// none). Transitions dropped from the history's middle make none either.
pub fn events_since(job: &JobRecord, seen: u64) -> Vec<WebhookEvent> {
    let total = transitions_made(job);
    let mut out = Vec::new();
    for n in seen.max(1)..total {
        let Some(index) = n
            .checked_sub(job.history_omitted)
            .filter(|i| *i >= 1)
            .map(|i| i as usize)
        else {
            continue;
        };
        let (Some(transition), previous) = (job.history.get(index), job.history.get(index - 1))
        else {
            continue;
        };
        // A history line that changes no state (a run re-adopted after a restart) is no event.
        if previous.is_some_and(|p| p.to == transition.to) {
            continue;
        }
        let Some(event) = EventKind::of(transition) else {
            continue;
        };
        let ended = matches!(event, EventKind::Succeeded | EventKind::Failed) && n + 1 == total;
        out.push(WebhookEvent {
            version: SCHEMA_VERSION,
            id: format!("{}-{n}", job.id),
            event,
            tenant: job.tenant.clone(),
            job_id: job.id,
            name: job.request.name.clone(),
            from: previous.map(|p| p.to),
            to: transition.to,
            reason: transition.why.clone(),
            time_unix_s: transition.at_unix_s,
            exit_code: if ended { job.exit_code } else { None },
        });
    }
    out
}

/// A tenant's webhook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebhookTarget {
    /// Where events are POSTed (checked when set: `security::webhook::check_url`).
    pub url: String,
    /// What signs them.
    pub secret: Secret,
    /// Bumped at every change by the admin: a receiver declared dead is given a new chance, and a
    /// delivery begun before the change does not count against the new one.
    pub generation: u64,
}

/// How a tenant's receiver fares (shown by `arbiter tenants`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// The [`WebhookTarget::generation`] it is about.
    pub generation: u64,
    /// Failed attempts since the last success.
    pub consecutive_failures: u32,
    /// The latest failure.
    pub last_error: Option<String>,
    /// When it happened, Unix seconds.
    pub last_error_unix_s: Option<i64>,
    /// The latest success, Unix seconds.
    pub last_delivered_unix_s: Option<i64>,
    /// Events delivered, ever.
    pub delivered: u64,
    /// Events dropped, ever: the outbox was full, or the receiver was declared dead.
    pub dropped: u64,
    /// Declared dead (after `max_failures` failures in a row) at this Unix time: nothing is
    /// recorded or sent until the admin sets the webhook again.
    pub dead_since_unix_s: Option<i64>,
}

/// What the store keeps in memory of the outbox (read back at open).
#[derive(Debug)]
pub struct OutboxMemory {
    /// Tenants' webhooks.
    pub targets: BTreeMap<String, WebhookTarget>,
    /// Their receivers' health.
    pub health: BTreeMap<String, Health>,
    /// Events waiting, per tenant.
    pub pending: BTreeMap<String, usize>,
    /// The next sequence number.
    pub next_seq: u64,
    /// Most events waiting per tenant; beyond, new ones are dropped and counted.
    pub capacity: usize,
    /// Failures in a row after which a receiver is declared dead.
    pub max_failures: u32,
}

impl Default for OutboxMemory {
    fn default() -> Self {
        OutboxMemory {
            targets: BTreeMap::new(),
            health: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_seq: 0,
            capacity: 1_000,
            max_failures: 10,
        }
    }
}

impl OutboxMemory {
    /// Whether `tenant`'s events are recorded: it has a webhook, not declared dead.
    pub fn active(&self, tenant: &str) -> bool {
        self.targets.contains_key(tenant)
            && self
                .health
                .get(tenant)
                .is_none_or(|h| h.dead_since_unix_s.is_none())
    }

    /// Tenants with events waiting and a live receiver, by name.
    pub fn due(&self) -> Vec<String> {
        self.pending
            .iter()
            .filter(|(t, n)| **n > 0 && self.active(t))
            .map(|(t, _)| t.clone())
            .collect()
    }
}

/// An outbox failure inside a store transaction.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The database.
    #[error("{0}")]
    Db(#[from] redb::Error),
    /// A row that does not decode, or an event that does not encode.
    #[error("webhook outbox: {0}")]
    Json(#[from] serde_json::Error),
}

fn db(e: impl Into<redb::Error>) -> OutboxError {
    OutboxError::Db(e.into())
}

/// An outbox key: tenant names are `[A-Za-z0-9_-]`, so `/` ends one.
pub(crate) fn key(tenant: &str, seq: u64) -> String {
    format!("{tenant}/{seq:020}")
}

/// The key range of `tenant`'s events (`0` follows `/`).
fn range(tenant: &str) -> (String, String) {
    (format!("{tenant}/"), format!("{tenant}0"))
}

/// What one job write added to the outbox (applied to memory once the transaction committed).
#[derive(Debug, Default)]
pub struct Recorded {
    /// Events recorded, per tenant.
    pub added: BTreeMap<String, usize>,
    /// Events dropped because the tenant's outbox was full, per tenant.
    pub dropped: BTreeMap<String, u64>,
    /// The next sequence number after them.
    pub next_seq: u64,
}

/// Records the events of `jobs`' new transitions in `txn`, and that they were considered. A job
/// written for the first time (its submission only) costs nothing here.
pub fn record_events(
    txn: &redb::WriteTransaction,
    memory: &OutboxMemory,
    jobs: &[&JobRecord],
) -> Result<Recorded, OutboxError> {
    let mut recorded = Recorded {
        next_seq: memory.next_seq,
        ..Recorded::default()
    };
    let changed: Vec<&&JobRecord> = jobs.iter().filter(|j| transitions_made(j) > 1).collect();
    if changed.is_empty() {
        return Ok(recorded);
    }
    let mut seen_table = txn.open_table(SEEN).map_err(db)?;
    let mut outbox = None;
    for job in changed {
        let total = transitions_made(job);
        // No row: the job was written with its submission only.
        let seen = seen_table.get(job.id).map_err(db)?.map_or(1, |v| v.value());
        if total <= seen {
            continue;
        }
        seen_table.insert(job.id, total).map_err(db)?;
        if !memory.active(&job.tenant) {
            continue;
        }
        for event in events_since(job, seen) {
            let waiting = memory.pending.get(&job.tenant).copied().unwrap_or(0)
                + recorded.added.get(&job.tenant).copied().unwrap_or(0);
            if waiting >= memory.capacity {
                *recorded.dropped.entry(job.tenant.clone()).or_default() += 1;
                continue;
            }
            let table = match &mut outbox {
                Some(t) => t,
                None => outbox.insert(txn.open_table(OUTBOX).map_err(db)?),
            };
            table
                .insert(
                    key(&job.tenant, recorded.next_seq).as_str(),
                    serde_json::to_string(&event)?.as_str(),
                )
                .map_err(db)?;
            recorded.next_seq += 1;
            *recorded.added.entry(job.tenant.clone()).or_default() += 1;
        }
    }
    if recorded.next_seq != memory.next_seq {
        txn.open_table(META)
            .map_err(db)?
            .insert(NEXT_SEQ, recorded.next_seq)
            .map_err(db)?;
    }
    for (tenant, n) in &recorded.dropped {
        let mut health = memory.health.get(tenant).cloned().unwrap_or_default();
        health.dropped += n;
        put_health(txn, tenant, &health)?;
    }
    Ok(recorded)
}

/// The store's `meta` table (the same definition as the store's).
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Writes `tenant`'s health row.
pub fn put_health(
    txn: &redb::WriteTransaction,
    tenant: &str,
    health: &Health,
) -> Result<(), OutboxError> {
    txn.open_table(HEALTH)
        .map_err(db)?
        .insert(tenant, serde_json::to_string(health)?.as_str())
        .map_err(db)?;
    Ok(())
}

/// Removes every event of `tenant` from the outbox; how many there were.
pub fn purge(txn: &redb::WriteTransaction, tenant: &str) -> Result<usize, OutboxError> {
    let (from, to) = range(tenant);
    let mut table = txn.open_table(OUTBOX).map_err(db)?;
    let removed = table
        .extract_from_if(from.as_str()..to.as_str(), |_, _| true)
        .map_err(db)?
        .count();
    Ok(removed)
}

/// The oldest event of `tenant`: its key and body.
pub fn head(
    txn: &redb::ReadTransaction,
    tenant: &str,
) -> Result<Option<(String, String)>, OutboxError> {
    let (from, to) = range(tenant);
    let table = txn.open_table(OUTBOX).map_err(db)?;
    let mut rows = table.range(from.as_str()..to.as_str()).map_err(db)?;
    match rows.next() {
        Some(row) => {
            let (k, v) = row.map_err(db)?;
            Ok(Some((k.value().to_string(), v.value().to_string())))
        }
        None => Ok(None),
    }
}

/// Reads the outbox's state back at open: webhooks, health, events waiting per tenant, the next
/// sequence number.
pub fn load(txn: &redb::ReadTransaction, memory: &mut OutboxMemory) -> Result<(), OutboxError> {
    for row in txn.open_table(TARGETS).map_err(db)?.iter().map_err(db)? {
        let (k, v) = row.map_err(db)?;
        memory
            .targets
            .insert(k.value().to_string(), serde_json::from_str(v.value())?);
    }
    for row in txn.open_table(HEALTH).map_err(db)?.iter().map_err(db)? {
        let (k, v) = row.map_err(db)?;
        memory
            .health
            .insert(k.value().to_string(), serde_json::from_str(v.value())?);
    }
    for row in txn.open_table(OUTBOX).map_err(db)?.iter().map_err(db)? {
        let (k, _) = row.map_err(db)?;
        let tenant = k.value().split('/').next().unwrap_or_default().to_string();
        *memory.pending.entry(tenant).or_default() += 1;
    }
    memory.next_seq = txn
        .open_table(META)
        .map_err(db)?
        .get(NEXT_SEQ)
        .map_err(db)?
        .map_or(0, |v| v.value());
    Ok(())
}

/// Creates the outbox's tables, and, the first time, counts every job's transitions as seen (a
/// store from before webhooks: its past is not sent). `jobs` gives each job's id and count.
pub fn create(
    txn: &redb::WriteTransaction,
    jobs: impl FnOnce() -> Result<Vec<(u32, u64)>, OutboxError>,
) -> Result<(), OutboxError> {
    txn.open_table(OUTBOX).map_err(db)?;
    txn.open_table(TARGETS).map_err(db)?;
    txn.open_table(HEALTH).map_err(db)?;
    let mut seen = txn.open_table(SEEN).map_err(db)?;
    let mut meta = txn.open_table(META).map_err(db)?;
    if meta.get(SEEN_READY).map_err(db)?.is_none() {
        for (id, total) in jobs()? {
            seen.insert(id, total).map_err(db)?;
        }
        meta.insert(SEEN_READY, 1).map_err(db)?;
    }
    Ok(())
}

/// The transition counts of the jobs stored as JSON in `table` (for [`create`]).
pub fn stored_transition_counts(
    txn: &redb::WriteTransaction,
    table: TableDefinition<u32, &str>,
) -> Result<Vec<(u32, u64)>, OutboxError> {
    /// Just what counting needs of a job record.
    #[derive(Deserialize)]
    struct Counts {
        history: Vec<serde::de::IgnoredAny>,
        #[serde(default)]
        history_omitted: u64,
    }
    let table = txn.open_table(table).map_err(db)?;
    let mut out = Vec::new();
    for row in table.iter().map_err(db)? {
        let (k, v) = row.map_err(db)?;
        let counts: Counts = serde_json::from_str(v.value())?;
        out.push((
            k.value(),
            counts.history_omitted + counts.history.len() as u64,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::{JobState, SubmitRequest};

    fn job() -> JobRecord {
        let request: SubmitRequest = serde_json::from_str(r#"{"command": "secret-command --token=abc", "env": {"API_KEY": "hunter2"}, "name": "train"}"#).expect("valid");
        JobRecord::submitted(7, "team-a", request, 1_000_000, String::new())
    }

    fn run(job: &mut JobRecord, at: i64) {
        job.transition(
            JobState::Running {
                gpus: vec![0],
                pid: 9,
                started_unix_s: at,
            },
            "started on host:0",
            at,
        );
    }

    #[test]
    fn each_notified_transition_makes_one_event_with_its_states_reason_and_exit_code() {
        let mut job = job();
        assert!(events_since(&job, 0).is_empty(), "a submission makes none");
        run(&mut job, 1_001);
        job.transition(
            JobState::Stopping {
                gpus: vec![0],
                pid: 9,
                reason: StopReason::Preempted,
                since_unix_s: 1_002,
                signal_sent: false,
            },
            StopReason::Preempted.as_str(),
            1_002,
        );
        job.transition(
            JobState::Queued,
            "preempted; requeued to resume from its checkpoint",
            1_003,
        );
        run(&mut job, 1_004);
        job.transition(JobState::Queued, "exit code 3; retry 1 of 2 in 1 s", 1_005);
        run(&mut job, 1_006);
        job.exit_code = Some(1);
        job.transition(JobState::Failed, "exit code 1; retries used up", 1_007);
        let events = events_since(&job, 1);
        let kinds: Vec<&str> = events.iter().map(|e| e.event.name()).collect();
        assert_eq!(
            kinds,
            ["started", "preempted", "started", "started", "failed"]
        );
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            ["7-1", "7-2", "7-4", "7-6", "7-7"],
            "ids are the transitions' numbers"
        );
        let last = &events[4];
        assert_eq!(
            (last.from, last.to, last.exit_code, last.time_unix_s),
            (Some(StateKind::Running), StateKind::Failed, Some(1), 1_007)
        );
        assert_eq!(last.reason, "exit code 1; retries used up");
        assert_eq!(
            events[0].exit_code, None,
            "only an end carries the exit code"
        );
        assert_eq!(
            events_since(&job, 7).len(),
            1,
            "from a count on, only what follows"
        );
        // A run re-adopted after a restart is written in the history, in the same state: no event.
        let mut adopted = self::job();
        run(&mut adopted, 1);
        adopted.history.push(Transition {
            at_unix_s: 2,
            to: StateKind::Running,
            why: "re-adopted run 9 after a daemon restart".into(),
        });
        assert_eq!(events_since(&adopted, 1).len(), 1);
        // Nothing of the command line or the environment is in a body.
        let body = serde_json::to_string(&events).expect("json");
        assert!(
            !body.contains("secret-command")
                && !body.contains("hunter2")
                && !body.contains("API_KEY"),
            "{body}"
        );
        assert!(
            body.contains(r#""version":1"#)
                && body.contains(r#""name":"train""#)
                && body.contains(r#""tenant":"team-a""#)
        );
    }

    #[test]
    fn cancels_and_successes_are_events_and_a_cancel_in_progress_is_not() {
        let mut job = job();
        run(&mut job, 1);
        job.transition(
            JobState::Stopping {
                gpus: vec![0],
                pid: 9,
                reason: StopReason::Cancelled,
                since_unix_s: 2,
                signal_sent: false,
            },
            StopReason::Cancelled.as_str(),
            2,
        );
        job.transition(JobState::Cancelled, "cancelled", 3);
        let kinds: Vec<EventKind> = events_since(&job, 1).iter().map(|e| e.event).collect();
        assert_eq!(kinds, [EventKind::Started, EventKind::Cancelled]);
        let mut ok = self::job();
        run(&mut ok, 1);
        ok.exit_code = Some(0);
        ok.transition(JobState::Succeeded, "exit code 0", 2);
        let last = events_since(&ok, 1).pop().expect("event");
        assert_eq!(
            (last.event, last.exit_code),
            (EventKind::Succeeded, Some(0))
        );
    }

    #[test]
    fn transitions_dropped_from_a_long_history_are_skipped_not_misnumbered() {
        let mut job = job();
        for i in 0..150 {
            run(&mut job, 10 + 2 * i);
            job.transition(JobState::Queued, "exit code 3; retry", 11 + 2 * i);
        }
        assert!(job.history_omitted > 0);
        let total = transitions_made(&job);
        let events = events_since(&job, total - 4);
        assert_eq!(
            events.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
            [format!("7-{}", total - 4), format!("7-{}", total - 2)]
        );
        assert!(
            events_since(&job, 1).len() < 150,
            "the dropped ones make none"
        );
    }
}

#[cfg(test)]
mod cost {
    use crate::records::job::{JobRecord, JobState, SubmitRequest};
    use crate::records::store::Store;

    /// What recording events adds to a write of 3,200 started jobs (the first round of `arbiter
    /// bench --suite daemon-scale`). A measurement, not a check: run with `--ignored --nocapture`
    /// in release.
    #[test]
    #[ignore]
    fn recording_cost_of_a_large_first_round() {
        for hooked in [false, true, false, true] {
            let dir = tempfile::tempdir_in("/dev/shm")
                .or_else(|_| tempfile::tempdir())
                .expect("dir");
            let store = Store::open(&dir.path().join("s.redb")).expect("store");
            if hooked {
                for t in 0..10 {
                    let target = super::WebhookTarget {
                        url: "http://192.0.2.1/".into(),
                        secret: crate::security::webhook::Secret::generate(),
                        generation: 1,
                    };
                    store
                        .set_webhook(&format!("tenant-{t}"), Some(target))
                        .expect("hook");
                }
            }
            let request: SubmitRequest =
                serde_json::from_str(r#"{"command": "python train.py", "name": "job"}"#)
                    .expect("valid");
            let mut jobs: Vec<JobRecord> = (0..3_200)
                .map(|i| {
                    JobRecord::submitted(
                        i,
                        &format!("tenant-{}", i % 10),
                        request.clone(),
                        1_000_000,
                        String::new(),
                    )
                })
                .collect();
            store
                .put_jobs(&jobs.iter().collect::<Vec<_>>())
                .expect("submitted");
            for job in &mut jobs {
                job.transition(
                    JobState::Running {
                        gpus: vec![0],
                        pid: 7,
                        started_unix_s: 2,
                    },
                    "started on n0:0",
                    2,
                );
            }
            let t = std::time::Instant::now();
            store
                .put_jobs(&jobs.iter().collect::<Vec<_>>())
                .expect("started");
            eprintln!(
                "webhooks {hooked}: write of 3,200 started jobs {:.1} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}
