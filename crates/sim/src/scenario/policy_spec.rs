//! The `[policy]` table of a scenario: the policies' own parameters, one table per family
//! (`[policy.las]`, `[policy.horus]`, ...), read straight into [`PolicyConfig`] — the types and
//! defaults each policy module owns — plus overrides for single policies
//! (`[policy.per_policy.muri-l.muri] autopack = true`).
//!
//! The flat keys of earlier releases (`horus_lookahead`, `muri_packing`, ...) are refused with
//! their new spelling rather than kept alive beside it: two spellings of one setting would be
//! two places to read.

use arbiter_policy::{PolicyConfig, PolicyKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// The `[policy]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// The table as written, without `per_policy` (overrides are laid over it key by key).
    table: toml::Table,
    /// What the table says.
    pub config: PolicyConfig,
    /// Keys of this table that apply to one policy only (a published number produced with
    /// another setting than the rest).
    pub per_policy: BTreeMap<PolicyKind, toml::Table>,
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec {
            table: toml::Table::new(),
            config: PolicyConfig::default(),
            per_policy: BTreeMap::new(),
        }
    }
}

impl PolicySpec {
    /// Reads a `[policy]` table.
    pub fn from_table(mut table: toml::Table) -> Result<Self, String> {
        let per_policy = match table.remove("per_policy") {
            None => BTreeMap::new(),
            Some(toml::Value::Table(t)) => t
                .into_iter()
                .map(|(name, value)| per_policy_entry(&name, value))
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err("policy.per_policy must be a table of tables, one per policy".into());
            }
        };
        let config = config_of(&table, "policy")?;
        Ok(PolicySpec {
            table,
            config,
            per_policy,
        })
    }

    /// The configuration `kind` runs with: the table, with `kind`'s `per_policy` entry laid
    /// over it key by key.
    pub fn config_for(&self, kind: PolicyKind) -> Result<PolicyConfig, String> {
        let Some(own) = self.per_policy.get(&kind) else {
            return Ok(self.config.clone());
        };
        let mut merged = self.table.clone();
        lay_over(&mut merged, own);
        config_of(&merged, &format!("policy.per_policy.{kind}"))
    }
}

/// One `per_policy` entry: a known policy's table, with no nested `per_policy`.
fn per_policy_entry(name: &str, value: toml::Value) -> Result<(PolicyKind, toml::Table), String> {
    let kind = PolicyKind::parse(name).map_err(|e| format!("policy.per_policy: {e}"))?;
    let toml::Value::Table(table) = value else {
        return Err(format!("policy.per_policy.{name} must be a table"));
    };
    if table.contains_key("per_policy") {
        return Err(format!(
            "policy.per_policy.{name}: per_policy cannot be nested"
        ));
    }
    Ok((kind, table))
}

/// The configuration a `[policy]` table (at `context`) says, checked.
fn config_of(table: &toml::Table, context: &str) -> Result<PolicyConfig, String> {
    refuse_renamed(table, context)?;
    let config: PolicyConfig = toml::Value::Table(table.clone())
        .try_into()
        .map_err(|e: toml::de::Error| format!("{context}: {}", e.message().trim()))?;
    config
        .themis
        .validate()
        .map_err(|e| format!("{context}.themis: {e}"))?;
    config
        .horus
        .validate()
        .map_err(|m| format!("{context}.{m}"))?;
    Ok(config)
}

/// Lays `over` onto `base`: a table into a table key by key, anything else replaced.
fn lay_over(base: &mut toml::Table, over: &toml::Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over_inner)) => {
                lay_over(inner, over_inner)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The flat keys of earlier releases and where each now lives (`family.key`; `horus_x` is
/// `horus.x`).
const RENAMED: [(&str, &str); 23] = [
    ("las_queue_limits_gpu_s", "las.queue_limits_gpu_s"),
    ("las_queues", "las.queues"),
    ("starvation_factor", "las.starvation_factor"),
    ("gittins_prior", "gittins.prior"),
    ("gittins_delta_gpu_s", "gittins.delta_gpu_s"),
    ("qssf_history", "qssf.history"),
    ("recompute_interval_s", "gavel.recompute_interval_s"),
    ("hierarchical_inner", "hierarchical.inner"),
    ("muri_packing", "muri.packing"),
    ("muri_autopack", "muri.autopack"),
    ("muri_order", "muri.order"),
    ("muri_blossom", "muri.blossom"),
    ("muri_matching", "muri.matching"),
    ("themis_f", "themis.fairness_knob"),
    ("themis_lease_s", "themis.lease_s"),
    ("vtc_quantum_s", "vtc.quantum_s"),
    ("vtc_inner", "vtc.inner"),
    ("chronus_lease_s", "chronus.lease_s"),
    ("chronus_later_options", "chronus.later_options"),
    ("chronus_mip_node_limit", "chronus.mip_node_limit"),
    ("chronus_mip_max_binaries", "chronus.mip_max_binaries"),
    ("external_cmd", "external.command"),
    ("external_timeout_s", "external.timeout_s"),
];

/// Refuses a flat key of an earlier release, naming its new spelling.
fn refuse_renamed(table: &toml::Table, context: &str) -> Result<(), String> {
    for key in table.keys() {
        let new = match key.strip_prefix("horus_") {
            Some(rest) => Some(format!("horus.{rest}")),
            None => RENAMED
                .iter()
                .find(|(old, _)| old == key)
                .map(|(_, new)| (*new).to_string()),
        };
        if let Some(new) = new {
            let (family, field) = new.split_once('.').unwrap_or((new.as_str(), ""));
            return Err(format!(
                "{context}.{key} is now `{field}` in the table [{context}.{family}] (on the command line: --set {context}.{new}=...)"
            ));
        }
    }
    Ok(())
}

impl Serialize for PolicySpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut table = self.table.clone();
        if !self.per_policy.is_empty() {
            let per_policy: toml::Table = self
                .per_policy
                .iter()
                .map(|(k, t)| (k.name().to_string(), toml::Value::Table(t.clone())))
                .collect();
            table.insert("per_policy".into(), toml::Value::Table(per_policy));
        }
        table.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PolicySpec::from_table(toml::Table::deserialize(deserializer)?)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Result<PolicySpec, String> {
        PolicySpec::from_table(text.parse::<toml::Table>().expect("toml"))
    }

    #[test]
    fn each_family_reads_its_own_table_and_keeps_its_defaults_elsewhere() {
        let s = spec("[horus]\nlookahead = 7\n[muri]\npacking = 2\norder = \"worst\"\n[gavel]\nrecompute_interval_s = 60\n").expect("reads");
        assert_eq!(
            (s.config.horus.lookahead, s.config.horus.max_jobs_per_gpu),
            (7, 3)
        );
        assert_eq!(
            (
                s.config.muri.packing,
                s.config.muri.order,
                s.config.muri.blossom
            ),
            (2, arbiter_policy::muri::interleave::JobOrder::Worst, true)
        );
        assert_eq!(
            (
                s.config.rounds.recompute_interval_s,
                s.config.rounds.round_s
            ),
            (60.0, 360.0)
        );
        assert_eq!(spec("").expect("empty").config, PolicyConfig::default());
    }

    #[test]
    fn gavels_solver_is_read_by_name_and_a_wrong_one_is_refused_with_the_choices() {
        use arbiter_policy::gavel::AllocationSolver;
        assert_eq!(
            spec("").expect("empty").config.rounds.solver,
            AllocationSolver::InteriorPoint
        );
        let s = spec("[gavel]\nsolver = \"simplex\"\n").expect("reads");
        assert_eq!(s.config.rounds.solver, AllocationSolver::Simplex);
        let e = spec("[gavel]\nsolver = \"fast\"\n").expect_err("refused");
        assert!(
            e.contains("fast") && e.contains("interior-point") && e.contains("simplex"),
            "{e}"
        );
    }

    #[test]
    fn a_flat_key_of_an_earlier_release_is_refused_with_its_new_spelling() {
        let e = spec("horus_lookahead = 5").expect_err("refused");
        assert!(
            e.contains("[policy.horus]")
                && e.contains("`lookahead`")
                && e.contains("--set policy.horus.lookahead="),
            "{e}"
        );
        let e = spec("themis_f = 0.5").expect_err("refused");
        assert!(
            e.contains("`fairness_knob` in the table [policy.themis]"),
            "{e}"
        );
        let e = spec("[horus]\nlookahed = 5").expect_err("refused");
        assert!(e.contains("lookahed"), "an unknown key names itself: {e}");
    }

    #[test]
    fn a_per_policy_entry_is_laid_over_the_table_key_by_key() {
        let s = spec(
            "[muri]\npacking = 4\nautopack = false\n[per_policy.muri-l.muri]\nautopack = true\n",
        )
        .expect("reads");
        let own = s.config_for(PolicyKind::MuriL).expect("merges");
        assert_eq!((own.muri.packing, own.muri.autopack), (4, true));
        assert!(
            !s.config_for(PolicyKind::MuriS)
                .expect("plain")
                .muri
                .autopack
        );
        assert!(
            spec("[per_policy.nope]\nx = 1")
                .expect_err("unknown policy")
                .contains("unknown policy `nope`")
        );
    }

    #[test]
    fn the_table_round_trips() {
        let s = spec("tenant_weights = { a = 2.0 }\n[vtc]\nquantum_s = 60\n[per_policy.vtc.vtc]\ninner = \"srtf\"\n").expect("reads");
        let again: PolicySpec = toml::Value::try_from(&s)
            .expect("serializes")
            .try_into()
            .expect("reads back");
        assert_eq!(again, s);
    }
}
