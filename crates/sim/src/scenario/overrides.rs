//! `--set key=value` overrides of scenario keys.

use super::ScenarioError;

/// Applies a `key=value` override to a TOML document. Keys are dotted paths; a numeric segment
/// indexes an array (`trace.0.path`). The value is parsed as TOML (`3`, `true`, `[1, 2]`,
/// `"text"`), falling back to a plain string.
pub fn apply_override(root: &mut toml::Value, assignment: &str) -> Result<(), ScenarioError> {
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| ScenarioError::Override(format!("`{assignment}`: expected key=value")))?;
    let key = key.trim();
    let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(ScenarioError::Override(format!("`{key}`: empty key segment")));
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
                t.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let index: usize = part
                    .parse()
                    .map_err(|_| ScenarioError::Override(format!("`{key}`: `{part}` must be an array index")))?;
                let len = a.len();
                let slot = a
                    .get_mut(index)
                    .ok_or_else(|| ScenarioError::Override(format!("`{key}`: index {index} out of range (len {len})")))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
            _ => return Err(ScenarioError::Override(format!("`{key}`: `{part}` is inside a non-table value"))),
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
}
