//! The data directory: one daemon at a time, private modes, and a store that matches its files.
//!
//! ```text
//! <data_dir>/            0711 (isolated: tenants traverse to their checkpoint area) or 0700
//!   lock                 flock held by the running daemon; holds its pid
//!   store.id             the id of the store these files belong to
//!   arbiter.redb         0600   the store
//!   admin.token          0600
//!   logs/                0700   <id>.log, 0600, written through a descriptor the daemon opens
//!   runs/                0700   <id>.pid, <id>.exit, <id>.launch.json (the run wrapper's files)
//!   checkpoints/         0711   <tenant>/ owned by the tenant's identity, 0700
//! ```
//!
//! A store that does not match its directory — deleted, truncated, or copied from elsewhere — is
//! refused at start: job ids would start again from 0 and new jobs would append to old jobs'
//! logs and resume from their checkpoints, reading another tenant's data.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// A file operation failed; names the path.
    // (Not `source`: a cause in the words and in the chain was printed twice.)
    #[error("{path}: {cause}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// Another daemon holds the directory.
    #[error(
        "another arbiter daemon{pid} is using the data directory {path}; stop it first, or give this one another --data-dir"
    )]
    Busy {
        /// The directory.
        path: PathBuf,
        /// ` (pid N)` when known.
        pid: String,
    },
    /// The store does not belong to the files beside it.
    #[error("{0}")]
    Mismatch(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataDirError + '_ {
    move |cause| DataDirError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// An open data directory; the lock is held as long as this lives.
#[derive(Debug)]
pub struct DataDir {
    /// Canonical path.
    pub path: PathBuf,
    _lock: Flock<File>,
}

impl DataDir {
    /// Creates (if needed) and locks `path`, sets the modes of the directory and its private
    /// subdirectories. `traversable`: let other users pass through the directory (0711) to
    /// their checkpoint areas; else 0700.
    pub fn open(path: &Path, traversable: bool) -> Result<Self, DataDirError> {
        std::fs::create_dir_all(path).map_err(io(path))?;
        let path = std::fs::canonicalize(path).map_err(io(path))?;
        let lock_path = path.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, _)) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(DataDirError::Busy {
                    path,
                    pid: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
        };
        lock.set_len(0).map_err(io(&lock_path))?;
        writeln!(lock, "{}", std::process::id()).map_err(io(&lock_path))?;
        set_mode(&path, if traversable { 0o711 } else { 0o700 })?;
        for private in ["logs", "runs"] {
            let dir = path.join(private);
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
            set_mode(&dir, 0o700)?;
        }
        for file in ["arbiter.redb", "admin.token"] {
            let file = path.join(file);
            if file.exists() {
                set_mode(&file, 0o600)?;
            }
        }
        Ok(DataDir { path, _lock: lock })
    }

    /// Path of the store file.
    pub fn store_path(&self) -> PathBuf {
        self.path.join("arbiter.redb")
    }

    /// What the directory holds besides the store: the store-id marker and how many job files
    /// (logs, run files) earlier daemons left.
    pub fn leftovers(&self) -> Leftovers {
        let count = |dir: &str| {
            std::fs::read_dir(self.path.join(dir))
                .map(|d| d.count())
                .unwrap_or(0)
        };
        let marker = std::fs::read_to_string(self.path.join("store.id"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Leftovers {
            marker,
            job_files: count("logs") + count("runs"),
        }
    }

    /// Checks that the store (its id, whether it has ever held a job) belongs to this
    /// directory; records the id for a new or older store. Returns the id the store must carry.
    pub fn reconcile(
        &self,
        before: &Leftovers,
        store_existed: bool,
        store_id: Option<u64>,
        store_has_jobs: bool,
    ) -> Result<Reconciled, DataDirError> {
        let recover = format!(
            "To recover: restore {store} from a backup; or, to start afresh (old jobs, logs and checkpoints are kept aside, not reused), stop the daemon and `mv {dir} {dir}.old`.",
            store = self.store_path().display(),
            dir = self.path.display()
        );
        let reconciled = match (store_id, &before.marker) {
            (Some(id), Some(marker)) if *marker == format!("{id:016x}") => Reconciled::Matches(id),
            (Some(id), Some(marker)) => {
                return Err(DataDirError::Mismatch(format!(
                    "the store {} has id {id:016x} but this data directory belongs to store {marker} ({}/store.id): the store comes from elsewhere. {recover}",
                    self.store_path().display(),
                    self.path.display()
                )));
            }
            (Some(id), None) => Reconciled::Matches(id),
            // A store written before stores had ids: adopt it.
            (None, _) if store_has_jobs => Reconciled::New(new_store_id()),
            (None, marker) if marker.is_some() || before.job_files > 0 => {
                let found = match marker {
                    Some(m) => format!("{}/store.id (store {m})", self.path.display()),
                    None => format!("{} job files in logs/ and runs/", before.job_files),
                };
                let what = if store_existed {
                    "is empty (truncated or replaced)"
                } else {
                    "is missing (deleted)"
                };
                return Err(DataDirError::Mismatch(format!(
                    "found {found} but the store {} {what}: starting would reuse job ids, and new jobs would append to old jobs' logs and resume from their checkpoints. {recover}",
                    self.store_path().display()
                )));
            }
            (None, _) => Reconciled::New(new_store_id()),
        };
        let id = match reconciled {
            Reconciled::Matches(id) | Reconciled::New(id) => id,
        };
        let marker = self.path.join("store.id");
        write_private(&marker, &format!("{id:016x}\n")).map_err(io(&marker))?;
        Ok(reconciled)
    }
}

/// What a data directory held before the store was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Contents of `store.id`.
    pub marker: Option<String>,
    /// Files in `logs/` and `runs/`.
    pub job_files: usize,
}

/// The outcome of [`DataDir::reconcile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// The store carries this id and matches the directory.
    Matches(u64),
    /// A new (or older, id-less) store: give it this id.
    New(u64),
}

fn new_store_id() -> u64 {
    let token = crate::security::auth::new_token();
    u64::from_str_radix(&token[..16], 16).unwrap_or(1)
}

/// Sets a file's or directory's permission bits.
pub fn set_mode(path: &Path, mode: u32) -> Result<(), DataDirError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))
}

/// Writes a small file readable by the owner only, through a temporary file and a rename: a
/// reader never sees half of it.
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_daemon_on_the_same_data_dir_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().expect("dir");
        let first = DataDir::open(dir.path(), false).expect("first");
        let second = DataDir::open(dir.path(), false).expect_err("second is refused");
        let message = second.to_string();
        assert!(
            message.contains("another arbiter daemon")
                && message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        drop(first);
        DataDir::open(dir.path(), false).expect("free again once the first is gone");
    }

    #[test]
    fn private_files_and_directories_get_private_modes() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("arbiter.redb"), "x").expect("write");
        std::fs::set_permissions(
            dir.path().join("arbiter.redb"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        let data = DataDir::open(dir.path(), true).expect("opens");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&data.path), 0o711);
        assert_eq!(mode(&data.path.join("logs")), 0o700);
        assert_eq!(mode(&data.path.join("runs")), 0o700);
        assert_eq!(mode(&data.path.join("arbiter.redb")), 0o600);
        assert_eq!(mode(&data.path.join("lock")), 0o600);
    }

    #[test]
    fn a_deleted_or_truncated_store_is_refused_and_a_foreign_one_too() {
        let dir = tempfile::tempdir().expect("dir");
        let data = DataDir::open(dir.path(), false).expect("opens");
        // Fresh directory: a new id is recorded.
        let Reconciled::New(id) = data
            .reconcile(&data.leftovers(), false, None, false)
            .expect("fresh")
        else {
            panic!("new")
        };
        assert_eq!(data.leftovers().marker, Some(format!("{id:016x}")));
        // The store carries it: fine.
        assert_eq!(
            data.reconcile(&data.leftovers(), true, Some(id), true)
                .expect("matches"),
            Reconciled::Matches(id)
        );
        // The store is gone (or empty) but the marker says there was one: refused, with advice.
        let e = data
            .reconcile(&data.leftovers(), false, None, false)
            .expect_err("deleted")
            .to_string();
        assert!(
            e.contains("is missing (deleted)") && e.contains("mv "),
            "{e}"
        );
        let e = data
            .reconcile(&data.leftovers(), true, None, false)
            .expect_err("truncated")
            .to_string();
        assert!(e.contains("is empty"), "{e}");
        // A store from another directory.
        let e = data
            .reconcile(&data.leftovers(), true, Some(id ^ 1), true)
            .expect_err("foreign")
            .to_string();
        assert!(e.contains("comes from elsewhere"), "{e}");
        // No marker, but old logs: refused too.
        std::fs::remove_file(data.path.join("store.id")).expect("rm");
        std::fs::write(data.path.join("logs/0.log"), "old").expect("log");
        let e = data
            .reconcile(&data.leftovers(), false, None, false)
            .expect_err("leftover logs")
            .to_string();
        assert!(e.contains("1 job files"), "{e}");
    }
}
