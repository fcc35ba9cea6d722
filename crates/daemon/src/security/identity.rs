//! Tenant isolation: the unix identity each tenant's runs execute as.
//!
//! When the daemon may switch users (it runs as root, or holds CAP_SETUID and CAP_SETGID), every
//! run executes as its tenant's own identity: an existing user named in `tenant_users`, or an
//! automatic uid = gid picked once per tenant from `tenant_uid_range` (default 1900000000–
//! 1900065535, a block systemd leaves unused; numbers no account, group or subordinate id range
//! uses), recorded in the store so that it never changes. A tenant's checkpoint area `<root>/<tenant>` is owned by that identity with mode 0700;
//! the data directory, store, tokens, logs and run files stay the daemon's (0600/0700), so a job
//! can reach neither the admin token nor another tenant's files, environment (`/proc/PID/environ`
//! needs the same uid) or processes.
//!
//! Without that privilege, runs share the daemon's identity and tenants are **not isolated from
//! each other**; the daemon says so at start and in `/v1/cluster`, and serves more than one tenant
//! only when `allow_shared_identity = true` acknowledges it.

use nix::unistd::{Gid, Group, Uid, User};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A unix identity a run executes as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnixIdentity {
    /// User id.
    pub uid: u32,
    /// Primary group id (supplementary groups are dropped).
    pub gid: u32,
}

/// How runs are isolated from each other.
#[derive(Clone, Debug, PartialEq)]
pub enum Isolation {
    /// Each tenant's runs execute as its own identity.
    PerTenant {
        /// Automatic uids come from `low..=high`.
        uid_range: [u32; 2],
        /// Tenants mapped to existing users.
        users: BTreeMap<String, String>,
    },
    /// Runs execute as the daemon's own identity: tenants can read each other's files.
    Shared {
        /// Whether the configuration acknowledged it (`allow_shared_identity`), which lets the
        /// daemon serve more than one tenant.
        acknowledged: bool,
        /// Why users cannot be switched.
        why: String,
    },
}

impl Isolation {
    /// Per-tenant identities where the process may switch users, else shared.
    pub fn detect(
        uid_range: [u32; 2],
        users: BTreeMap<String, String>,
        acknowledged: bool,
    ) -> Self {
        match switch_capability() {
            Ok(()) => Isolation::PerTenant { uid_range, users },
            Err(why) => Isolation::Shared { acknowledged, why },
        }
    }

    /// Whether tenants are isolated from each other.
    pub fn is_isolated(&self) -> bool {
        matches!(self, Isolation::PerTenant { .. })
    }

    /// One line for the start-up message, `arbiter cluster` and `/v1/cluster`.
    pub fn describe(&self) -> String {
        match self {
            Isolation::PerTenant { uid_range, .. } => {
                format!(
                    "each tenant's jobs run as its own unix user (automatic uids {}-{})",
                    uid_range[0], uid_range[1]
                )
            }
            Isolation::Shared { why, .. } => format!(
                "tenants are NOT isolated from each other: every job runs as the daemon's user ({why}); a job can read other tenants' files and the admin token"
            ),
        }
    }

    /// Whether more than one tenant may be served.
    pub fn allows_many_tenants(&self) -> bool {
        match self {
            Isolation::PerTenant { .. } => true,
            Isolation::Shared { acknowledged, .. } => *acknowledged,
        }
    }
}

/// Whether this process may switch to other users: effective uid 0, or CAP_SETUID and
/// CAP_SETGID in its effective capability set.
pub fn switch_capability() -> Result<(), String> {
    if Uid::effective().is_root() {
        return Ok(());
    }
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    if effective & (1 << CAP_SETUID) != 0 && effective & (1 << CAP_SETGID) != 0 {
        Ok(())
    } else {
        Err(format!(
            "the daemon runs as uid {} without CAP_SETUID/CAP_SETGID",
            Uid::effective()
        ))
    }
}

/// The identity of an existing user: its uid and primary group.
pub fn resolve_user(name: &str) -> Result<UnixIdentity, String> {
    match User::from_name(name) {
        Ok(Some(user)) if user.uid.is_root() => Err(format!(
            "user `{name}` is root; a tenant never runs as root"
        )),
        Ok(Some(user)) => Ok(UnixIdentity {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        }),
        Ok(None) => Err(format!("no user `{name}` on this machine")),
        Err(e) => Err(format!("looking up user `{name}`: {e}")),
    }
}

/// The first number in `range` that no tenant holds (`taken`), no running process has, no
/// account or group in the user database uses, and no subordinate range (`/etc/subuid`, `/etc/subgid`: rootless containers)
/// covers.
pub fn allocate_uid(range: [u32; 2], taken: &BTreeSet<u32>) -> Option<u32> {
    let subordinate: Vec<(u64, u64)> = ["/etc/subuid", "/etc/subgid"]
        .iter()
        .flat_map(|f| parse_subordinate(&std::fs::read_to_string(f).unwrap_or_default()))
        .collect();
    // A uid that owns a process belongs to somebody (another daemon's tenant, say).
    let running: BTreeSet<u32> = crate::security::procs::processes()
        .iter()
        .map(|p| p.uid)
        .collect();
    (range[0].max(1)..=range[1]).find(|&id| {
        !taken.contains(&id)
            && !running.contains(&id)
            && !subordinate
                .iter()
                .any(|(start, count)| (*start..start.saturating_add(*count)).contains(&(id as u64)))
            && !matches!(User::from_uid(Uid::from_raw(id)), Ok(Some(_)))
            && !matches!(Group::from_gid(Gid::from_raw(id)), Ok(Some(_)))
    })
}

/// `name:start:count` lines of `/etc/subuid` or `/etc/subgid`.
fn parse_subordinate(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.trim().split(':');
            let _owner = parts.next()?;
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_uids_skip_taken_ones_and_existing_accounts() {
        // uid 0 (root) always exists; the range starts above it.
        let taken = BTreeSet::from([61184, 61185]);
        assert_eq!(allocate_uid([61184, 61190], &taken), Some(61186));
        assert_eq!(allocate_uid([61184, 61185], &taken), None, "range used up");
        // An id that an account uses is skipped (root: 0 is excluded by max(1); check an existing
        // system account if the machine has one).
        if let Ok(Some(user)) = User::from_name("nobody") {
            let id = user.uid.as_raw();
            assert_ne!(
                allocate_uid([id, id.saturating_add(5)], &BTreeSet::new()),
                Some(id)
            );
        }
    }

    #[test]
    fn subordinate_id_ranges_parse() {
        assert_eq!(
            parse_subordinate("alice:100000:65536\nbad line\nbob:165536:65536\n"),
            vec![(100000, 65536), (165536, 65536)]
        );
    }

    #[test]
    fn root_and_unknown_users_are_refused() {
        assert!(
            resolve_user("root")
                .expect_err("root")
                .contains("never runs as root")
        );
        assert!(
            resolve_user("no-such-user-arbiter")
                .expect_err("unknown")
                .contains("no user")
        );
    }

    #[test]
    fn shared_identity_says_tenants_are_not_isolated() {
        let shared = Isolation::Shared {
            acknowledged: false,
            why: "uid 1000".into(),
        };
        assert!(shared.describe().contains("NOT isolated"));
        assert!(!shared.allows_many_tenants());
        assert!(
            Isolation::Shared {
                acknowledged: true,
                why: String::new()
            }
            .allows_many_tenants()
        );
    }
}
