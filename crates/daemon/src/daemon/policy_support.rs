//! Which simulator policies the daemon can carry out, and their configuration from the daemon's
//! settings.
//!
//! A policy whose decisions the daemon cannot carry out is refused when the configuration is
//! validated, with the reason — never started and then silently half-applied. Policy timing
//! (Gavel's round length and recomputation interval) follows the daemon's `round_s`, not the
//! simulator's defaults (360 s rounds, recompute every 1,920 s), so that a new job on free GPUs
//! starts within one round under every policy.

use crate::config::{ConfigError, ServeConfig};
use crate::executor::Capabilities;
use crate::records::store::Tenant;
use arbiter_policy::DaemonSupport;
use arbiter_policy::gavel::RoundOptions;
use arbiter_policy::mechanisms::colocation::PairSpeeds;
use arbiter_policy::{PolicyConfig, PolicyKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The bundled Gittins prior: GPU-time samples from Tiresias' production YARN cluster
/// (`data/tiresias/yarn-gput10000.csv`, Apache-2.0).
const BUNDLED_GITTINS_PRIOR: &str = include_str!("../../../../data/tiresias/yarn-gput10000.csv");

/// Why the daemon cannot run `kind` on an executor that can do `capabilities`, or `None` when
/// it can. (Migrations are carried out by every executor — checkpoint, then start on the new
/// GPUs — and so are CPU/memory shares: an executor that cannot change a run's limits live
/// restarts it from its checkpoint with the new ones.)
///
/// `max-min-fairness-packed` runs where the executor co-locates: its pair speeds are the ones
/// the daemon learns from progress reports ([`pair_speeds`]); a pair not measured yet never
/// shares, so until the table has entries it decides as `max-min-fairness-het`.
///
/// The other policies that put jobs on the same GPUs (`muri-s`, `muri-l`, `gandiva`, `horus`) run on
/// every executor: on one without [`Capabilities::colocation`] (Slurm gives a GPU to one job at
/// a time) the round starts no run on GPUs another run holds and moves no running job into a
/// group — the first member of a group runs alone and the others wait, each with a pending
/// reason that says so (`round::gate::check_start`), so a decision is never carried out half-shared.
pub fn unsupported(kind: PolicyKind, capabilities: Capabilities) -> Option<String> {
    match kind.descriptor().daemon {
        DaemonSupport::Runs => None,
        DaemonSupport::NeedsColocation if capabilities.colocation => None,
        DaemonSupport::NeedsColocation => Some(format!(
            "`{}` decides GPU sharing (two jobs on the same GPUs), which this executor cannot carry out (it gives a GPU to one job at a time{}); use max-min-fairness-het",
            kind.name(),
            capabilities
                .colocation_hint
                .map(|h| format!(": {h}"))
                .unwrap_or_default()
        )),
        DaemonSupport::Refused(why) => Some(format!("`{}`: {why}", kind.name())),
    }
}

/// The fraction of its solo speed a job is assumed to keep next to a job type it was not
/// measured with, per policy: Gandiva must try a pair before its introspection can judge it, so
/// an unmeasured pair counts as exactly as good as taking turns (each at half speed: normalized
/// packed throughput 1, kept until measured below); the packed program and Horus take only
/// measured pairs (`None`).
pub fn assumed_pair_fraction(kind: PolicyKind) -> Option<f64> {
    (kind == PolicyKind::Gandiva).then_some(0.5)
}

/// The learned co-location table as `kind` takes it (`None` for policies that use none), over
/// the cluster's GPU types.
pub fn pair_speeds(
    kind: PolicyKind,
    table: &crate::records::pairs::PairTable,
    gpu_types: &[String],
) -> Option<Arc<PairSpeeds>> {
    kind.needs_pair_speeds()
        .then(|| Arc::new(table.speeds(gpu_types, assumed_pair_fraction(kind))))
}

/// Parses a prior of job sizes: one number per line after a header (`duration`), GPU-seconds.
pub fn parse_prior(text: &str, source: &str) -> Result<Vec<f64>, String> {
    let mut samples = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let first = line.split(',').next().unwrap_or(line).trim();
        match first.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => samples.push(v),
            _ => {
                return Err(format!(
                    "{source}:{}: duration: `{first}` is not a non-negative number",
                    i + 1
                ));
            }
        }
    }
    if samples.is_empty() {
        return Err(format!("{source}: no samples"));
    }
    Ok(samples)
}

/// The Gittins prior: from `path`, or the bundled one.
pub fn gittins_prior(path: Option<&Path>) -> Result<Vec<f64>, String> {
    match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("gittins_prior: {}: {e}", p.display()))?;
            parse_prior(&text, &p.display().to_string())
        }
        None => parse_prior(BUNDLED_GITTINS_PRIOR, "bundled yarn-gput10000.csv"),
    }
}

/// The tenants' weights, as the policies that use them take them.
pub fn tenant_weights(tenants: &BTreeMap<String, Tenant>) -> arbiter_policy::TenantWeights {
    tenants
        .values()
        .map(|t| (t.name.clone(), t.weight))
        .collect()
}

/// The policy configuration for the daemon: defaults, the tenants' weights, rounds as long as
/// the daemon's and recomputed every round, and the Gittins prior.
pub fn policy_config(
    tenants: &BTreeMap<String, Tenant>,
    round_s: f64,
    gittins_prior: &[f64],
) -> PolicyConfig {
    PolicyConfig {
        tenant_weights: tenant_weights(tenants),
        rounds: RoundOptions {
            round_s,
            recompute_interval_s: round_s,
            ..RoundOptions::default()
        },
        gittins_prior_gpu_s: gittins_prior.to_vec(),
        // VTC charges a job handed GPUs one round of them, and decides again each round.
        vtc: arbiter_policy::vtc::VtcConfig {
            quantum_s: round_s,
            ..Default::default()
        },
        // Chronus re-plans its promises within a wall-clock second as well as its node limit:
        // the daemon's tick must not stall on a hard program (simulation uses the node limit
        // alone, to stay deterministic).
        chronus: arbiter_policy::chronus::ChronusConfig {
            mip_time_limit_s: Some(1.0),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `kind` with `config`, under the priority classes when any is configured (an external agent
/// decides alone: `ServeConfig::validate` refuses it with classes), under the quota tree (set
/// later with `Policy::set_quota_tree` as the admin changes it).
pub(crate) fn build_policy(
    kind: PolicyKind,
    config: &arbiter_policy::PolicyConfig,
    classes: &crate::config::PriorityClasses,
    quota_tree: Option<arbiter_policy::quotas::QuotaTree>,
) -> Result<Box<dyn arbiter_policy::Policy>, arbiter_policy::PolicyError> {
    let inner = if classes.is_empty() || kind == PolicyKind::External {
        arbiter_policy::build(kind, config)?
    } else {
        Box::new(arbiter_policy::mechanisms::classes::PriorityClasses::new(
            kind,
            config.clone(),
        )?)
    };
    Ok(Box::new(
        arbiter_policy::quotas::Quotas::with_tree(quota_tree, inner).showing_every_round(),
    ))
}

impl ServeConfig {
    /// Checks the configuration: every field, then that the executor can carry out the policy
    /// (here, where policy support is known, so that `config` stays a leaf that imports
    /// nothing of the daemon's).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_fields()?;
        if !self.priority_classes.is_empty() {
            for (key, kind) in [
                ("policy", self.policy_kind()?),
                ("policy_fallback", self.fallback_kind()?),
            ] {
                if matches!(kind, PolicyKind::External | PolicyKind::AntMan) {
                    return Err(ConfigError::Invalid(format!(
                        "{key}: {} cannot run under [[priority_classes]] ({}); choose another policy or remove the classes",
                        kind.name(),
                        if kind == PolicyKind::External {
                            "one agent decides the whole queue"
                        } else {
                            "it has its own classes, guaranteed and opportunistic"
                        }
                    )));
                }
            }
        }
        if let Some(reason) = unsupported(self.policy_kind()?, self.capabilities()) {
            return Err(ConfigError::Invalid(format!(
                "policy: {} executor: {reason}",
                self.executor.name()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_policy_builds_with_the_daemon_configuration_or_is_refused_with_a_reason() {
        let prior = gittins_prior(None).expect("bundled prior parses");
        assert!(prior.len() > 1000);
        let mut config = policy_config(&BTreeMap::new(), 30.0, &prior);
        for kind in PolicyKind::ALL {
            config.pair_speeds = pair_speeds(
                kind,
                &crate::records::pairs::PairTable::default(),
                &["a100".to_string()],
            );
            // The daemon's config requires policy_cmd for `external` (checked in config.rs).
            config.external =
                (kind == PolicyKind::External).then(|| arbiter_policy::external::ExternalConfig {
                    command: "cat > /dev/null".into(),
                    timeout: std::time::Duration::from_secs(1),
                });
            for executor in [
                crate::config::ExecutorKind::Local,
                crate::config::ExecutorKind::Slurm,
            ] {
                match unsupported(kind, executor.capabilities()) {
                    Some(reason) => assert!(reason.contains(kind.name()), "{reason}"),
                    None => {
                        if let Err(e) = arbiter_policy::build(kind, &config) {
                            panic!("{} passes validation but fails to build: {e}", kind.name());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_bad_prior_names_the_line() {
        let e = parse_prior("duration\n10\nx\n", "p.csv").expect_err("bad");
        assert!(e.starts_with("p.csv:3: duration"), "{e}");
    }
}
