//! `set={...}` from Python as `--set` assignments: each value (sent as JSON) written in TOML,
//! so that the scenario loader applies it — and refuses it — exactly as it does `--set KEY=VALUE`.

use crate::Error;

/// `KEY=VALUE` with `json` (a Python value as JSON) written as a TOML value: `"srtf"` for a
/// string, `["srtf", "las"]` for a list, `{ lookahead = 5 }` for a dict.
pub fn assignment(key: &str, json: &str) -> Result<String, Error> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::Argument(format!("set `{key}`: {e}")))?;
    let toml = to_toml(value).map_err(|m| Error::Argument(format!("set `{key}`: {m}")))?;
    Ok(format!("{key}={toml}"))
}

/// A JSON value as TOML; `null` (Python's `None`) has no TOML form.
pub(crate) fn to_toml(value: serde_json::Value) -> Result<toml::Value, String> {
    use serde_json::Value as J;
    Ok(match value {
        J::Null => return Err("None has no TOML form (leave the key out instead)".into()),
        J::Bool(b) => toml::Value::Boolean(b),
        J::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().ok_or_else(|| format!("{n} is out of range"))?),
        },
        J::String(s) => toml::Value::String(s),
        J::Array(items) => {
            toml::Value::Array(items.into_iter().map(to_toml).collect::<Result<_, _>>()?)
        }
        J::Object(map) => toml::Value::Table(
            map.into_iter()
                .map(|(k, v)| Ok((k, to_toml(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_in_toml() {
        assert_eq!(
            assignment("policies", r#"["srtf", "las"]"#).expect("list"),
            r#"policies=["srtf", "las"]"#
        );
        assert_eq!(
            assignment("trace.0.max_jobs", "200").expect("int"),
            "trace.0.max_jobs=200"
        );
        assert_eq!(
            assignment("simulation.round_s", "360.5").expect("float"),
            "simulation.round_s=360.5"
        );
        assert_eq!(
            assignment("placement.strategy", r#""relaxed""#).expect("str"),
            r#"placement.strategy="relaxed""#
        );
        assert_eq!(
            assignment("policy.horus", r#"{"lookahead": 5}"#).expect("table"),
            "policy.horus={ lookahead = 5 }"
        );
        assert_eq!(
            assignment("tenant_rows", "true").expect("bool"),
            "tenant_rows=true"
        );
    }

    #[test]
    fn none_is_refused_naming_the_key() {
        let e = assignment("seeds", "[0, null]")
            .expect_err("null")
            .to_string();
        assert_eq!(
            e,
            "set `seeds`: None has no TOML form (leave the key out instead)"
        );
    }
}
