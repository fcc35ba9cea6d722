//! The process table, read from `/proc`: who runs, as whom, in which session.
//!
//! Every run is its own session (its wrapper calls `setsid()`), so a job cannot move a process
//! into another run's process group (`setpgid` across sessions fails) and everything a run
//! started can be found by its session id, which is the wrapper's pid. A process of a tenant's
//! automatic uid outside the sessions of that tenant's live runs has escaped its run (`setsid`,
//! double fork) and is killed.

use std::path::Path;

/// One process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcInfo {
    /// Process id.
    pub pid: u32,
    /// Effective uid (the owner of `/proc/PID`).
    pub uid: u32,
    /// Process group id.
    pub pgrp: u32,
    /// Session id.
    pub session: u32,
    /// Start time, clock ticks after boot (with the boot id, tells a reused pid apart).
    pub start_ticks: u64,
    /// A zombie (or dead) process: it runs nothing and holds nothing.
    pub dead: bool,
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
/// majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime ...`;
/// `comm` may contain spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(pid: u32, uid: u32, stat: &str) -> Option<ProcInfo> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = *fields.first()?;
    Some(ProcInfo {
        pid,
        uid,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
        dead: state == "Z" || state == "X",
    })
}

/// One process, if it exists.
pub fn process(pid: u32) -> Option<ProcInfo> {
    let dir = Path::new("/proc").join(pid.to_string());
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dir).ok()?);
    parse_stat(pid, uid, &std::fs::read_to_string(dir.join("stat")).ok()?)
}

/// Every process (those that vanish while being read are skipped).
pub fn processes() -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(process)
        .collect()
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`); empty where there is none.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Who a run's wrapper was: recorded in its pid file, so that a restarted daemon re-adopts
/// exactly that process and never an unrelated one that got the same pid later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunIdentity {
    /// The wrapper's pid (= the run's session and process-group id).
    pub pid: u32,
    /// Its start time (clock ticks after boot); 0 when recorded by an older version.
    pub start_ticks: u64,
    /// The boot it started in; empty when recorded by an older version.
    pub boot_id: String,
}

impl RunIdentity {
    /// This process's identity.
    pub fn of_self() -> Self {
        let pid = std::process::id();
        RunIdentity {
            pid,
            start_ticks: process(pid).map_or(0, |p| p.start_ticks),
            boot_id: boot_id(),
        }
    }

    /// `PID START_TICKS BOOT_ID`.
    pub fn to_line(&self) -> String {
        format!("{} {} {}\n", self.pid, self.start_ticks, self.boot_id)
    }

    /// Parses [`RunIdentity::to_line`] (or a bare pid, as older versions wrote).
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split_whitespace();
        let pid = parts.next()?.parse().ok()?;
        let start_ticks = parts.next().map_or(Some(0), |t| t.parse().ok())?;
        Some(RunIdentity {
            pid,
            start_ticks,
            boot_id: parts.next().unwrap_or("").to_string(),
        })
    }

    /// Whether this very process is still alive (same pid, same start, same boot).
    pub fn is_alive(&self) -> bool {
        let Some(p) = process(self.pid) else {
            return false;
        };
        let same_boot = self.boot_id.is_empty() || self.boot_id == boot_id();
        let same_start = self.start_ticks == 0 || self.start_ticks == p.start_ticks;
        !p.dead && same_boot && same_start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let stat = "4242 (my (odd) job) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615";
        let p = parse_stat(4242, 61184, stat).expect("parses");
        assert_eq!(
            (p.pgrp, p.session, p.start_ticks, p.dead),
            (4242, 4242, 987654, false)
        );
        assert!(
            parse_stat(1, 0, "1 (x) Z 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0")
                .expect("parses")
                .dead
        );
    }

    #[test]
    fn a_reused_pid_is_not_the_recorded_run() {
        let me = RunIdentity::of_self();
        assert!(me.is_alive());
        let parsed = RunIdentity::parse(&me.to_line()).expect("parses");
        assert_eq!(parsed, me);
        // Same pid, another start time: a different process.
        assert!(
            !RunIdentity {
                start_ticks: me.start_ticks + 1,
                ..me.clone()
            }
            .is_alive()
        );
        assert!(
            !RunIdentity {
                boot_id: "another-boot".into(),
                ..me.clone()
            }
            .is_alive()
        );
        // Older pid files hold a bare pid.
        assert_eq!(
            RunIdentity::parse("77\n"),
            Some(RunIdentity {
                pid: 77,
                start_ticks: 0,
                boot_id: String::new()
            })
        );
    }
}
