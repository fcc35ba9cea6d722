//! The policies with their descriptors, one JSON object each, in `arbiter policies` order: the
//! serialized [`Descriptor`]s, as `arbiter policies --json` prints them.

use crate::Error;
use arbiter_policy::{Descriptor, PolicyConfig, PolicyKind};
use serde_json::{Map, Value};

/// Every policy's descriptor, as a JSON list of objects.
pub fn descriptors_json() -> Result<String, Error> {
    let all: Vec<Descriptor> = PolicyKind::ALL.iter().map(|k| k.descriptor()).collect();
    Ok(serde_json::to_string(&all)?)
}

/// The `[policy]` table of an ad-hoc simulation under `policy` from `params` (a JSON object of
/// `simulate(**policy_params)`): keys that name a `[policy]` table (`las`, `gavel`,
/// `tenant_weights`, ...) are that table; any other key is a parameter of one of the tables
/// `policy` reads (`queues` for `las`: `[policy.las] queues`), put in it. A key that is
/// neither is refused, naming it and what the policy accepts.
pub fn policy_table(policy: &str, params: &str) -> Result<String, Error> {
    let kind = PolicyKind::parse(policy).map_err(Error::Policy)?;
    let Value::Object(params) = serde_json::from_str(params)? else {
        return Err(Error::Argument(
            "the policy parameters must be a dict".into(),
        ));
    };
    let Value::Object(defaults) = serde_json::to_value(PolicyConfig::default())? else {
        return Err(Error::Argument("the policy tables are not a table".into()));
    };
    // The tables `kind` reads, each with its parameters (a table without defaults, such as
    // `external`'s, has none to give flat).
    let tables: Vec<(&str, Vec<&String>)> = kind
        .reads()
        .iter()
        .filter_map(|field| PolicyConfig::scenario_key(field))
        .filter_map(|table| {
            Some((
                table,
                defaults
                    .get(table)?
                    .as_object()
                    .map_or_else(Vec::new, |fields| fields.keys().collect()),
            ))
        })
        .collect();
    let mut out = Map::new();
    for (key, value) in &params {
        if defaults.contains_key(key) {
            merge(&mut out, key, value.clone(), None)?;
            continue;
        }
        let owners: Vec<&str> = tables
            .iter()
            .filter(|(_, fields)| fields.contains(&key))
            .map(|(table, _)| *table)
            .collect();
        match owners.as_slice() {
            [table] => merge(&mut out, table, value.clone(), Some(key))?,
            [] => return Err(Error::Policy(unknown_parameter(kind, key, &tables))),
            _ => {
                return Err(Error::Policy(format!(
                    "policy `{kind}`: parameter `{key}` is in `[policy.{}]` and `[policy.{}]`; give it in its table (`{}={{\"{key}\": ...}}`)",
                    owners[0], owners[1], owners[0]
                )));
            }
        }
    }
    Ok(serde_json::to_string(&out)?)
}

/// Puts `value` in `out` as table `table` (`field`: `None`) or as its field `field`, refusing a
/// field given twice (flat and in its table).
fn merge(
    out: &mut Map<String, Value>,
    table: &str,
    value: Value,
    field: Option<&str>,
) -> Result<(), Error> {
    let twice = |key: &str| {
        Error::Policy(format!(
            "policy parameter `{key}` is given twice: flat and in `[policy.{table}]`"
        ))
    };
    let (field, value) = match field {
        None if !value.is_object() || !out.contains_key(table) => {
            out.insert(table.to_string(), value);
            return Ok(());
        }
        None => {
            // The table after some of its fields given flat: the fields join them.
            let Value::Object(fields) = value else {
                return Ok(());
            };
            for (key, value) in fields {
                merge(out, table, value, Some(&key))?;
            }
            return Ok(());
        }
        Some(field) => (field, value),
    };
    match out
        .entry(table.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(fields) if fields.contains_key(field) => Err(twice(field)),
        Value::Object(fields) => {
            fields.insert(field.to_string(), value);
            Ok(())
        }
        _ => Err(Error::Policy(format!("`[policy.{table}]` must be a table"))),
    }
}

/// The words for a parameter that `kind` does not take: serde's for an unknown field, with what
/// `kind` accepts flat.
fn unknown_parameter(kind: PolicyKind, key: &str, tables: &[(&str, Vec<&String>)]) -> String {
    let accepted: Vec<String> = tables
        .iter()
        .flat_map(|(_, fields)| fields.iter().map(|f| format!("`{f}`")))
        .collect();
    if accepted.is_empty() {
        format!("policy `{kind}`: unknown field `{key}`; it takes no parameters")
    } else {
        format!(
            "policy `{kind}`: unknown field `{key}`, expected one of {}",
            accepted.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_listed_once_with_its_descriptor() {
        let all: Vec<serde_json::Value> =
            serde_json::from_str(&descriptors_json().expect("serializes")).expect("JSON");
        assert_eq!(all.len(), PolicyKind::ALL.len());
        assert_eq!(all[0]["name"], "fifo");
        assert_eq!(all[0]["family"], "events");
        assert_eq!(all[0]["daemon"], "runs");
        let antman = all.iter().find(|p| p["name"] == "antman").expect("antman");
        assert_eq!(antman["daemon"], "refused");
        assert!(
            antman["daemon_refused_because"]
                .as_str()
                .is_some_and(|why| !why.is_empty())
        );
        let las = all.iter().find(|p| p["name"] == "las").expect("las");
        assert!(las["aliases"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(las["paper"].as_str().is_some_and(|p| !p.is_empty()));
        assert!(las["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }

    fn table(policy: &str, params: &str) -> Result<serde_json::Value, String> {
        policy_table(policy, params)
            .map(|t| serde_json::from_str(&t).expect("JSON"))
            .map_err(|e| e.message())
    }

    #[test]
    fn flat_parameters_go_to_the_policys_own_tables() {
        assert_eq!(
            table("las", r#"{"queues": 3}"#),
            Ok(serde_json::json!({"las": {"queues": 3}}))
        );
        // A policy reading another family's table (dlas-gpu reads las's); an alias.
        assert_eq!(
            table("dlas-gpu", r#"{"queues": 2}"#),
            Ok(serde_json::json!({"las": {"queues": 2}}))
        );
        assert_eq!(
            table("tiresias-l", r#"{"queues": 2}"#),
            Ok(serde_json::json!({"las": {"queues": 2}}))
        );
        // Tables as before, and with flat fields of the same table.
        let both = table(
            "las",
            r#"{"las": {"queues": 2}, "starvation_factor": 4.0, "tenant_weights": {"a": 2}}"#,
        );
        assert_eq!(
            both,
            Ok(
                serde_json::json!({"las": {"queues": 2, "starvation_factor": 4.0}, "tenant_weights": {"a": 2}})
            )
        );
        let both = table("las", r#"{"starvation_factor": 4.0, "las": {"queues": 2}}"#);
        assert_eq!(
            both,
            Ok(serde_json::json!({"las": {"queues": 2, "starvation_factor": 4.0}}))
        );
    }

    #[test]
    fn an_unknown_or_doubled_parameter_is_named() {
        let e = table("las", r#"{"queus": 3}"#).expect_err("unknown");
        assert_eq!(
            e,
            "policy `las`: unknown field `queus`, expected one of `queue_limits_gpu_s`, `queues`, `starvation_factor`"
        );
        assert_eq!(
            table("fifo", r#"{"queues": 3}"#),
            Err("policy `fifo`: unknown field `queues`; it takes no parameters".into())
        );
        let e = table("las", r#"{"queues": 3, "las": {"queues": 2}}"#).expect_err("twice");
        assert!(e.contains("`queues` is given twice"), "{e}");
        assert!(
            table("srft", "{}")
                .expect_err("policy")
                .contains("did you mean `srtf`")
        );
    }
}
