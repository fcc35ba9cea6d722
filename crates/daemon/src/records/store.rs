//! The daemon's embedded store: redb (pure Rust, ACID, crash-safe — a committed transaction
//! survives `kill -9`; chosen over SQLite because it needs no C build and the daemon's data is a
//! few keyed tables, not queries). Every job record is written, in one transaction with the
//! job's state, *before* the daemon acts on the new state (starts a process, signals one).
//!
//! Tables: `meta` (schema version, store id, next job id), `jobs` (id → JSON [`JobRecord`]),
//! `tenants` (name → JSON [`Tenant`]), `identities` (tenant → automatic uid), `pairs` (the
//! learned co-location table: JSON [`PairKey`] → JSON [`StoredPair`]), `usage` (one row per
//! ended run, written with the job record that ends it: `records/usage.rs`).
//! learned co-location table: JSON [`PairKey`] → JSON [`StoredPair`]); and the webhook tables of
//! [`crate::records::outbox`] (events waiting, each job's transitions seen, webhooks, receivers'
//! health), written in the same transactions as the jobs whose changes they tell of.
//!
//! A write that fails with an I/O error (a full disk) leaves the store *degraded*: redb refuses
//! every later write on that handle, so the handle is dropped and the file reopened at the next
//! write; until one succeeds, callers get [`StoreError::Unavailable`] and change nothing in
//! memory (the API answers 503, `/metrics` shows `arbiter_store_degraded 1`). The schema version is checked at open; [`MIGRATIONS`] upgrade older
//! files in order.

use crate::records::job::JobRecord;
use crate::records::outbox::{self, Health, OutboxError, OutboxMemory, WebhookTarget};
use crate::records::pairs::{PairEntry, PairKey, PairWrite};
use crate::records::reservation::Reservation;
use crate::records::usage::{self, RunUsage};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const JOBS: TableDefinition<u32, &str> = TableDefinition::new("jobs");
const TENANTS: TableDefinition<&str, &str> = TableDefinition::new("tenants");
/// Automatic unix identities: tenant name → uid (= gid), allocated once, never changed.
const IDENTITIES: TableDefinition<&str, u32> = TableDefinition::new("identities");
/// The learned co-location table: JSON [`PairKey`] → JSON [`StoredPair`].
const PAIRS: TableDefinition<&str, &str> = TableDefinition::new("pairs");
/// Reservations and maintenance windows: id (as text) → JSON [`Reservation`].
const RESERVATIONS: TableDefinition<&str, &str> = TableDefinition::new("reservations");
/// Usage accounting: one row per ended run, [`usage::row_key`] → [`usage::RunUsage::encode`]
/// (`records/usage.rs`).
const USAGE: TableDefinition<u64, &[u8]> = TableDefinition::new("usage");
/// The quota tree: group (or tenant) name → JSON [`arbiter_policy::quotas::QuotaGroup`].
const QUOTA_GROUPS: TableDefinition<&str, &str> = TableDefinition::new("quota_groups");

/// redb's page cache (its default is 1 GiB). The daemon reads the store whole once, at start,
/// and then only writes: a cache holding every page it ever touched only grows the daemon's
/// memory with the number of jobs on record.
const CACHE_BYTES: usize = 64 << 20;

/// The schema this build writes.
pub const SCHEMA_VERSION: u64 = 1;

/// One schema upgrade, run inside the opening transaction.
type Migration = fn(&redb::WriteTransaction) -> Result<(), StoreError>;

/// Upgrades from version `i + 1` to `i + 2` (none yet: version 1 is the first; the tables added
/// since — `identities`, `pairs`, the `store_id` and `next_job_id` meta keys — are created when
/// missing).
const MIGRATIONS: &[Migration] = &[];

/// A store failure. `Unavailable` clears up by itself (the store reopens once writes work
/// again); `Corrupt` and `Schema` will not.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("store: {0}")]
    Database(String),
    /// A record does not decode.
    #[error("store: corrupt record: {0}")]
    Corrupt(String),
    /// The file was written by a newer Arbiter.
    #[error(
        "store: schema version {found} is newer than this build's {supported}; upgrade Arbiter"
    )]
    Schema {
        /// Version in the file.
        found: u64,
        /// Version this build knows.
        supported: u64,
    },
    /// Writes fail (an I/O error such as a full disk): the store is read-only until a write
    /// works again; nothing was changed.
    #[error(
        "store is read-only after an I/O error ({0}); nothing was changed; it recovers by itself once writes work again"
    )]
    Unavailable(String),
}

fn db_error(e: impl Into<redb::Error>) -> StoreError {
    match e.into() {
        // An I/O failure (disk full, read-only file system): the database must be reopened
        // before it takes writes again.
        e @ (redb::Error::Io(_) | redb::Error::PreviousIo | redb::Error::DatabaseClosed) => {
            StoreError::Unavailable(e.to_string())
        }
        e => StoreError::Database(e.to_string()),
    }
}

/// One row of the co-location table as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredPair {
    /// What it is about.
    pub key: PairKey,
    /// What was learned.
    pub entry: PairEntry,
}

/// The tenant the admin's own jobs belong to.
pub(crate) const ADMIN_TENANT: &str = "admin";

/// A tenant: its weight and GPU quota, and the hash of its bearer token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    /// Name.
    pub name: String,
    /// Fair-share weight (hierarchical policies).
    pub weight: f64,
    /// Most GPUs its jobs may hold at once (`None`: no limit).
    pub gpu_quota: Option<u32>,
    /// SHA-256 of its token, hex.
    pub token_sha256: String,
}

/// Opens the database file (the real file, or a test's fault-injecting backend).
type Opener = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send + Sync>;

/// The store.
pub struct Store {
    open: Opener,
    /// `None` after an I/O error closed it; reopened at the next write.
    db: Mutex<Option<Database>>,
    /// Why writes fail, while they do.
    degraded: Mutex<Option<String>>,
    /// The webhook outbox's bookkeeping (locked before `db` where both are).
    outbox: Mutex<OutboxMemory>,
    /// Told when events are recorded (the webhook dispatcher waits on it).
    outbox_wake: std::sync::Arc<tokio::sync::Notify>,
}

impl From<OutboxError> for StoreError {
    fn from(e: OutboxError) -> Self {
        match e {
            OutboxError::Db(e) => db_error(e),
            OutboxError::Json(e) => StoreError::Corrupt(e.to_string()),
        }
    }
}

impl Store {
    /// Opens (or creates) the store at `path`, upgrading its schema if needed.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        Self::open_with(Box::new(move || {
            redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create(&path)
        }))
    }

    /// Opens the store through `open` (tests inject I/O failures this way).
    pub fn open_with(open: Opener) -> Result<Self, StoreError> {
        let db = open().map_err(db_error)?;
        let store = Store {
            open,
            db: Mutex::new(Some(db)),
            degraded: Mutex::new(None),
            outbox: Mutex::default(),
            outbox_wake: std::sync::Arc::default(),
        };
        store.write(|txn| {
            // (Refused below for a newer schema: the transaction is then not committed.)
            outbox::create(txn, || outbox::stored_transition_counts(txn, JOBS))?;
            let mut meta = txn.open_table(META).map_err(db_error)?;
            let version = meta
                .get("schema_version")
                .map_err(db_error)?
                .map(|v| v.value());
            match version {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION)
                        .map_err(db_error)?;
                }
                Some(v) if v > SCHEMA_VERSION => {
                    return Err(StoreError::Schema {
                        found: v,
                        supported: SCHEMA_VERSION,
                    });
                }
                Some(v) => {
                    drop(meta);
                    for migrate in &MIGRATIONS[(v as usize).saturating_sub(1)..] {
                        migrate(txn)?;
                    }
                    let mut meta = txn.open_table(META).map_err(db_error)?;
                    meta.insert("schema_version", SCHEMA_VERSION)
                        .map_err(db_error)?;
                }
            }
            txn.open_table(JOBS).map_err(db_error)?;
            txn.open_table(TENANTS).map_err(db_error)?;
            txn.open_table(IDENTITIES).map_err(db_error)?;
            txn.open_table(PAIRS).map_err(db_error)?;
            txn.open_table(RESERVATIONS).map_err(db_error)?;
            txn.open_table(USAGE).map_err(db_error)?;
            txn.open_table(QUOTA_GROUPS).map_err(db_error)?;
            Ok(())
        })?;
        let mut memory = OutboxMemory::default();
        store.read(|txn| Ok(outbox::load(txn, &mut memory)?))?;
        *store.outbox.lock().unwrap_or_else(|p| p.into_inner()) = memory;
        Ok(store)
    }

    /// Why writes fail at the moment (`None`: they work).
    pub fn degraded(&self) -> Option<String> {
        self.degraded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs `body` in one write transaction and commits it. After an I/O error the database is
    /// closed and reopened (redb refuses every later write on a handle that saw one), and the
    /// store reports itself degraded until a write succeeds again.
    fn write(
        &self,
        body: impl FnOnce(&redb::WriteTransaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.write_with(true, body)
    }

    /// [`Store::write`], without waiting for the disk unless `durable`: the change is on disk
    /// with the next durable write (a crash before it loses the change).
    fn write_with(
        &self,
        durable: bool,
        body: impl FnOnce(&redb::WriteTransaction) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        if db.is_none() {
            match (self.open)() {
                Ok(reopened) => *db = Some(reopened),
                Err(e) => return Err(self.degrade(db_error(e))),
            }
        }
        let Some(handle) = db.as_ref() else {
            return Err(StoreError::Unavailable("closed".into()));
        };
        let result = (|| {
            let mut txn = handle.begin_write().map_err(db_error)?;
            if !durable {
                txn.set_durability(redb::Durability::None)
                    .map_err(|e| StoreError::Database(e.to_string()))?;
            }
            body(&txn)?;
            txn.commit().map_err(db_error)
        })();
        match result {
            Ok(()) => {
                let mut degraded = self.degraded.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(was) = degraded.take() {
                    tracing::warn!("store writable again (it failed with: {was})");
                }
                Ok(())
            }
            Err(e @ StoreError::Unavailable(_)) => {
                // Drop the handle; the next write reopens the file.
                *db = None;
                Err(self.degrade(e))
            }
            Err(e) => Err(e),
        }
    }

    fn degrade(&self, e: StoreError) -> StoreError {
        let reason = match &e {
            StoreError::Unavailable(r) => r.clone(),
            other => other.to_string(),
        };
        let mut degraded = self.degraded.lock().unwrap_or_else(|p| p.into_inner());
        if degraded.is_none() {
            tracing::error!(
                "store write failed ({reason}); the daemon refuses changes (503) until writes work again"
            );
        }
        *degraded = Some(reason.clone());
        StoreError::Unavailable(reason)
    }

    /// Writes `jobs` in one transaction (all or none), and the next free id.
    pub fn put_jobs(&self, jobs: &[&JobRecord]) -> Result<(), StoreError> {
        self.put_jobs_and_pairs(jobs, &[])
    }

    /// Writes `jobs` and the changes of the co-location table in one transaction (all or none).
    pub fn put_jobs_and_pairs(
        &self,
        jobs: &[&JobRecord],
        pairs: &[PairWrite],
    ) -> Result<(), StoreError> {
        self.put_jobs_and_pairs_with(true, jobs, pairs)
    }

    /// [`Store::put_jobs_and_pairs`], durable only if `durable` (see [`Store::write_with`]):
    /// for what may be lost in a crash, such as a progress report the next one repeats.
    pub fn put_jobs_and_pairs_with(
        &self,
        durable: bool,
        jobs: &[&JobRecord],
        pairs: &[PairWrite],
    ) -> Result<(), StoreError> {
        let corrupt = |e: serde_json::Error| StoreError::Corrupt(e.to_string());
        let encoded = jobs
            .iter()
            .map(|job| serde_json::to_string(job).map(|json| (job.id, json)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(corrupt)?;
        let mut pair_rows: Vec<(String, Option<String>)> = Vec::with_capacity(pairs.len());
        for write in pairs {
            pair_rows.push(match write {
                PairWrite::Put(key, entry) => (
                    serde_json::to_string(key).map_err(corrupt)?,
                    Some(
                        serde_json::to_string(&StoredPair {
                            key: key.clone(),
                            entry: *entry,
                        })
                        .map_err(corrupt)?,
                    ),
                ),
                PairWrite::Delete(key) => (serde_json::to_string(key).map_err(corrupt)?, None),
            });
        }
        // The usage row of each job's last ended run goes with the record that ended it (and is
        // rewritten, unchanged, with the job's later records: same key, same bytes).
        let usage_rows: Vec<(u64, Vec<u8>)> = jobs
            .iter()
            .filter_map(|job| {
                Some((
                    usage::row_key(job.id, job.runs_accounted),
                    job.last_run_usage.as_ref()?.encode(),
                ))
            })
            .collect();
        let mut memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let mut recorded = outbox::Recorded::default();
        self.write_with(durable, |txn| {
            recorded = outbox::record_events(txn, &memory, jobs)?;
            if !usage_rows.is_empty() {
                let mut table = txn.open_table(USAGE).map_err(db_error)?;
                for (key, row) in &usage_rows {
                    table.insert(*key, row.as_slice()).map_err(db_error)?;
                }
            }
            if !encoded.is_empty() {
                let mut table = txn.open_table(JOBS).map_err(db_error)?;
                let mut meta = txn.open_table(META).map_err(db_error)?;
                let mut next = meta
                    .get("next_job_id")
                    .map_err(db_error)?
                    .map_or(0, |v| v.value());
                for (id, json) in &encoded {
                    table.insert(*id, json.as_str()).map_err(db_error)?;
                    next = next.max(*id as u64 + 1);
                }
                meta.insert("next_job_id", next).map_err(db_error)?;
            }
            if !pair_rows.is_empty() {
                let mut table = txn.open_table(PAIRS).map_err(db_error)?;
                for (key, row) in &pair_rows {
                    match row {
                        Some(row) => table.insert(key.as_str(), row.as_str()).map_err(db_error)?,
                        None => table.remove(key.as_str()).map_err(db_error)?,
                    };
                }
            }
            Ok(())
        })?;
        self.recorded(&mut memory, recorded);
        Ok(())
    }

    /// Applies what a committed write added to the outbox to its bookkeeping, and wakes the
    /// dispatcher; says when a tenant's outbox overflowed.
    fn recorded(&self, memory: &mut OutboxMemory, recorded: outbox::Recorded) {
        memory.next_seq = recorded.next_seq;
        for (tenant, n) in &recorded.dropped {
            let health = memory.health.entry(tenant.clone()).or_default();
            health.dropped += n;
            tracing::warn!(tenant = %tenant, dropped = n, total_dropped = health.dropped, capacity = memory.capacity, "webhook outbox full: events dropped (the receiver is slow or down)");
        }
        if !recorded.added.is_empty() {
            for (tenant, n) in recorded.added {
                *memory.pending.entry(tenant).or_default() += n;
            }
            self.outbox_wake.notify_one();
        }
    }

    /// Deletes the records of `ids` in one transaction (the next free id stays where it is: ids
    /// are never given out again).
    pub fn delete_jobs(&self, ids: &[u32]) -> Result<(), StoreError> {
        self.write(|txn| {
            let mut table = txn.open_table(JOBS).map_err(db_error)?;
            let mut seen = txn.open_table(outbox::SEEN).map_err(db_error)?;
            for id in ids {
                table.remove(*id).map_err(db_error)?;
                seen.remove(*id).map_err(db_error)?;
            }
            Ok(())
        })
    }

    /// The learned co-location table.
    pub fn pairs(&self) -> Result<Vec<(PairKey, PairEntry)>, StoreError> {
        Ok(self
            .read_all::<&str, StoredPair>(PAIRS)?
            .into_iter()
            .map(|p| (p.key, p.entry))
            .collect())
    }

    /// Reads one meta value.
    fn meta(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(META).map_err(db_error)?;
            Ok(table.get(key).map_err(db_error)?.map(|v| v.value()))
        })
    }

    /// Runs `body` in one read transaction.
    fn read<T>(
        &self,
        body: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        let Some(db) = db.as_ref() else {
            return Err(StoreError::Unavailable("closed".into()));
        };
        let txn = db.begin_read().map_err(db_error)?;
        body(&txn)
    }

    /// The id of this store (`None` for a new store, or one written before stores had ids).
    pub fn store_id(&self) -> Result<Option<u64>, StoreError> {
        self.meta("store_id")
    }

    /// Records the store's id.
    pub fn set_store_id(&self, id: u64) -> Result<(), StoreError> {
        self.write(|txn| {
            txn.open_table(META)
                .map_err(db_error)?
                .insert("store_id", id)
                .map_err(db_error)?;
            Ok(())
        })
    }

    /// The next job id: one past the highest ever written (ids are never reused).
    pub fn next_job_id(&self) -> Result<u32, StoreError> {
        Ok(self.meta("next_job_id")?.unwrap_or(0) as u32)
    }

    /// Calls `each` with every usage row, in key order (job, then run). The store's lock is
    /// held only to begin the read: a long scan does not hold up the daemon's writes.
    pub fn for_each_usage(&self, mut each: impl FnMut(RunUsage)) -> Result<(), StoreError> {
        let txn = {
            let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
            let Some(db) = db.as_ref() else {
                return Err(StoreError::Unavailable("closed".into()));
            };
            db.begin_read().map_err(db_error)?
        };
        let table = txn.open_table(USAGE).map_err(db_error)?;
        for entry in table.iter().map_err(db_error)? {
            let (key, value) = entry.map_err(db_error)?;
            let row = RunUsage::decode(value.value())
                .map_err(|e| StoreError::Corrupt(format!("usage row {:#x}: {e}", key.value())))?;
            each(row);
        }
        Ok(())
    }

    /// Writes usage rows directly (the benchmark fills a store with a million runs this way).
    pub fn put_usage_rows(&self, rows: &[(u64, RunUsage)]) -> Result<(), StoreError> {
        self.write(|txn| {
            let mut table = txn.open_table(USAGE).map_err(db_error)?;
            for (key, row) in rows {
                table
                    .insert(*key, row.encode().as_slice())
                    .map_err(db_error)?;
            }
            Ok(())
        })
    }

    /// Every job, by id.
    pub fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.read_all(JOBS)
    }

    /// Every JSON value of `table`, in key order.
    fn read_all<K: redb::Key + 'static, T: serde::de::DeserializeOwned>(
        &self,
        table: TableDefinition<K, &str>,
    ) -> Result<Vec<T>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(table).map_err(db_error)?;
            let mut out = Vec::new();
            for entry in table.iter().map_err(db_error)? {
                let (_, value) = entry.map_err(db_error)?;
                out.push(
                    serde_json::from_str(value.value())
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                );
            }
            Ok(out)
        })
    }

    /// Writes a tenant.
    pub fn put_tenant(&self, tenant: &Tenant) -> Result<(), StoreError> {
        let json = serde_json::to_string(tenant).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.write(|txn| {
            txn.open_table(TENANTS)
                .map_err(db_error)?
                .insert(tenant.name.as_str(), json.as_str())
                .map_err(db_error)?;
            Ok(())
        })
    }

    /// Every tenant, by name.
    pub fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        self.read_all(TENANTS)
    }

    /// Deletes a tenant; true if it was there. Its automatic identity stays allocated (files it
    /// owns may remain; the uid is not handed to another tenant).
    pub fn delete_tenant(&self, name: &str) -> Result<bool, StoreError> {
        let mut existed = false;
        // Its webhook and undelivered events go with it.
        let mut memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        self.write(|txn| {
            existed = txn
                .open_table(TENANTS)
                .map_err(db_error)?
                .remove(name)
                .map_err(db_error)?
                .is_some();
            Self::forget_webhook(txn, name)
        })?;
        memory.targets.remove(name);
        memory.health.remove(name);
        memory.pending.remove(name);
        Ok(existed)
    }

    /// Automatic identities: tenant → uid.
    pub fn identities(&self) -> Result<BTreeMap<String, u32>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(IDENTITIES).map_err(db_error)?;
            let mut out = BTreeMap::new();
            for entry in table.iter().map_err(db_error)? {
                let (name, uid) = entry.map_err(db_error)?;
                out.insert(name.value().to_string(), uid.value());
            }
            Ok(out)
        })
    }

    /// Stores a new reservation, giving it the next id (never one given before); returns it.
    pub fn add_reservation(&self, mut reservation: Reservation) -> Result<Reservation, StoreError> {
        self.write(|txn| {
            let mut meta = txn.open_table(META).map_err(db_error)?;
            let id = meta
                .get("next_reservation_id")
                .map_err(db_error)?
                .map_or(1, |v| v.value());
            meta.insert("next_reservation_id", id + 1)
                .map_err(db_error)?;
            reservation.id = u32::try_from(id)
                .map_err(|_| StoreError::Corrupt("reservation ids exhausted".into()))?;
            let json = serde_json::to_string(&reservation)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            txn.open_table(RESERVATIONS)
                .map_err(db_error)?
                .insert(id.to_string().as_str(), json.as_str())
                .map_err(db_error)?;
            Ok(())
        })?;
        Ok(reservation)
    }

    /// Deletes a reservation; true if it was there.
    pub fn delete_reservation(&self, id: u32) -> Result<bool, StoreError> {
        let mut existed = false;
        self.write(|txn| {
            existed = txn
                .open_table(RESERVATIONS)
                .map_err(db_error)?
                .remove(id.to_string().as_str())
                .map_err(db_error)?
                .is_some();
            Ok(())
        })?;
        Ok(existed)
    }

    /// Every reservation.
    pub fn reservations(&self) -> Result<Vec<Reservation>, StoreError> {
        self.read_all(RESERVATIONS)
    }

    /// The quota tree's groups, by name.
    pub fn quota_groups(&self) -> Result<Vec<arbiter_policy::quotas::QuotaGroup>, StoreError> {
        self.read_all(QUOTA_GROUPS)
    }

    /// Replaces the quota tree with `groups`, in one transaction (a tree is checked whole: a
    /// crash never leaves half of a change).
    pub fn put_quota_groups(
        &self,
        groups: &[arbiter_policy::quotas::QuotaGroup],
    ) -> Result<(), StoreError> {
        let rows: Vec<(String, String)> = groups
            .iter()
            .map(|g| Ok((g.name.clone(), serde_json::to_string(g)?)))
            .collect::<Result<_, serde_json::Error>>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.write(|txn| {
            let mut table = txn.open_table(QUOTA_GROUPS).map_err(db_error)?;
            table.retain(|_, _| false).map_err(db_error)?;
            for (name, json) in &rows {
                table
                    .insert(name.as_str(), json.as_str())
                    .map_err(db_error)?;
            }
            Ok(())
        })
    }

    /// Records an automatic identity.
    pub fn put_identity(&self, tenant: &str, uid: u32) -> Result<(), StoreError> {
        self.write(|txn| {
            txn.open_table(IDENTITIES)
                .map_err(db_error)?
                .insert(tenant, uid)
                .map_err(db_error)?;
            Ok(())
        })
    }
}

/// Webhooks: each tenant's, the events waiting for them, and how their receivers fare
/// (`records/outbox.rs`; delivered by `daemon/webhooks.rs`).
impl Store {
    /// Sets the outbox's bounds: events waiting per tenant, failures in a row before a receiver
    /// is declared dead.
    pub fn configure_outbox(&self, capacity: usize, max_failures: u32) {
        let mut memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        memory.capacity = capacity;
        memory.max_failures = max_failures;
    }

    /// Notified whenever events are recorded.
    pub fn outbox_wake(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.outbox_wake.clone()
    }

    /// `tenant`'s webhook, with its receiver's health and the events waiting for it.
    pub fn webhook(&self, tenant: &str) -> Option<(WebhookTarget, Health, usize)> {
        let memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let target = memory.targets.get(tenant)?.clone();
        Some((
            target,
            memory.health.get(tenant).cloned().unwrap_or_default(),
            memory.pending.get(tenant).copied().unwrap_or(0),
        ))
    }

    /// Sets (`Some`) or removes (`None`) `tenant`'s webhook. A new generation gives the receiver
    /// a clean slate (a dead one lives again; its counts of delivered and dropped events stay);
    /// removing it drops the events waiting.
    pub fn set_webhook(
        &self,
        tenant: &str,
        target: Option<WebhookTarget>,
    ) -> Result<(), StoreError> {
        let mut memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let health = target.as_ref().map(|t| {
            let old = memory.health.get(tenant).cloned().unwrap_or_default();
            if old.generation == t.generation {
                old
            } else {
                Health {
                    generation: t.generation,
                    delivered: old.delivered,
                    dropped: old.dropped,
                    ..Health::default()
                }
            }
        });
        self.write(|txn| match (&target, &health) {
            (Some(target), Some(health)) => {
                let json = serde_json::to_string(target)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                txn.open_table(outbox::TARGETS)
                    .map_err(db_error)?
                    .insert(tenant, json.as_str())
                    .map_err(db_error)?;
                Ok(outbox::put_health(txn, tenant, health)?)
            }
            _ => Self::forget_webhook(txn, tenant),
        })?;
        match (target, health) {
            (Some(target), Some(health)) => {
                memory.targets.insert(tenant.to_string(), target);
                memory.health.insert(tenant.to_string(), health);
                self.outbox_wake.notify_one();
            }
            _ => {
                memory.targets.remove(tenant);
                memory.health.remove(tenant);
                memory.pending.remove(tenant);
            }
        }
        Ok(())
    }

    fn forget_webhook(txn: &redb::WriteTransaction, tenant: &str) -> Result<(), StoreError> {
        txn.open_table(outbox::TARGETS)
            .map_err(db_error)?
            .remove(tenant)
            .map_err(db_error)?;
        txn.open_table(outbox::HEALTH)
            .map_err(db_error)?
            .remove(tenant)
            .map_err(db_error)?;
        outbox::purge(txn, tenant)?;
        Ok(())
    }

    /// Tenants with events waiting for a live receiver.
    pub fn webhooks_due(&self) -> Vec<String> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner()).due()
    }

    /// The oldest event waiting for `tenant`'s receiver: its outbox key and body.
    pub fn webhook_head(&self, tenant: &str) -> Result<Option<(String, String)>, StoreError> {
        self.read(|txn| Ok(outbox::head(txn, tenant)?))
    }

    /// Records how delivering the event at `key` (to the webhook of `generation`) went, at
    /// `now_unix_s`: delivered, it leaves the outbox; failed, the failure is counted, and at
    /// `max_failures` in a row the receiver is declared dead and its waiting events dropped. An
    /// outcome for a webhook changed since is ignored, but for a delivery, which still ends the
    /// event's wait. Returns the receiver's health after it (`None`: no webhook any more).
    pub fn webhook_outcome(
        &self,
        tenant: &str,
        key: &str,
        generation: u64,
        outcome: Result<(), String>,
        now_unix_s: i64,
    ) -> Result<Option<Health>, StoreError> {
        let mut memory = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let current = memory
            .targets
            .get(tenant)
            .is_some_and(|t| t.generation == generation);
        let mut health = memory.health.get(tenant).cloned().unwrap_or_default();
        let max_failures = memory.max_failures;
        let mut removed = 0;
        self.write_with(false, |txn| {
            match &outcome {
                Ok(()) => {
                    removed = usize::from(
                        txn.open_table(outbox::OUTBOX)
                            .map_err(db_error)?
                            .remove(key)
                            .map_err(db_error)?
                            .is_some(),
                    );
                    if current {
                        health.delivered += 1;
                        health.consecutive_failures = 0;
                        health.last_delivered_unix_s = Some(now_unix_s);
                    }
                }
                Err(_) if !current => return Ok(()),
                Err(e) => {
                    health.consecutive_failures += 1;
                    health.last_error = Some(e.clone());
                    health.last_error_unix_s = Some(now_unix_s);
                    if health.consecutive_failures >= max_failures {
                        health.dead_since_unix_s = Some(now_unix_s);
                        removed = outbox::purge(txn, tenant)?;
                        health.dropped += removed as u64;
                    }
                }
            }
            if current {
                Ok(outbox::put_health(txn, tenant, &health)?)
            } else {
                Ok(())
            }
        })?;
        if let Some(n) = memory.pending.get_mut(tenant) {
            *n = n.saturating_sub(removed);
        }
        if !current {
            return Ok(memory.health.get(tenant).cloned());
        }
        memory.health.insert(tenant.to_string(), health.clone());
        Ok(Some(health))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::job::{JobState, SubmitRequest};
    use std::ops::Bound;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn record(id: u32) -> JobRecord {
        let request: SubmitRequest = serde_json::from_str(r#"{"command": "true"}"#).expect("valid");
        let mut record = JobRecord::submitted(id, "t", request, 0, String::new());
        record.history.clear();
        record
    }

    #[test]
    fn jobs_and_tenants_survive_reopening() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("arbiter.redb");
        {
            let store = Store::open(&path).expect("opens");
            let (a, mut b) = (record(0), record(1));
            store.put_jobs(&[&a, &b]).expect("writes");
            b.transition(JobState::Succeeded, "exit code 0", 5);
            store.put_jobs(&[&b]).expect("writes");
            store
                .put_tenant(&Tenant {
                    name: "t".into(),
                    weight: 2.0,
                    gpu_quota: Some(4),
                    token_sha256: "x".into(),
                })
                .expect("writes");
        }
        let store = Store::open(&path).expect("reopens");
        let jobs = store.jobs().expect("reads");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].state, JobState::Succeeded);
        assert_eq!(jobs[1].history.len(), 1);
        assert_eq!(store.tenants().expect("reads")[0].gpu_quota, Some(4));
    }

    #[test]
    fn a_write_that_does_not_wait_for_the_disk_is_kept_by_the_next_one_that_does_and_pruned_records_stay_gone()
     {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("arbiter.redb");
        {
            let store = Store::open(&path).expect("opens");
            let (mut a, b, c) = (record(0), record(1), record(2));
            store.put_jobs(&[&a, &b, &c]).expect("writes");
            a.transition(JobState::Succeeded, "exit code 0", 5);
            store
                .put_jobs_and_pairs_with(false, &[&a], &[])
                .expect("writes without waiting");
            store
                .delete_jobs(&[1])
                .expect("deletes (durably, with the write before it)");
        }
        let store = Store::open(&path).expect("reopens");
        let jobs = store.jobs().expect("reads");
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(jobs[0].state, JobState::Succeeded);
        assert_eq!(
            store.next_job_id().expect("reads"),
            3,
            "ids are not given out again"
        );
    }

    /// A file backend that fails every write with ENOSPC while `full` is set.
    #[derive(Debug)]
    struct FillableDisk {
        inner: redb::backends::FileBackend,
        full: Arc<AtomicBool>,
    }

    impl FillableDisk {
        fn check(&self) -> std::io::Result<()> {
            if self.full.load(Ordering::SeqCst) {
                Err(std::io::Error::from_raw_os_error(28)) // ENOSPC
            } else {
                Ok(())
            }
        }
    }

    impl redb::StorageBackend for FillableDisk {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.check()?;
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.check()?;
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.check()?;
            self.inner.write(offset, data)
        }
        fn close(&self) -> std::io::Result<()> {
            self.inner.close()
        }
        fn try_lock_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<bool, redb::BackendError> {
            self.inner.try_lock_range(start, end)
        }
        fn try_lock_shared_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<bool, redb::BackendError> {
            self.inner.try_lock_shared_range(start, end)
        }
        fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
            self.inner.lock_range(start, end)
        }
        fn lock_shared_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<(), redb::BackendError> {
            self.inner.lock_shared_range(start, end)
        }
        fn unlock_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<(), redb::BackendError> {
            self.inner.unlock_range(start, end)
        }
        fn query_lock_range(
            &self,
            start: Bound<u64>,
            end: Bound<u64>,
        ) -> Result<bool, redb::BackendError> {
            self.inner.query_lock_range(start, end)
        }
    }

    #[test]
    fn a_full_disk_makes_the_store_read_only_until_space_returns() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("arbiter.redb");
        let full = Arc::new(AtomicBool::new(false));
        let (p, f) = (path.clone(), full.clone());
        let store = Store::open_with(Box::new(move || {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)?;
            redb::Builder::new().create_with_backend(FillableDisk {
                inner: redb::backends::FileBackend::new(file)?,
                full: f.clone(),
            })
        }))
        .expect("opens");
        store.put_jobs(&[&record(0)]).expect("writes");
        full.store(true, Ordering::SeqCst);
        let e = store.put_jobs(&[&record(1)]).expect_err("disk full");
        assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
        assert!(store.degraded().is_some());
        // Still full: still refused (the reopen cannot write either), and nothing half-written.
        assert!(matches!(
            store.put_jobs(&[&record(1)]),
            Err(StoreError::Unavailable(_))
        ));
        // Space returns: the next write reopens the file and works; the store is healthy again.
        full.store(false, Ordering::SeqCst);
        store.put_jobs(&[&record(2)]).expect("writes again");
        assert_eq!(store.degraded(), None);
        let ids: Vec<u32> = store.jobs().expect("reads").iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![0, 2], "the refused write left nothing behind");
        assert_eq!(store.next_job_id().expect("meta"), 3);
    }

    #[test]
    fn the_learned_pair_table_survives_reopening_and_evictions_are_removed() {
        use crate::records::pairs::TypeOf;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("arbiter.redb");
        let key = |t: &str| PairKey {
            job: TypeOf {
                tenant: "a".into(),
                job_type: t.into(),
            },
            partner: TypeOf {
                tenant: "b".into(),
                job_type: "y".into(),
            },
            gpus: 2,
            gpu_type: "a100".into(),
        };
        let entry = PairEntry {
            normalized_speed: 0.4,
            samples: 3,
            updated_unix_s: 9,
        };
        {
            let store = Store::open(&path).expect("opens");
            store
                .put_jobs_and_pairs(
                    &[&record(0)],
                    &[
                        PairWrite::Put(key("x"), entry),
                        PairWrite::Put(key("z"), entry),
                    ],
                )
                .expect("writes");
            store
                .put_jobs_and_pairs(&[], &[PairWrite::Delete(key("z"))])
                .expect("writes");
        }
        let store = Store::open(&path).expect("reopens");
        assert_eq!(store.pairs().expect("reads"), vec![(key("x"), entry)]);
        assert_eq!(
            store.jobs().expect("reads").len(),
            1,
            "the job went in the same transaction"
        );
    }

    #[test]
    fn store_ids_and_identities_persist() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("arbiter.redb");
        {
            let store = Store::open(&path).expect("opens");
            assert_eq!(store.store_id().expect("id"), None);
            store.set_store_id(42).expect("writes");
            store.put_identity("team-a", 61184).expect("writes");
        }
        let store = Store::open(&path).expect("reopens");
        assert_eq!(store.store_id().expect("id"), Some(42));
        assert_eq!(
            store.identities().expect("reads").get("team-a"),
            Some(&61184)
        );
    }
}
