//! Policies by name: the registry. The `policies!` table below has one line per policy — its
//! descriptor and its builder, both in the policy's own module, and the parts of
//! [`PolicyConfig`] the builder reads — and generates [`PolicyKind`], [`PolicyKind::ALL`],
//! [`PolicyKind::descriptor`], [`build`] and the policies' own tables of [`PolicyConfig`], so a
//! policy left out of any of them cannot compile.

use crate::TenantWeights;
use crate::descriptor::{Descriptor, Family};
use crate::gavel::{Gavel, RoundOptions};
use crate::mechanisms::colocation::PairSpeeds;
use crate::mechanisms::placement::{PlacementStrategy, Placing};
use crate::synergy::{self, Mechanism, SynergyOrder};
use crate::{Policy, PolicyError};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// The registry. A line reads
///
/// ```text
/// Variant [table: crate::module::Params] => crate::module::DESCRIPTOR, crate::module::build(field, ...);
/// ```
///
/// `DESCRIPTOR` is the policy's [`Descriptor`]; `build` is called with a reference to each
/// named field of [`PolicyConfig`], in order, then the caller's [`Placing`], and returns the
/// policy as its own type. `[table: Params]`, on the first line that reads a table, declares
/// that field of [`PolicyConfig`]: the scenario table `[policy.table]`, `Params::default()` when
/// absent. Paths are written from `crate::`, so a new module needs nothing here but its line
/// (and the module-cycle test sees what the registry names). The fields several families read
/// (tenant weights, Gavel's rounds) and what the caller supplies (placement, the Gittins prior,
/// measured pair speeds) are written out in `PolicyConfig` below. Synergy's sixteen (order ×
/// mechanism) are the one variant with fields, added by hand.
macro_rules! policies {
    ($( $variant:ident $([$table:ident: $params:ty])? => $descriptor:expr, $($build:ident)::+ ($($reads:ident),*); )*) => {
        /// Every policy Arbiter implements.
        ///
        /// Serialized and parsed by [`PolicyKind::name`] (`fifo`, `max-min-fairness-het`, `srtf+tune`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum PolicyKind {
            $( #[doc = concat!("The policy of [`", stringify!($descriptor), "`].")] $variant, )*
            /// Synergy: a job order composed with a CPU/memory allocation mechanism (`srtf+tune`).
            Synergy(SynergyOrder, Mechanism),
        }

        /// The policies of the table, in its order.
        const TABLE: [PolicyKind; [$(stringify!($variant)),*].len()] = [$(PolicyKind::$variant),*];

        impl PolicyKind {
            /// Everything known about the policy before it is built, in one place.
            pub fn descriptor(self) -> Descriptor {
                match self {
                    $( PolicyKind::$variant => $descriptor, )*
                    PolicyKind::Synergy(order, mechanism) => synergy::descriptor(order, mechanism),
                }
            }

            /// The fields of [`PolicyConfig`] its builder reads, by their Rust names
            /// ([`PolicyConfig::scenario_key`] gives a field's scenario table).
            pub fn reads(self) -> &'static [&'static str] {
                match self {
                    $( PolicyKind::$variant => &[$(stringify!($reads)),*], )*
                    PolicyKind::Synergy(..) => &[],
                }
            }
        }

        /// Builds `kind` and hands it, as its own type, to `sink`.
        fn build_into<S: Sink>(kind: PolicyKind, config: &PolicyConfig, sink: S) -> Result<S::Out, PolicyError> {
            let placing = Placing { strategy: config.placement, keep_placements: config.keep_placements };
            Ok(match kind {
                $( PolicyKind::$variant => sink.take($($build)::+($(&config.$reads,)* placing)?), )*
                PolicyKind::Synergy(order, mechanism) => sink.take(synergy::build(order, mechanism)),
            })
        }

        /// Everything the policies can be configured with: each policy's own table with its
        /// defaults (a scenario's `[policy.<table>]`; the daemon builds its policies from the same
        /// defaults), the tables several families read, and what the caller supplies at run time
        /// (placement, the Gittins prior's samples, measured pair speeds: not scenario keys).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct PolicyConfig {
            /// Placement strategy (the scenario's `[placement]`).
            #[serde(skip)]
            pub placement: PlacementStrategy,
            /// Preemptive policies keep a continuing job's GPUs when free (true) or re-place every
            /// job from an empty cluster at each scheduling point (false, as Tiresias' and Muri's
            /// simulators).
            #[serde(skip)]
            pub keep_placements: bool,
            /// Tenant weights for `hierarchical` and `vtc` (unlisted tenants weigh 1).
            pub tenant_weights: TenantWeights,
            /// Gittins prior samples in GPU-seconds, read from `gittins.prior` (required for `gittins`).
            #[serde(skip)]
            pub gittins_prior_gpu_s: Vec<f64>,
            /// Gavel's round mechanism (`[policy.gavel]`), which Gandiva runs on too.
            #[serde(rename = "gavel")]
            pub rounds: RoundOptions,
            /// Co-location speeds for space sharing (required by `max-min-fairness-packed`).
            #[serde(skip)]
            pub pair_speeds: Option<Arc<PairSpeeds>>,
            /// Decayed fair share for `hierarchical` and `vtc` (`[policy.fairshare]`; off by default).
            pub fairshare: crate::fairshare::FairShareConfig,
            $($(
                #[doc = concat!("`[policy.", stringify!($table), "]`, declared by the registry's `", stringify!($variant), "` line.")]
                pub $table: $params,
            )?)*
        }

        impl Default for PolicyConfig {
            fn default() -> Self {
                PolicyConfig {
                    placement: PlacementStrategy::Consolidated,
                    keep_placements: true,
                    tenant_weights: TenantWeights::new(),
                    gittins_prior_gpu_s: Vec::new(),
                    rounds: RoundOptions::default(),
                    pair_speeds: None,
                    fairshare: crate::fairshare::FairShareConfig::default(),
                    $($( $table: <$params>::default(), )?)*
                }
            }
        }
    };
}

policies! {
    Fifo => crate::classic::ordered::FIFO, crate::classic::ordered::build_fifo();
    FifoBackfill => crate::classic::backfill::DESCRIPTOR, crate::classic::backfill::build();
    Sjf => crate::classic::ordered::SJF, crate::classic::ordered::build_sjf();
    Srtf => crate::classic::ordered::SRTF, crate::classic::ordered::build_srtf();
    Srsf => crate::classic::ordered::SRSF, crate::classic::ordered::build_srsf();
    Edf => crate::classic::ordered::EDF, crate::classic::ordered::build_edf();
    Chronus [chronus: crate::chronus::ChronusConfig] => crate::chronus::DESCRIPTOR, crate::chronus::build(chronus);
    Las [las: crate::tiresias::las::LasConfig] => crate::tiresias::las::DESCRIPTOR, crate::tiresias::las::build(las);
    DlasGpu => crate::tiresias::dlas::DESCRIPTOR, crate::tiresias::dlas::build(las);
    Gittins [gittins: crate::tiresias::gittins::GittinsParams] => crate::tiresias::gittins::DESCRIPTOR, crate::tiresias::gittins::build(las, gittins, gittins_prior_gpu_s);
    MuriS [muri: crate::muri::MuriConfig] => crate::muri::MURI_S, crate::muri::build_muri_s(muri);
    MuriL => crate::muri::MURI_L, crate::muri::build_muri_l(muri);
    AntMan => crate::antman::DESCRIPTOR, crate::antman::build();
    ThemisMuri => crate::themis::muri::DESCRIPTOR, crate::themis::muri::build();
    Themis [themis: crate::themis::ThemisConfig] => crate::themis::lease::DESCRIPTOR, crate::themis::lease::build(themis);
    Gandiva => crate::gavel::gandiva::DESCRIPTOR, crate::gavel::gandiva::build(rounds, pair_speeds);
    Horus [horus: crate::horus::HorusConfig] => crate::horus::DESCRIPTOR, crate::horus::build(horus, pair_speeds);
    Qssf [qssf: crate::qssf::QssfParams] => crate::qssf::DESCRIPTOR, crate::qssf::build(qssf);
    External [external: Option<crate::external::ExternalConfig>] => crate::external::DESCRIPTOR, crate::external::build(external);
    Vtc [vtc: crate::vtc::VtcConfig] => crate::vtc::DESCRIPTOR, crate::vtc::build(vtc, tenant_weights, fairshare);
    PolluxTiresias => crate::tiresias::pollux_tiresias::DESCRIPTOR, crate::tiresias::pollux_tiresias::build();
    Optimus => crate::elastic::optimus::DESCRIPTOR, crate::elastic::optimus::build();
    Afs => crate::elastic::afs::DESCRIPTOR, crate::elastic::afs::build();
    MaxMinFairness => crate::gavel::objectives::MAX_MIN_FAIRNESS, crate::gavel::objectives::build_max_min_fairness(rounds);
    MaxMinFairnessHet => crate::gavel::objectives::MAX_MIN_FAIRNESS_HET, crate::gavel::objectives::build_max_min_fairness_het(rounds);
    FinishTimeFairness => crate::gavel::objectives::FINISH_TIME_FAIRNESS, crate::gavel::objectives::build_finish_time_fairness(rounds);
    FinishTimeFairnessHet => crate::gavel::objectives::FINISH_TIME_FAIRNESS_HET, crate::gavel::objectives::build_finish_time_fairness_het(rounds);
    MinMakespan => crate::gavel::objectives::MIN_MAKESPAN, crate::gavel::objectives::build_min_makespan(rounds);
    MinMakespanHet => crate::gavel::objectives::MIN_MAKESPAN_HET, crate::gavel::objectives::build_min_makespan_het(rounds);
    FifoHet => crate::gavel::objectives::FIFO_HET, crate::gavel::objectives::build_fifo_het(rounds);
    MaxThroughput => crate::gavel::objectives::MAX_THROUGHPUT, crate::gavel::objectives::build_max_throughput(rounds);
    MinCost => crate::gavel::objectives::MIN_COST, crate::gavel::objectives::build_min_cost(rounds);
    Hierarchical [hierarchical: crate::gavel::objectives::HierarchicalParams] => crate::gavel::objectives::HIERARCHICAL, crate::gavel::objectives::build_hierarchical(rounds, tenant_weights, hierarchical, fairshare);
    MaxMinFairnessPacked => crate::gavel::objectives::MAX_MIN_FAIRNESS_PACKED, crate::gavel::objectives::build_max_min_fairness_packed(rounds, pair_speeds);
}

/// Every policy: the table's, then Synergy's (order-major).
const fn all_policies() -> [PolicyKind; TABLE.len() + 16] {
    let mut all = [PolicyKind::Fifo; TABLE.len() + 16];
    let mut i = 0;
    while i < TABLE.len() {
        all[i] = TABLE[i];
        i += 1;
    }
    let mut o = 0;
    while o < 4 {
        let mut m = 0;
        while m < 4 {
            all[TABLE.len() + o * 4 + m] =
                PolicyKind::Synergy(SynergyOrder::ALL[o], Mechanism::ALL[m]);
            m += 1;
        }
        o += 1;
    }
    all
}

/// What [`build_into`] makes of the policy it built (each line's builder returns its own type).
trait Sink {
    /// What the caller gets.
    type Out;
    /// Takes the built policy.
    fn take<P: Policy + 'static>(self, policy: P) -> Self::Out;
}

/// Boxed, as every caller but the ideal mechanism takes a policy.
struct Boxed;

impl Sink for Boxed {
    type Out = Box<dyn Policy>;

    fn take<P: Policy + 'static>(self, policy: P) -> Box<dyn Policy> {
        Box::new(policy)
    }
}

/// As the type `T`, if the policy is one.
struct AsType<T>(PhantomData<T>);

impl<T: 'static> Sink for AsType<T> {
    type Out = Option<T>;

    fn take<P: Policy + 'static>(self, policy: P) -> Option<T> {
        (Box::new(policy) as Box<dyn Any>)
            .downcast::<T>()
            .ok()
            .map(|policy| *policy)
    }
}

/// Builds a policy.
pub fn build(kind: PolicyKind, config: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
    build_into(kind, config, Boxed)
}

/// Builds a Gavel policy as its concrete type (for the ideal mechanism), or `None` for a kind
/// that is not one of Gavel's allocation policies.
pub fn build_gavel(kind: PolicyKind, config: &PolicyConfig) -> Result<Option<Gavel>, PolicyError> {
    if !kind.is_gavel() {
        return Ok(None);
    }
    build_into(kind, config, AsType(PhantomData))
}

impl PolicyConfig {
    /// The scenario table (`policy.<key>`) a field read by builders ([`PolicyKind::reads`]) is
    /// set in, or `None` for what the caller supplies.
    pub fn scenario_key(field: &'static str) -> Option<&'static str> {
        match field {
            "placement" | "keep_placements" | "gittins_prior_gpu_s" | "pair_speeds" => None,
            "rounds" => Some("gavel"),
            table => Some(table),
        }
    }
}

impl Serialize for PolicyKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for PolicyKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        PolicyKind::parse(&name).map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        PolicyKind::parse(name)
    }
}

impl PolicyKind {
    /// All policies: the registry's, then Synergy's.
    pub const ALL: [PolicyKind; TABLE.len() + 16] = all_policies();

    /// Whether this is one of Synergy's resource-sensitive policies.
    pub fn is_synergy(self) -> bool {
        self.descriptor().family == Family::Synergy
    }

    /// Whether the policy uses measured speeds of job pairs sharing GPUs (a throughput table
    /// with pair entries): `max-min-fairness-packed` needs them; `gandiva` and `horus` use them
    /// where the scenario has them.
    pub fn needs_pair_speeds(self) -> bool {
        self.descriptor().pair_speeds
    }

    /// Whether the policy decides in rounds (Gavel's and Synergy's families, Gandiva): called
    /// between rounds it would re-rank and swap jobs, so the daemon lets running jobs finish
    /// their round.
    pub fn decides_by_rounds(self) -> bool {
        self.descriptor().family != Family::Events
    }

    /// Whether this is one of Gavel's allocation policies (computed as X, realized by rounds).
    pub fn is_gavel(self) -> bool {
        self.descriptor().family == Family::GavelAllocation
    }

    /// The identifier.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// Parses an identifier or one of the aliases its descriptor lists (`tiresias-l` for `las`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .or_else(|| {
                Self::ALL
                    .into_iter()
                    .find(|k| k.descriptor().aliases.contains(&name))
            })
    }

    /// One line on what it does and where it comes from.
    pub fn describe(self) -> &'static str {
        self.descriptor().describe
    }

    /// Parses an identifier like [`PolicyKind::from_name`]; an unknown one is refused with the
    /// closest known name where one is close (`srft`: "did you mean `srtf`?").
    pub fn parse(name: &str) -> Result<Self, String> {
        PolicyKind::from_name(name).ok_or_else(|| match closest_name(name) {
            Some(close) => format!(
                "unknown policy `{name}`; did you mean `{close}`? (`arbiter policies` lists them)"
            ),
            None => format!("unknown policy `{name}` (`arbiter policies` lists them)"),
        })
    }

    /// Whether the policy reads the tenants' weights (`arbiter tenants add --weight`): its
    /// builder is given them. Only the tenant-level ones are — `hierarchical` splits the cluster
    /// between tenants by weight, `vtc` charges each tenant's service divided by its weight.
    /// Every other policy orders jobs and ignores weights, so a "fair share" from weights means
    /// nothing under it.
    pub fn uses_tenant_weights(self) -> bool {
        self.reads().contains(&"tenant_weights")
    }

    /// Whether the policy can weigh tenants by their decayed past usage (`[policy.fairshare]`,
    /// the daemon's `fairshare = true`): the tenant-level ones.
    pub fn uses_fairshare(self) -> bool {
        self.reads().contains(&"fairshare")
    }
}

/// The known name (identifier or alias) nearest to `name` by edit distance (a swap of two
/// neighbours counts once: `srft` is one from `srtf`), if it is near enough to be a typo: at
/// most one edit per three characters, and at least one allowed.
fn closest_name(name: &str) -> Option<&'static str> {
    let typed = name.trim().to_ascii_lowercase();
    let allowed = (typed.chars().count() / 3).max(1);
    PolicyKind::ALL
        .iter()
        .map(|k| k.name())
        .chain(
            PolicyKind::ALL
                .iter()
                .flat_map(|k| k.descriptor().aliases.iter().copied()),
        )
        .map(|known| (strsim::osa_distance(&typed, known), known))
        .filter(|(d, _)| *d <= allowed)
        .min_by_key(|(d, _)| *d)
        .map(|(_, known)| known)
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gavel_family_is_what_build_gavel_builds() {
        let config = PolicyConfig {
            pair_speeds: Some(Arc::new(PairSpeeds::default())),
            ..PolicyConfig::default()
        };
        for kind in PolicyKind::ALL {
            let built = build_gavel(kind, &config).expect("builds").is_some();
            assert_eq!(kind.is_gavel(), built, "{kind}");
            assert!(!kind.is_gavel() || kind.decides_by_rounds(), "{kind}");
            assert_eq!(
                kind.is_synergy(),
                matches!(kind, PolicyKind::Synergy(..)),
                "{kind}"
            );
        }
    }

    #[test]
    fn names_round_trip_and_aliases_resolve() {
        for kind in PolicyKind::ALL {
            assert_eq!(PolicyKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(PolicyKind::from_name("tiresias-l"), Some(PolicyKind::Las));
        assert_eq!(PolicyKind::from_name("nope"), None);
    }

    #[test]
    fn a_mistyped_policy_name_gets_the_closest_one_suggested() {
        let refused = |name: &str| name.parse::<PolicyKind>().expect_err("unknown");
        assert!(
            refused("srft").contains("did you mean `srtf`?"),
            "{}",
            refused("srft")
        );
        assert!(refused("SRTF").contains("did you mean `srtf`?"));
        assert!(refused("max-min-fairnes").contains("did you mean `max-min-fairness`?"));
        assert!(
            refused("tiresias").contains("did you mean `tiresias-l`?")
                || refused("tiresias").contains("did you mean `tiresias-g`?")
        );
        // Nothing close: no guess.
        assert!(
            !refused("round-robin").contains("did you mean"),
            "{}",
            refused("round-robin")
        );
        assert!(refused("round-robin").contains("`arbiter policies` lists them"));
        // Scenario files and JSON parse through the same message.
        let json = serde_json::from_str::<PolicyKind>("\"srft\"")
            .expect_err("unknown")
            .to_string();
        assert!(json.contains("did you mean `srtf`?"), "{json}");
        // Every alias really is one.
        let aliases: Vec<&str> = PolicyKind::ALL
            .iter()
            .flat_map(|k| k.descriptor().aliases.iter().copied())
            .collect();
        assert_eq!(aliases.len(), 6);
        for alias in aliases {
            assert!(
                PolicyKind::ALL.iter().all(|k| k.name() != alias),
                "{alias} is also a name"
            );
            assert_eq!(
                PolicyKind::from_name(alias).map(|k| k.descriptor().aliases.contains(&alias)),
                Some(true),
                "{alias}"
            );
        }
        assert_eq!(PolicyKind::from_name("yarn-cs"), Some(PolicyKind::Fifo));
    }

    /// The decisions of `kind` over a few rounds of two tenants' jobs competing for too few
    /// GPUs, with tenant `b` weighing `b_weight` (`a` weighs 1); `None` where the policy needs
    /// more configuration than the defaults.
    fn decisions_with_weight(
        kind: PolicyKind,
        b_weight: f64,
    ) -> Option<Vec<arbiter_model::Decision>> {
        use crate::test_support::{active, cluster, decide, spec_with};
        let weights: TenantWeights = [("a".to_string(), 1.0), ("b".to_string(), b_weight)].into();
        let config = PolicyConfig {
            tenant_weights: weights,
            ..PolicyConfig::default()
        };
        let mut policy = build(kind, &config).ok()?;
        let cluster = cluster(1, 4);
        let specs: Vec<arbiter_model::JobSpec> = (0..8)
            .map(|i| {
                let mut s = spec_with(i, u64::from(i % 4), 1, 100_000.0);
                s.tenant = if i < 4 { "a" } else { "b" }.into();
                s
            })
            .collect();
        let live: Vec<u32> = (0..8).collect();
        let mut last = arbiter_model::Decision::default();
        let mut out = Vec::new();
        for round in 1..=4u64 {
            let jobs = active(&specs, &live, &last);
            last = decide(
                policy.as_mut(),
                &cluster,
                &jobs,
                &specs,
                arbiter_model::SimTime::from_ms(round * 600_000),
            );
            out.push(last.clone());
        }
        Some(out)
    }

    #[test]
    fn only_the_policies_that_say_so_decide_by_tenant_weights() {
        let using: Vec<&str> = PolicyKind::ALL
            .iter()
            .filter(|k| k.uses_tenant_weights())
            .map(|k| k.name())
            .collect();
        assert_eq!(using, ["vtc", "hierarchical"]);
        // By what they do: the same jobs with tenant `b` weighing 1 or 9. (The dashboard shows
        // fair shares from weights only under these.)
        let mut checked = 0;
        for kind in PolicyKind::ALL {
            let (Some(even), Some(heavy)) = (
                decisions_with_weight(kind, 1.0),
                decisions_with_weight(kind, 9.0),
            ) else {
                continue;
            };
            assert_eq!(
                even != heavy,
                kind.uses_tenant_weights(),
                "{kind}: decides by weight = {}",
                even != heavy
            );
            checked += 1;
        }
        assert!(
            checked >= 40,
            "only {checked} policies built with the defaults"
        );
    }

    #[test]
    fn every_descriptor_says_where_it_comes_from_and_what_it_does() {
        for kind in PolicyKind::ALL {
            let d = kind.descriptor();
            assert!(
                !d.paper.is_empty() && !d.detail.is_empty(),
                "{kind}: paper and detail"
            );
            assert_eq!(
                d.pair_speeds,
                kind.reads().contains(&"pair_speeds"),
                "{kind}: says it uses pair speeds iff its builder gets them"
            );
        }
    }

    #[test]
    fn every_field_read_is_a_scenario_table_or_supplied_by_the_caller() {
        let Ok(serde_json::Value::Object(tables)) = serde_json::to_value(PolicyConfig::default())
        else {
            panic!("PolicyConfig serializes to a table")
        };
        let read: std::collections::BTreeSet<&str> = PolicyKind::ALL
            .iter()
            .flat_map(|k| k.reads().iter().copied())
            .collect();
        for field in &read {
            match PolicyConfig::scenario_key(field) {
                Some(key) => assert!(
                    tables.contains_key(key),
                    "{field}: `policy.{key}` is not a scenario table"
                ),
                None => assert!(!tables.contains_key(*field), "{field} is a scenario table"),
            }
        }
        // And no table is read by nobody.
        let keys: std::collections::BTreeSet<&str> = read
            .iter()
            .filter_map(|f| PolicyConfig::scenario_key(f))
            .collect();
        assert_eq!(keys, tables.keys().map(String::as_str).collect());
    }

    #[test]
    fn gittins_without_prior_is_refused() {
        assert!(build(PolicyKind::Gittins, &PolicyConfig::default()).is_err());
    }
}
