//! CPU and memory limits for runs through cgroup v2, where the machine lets the daemon manage a
//! subtree (`/sys/fs/cgroup/arbiter`, with the `cpu` and `memory` controllers enabled for it).
//! Elsewhere CPU limits are not enforced and memory falls back to RLIMIT_DATA per process (see
//! [`crate::security::containment::MemoryEnforcement`]); the daemon says which at start and in `/v1/cluster`.
//!
//! Each run gets `arbiter/job-<id>` with `cpu.max` = "<cores × 100000> 100000" (a bandwidth
//! limit of that many cores) and `memory.max` in bytes; the run's wrapper moves itself into the
//! group as its first act (so every process of the run is inside before the command starts).

use std::path::{Path, PathBuf};

/// CFS period for `cpu.max`, microseconds.
const PERIOD_US: u64 = 100_000;

/// A cgroup v2 subtree the daemon manages.
#[derive(Clone, Debug, PartialEq)]
pub struct Cgroups {
    root: PathBuf,
}

impl Cgroups {
    /// The subtree `<mount>/arbiter`, if it can be created and given the cpu and memory
    /// controllers (needs a writable cgroup v2 mount, e.g. root or a delegated subtree).
    pub fn detect(mount: &Path) -> Option<Self> {
        if !mount.join("cgroup.controllers").is_file() {
            return None;
        }
        let root = mount.join("arbiter");
        std::fs::create_dir_all(&root).ok()?;
        // Controllers must be enabled in the parent for the child groups to have them.
        let enable =
            |dir: &Path| std::fs::write(dir.join("cgroup.subtree_control"), "+cpu +memory").is_ok();
        if !(enable(mount) && enable(&root)) {
            return None;
        }
        Some(Cgroups { root })
    }

    /// A manager over an existing directory (tests use a temporary one).
    pub fn at(root: PathBuf) -> Self {
        Cgroups { root }
    }

    /// Creates (or resets) the group of job `id` with limits; returns its directory, which the
    /// run's wrapper joins.
    pub fn prepare(&self, id: u32, cpus: f64, memory_bytes: u64) -> std::io::Result<PathBuf> {
        let dir = self.root.join(format!("job-{id}"));
        std::fs::create_dir_all(&dir)?;
        let quota_us = ((cpus.max(0.01)) * PERIOD_US as f64).round() as u64;
        std::fs::write(dir.join("cpu.max"), format!("{quota_us} {PERIOD_US}"))?;
        std::fs::write(dir.join("memory.max"), memory_bytes.to_string())?;
        Ok(dir)
    }

    /// Removes the group of job `id` once its run has ended (the kernel refuses while processes
    /// remain; that is left for the next run's `prepare`).
    pub fn remove(&self, id: u32) {
        let _ = std::fs::remove_dir(self.root.join(format!("job-{id}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_written_as_cgroup_v2_expects() {
        let dir = tempfile::tempdir().expect("dir");
        let cgroups = Cgroups::at(dir.path().to_path_buf());
        let group = cgroups.prepare(7, 2.5, 8 << 30).expect("prepares");
        assert_eq!(
            std::fs::read_to_string(group.join("cpu.max")).expect("cpu"),
            "250000 100000"
        );
        assert_eq!(
            std::fs::read_to_string(group.join("memory.max")).expect("mem"),
            (8u64 << 30).to_string()
        );
        // Not a cgroup mount: nothing detected.
        assert_eq!(Cgroups::detect(dir.path()), None);
    }
}
