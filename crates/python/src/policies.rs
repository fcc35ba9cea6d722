//! The policies with their descriptors, one JSON object each, in `arbiter policies` order.

use crate::Error;
use arbiter_policy::{DaemonSupport, Descriptor, Family, PolicyKind};
use serde::Serialize;

/// What the Python side shows of a policy's [`Descriptor`].
#[derive(Debug, Serialize)]
struct PolicyInfo {
    name: &'static str,
    describe: &'static str,
    /// `events`, `gavel-allocation`, `synergy` or `other-rounds`.
    family: &'static str,
    pair_speeds: bool,
    elastic: bool,
    /// `runs`, `needs-colocation` or `refused`.
    daemon: &'static str,
    /// Why the daemon refuses it, where it does.
    daemon_refused_because: Option<&'static str>,
    fairness_columns: bool,
}

impl From<Descriptor> for PolicyInfo {
    fn from(d: Descriptor) -> Self {
        let family = match d.family {
            Family::Events => "events",
            Family::GavelAllocation => "gavel-allocation",
            Family::Synergy => "synergy",
            Family::OtherRounds => "other-rounds",
        };
        let (daemon, daemon_refused_because) = match d.daemon {
            DaemonSupport::Runs => ("runs", None),
            DaemonSupport::NeedsColocation => ("needs-colocation", None),
            DaemonSupport::Refused(why) => ("refused", Some(why)),
        };
        PolicyInfo {
            name: d.name,
            describe: d.describe,
            family,
            pair_speeds: d.pair_speeds,
            elastic: d.elastic,
            daemon,
            daemon_refused_because,
            fairness_columns: d.fairness_columns,
        }
    }
}

/// Every policy's descriptor, as a JSON list of objects.
pub fn descriptors_json() -> Result<String, Error> {
    let all: Vec<PolicyInfo> = PolicyKind::ALL.iter().map(|k| k.descriptor().into()).collect();
    Ok(serde_json::to_string(&all)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_listed_once_with_its_name() {
        let all: Vec<serde_json::Value> = serde_json::from_str(&descriptors_json().expect("serializes")).expect("JSON");
        assert_eq!(all.len(), PolicyKind::ALL.len());
        assert_eq!(all[0]["name"], "fifo");
        let antman = all.iter().find(|p| p["name"] == "antman").expect("antman");
        assert_eq!(antman["daemon"], "refused");
        assert!(antman["daemon_refused_because"].as_str().is_some_and(|why| !why.is_empty()));
    }
}
