//! What keeps tenants apart and the daemon's secrets secret: tokens ([`auth`]), the unix identity
//! each tenant's runs execute as ([`identity`], read back from `/proc` by [`procs`]), where a
//! job's files may be ([`confine`]), what confines each run beyond its identity ([`containment`],
//! [`cgroup`]), the private data directory ([`datadir`]), the characters tenant-written text may
//! not hold ([`text`]), and webhooks' secrets, signatures and reachable addresses ([`webhook`]). The model and the attacks it is tested against: docs/security.md.
//!
//! Below everything but [`crate::config`]: nothing here knows jobs, executors or the round.

pub mod auth;
pub mod cgroup;
pub mod confine;
pub mod containment;
pub mod datadir;
pub mod identity;
pub mod procs;
pub mod text;
pub mod webhook;
