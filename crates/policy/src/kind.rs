//! Policies by name: the closed set of identifiers accepted in scenarios and on the command line,
//! and [`build`], which turns a name plus configuration into a policy object.

use crate::classic::backfill::FifoBackfill;
use crate::gavel::allocation::InnerPolicy;
use crate::gavel::packing::PairSpeeds;
use crate::gavel::{Gavel, Objective, RoundOptions, TenantWeights};
use crate::tiresias::gittins::{Gittins, GittinsPrior};
use crate::mechanisms::greedy::GreedyOptions;
use crate::horus::HorusConfig;
use crate::tiresias::dlas::DlasGpu;
use crate::muri::{Muri, MuriConfig, MuriRanking};
use crate::tiresias::las::{Las, LasConfig};
use crate::classic::ordered::{Order, OrderedPolicy};
use crate::mechanisms::placement::PlacementStrategy;
use crate::qssf::{Qssf, DEFAULT_HISTORY};
use crate::themis::ThemisConfig;
use crate::synergy::{Mechanism, Synergy, SynergyOrder};
use crate::descriptor::{DaemonSupport, Descriptor, Family};
use crate::{Policy, PolicyError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The registry: one line per policy (its variant, descriptor and how it is built) generates
/// [`PolicyKind`], [`PolicyKind::ALL`], [`PolicyKind::descriptor`] and [`build`], so a policy left
/// out of any of them cannot compile. Synergy's sixteen (order × mechanism) are the one variant
/// with fields, added by hand below the table. `$kind`, `$config`, `$greedy` and `$ordered` name
/// what a line's build expression may use: the policy, its configuration, greedy placement
/// options and a builder of ordered policies.
macro_rules! policies {
    (($kind:ident, $config:ident, $greedy:ident, $ordered:ident) $( $(#[$attr:meta])* $variant:ident => $descriptor:expr, $build:expr; )*) => {
        /// Every policy Arbiter implements.
        ///
        /// Serialized and parsed by [`PolicyKind::name`] (`fifo`, `max-min-fairness-het`, `srtf+tune`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum PolicyKind {
            $( $(#[$attr])* $variant, )*
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
                    PolicyKind::Synergy(order, mechanism) => synergy_descriptor(order, mechanism),
                }
            }
        }

        /// Builds a policy.
        pub fn build($kind: PolicyKind, $config: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
            let $greedy = GreedyOptions { preemptive: false, head_of_line_blocking: false, keep_placements: $config.keep_placements, strategy: $config.placement };
            let $ordered = |order| Box::new(OrderedPolicy::new(order, $config.placement, $config.keep_placements)) as Box<dyn Policy>;
            Ok(match $kind {
                $( PolicyKind::$variant => $build, )*
                PolicyKind::Synergy(order, mechanism) => Box::new(Synergy::new($kind.name(), order, mechanism)),
            })
        }
    };
}

policies! {
    (kind, config, greedy, ordered)
    /// Strict FIFO with head-of-line blocking (YARN-CS). Non-preemptive.
    Fifo => Descriptor::new("fifo", Family::Events, "strict FIFO, head-of-line blocking (YARN-CS, as in the Philly and Tiresias papers)"),
        ordered(Order::Fifo);
    /// FIFO with EASY backfilling against the head job's reservation. Non-preemptive.
    FifoBackfill => Descriptor::new("fifo-backfill", Family::Events, "FIFO with EASY backfilling (Lifka'95; Slurm's backfill)"),
        Box::new(FifoBackfill::new(config.placement));
    /// Shortest job first by trace duration (oracle). Non-preemptive.
    Sjf => Descriptor::new("sjf", Family::Events, "shortest job first by trace duration, non-preemptive (oracle baseline in Helios)"),
        ordered(Order::ShortestJob);
    /// Shortest remaining time first (oracle). Preemptive.
    Srtf => Descriptor::new("srtf", Family::Events, "shortest remaining time first, preemptive (oracle baseline in Tiresias, Muri, Helios)"),
        ordered(Order::ShortestRemainingTime);
    /// Shortest remaining service (time × GPUs) first (oracle). Preemptive.
    Srsf => Descriptor::new("srsf", Family::Events, "shortest remaining service (time x GPUs) first, preemptive (Tiresias, Muri)"),
        ordered(Order::ShortestRemainingService);
    /// Earliest deadline first (jobs without a deadline last). Preemptive.
    Edf => Descriptor::new("edf", Family::Events, "earliest deadline first, jobs without a deadline after (submission order); preemptive (baseline in Chronus, SoCC'21)"),
        ordered(Order::EarliestDeadline);
    /// Chronus: lease-based deadline guarantees with admission control (SoCC'21).
    Chronus => Descriptor::new("chronus", Family::Events, "Chronus: deadlines admitted only if leases of their GPUs can be reserved before them (guaranteed), refused ones and best effort on spare GPUs by least remaining GPU time (SoCC'21)"),
        Box::new(crate::chronus::Chronus::new(config.chronus, greedy)?);
    /// Tiresias-L: discretized 2D least-attained-service queues. Preemptive.
    Las => Descriptor::new("las", Family::Events, "Tiresias-L: discretized 2D least-attained-service (Gu et al., NSDI'19)"),
        Box::new(Las::new(config.las.clone(), greedy)?);
    /// Tiresias-L as Tiresias' and Muri's simulators run it (their queue-list order, counting
    /// placement, demotion timers). Preemptive.
    DlasGpu => Descriptor::new("dlas-gpu", Family::Events, "Tiresias-L as the Tiresias/Muri simulators run it (queue-list order, GPU counting; Muri SIGCOMM'22)"),
        Box::new(DlasGpu::new(&config.las)?);
    /// Tiresias-G: discretized 2D Gittins index from a job-size prior. Preemptive.
    Gittins => Descriptor::new("gittins", Family::Events, "Tiresias-G: discretized 2D Gittins index from a GPU-time prior (NSDI'19)"),
        {
                let prior = GittinsPrior::new(config.gittins_prior_gpu_s.clone())?;
                let limits = config.las.queue_limits_gpu_s.iter().copied().take(config.las.queues.saturating_sub(1)).collect();
                Box::new(Gittins::new(prior, limits, config.gittins.delta_gpu_s, greedy)?)
    };
    /// Muri-S: interleaves jobs with different resource needs, least remaining service first.
    MuriS => Descriptor::new("muri-s", Family::Events, "Muri-S: interleave up to 4 jobs with different resource needs per GPU set, least remaining service first (SIGCOMM'22)"),
        Box::new(Muri::new(MuriRanking::RemainingService, config.muri)?);
    /// Muri-L: the same, least attained service first (durations unknown).
    MuriL => Descriptor::new("muri-l", Family::Events, "Muri-L: Muri's interleaving, least attained service first, durations unknown (SIGCOMM'22)"),
        Box::new(Muri::new(MuriRanking::AttainedService, config.muri)?);
    /// AntMan: non-preemptive; resource-guaranteed jobs get GPUs of their own (reserving partial
    /// gangs while they wait), opportunistic jobs soak up lightly used GPUs anywhere.
    AntMan => Descriptor::new("antman", Family::Events, "AntMan: guaranteed jobs on GPUs of their own, opportunistic jobs on lightly used GPUs, no preemption (OSDI'20, as Muri models it)").daemon(DaemonSupport::Refused("it runs opportunistic jobs on GPUs that running jobs hold, which the daemon does not do; use any other policy and `arbiter submit --opportunistic` (such jobs run on idle GPUs and are stopped when a job needs them)")),
        crate::antman::build();
    /// Themis as Muri's simulator runs it: a finish-time-fairness allocation recomputed at every
    /// event, ranked by allocation over time received.
    ThemisMuri => Descriptor::new("themis-muri", Family::Events, "Themis as Muri's simulator runs it: finish-time-fairness allocation at every event, ranked by share over service (SIGCOMM'22)").fairness_columns(),
        crate::themis::build_muri();
    /// Themis' own mechanism: leases, finish-time fairness ρ, GPUs offered to the `1 − f`
    /// fraction of jobs with the worst ρ, partial-allocation auction.
    Themis => Descriptor::new("themis", Family::Events, "Themis: leases, finish-time fairness rho, GPUs auctioned to the 1-f worst-off jobs (NSDI'20)").fairness_columns(),
        crate::themis::build_lease(config.themis, config.placement)?;
    /// Gandiva as Gavel implements it: time-slicing in rounds, random pairing with
    /// introspection when over-subscribed, migration to defragment.
    Gandiva => Descriptor::new("gandiva", Family::OtherRounds, "Gandiva: time-slicing, random pairing kept while it pays (introspection), migration to defragment (OSDI'18, as Gavel runs it)").pair_speeds(),
        Box::new(crate::gavel::gandiva::Gandiva::new(config.rounds, config.pair_speeds.clone())?);
    /// Horus: interference-aware co-location of jobs on GPUs in use, only where predicted
    /// utilization and memory stay under limits; look-ahead over the queue. Non-preemptive.
    Horus => Descriptor::new("horus", Family::Events, "Horus: co-locate on GPUs in use only under predicted utilization/memory limits, cheapest GPU by its cost, look-ahead k, no preemption (TPDS'21)").pair_speeds(),
        Box::new(crate::horus::Horus::new(config.horus, config.placement, config.pair_speeds.clone())?);
    /// Helios QSSF: shortest predicted GPU time first, predicted from history. Non-preemptive.
    Qssf => Descriptor::new("qssf", Family::Events, "Helios QSSF: shortest predicted GPU time first, learned from history (SC'21)"),
        Box::new(Qssf::new(greedy, config.qssf.history));
    /// A program outside Rust orders the jobs (JSON lines over a pipe; learned policies such as
    /// Decima): see [`crate::external`].
    External => Descriptor::new("external", Family::Events, "an external program orders the jobs: JSON lines over a pipe (policy.external.command, --policy-cmd), for learned policies such as Decima (SIGCOMM'19)"),
        {
                let agent = config.external.as_ref().ok_or_else(|| PolicyError::Config("policy `external` needs the agent's command ([policy.external] command = \"...\"; arbiter simulate --policy-cmd)".into()))?;
                Box::new(crate::external::ExternalPolicy::spawn(&agent.command, agent.timeout, greedy)?)
    };
    /// VTC: tenants served by the lowest counter of weighted service received over time, no
    /// banked credit; a job order inside each tenant. Preemptive.
    Vtc => Descriptor::new("vtc", Family::Events, "VTC: the backlogged tenant with the least weighted service received over time first, no banked credit; FIFO (or policy.vtc.inner) inside a tenant (OSDI'24)"),
        Box::new(crate::vtc::Vtc::new(config.vtc, config.tenant_weights.clone(), greedy)?);
    /// Tiresias as Pollux's simulator runs it (two queues, 16 GPU-hours, most-free-node
    /// placement). Preemptive.
    PolluxTiresias => Descriptor::new("pollux-tiresias", Family::OtherRounds, "Tiresias as Pollux's simulator runs it: 2 queues at 16 GPU-hours, FIFO inside, requested GPUs, most-free-node placement (OSDI'21 artifact)"),
        Box::new(crate::tiresias::pollux_tiresias::PolluxTiresias::new(crate::tiresias::pollux_tiresias::QUEUE_THRESHOLD_GPU_S)?);
    /// Optimus+Oracle as Pollux's simulator runs it: elastic GPU counts by marginal gain.
    Optimus => Descriptor::new("optimus", Family::OtherRounds, "Optimus+Oracle as Pollux's simulator runs it: one GPU each, then GPUs by step-time gain x iterations left; elastic jobs resized (OSDI'21 artifact)").elastic(),
        Box::new(crate::elastic::optimus::Optimus);
    /// AFS-L: elastic sharing by relative throughput gain (NSDI'21).
    Afs => Descriptor::new("afs", Family::OtherRounds, "AFS-L: GPUs one at a time, to the shorter job unless the longer one's relative throughput gain is larger; elastic jobs resized (Hwang et al., NSDI'21)").elastic(),
        Box::new(crate::elastic::afs::Afs::default());
    /// Gavel max-min fairness (LAS), heterogeneity-agnostic, realized by rounds.
    MaxMinFairness => Descriptor::new("max-min-fairness", Family::GavelAllocation, "Gavel LAS: max-min fair time shares, heterogeneity-agnostic, in rounds (OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Gavel max-min fairness over normalized throughputs (heterogeneity-aware LAS), by rounds.
    MaxMinFairnessHet => Descriptor::new("max-min-fairness-het", Family::GavelAllocation, "Gavel LAS-het: max-min fair normalized throughput over GPU types, in rounds (OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Themis' finish-time fairness as a Gavel allocation, heterogeneity-agnostic.
    FinishTimeFairness => Descriptor::new("finish-time-fairness", Family::GavelAllocation, "Themis finish-time fairness (NSDI'20) as a Gavel allocation, agnostic of GPU types").fairness_columns(),
        gavel_policy(kind, config)?;
    /// Finish-time fairness over real per-type throughputs.
    FinishTimeFairnessHet => Descriptor::new("finish-time-fairness-het", Family::GavelAllocation, "finish-time fairness over per-type throughputs (Gavel OSDI'20)").fairness_columns(),
        gavel_policy(kind, config)?;
    /// Minimum makespan as a Gavel allocation, heterogeneity-agnostic.
    MinMakespan => Descriptor::new("min-makespan", Family::GavelAllocation, "minimum makespan as a Gavel allocation, agnostic of GPU types"),
        gavel_policy(kind, config)?;
    /// Minimum makespan over real per-type throughputs.
    MinMakespanHet => Descriptor::new("min-makespan-het", Family::GavelAllocation, "minimum makespan over per-type throughputs (Gavel OSDI'20)"),
        gavel_policy(kind, config)?;
    /// FIFO with whole GPUs on each job's fastest free type, realized by Gavel's rounds.
    FifoHet => Descriptor::new("fifo-het", Family::GavelAllocation, "FIFO, each job on its fastest type with room, in Gavel's rounds (OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Maximum total throughput over per-type throughputs (Gavel).
    MaxThroughput => Descriptor::new("max-throughput", Family::GavelAllocation, "maximum total throughput over GPU types (Gavel OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Most throughput per dollar, meeting job SLOs where possible (Gavel).
    MinCost => Descriptor::new("min-cost", Family::GavelAllocation, "most throughput per dollar (GPU-type prices), meeting SLOs where possible (Gavel OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Weighted fairness across tenants, then fairness among each tenant's jobs (Gavel).
    Hierarchical => Descriptor::new("hierarchical", Family::GavelAllocation, "weighted max-min fairness across tenants (water-filling), then among their jobs (Gavel OSDI'20)"),
        gavel_policy(kind, config)?;
    /// Heterogeneity-aware max-min fairness with space sharing: pairs of jobs may share GPUs
    /// (Gavel).
    MaxMinFairnessPacked => Descriptor::new("max-min-fairness-packed", Family::GavelAllocation, "LAS-het with space sharing: pairs of jobs share GPUs at measured co-located speeds (Gavel OSDI'20)").pair_speeds().daemon(DaemonSupport::NeedsColocation),
        gavel_policy(kind, config)?;
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
            all[TABLE.len() + o * 4 + m] = PolicyKind::Synergy(SynergyOrder::ALL[o], Mechanism::ALL[m]);
            m += 1;
        }
        o += 1;
    }
    all
}

/// Synergy's descriptors, by mechanism.
fn synergy_descriptor(order: SynergyOrder, mechanism: Mechanism) -> Descriptor {
    match mechanism {
        mechanism @ Mechanism::Proportional => Descriptor::new(SYNERGY_NAMES[order as usize][mechanism as usize], Family::Synergy, "Synergy baseline: GPU-proportional CPU and memory, in 300 s rounds (OSDI'22)"),
        mechanism @ Mechanism::Greedy => Descriptor::new(SYNERGY_NAMES[order as usize][mechanism as usize], Family::Synergy, "Synergy-GREEDY: each job's ideal CPU/memory vector or nothing this round (OSDI'22)"),
        mechanism @ Mechanism::Tune => Descriptor::new(SYNERGY_NAMES[order as usize][mechanism as usize], Family::Synergy, "Synergy-TUNE: ideal vector, else proportional, else reclaim from over-provisioned jobs (OSDI'22)"),
        mechanism @ Mechanism::Opt => Descriptor::new(SYNERGY_NAMES[order as usize][mechanism as usize], Family::Synergy, "Synergy-OPT: per-server optimal CPU/memory split over the profile grid (OSDI'22)"),
    }
}

/// One of Gavel's allocation policies, built.
fn gavel_policy(kind: PolicyKind, config: &PolicyConfig) -> Result<Box<dyn Policy>, PolicyError> {
    match build_gavel(kind, config)? {
        Some(policy) => Ok(Box::new(policy)),
        None => Err(PolicyError::Invariant(format!("{kind} has no builder"))),
    }
}


/// `order+mechanism` names of the Synergy policies, indexed like [`SynergyOrder::ALL`] ×
/// [`Mechanism::ALL`].
const SYNERGY_NAMES: [[&str; 4]; 4] = [
    ["fifo+proportional", "fifo+greedy", "fifo+tune", "fifo+opt"],
    ["srtf+proportional", "srtf+greedy", "srtf+tune", "srtf+opt"],
    ["las+proportional", "las+greedy", "las+tune", "las+opt"],
    ["ftf+proportional", "ftf+greedy", "ftf+tune", "ftf+opt"],
];

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

    /// Parses an identifier; `tiresias-l`/`tiresias-g` are accepted as aliases.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "tiresias-l" => Some(PolicyKind::Las),
            "tiresias-g" => Some(PolicyKind::Gittins),
            "ftf" => Some(PolicyKind::FinishTimeFairness),
            "ftf-het" => Some(PolicyKind::FinishTimeFairnessHet),
            "las-het" => Some(PolicyKind::MaxMinFairnessHet),
            "yarn-cs" => Some(PolicyKind::Fifo),
            other => Self::ALL.into_iter().find(|k| k.name() == other),
        }
    }

    /// One line on what it does and where it comes from.
    pub fn describe(self) -> &'static str {
        self.descriptor().describe
    }

    /// Parses an identifier like [`PolicyKind::from_name`]; an unknown one is refused with the
    /// closest known name where one is close (`srft`: "did you mean `srtf`?").
    pub fn parse(name: &str) -> Result<Self, String> {
        PolicyKind::from_name(name).ok_or_else(|| match closest_name(name) {
            Some(close) => format!("unknown policy `{name}`; did you mean `{close}`? (`arbiter policies` lists them)"),
            None => format!("unknown policy `{name}` (`arbiter policies` lists them)"),
        })
    }

    /// Whether the policy reads the tenants' weights (`arbiter tenants add --weight`): only
    /// the tenant-level ones do — `hierarchical` splits the cluster between tenants by weight,
    /// `vtc` charges each tenant's service divided by its weight. Every other policy orders
    /// jobs and ignores weights, so a "fair share" from weights means nothing under it.
    pub fn uses_tenant_weights(self) -> bool {
        matches!(self, PolicyKind::Hierarchical | PolicyKind::Vtc)
    }
}

/// Aliases [`PolicyKind::from_name`] accepts beside the identifiers.
const ALIASES: [&str; 6] = ["tiresias-l", "tiresias-g", "ftf", "ftf-het", "las-het", "yarn-cs"];

/// The known name (identifier or alias) nearest to `name` by edit distance (a swap of two
/// neighbours counts once: `srft` is one from `srtf`), if it is near enough to be a typo: at
/// most one edit per three characters, and at least one allowed.
fn closest_name(name: &str) -> Option<&'static str> {
    let typed = name.trim().to_ascii_lowercase();
    let allowed = (typed.chars().count() / 3).max(1);
    PolicyKind::ALL
        .iter()
        .map(|k| k.name())
        .chain(ALIASES)
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

/// Everything the policies can be configured with: one table per policy family, each that
/// family's own parameters with their defaults (a scenario's `[policy.<family>]`; the daemon
/// builds its policies from the same defaults), plus what the caller supplies at run time
/// (placement, the Gittins prior's samples, measured pair speeds: not scenario keys).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Placement strategy (the scenario's `[placement]`).
    #[serde(skip)]
    pub placement: PlacementStrategy,
    /// Preemptive policies keep a continuing job's GPUs when free (true) or re-place every job
    /// from an empty cluster at each scheduling point (false, as Tiresias' and Muri's simulators).
    #[serde(skip)]
    pub keep_placements: bool,
    /// Tenant weights for `hierarchical` and `vtc` (unlisted tenants weigh 1).
    pub tenant_weights: TenantWeights,
    /// Tiresias-L / -G queues (`[policy.las]`).
    pub las: LasConfig,
    /// Tiresias-G (`[policy.gittins]`).
    pub gittins: GittinsParams,
    /// Gittins prior samples in GPU-seconds, read from `gittins.prior` (required for `gittins`).
    #[serde(skip)]
    pub gittins_prior_gpu_s: Vec<f64>,
    /// Helios' QSSF (`[policy.qssf]`).
    pub qssf: QssfParams,
    /// Gavel's round mechanism (`[policy.gavel]`).
    #[serde(rename = "gavel")]
    pub rounds: RoundOptions,
    /// Gavel's `hierarchical` (`[policy.hierarchical]`).
    pub hierarchical: HierarchicalParams,
    /// Co-location speeds for space sharing (required by `max-min-fairness-packed`).
    #[serde(skip)]
    pub pair_speeds: Option<Arc<PairSpeeds>>,
    /// Muri-S / Muri-L (`[policy.muri]`).
    pub muri: MuriConfig,
    /// Themis (`[policy.themis]`).
    pub themis: ThemisConfig,
    /// Horus (`[policy.horus]`).
    pub horus: HorusConfig,
    /// VTC (`[policy.vtc]`).
    pub vtc: crate::vtc::VtcConfig,
    /// `external`: the agent's command and how long one answer may take (`[policy.external]`).
    pub external: Option<crate::external::ExternalConfig>,
    /// Chronus (`[policy.chronus]`).
    pub chronus: crate::chronus::ChronusConfig,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            placement: PlacementStrategy::Consolidated,
            keep_placements: true,
            tenant_weights: TenantWeights::new(),
            las: LasConfig::default(),
            gittins: GittinsParams::default(),
            gittins_prior_gpu_s: Vec::new(),
            qssf: QssfParams::default(),
            rounds: RoundOptions::default(),
            hierarchical: HierarchicalParams::default(),
            pair_speeds: None,
            muri: MuriConfig::default(),
            themis: ThemisConfig::default(),
            horus: HorusConfig::default(),
            vtc: crate::vtc::VtcConfig::default(),
            external: None,
            chronus: crate::chronus::ChronusConfig::default(),
        }
    }
}

/// Tiresias-G's parameters (`[policy.gittins]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GittinsParams {
    /// CSV with a `duration` column of job sizes in GPU-seconds: the prior the index is
    /// computed from (read by the caller into [`PolicyConfig::gittins_prior_gpu_s`]).
    pub prior: Option<std::path::PathBuf>,
    /// The quantum Δ, GPU-seconds.
    pub delta_gpu_s: f64,
}

impl Default for GittinsParams {
    fn default() -> Self {
        GittinsParams { prior: None, delta_gpu_s: 3250.0 }
    }
}

/// Helios QSSF's parameters (`[policy.qssf]`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QssfParams {
    /// Recent jobs kept per history key.
    pub history: usize,
}

impl Default for QssfParams {
    fn default() -> Self {
        QssfParams { history: DEFAULT_HISTORY }
    }
}

/// Gavel's `hierarchical` parameters (`[policy.hierarchical]`; the weights are
/// `policy.tenant_weights`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HierarchicalParams {
    /// How a tenant's share is split among its jobs: `fairness` or `fifo`.
    pub inner: InnerPolicy,
}

/// Builds a Gavel policy as its concrete type (for the ideal mechanism), or `None` for a kind
/// that is not one of Gavel's allocation policies.
pub fn build_gavel(kind: PolicyKind, config: &PolicyConfig) -> Result<Option<Gavel>, PolicyError> {
    let (objective, aware) = match kind {
        PolicyKind::MaxMinFairness => (Objective::MaxMinFairness, false),
        PolicyKind::MaxMinFairnessHet => (Objective::MaxMinFairness, true),
        PolicyKind::FinishTimeFairness => (Objective::FinishTimeFairness, false),
        PolicyKind::FinishTimeFairnessHet => (Objective::FinishTimeFairness, true),
        PolicyKind::MinMakespan => (Objective::MinMakespan, false),
        PolicyKind::MinMakespanHet => (Objective::MinMakespan, true),
        PolicyKind::FifoHet => (Objective::Fifo, true),
        PolicyKind::MaxThroughput => (Objective::MaxThroughput, true),
        PolicyKind::MinCost => (Objective::MinCost, true),
        PolicyKind::Hierarchical => (Objective::Hierarchical, true),
        PolicyKind::MaxMinFairnessPacked => (Objective::MaxMinFairnessPacked, true),
        _ => return Ok(None),
    };
    let name = kind.name();
    let mut gavel = Gavel::new(name, objective, aware, config.rounds)?
        .with_tenant_weights(config.tenant_weights.clone())
        .with_inner_policy(config.hierarchical.inner);
    if objective == Objective::MaxMinFairnessPacked {
        let pairs = config.pair_speeds.clone().ok_or_else(|| {
            PolicyError::Config(format!("{name} needs co-location speeds (a scenario's `throughputs` table with pair entries)"))
        })?;
        gavel = gavel.with_pair_speeds(pairs);
    }
    Ok(Some(gavel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gavel_family_is_what_build_gavel_builds() {
        let config = PolicyConfig { pair_speeds: Some(Arc::new(PairSpeeds::default())), ..PolicyConfig::default() };
        for kind in PolicyKind::ALL {
            let built = build_gavel(kind, &config).expect("builds").is_some();
            assert_eq!(kind.is_gavel(), built, "{kind}");
            assert!(!kind.is_gavel() || kind.decides_by_rounds(), "{kind}");
            assert_eq!(kind.is_synergy(), matches!(kind, PolicyKind::Synergy(..)), "{kind}");
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
        assert!(refused("srft").contains("did you mean `srtf`?"), "{}", refused("srft"));
        assert!(refused("SRTF").contains("did you mean `srtf`?"));
        assert!(refused("max-min-fairnes").contains("did you mean `max-min-fairness`?"));
        assert!(refused("tiresias").contains("did you mean `tiresias-l`?") || refused("tiresias").contains("did you mean `tiresias-g`?"));
        // Nothing close: no guess.
        assert!(!refused("round-robin").contains("did you mean"), "{}", refused("round-robin"));
        assert!(refused("round-robin").contains("`arbiter policies` lists them"));
        // Scenario files and JSON parse through the same message.
        let json = serde_json::from_str::<PolicyKind>("\"srft\"").expect_err("unknown").to_string();
        assert!(json.contains("did you mean `srtf`?"), "{json}");
        // Every alias really is one.
        assert!(ALIASES.iter().all(|a| PolicyKind::from_name(a).is_some()));
    }

    /// The decisions of `kind` over a few rounds of two tenants' jobs competing for too few
    /// GPUs, with tenant `b` weighing `b_weight` (`a` weighs 1); `None` where the policy needs
    /// more configuration than the defaults.
    fn decisions_with_weight(kind: PolicyKind, b_weight: f64) -> Option<Vec<arbiter_model::Decision>> {
        use crate::test_support::{active, cluster, decide, spec_with};
        let weights: TenantWeights = [("a".to_string(), 1.0), ("b".to_string(), b_weight)].into();
        let config = PolicyConfig { tenant_weights: weights, ..PolicyConfig::default() };
        let mut policy = build(kind, &config).ok()?;
        let cluster = cluster(1, 4);
        let specs: Vec<arbiter_model::JobSpec> = (0..8)
            .map(|i| {
                let mut s = spec_with(i, u64::from(i % 4), 1, 100_000.0);
                s.tenant = if i < 4 { "a" } else { "b" }.to_string();
                s
            })
            .collect();
        let live: Vec<u32> = (0..8).collect();
        let mut last = arbiter_model::Decision::default();
        let mut out = Vec::new();
        for round in 1..=4u64 {
            let jobs = active(&specs, &live, &last);
            last = decide(policy.as_mut(), &cluster, &jobs, &specs, arbiter_model::SimTime::from_ms(round * 600_000));
            out.push(last.clone());
        }
        Some(out)
    }

    #[test]
    fn only_the_policies_that_say_so_decide_by_tenant_weights() {
        let using: Vec<&str> = PolicyKind::ALL.iter().filter(|k| k.uses_tenant_weights()).map(|k| k.name()).collect();
        assert_eq!(using, ["vtc", "hierarchical"]);
        // By what they do: the same jobs with tenant `b` weighing 1 or 9. (The dashboard shows
        // fair shares from weights only under these.)
        let mut checked = 0;
        for kind in PolicyKind::ALL {
            let (Some(even), Some(heavy)) = (decisions_with_weight(kind, 1.0), decisions_with_weight(kind, 9.0)) else { continue };
            assert_eq!(even != heavy, kind.uses_tenant_weights(), "{kind}: decides by weight = {}", even != heavy);
            checked += 1;
        }
        assert!(checked >= 40, "only {checked} policies built with the defaults");
    }

    #[test]
    fn gittins_without_prior_is_refused() {
        assert!(build(PolicyKind::Gittins, &PolicyConfig::default()).is_err());
    }
}
