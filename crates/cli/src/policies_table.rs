//! The guide's tables of policies, generated from their descriptors
//! (`arbiter policies --markdown`) so that they cannot go stale: a test holds `docs/policies.md`
//! to them. "At a glance" has a row per policy; "In detail" what each does in full, where it
//! comes from, and the scenario tables its builder reads with their defaults from the code.

use arbiter_policy::{DaemonSupport, Family, PolicyConfig, PolicyKind};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// What `arbiter policies --markdown` prints: the "At a glance" table, then the "In detail"
/// section.
pub fn markdown() -> String {
    format!("{}\n{}", at_a_glance(), in_detail())
}

/// Every policy as a row of a Markdown table.
fn at_a_glance() -> String {
    let mut out = String::from(
        "| policy | what it does (source) | decides | pair speeds | elastic | daemon |\n|---|---|---|---|---|---|\n",
    );
    for kind in PolicyKind::ALL {
        let d = kind.descriptor();
        let decides = match d.family {
            Family::Events => "at events",
            Family::GavelAllocation => "Gavel's rounds",
            Family::Synergy => "Synergy's rounds",
            Family::OtherRounds => "in rounds",
        };
        let daemon = match d.daemon {
            DaemonSupport::Runs => "yes".to_string(),
            DaemonSupport::NeedsColocation => "where GPUs can be shared".to_string(),
            DaemonSupport::Refused(why) => format!("no: {why}"),
        };
        let yes = |b: bool| if b { "yes" } else { "" };
        let _ = writeln!(
            out,
            "| `{}` | {} | {decides} | {} | {} | {daemon} |",
            d.name,
            cell(d.describe),
            yes(d.pair_speeds),
            yes(d.elastic)
        );
    }
    out
}

/// The "In detail" heading and table: a row per policy (with its aliases), or per set of
/// policies with the same text, source and tables (Synergy's orders under one mechanism).
fn in_detail() -> String {
    let Ok(Value::Object(defaults)) = serde_json::to_value(PolicyConfig::default()) else {
        return String::new();
    };
    let mut rows: Vec<(Vec<String>, [String; 3])> = Vec::new();
    for kind in PolicyKind::ALL {
        let d = kind.descriptor();
        let name = match d.aliases {
            [] => format!("`{}`", d.name),
            aliases => format!("`{}` (also `{}`)", d.name, aliases.join("`, `")),
        };
        let row = [cell(d.detail), cell(d.paper), tables_read(kind, &defaults)];
        match rows.iter_mut().find(|(_, r)| *r == row) {
            Some((names, _)) => names.push(name),
            None => rows.push((vec![name], row)),
        }
    }
    let mut out = String::from(
        "## In detail\n\nWhat each policy does in full, where it comes from, and the scenario tables it reads with their defaults\n\
         ([Scenario files](simulation.md#scenario-files) says what each key means).\n\n\
         | policy | what it does | from | reads (defaults) |\n|---|---|---|---|\n",
    );
    for (names, [detail, paper, tables]) in rows {
        let _ = writeln!(
            out,
            "| {} | {detail} | {paper} | {tables} |",
            names.join(", ")
        );
    }
    out
}

/// The scenario tables `kind`'s builder reads, each with its keys' defaults from `defaults`
/// (`PolicyConfig::default()` as JSON): "`policy.muri`: `autopack = false`, `packing = 4`".
fn tables_read(kind: PolicyKind, defaults: &Map<String, Value>) -> String {
    let tables = kind
        .reads()
        .iter()
        .filter_map(|field| PolicyConfig::scenario_key(field))
        .map(|table| match defaults.get(table) {
            Some(Value::Object(keys)) if !keys.is_empty() => {
                let keys: Vec<String> = keys
                    .iter()
                    .map(|(key, value)| {
                        if value.is_null() {
                            format!("`{key}` unset")
                        } else {
                            format!("`{key} = {}`", toml(value))
                        }
                    })
                    .collect();
                format!("`policy.{table}`: {}", keys.join(", "))
            }
            Some(Value::Null) | None => format!("`policy.{table}` (no default)"),
            Some(value) => format!("`policy.{table} = {}`", toml(value)),
        });
    cell(&tables.collect::<Vec<_>>().join("; "))
}

/// A default as TOML writes it (JSON's numbers, strings and booleans are TOML's; arrays get
/// TOML's spacing, tables its inline form).
fn toml(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(keys) if keys.is_empty() => "{}".into(),
        Value::Object(keys) => format!(
            "{{ {} }}",
            keys.iter()
                .map(|(k, v)| format!("{k} = {}", toml(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// Text for a table cell: a `|` would end it.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the generated text starts and ends in `docs/policies.md`.
    const BEGIN: &str =
        "<!-- policies:begin (generated by `arbiter policies --markdown`; a test checks it) -->";
    const END: &str = "<!-- policies:end -->";

    #[test]
    fn the_guides_tables_of_policies_are_the_generated_ones() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policies.md");
        let text = std::fs::read_to_string(path).expect("docs/policies.md");
        let start = text.find(BEGIN).expect("the begin marker") + BEGIN.len();
        let end = text.find(END).expect("the end marker");
        assert_eq!(
            text[start..end].trim(),
            markdown().trim(),
            "docs/policies.md is stale: paste `arbiter policies --markdown` between its markers"
        );
    }

    #[test]
    fn every_policy_has_a_row_at_a_glance_and_in_detail() {
        assert_eq!(at_a_glance().lines().count(), PolicyKind::ALL.len() + 2);
        let detail = in_detail();
        for kind in PolicyKind::ALL {
            assert!(
                detail.contains(&format!("`{}`", kind.name())),
                "{kind} in detail"
            );
        }
    }

    #[test]
    fn the_tables_read_come_with_their_defaults() {
        let Ok(Value::Object(defaults)) = serde_json::to_value(PolicyConfig::default()) else {
            panic!("a table")
        };
        assert_eq!(tables_read(PolicyKind::Fifo, &defaults), "");
        let vtc = tables_read(PolicyKind::Vtc, &defaults);
        assert!(
            vtc.starts_with("`policy.vtc`: ")
                && vtc.contains("`quantum_s = 300.0`")
                && vtc.contains("; `policy.tenant_weights = {}`")
                && vtc.ends_with("; `policy.fairshare`: `half_life_s = 0.0`"),
            "{vtc}"
        );
        let gittins = tables_read(PolicyKind::Gittins, &defaults);
        assert!(
            gittins.contains("`queue_limits_gpu_s = [3250.0, 7200.0, 18000.0]`")
                && gittins.contains("`prior` unset"),
            "{gittins}"
        );
        assert!(
            tables_read(PolicyKind::Gandiva, &defaults)
                .starts_with("`policy.gavel`: `recompute_interval_s = ")
        );
        assert_eq!(
            tables_read(PolicyKind::External, &defaults),
            "`policy.external` (no default)"
        );
    }

    /// The `policy.*` rows of the key table in docs/simulation.md: key → its default cell.
    fn guide_policy_keys() -> Vec<(String, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/simulation.md");
        let text = std::fs::read_to_string(path).expect("docs/simulation.md");
        let mut rows = Vec::new();
        for line in text.lines().filter(|l| l.starts_with("| `policy.")) {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            let keys: Vec<&str> = cells[0]
                .split(", ")
                .map(|k| k.trim().trim_matches('`'))
                .collect();
            let defaults: Vec<&str> = if keys.len() > 1 {
                cells[cells.len() - 1].split("`, ").collect()
            } else {
                vec![cells[cells.len() - 1]]
            };
            for (i, key) in keys.iter().enumerate() {
                rows.push((
                    key.to_string(),
                    defaults
                        .get(i)
                        .unwrap_or(&"")
                        .trim()
                        .trim_matches('`')
                        .to_string(),
                ));
            }
        }
        rows
    }

    /// Every key of `value` (a table of `PolicyConfig` as JSON) as a dotted path under `prefix`.
    fn keys_of(prefix: &str, value: &Value, out: &mut Vec<(String, Value)>) {
        match value {
            Value::Object(keys) if !keys.is_empty() && prefix.matches('.').count() < 2 => keys
                .iter()
                .for_each(|(k, v)| keys_of(&format!("{prefix}.{k}"), v, out)),
            _ => out.push((prefix.to_string(), value.clone())),
        }
    }

    /// Whether the first number in `cell` is `value` to the decimals written (31.51 for
    /// 31.51171875).
    fn same_as_written(cell: &str, value: f64) -> bool {
        let Some(written) = cell
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .find(|w| !w.is_empty())
        else {
            return false;
        };
        let decimals = written.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
        written.parse::<f64>().is_ok_and(|w| {
            (value * 10f64.powi(decimals)).round() == (w * 10f64.powi(decimals)).round()
        })
    }

    #[test]
    fn the_simulation_guide_lists_every_policy_key_with_its_default() {
        let Ok(defaults) = serde_json::to_value(PolicyConfig::default()) else {
            panic!("a table")
        };
        let mut keys = Vec::new();
        keys_of("policy", &defaults, &mut keys);
        let guide = guide_policy_keys();
        for (key, value) in &keys {
            if matches!(key.as_str(), "policy.placement" | "policy.keep_placements") {
                continue; // `[placement]` in a scenario, with its own rows
            }
            if value.is_null() && guide.iter().any(|(k, _)| k.starts_with(&format!("{key}."))) {
                continue; // a table with no default (`[policy.external]`): its keys are listed
            }
            let Some((_, cell)) = guide.iter().find(|(k, _)| k == key) else {
                panic!("docs/simulation.md lists no `{key}`")
            };
            match value {
                Value::Number(n) => assert!(
                    same_as_written(cell, n.as_f64().unwrap_or(f64::NAN)),
                    "`{key}`: the guide says {cell:?}, the code {n}"
                ),
                Value::Bool(b) => assert!(
                    cell.starts_with(&b.to_string()),
                    "`{key}`: the guide says {cell:?}, the code {b}"
                ),
                Value::String(s) => assert!(
                    cell.starts_with(s.as_str()),
                    "`{key}`: the guide says {cell:?}, the code {s:?}"
                ),
                Value::Array(items) => assert_eq!(
                    cell.trim_matches(['[', ']'])
                        .split(", ")
                        .map(|x| x.parse::<f64>().ok())
                        .collect::<Vec<_>>(),
                    items.iter().map(Value::as_f64).collect::<Vec<_>>(),
                    "`{key}`"
                ),
                Value::Null | Value::Object(_) => assert!(
                    matches!(cell.as_str(), "none" | "all 1"),
                    "`{key}`: the guide says {cell:?}, the code has no default"
                ),
            }
        }
        for (key, _) in guide
            .iter()
            .filter(|(k, _)| !k.starts_with("policy.per_policy"))
        {
            let read = keys
                .iter()
                .any(|(k, v)| k == key || (v.is_null() && key.starts_with(&format!("{k}."))));
            assert!(
                read,
                "docs/simulation.md lists `{key}`, which no policy reads"
            );
        }
    }
}
