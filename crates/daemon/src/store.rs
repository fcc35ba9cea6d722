//! The daemon's embedded store: redb (pure Rust, ACID, crash-safe — a committed transaction
//! survives `kill -9`; chosen over SQLite because it needs no C build and the daemon's data is a
//! few keyed tables, not queries). Every job record is written, in one transaction with the
//! job's state, *before* the daemon acts on the new state (starts a process, signals one).
//!
//! Tables: `meta` (schema version, next job id), `jobs` (id → JSON [`JobRecord`]), `tenants`
//! (name → JSON [`Tenant`]). The schema version is checked at open; [`MIGRATIONS`] upgrade older
//! files in order.

use crate::job::JobRecord;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::path::Path;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const JOBS: TableDefinition<u32, &str> = TableDefinition::new("jobs");
const TENANTS: TableDefinition<&str, &str> = TableDefinition::new("tenants");

/// The schema this build writes.
pub const SCHEMA_VERSION: u64 = 1;

/// One schema upgrade, run inside the opening transaction.
type Migration = fn(&redb::WriteTransaction) -> Result<(), StoreError>;

/// Upgrades from version `i + 1` to `i + 2` (none yet: version 1 is the first).
const MIGRATIONS: &[Migration] = &[];

/// A store failure. `Io`/`Database` may clear up on retry; `Corrupt` and `Schema` will not.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("store: {0}")]
    Database(String),
    /// A record does not decode.
    #[error("store: corrupt record: {0}")]
    Corrupt(String),
    /// The file was written by a newer Arbiter.
    #[error("store: schema version {found} is newer than this build's {supported}; upgrade Arbiter")]
    Schema {
        /// Version in the file.
        found: u64,
        /// Version this build knows.
        supported: u64,
    },
}

fn db_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(e.to_string())
}

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

/// The store.
pub struct Store {
    db: Database,
}

impl Store {
    /// Opens (or creates) the store at `path`, upgrading its schema if needed.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(db_error)?;
        let txn = db.begin_write().map_err(db_error)?;
        {
            let mut meta = txn.open_table(META).map_err(db_error)?;
            let version = meta.get("schema_version").map_err(db_error)?.map(|v| v.value());
            match version {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION).map_err(db_error)?;
                }
                Some(v) if v > SCHEMA_VERSION => return Err(StoreError::Schema { found: v, supported: SCHEMA_VERSION }),
                Some(v) => {
                    drop(meta);
                    for migrate in &MIGRATIONS[(v as usize).saturating_sub(1)..] {
                        migrate(&txn)?;
                    }
                    let mut meta = txn.open_table(META).map_err(db_error)?;
                    meta.insert("schema_version", SCHEMA_VERSION).map_err(db_error)?;
                }
            }
            txn.open_table(JOBS).map_err(db_error)?;
            txn.open_table(TENANTS).map_err(db_error)?;
        }
        txn.commit().map_err(db_error)?;
        Ok(Store { db })
    }

    /// Writes `jobs` in one transaction (all or none), and the next free id.
    pub fn put_jobs(&self, jobs: &[&JobRecord]) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db_error)?;
        {
            let mut table = txn.open_table(JOBS).map_err(db_error)?;
            let mut meta = txn.open_table(META).map_err(db_error)?;
            let mut next = meta.get("next_job_id").map_err(db_error)?.map_or(0, |v| v.value());
            for job in jobs {
                let json = serde_json::to_string(job).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                table.insert(job.id, json.as_str()).map_err(db_error)?;
                next = next.max(job.id as u64 + 1);
            }
            meta.insert("next_job_id", next).map_err(db_error)?;
        }
        txn.commit().map_err(db_error)
    }

    /// Every job, by id.
    pub fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.read_all(JOBS)
    }

    /// Every JSON value of `table`, in key order.
    fn read_all<K: redb::Key + 'static, T: serde::de::DeserializeOwned>(&self, table: TableDefinition<K, &str>) -> Result<Vec<T>, StoreError> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let table = txn.open_table(table).map_err(db_error)?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(db_error)? {
            let (_, value) = entry.map_err(db_error)?;
            out.push(serde_json::from_str(value.value()).map_err(|e| StoreError::Corrupt(e.to_string()))?);
        }
        Ok(out)
    }

    /// Writes a tenant.
    pub fn put_tenant(&self, tenant: &Tenant) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(db_error)?;
        {
            let mut table = txn.open_table(TENANTS).map_err(db_error)?;
            let json = serde_json::to_string(tenant).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            table.insert(tenant.name.as_str(), json.as_str()).map_err(db_error)?;
        }
        txn.commit().map_err(db_error)
    }

    /// Every tenant, by name.
    pub fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        self.read_all(TENANTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobState, SubmitRequest};

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
            store.put_tenant(&Tenant { name: "t".into(), weight: 2.0, gpu_quota: Some(4), token_sha256: "x".into() }).expect("writes");
        }
        let store = Store::open(&path).expect("reopens");
        let jobs = store.jobs().expect("reads");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].state, JobState::Succeeded);
        assert_eq!(jobs[1].history.len(), 1);
        assert_eq!(store.tenants().expect("reads")[0].gpu_quota, Some(4));
    }
}
