//! The policies with their descriptors, one JSON object each, in `arbiter policies` order: the
//! serialized [`Descriptor`]s, as `arbiter policies --json` prints them.

use crate::Error;
use arbiter_policy::{Descriptor, PolicyKind};

/// Every policy's descriptor, as a JSON list of objects.
pub fn descriptors_json() -> Result<String, Error> {
    let all: Vec<Descriptor> = PolicyKind::ALL.iter().map(|k| k.descriptor()).collect();
    Ok(serde_json::to_string(&all)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_listed_once_with_its_descriptor() {
        let all: Vec<serde_json::Value> = serde_json::from_str(&descriptors_json().expect("serializes")).expect("JSON");
        assert_eq!(all.len(), PolicyKind::ALL.len());
        assert_eq!(all[0]["name"], "fifo");
        assert_eq!(all[0]["family"], "events");
        assert_eq!(all[0]["daemon"], "runs");
        let antman = all.iter().find(|p| p["name"] == "antman").expect("antman");
        assert_eq!(antman["daemon"], "refused");
        assert!(antman["daemon_refused_because"].as_str().is_some_and(|why| !why.is_empty()));
        let las = all.iter().find(|p| p["name"] == "las").expect("las");
        assert!(las["aliases"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(las["paper"].as_str().is_some_and(|p| !p.is_empty()));
        assert!(las["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
}
