//! A tenant's name, shared between its jobs.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LazyLock};

/// The name of the tenant (team, virtual cluster) that owns a job: a string, shared.
///
/// A trace of a million jobs has a few dozen tenants. Read through a [`TenantNames`] interner,
/// every job of a tenant points at one copy of its name, which stays in cache: anything that
/// looks a job's tenant up (fair share, quotas, reports) reads hot memory instead of a separate
/// allocation per job, scattered once the trace is sorted by submission. It compares, orders,
/// hashes, prints and serialises as the string it holds.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantName(Arc<str>);

impl TenantName {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both are the one shared copy (a pointer comparison; equal names handed out by
    /// one [`TenantNames`] are, equal names read apart may not be).
    pub fn is_same_copy(&self, other: &TenantName) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Where the shared copy lives: a cheap hash for a cache by name. Only meaningful while
    /// the copy is alive (a cache keeps the name itself, so that its address stays its own).
    pub fn copy_address(&self) -> usize {
        Arc::as_ptr(&self.0).cast::<u8>() as usize
    }
}

/// The tenant of a job that names none, shared by all such jobs.
static DEFAULT: LazyLock<TenantName> = LazyLock::new(|| TenantName(Arc::from("default")));

impl Default for TenantName {
    /// `default`, the tenant of a job that names none (one copy for every such job).
    fn default() -> Self {
        DEFAULT.clone()
    }
}

impl Deref for TenantName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for TenantName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for TenantName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for TenantName {
    fn from(name: &str) -> Self {
        TenantName(Arc::from(name))
    }
}

impl From<String> for TenantName {
    fn from(name: String) -> Self {
        TenantName(Arc::from(name))
    }
}

impl From<&String> for TenantName {
    fn from(name: &String) -> Self {
        TenantName(Arc::from(name.as_str()))
    }
}

impl From<TenantName> for String {
    fn from(name: TenantName) -> Self {
        name.0.to_string()
    }
}

impl PartialEq<str> for TenantName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for TenantName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for TenantName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<TenantName> for str {
    fn eq(&self, other: &TenantName) -> bool {
        self == &*other.0
    }
}

impl PartialEq<TenantName> for &str {
    fn eq(&self, other: &TenantName) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<TenantName> for String {
    fn eq(&self, other: &TenantName) -> bool {
        **self == *other.0
    }
}

impl fmt::Display for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TenantName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for TenantName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TenantName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(TenantName::from)
    }
}

/// Hands out one shared [`TenantName`] per distinct name: what a trace reader uses, so that a
/// tenant's jobs share its name.
#[derive(Debug, Default)]
pub struct TenantNames {
    known: BTreeSet<TenantName>,
}

impl TenantNames {
    /// The shared name for `name`.
    pub fn get(&mut self, name: &str) -> TenantName {
        if let Some(known) = self.known.get(name) {
            return known.clone();
        }
        let shared = TenantName::from(name);
        self.known.insert(shared.clone());
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_name_reads_compares_and_serialises_as_its_string() {
        let name = TenantName::from("team-a");
        assert_eq!(name, "team-a");
        assert_eq!("team-a", name);
        assert_eq!(name.as_str(), "team-a");
        assert_eq!(name.to_string(), "team-a");
        assert_eq!(format!("{name:?}"), "\"team-a\"");
        assert_eq!(
            serde_json::to_string(&name).expect("serialises"),
            "\"team-a\""
        );
        let back: TenantName = serde_json::from_str("\"team-a\"").expect("reads");
        assert_eq!(back, name);
        let (a, b) = (TenantName::from("a"), TenantName::from("b"));
        assert!(a < b, "ordered as strings");
        assert_eq!(TenantName::default(), "default");
        assert!(Arc::ptr_eq(
            &TenantName::default().0,
            &TenantName::default().0
        ));
    }

    #[test]
    fn names_handed_out_by_an_interner_share_one_copy() {
        let mut names = TenantNames::default();
        let (a, b, c) = (names.get("vc1"), names.get("vc1"), names.get("vc2"));
        assert!(a.is_same_copy(&b) && a.copy_address() == b.copy_address());
        assert!(!a.is_same_copy(&c));
        assert!(!a.is_same_copy(&TenantName::from("vc1")), "read apart");
        assert_eq!(c, "vc2");
    }
}
