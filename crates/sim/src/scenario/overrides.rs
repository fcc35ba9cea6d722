//! `--set key=value` overrides of scenario keys.

use super::ScenarioError;

/// Parses the value of a `--set`: TOML (`3`, `true`, `[1, 2]`, `"text"`), or a bare word taken
/// as a string (`las`, `per-event`). Text that starts like a TOML array, inline table or quoted
/// string but does not parse (`[0,1`) is an error, never a string.
pub(crate) fn parse_value(raw: &str) -> Result<toml::Value, String> {
    let text = raw.trim();
    match toml::from_str::<toml::Table>(&format!("v = {text}")) {
        Ok(mut table) => table.remove("v").ok_or_else(|| "no value".to_string()),
        Err(e) if text.starts_with(['[', '{', '"', '\'']) => {
            let reason = e.message().trim().to_string();
            Err(format!(
                "`{text}` is not a valid TOML value ({reason}); quote the whole assignment for the shell, e.g. --set 'key=[1, 2]'"
            ))
        }
        Err(_) => Ok(toml::Value::String(text.to_string())),
    }
}

/// The key of a `key=value` assignment, if it has one.
pub(crate) fn override_key(assignment: &str) -> Option<&str> {
    assignment.split_once('=').map(|(k, _)| k.trim())
}

/// Applies a `key=value` override to a TOML document. Keys are dotted paths; a numeric segment
/// indexes an array (`trace.0.path`). The value is parsed by [`parse_value`].
pub fn apply_override(root: &mut toml::Value, assignment: &str) -> Result<(), ScenarioError> {
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| ScenarioError::Override(format!("`{assignment}`: expected key=value")))?;
    let key = key.trim();
    let value =
        parse_value(raw).map_err(|m| ScenarioError::Override(format!("`{assignment}`: {m}")))?;
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::Override(format!(
            "`{key}`: empty key segment"
        )));
    }
    let mut current: &mut toml::Value = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        current = match current {
            toml::Value::Table(t) => {
                if last {
                    t.insert(part.to_string(), value);
                    return Ok(());
                }
                t.entry(part.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let index: usize = part.parse().map_err(|_| {
                    ScenarioError::Override(format!("`{key}`: `{part}` must be an array index"))
                })?;
                let len = a.len();
                let slot = a.get_mut(index).ok_or_else(|| {
                    ScenarioError::Override(format!(
                        "`{key}`: index {index} out of range (len {len})"
                    ))
                })?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => {
                return Err(ScenarioError::Override(format!(
                    "`{key}`: `{part}` is inside a non-table value"
                )));
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml::Value {
        toml::Value::Table(toml::from_str(text).expect("valid TOML"))
    }

    #[test]
    fn overrides_set_nested_keys_array_items_and_typed_values() {
        let mut d = doc("a = 1\n[b]\nc = \"x\"\n[[t]]\np = \"one\"\n[[t]]\np = \"two\"\n");
        apply_override(&mut d, "a=2").expect("ok");
        apply_override(&mut d, "b.c=word").expect("ok");
        apply_override(&mut d, "b.new.deep=true").expect("ok");
        apply_override(&mut d, "t.1.p=\"three\"").expect("ok");
        apply_override(&mut d, "list=[1, 2]").expect("ok");
        assert_eq!(d["a"].as_integer(), Some(2));
        assert_eq!(d["b"]["c"].as_str(), Some("word"));
        assert_eq!(d["b"]["new"]["deep"].as_bool(), Some(true));
        assert_eq!(d["t"][1]["p"].as_str(), Some("three"));
        assert_eq!(d["list"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn malformed_overrides_are_errors() {
        let mut d = doc("a = 1\n[[t]]\np = 1\n");
        assert!(apply_override(&mut d, "no-equals").is_err());
        assert!(apply_override(&mut d, "t.5.p=1").is_err());
        assert!(apply_override(&mut d, "t.x=1").is_err());
        assert!(apply_override(&mut d, "a.b=1").is_err());
        assert!(apply_override(&mut d, "a..b=1").is_err());
    }

    #[test]
    fn malformed_toml_values_are_refused_not_taken_as_strings() {
        let mut d = doc("a = 1\n");
        for bad in ["a=[0,1", "a={x = 1", "a=\"open", "a='open", "a=[1, 2]]"] {
            let e = apply_override(&mut d, bad).expect_err(bad).to_string();
            assert!(
                e.starts_with(&format!("--set `{bad}`: "))
                    && e.contains("is not a valid TOML value"),
                "{e}"
            );
        }
        // Bare words are still strings, and a quoted string keeps its text.
        apply_override(&mut d, "a=per-event").expect("bare word");
        assert_eq!(d["a"].as_str(), Some("per-event"));
        apply_override(&mut d, "a=\"[x\"").expect("quoted");
        assert_eq!(d["a"].as_str(), Some("[x"));
        assert_eq!(d.get("b"), None);
    }
}
