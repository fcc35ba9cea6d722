//! Gavel's allocation policies, one per objective: each one's descriptor and builder (the
//! registry's lines for them point here). All of them are a [`Gavel`] with an [`Objective`],
//! heterogeneity-agnostic or -aware, on the round mechanism of `[policy.gavel]`.

use super::allocation::InnerPolicy;
use super::{Gavel, Objective, RoundOptions};
use crate::PolicyError;
use crate::TenantWeights;
use crate::descriptor::{DaemonSupport, Descriptor, Family};
use crate::mechanisms::colocation::PairSpeeds;
use crate::mechanisms::placement::Placing;
use std::sync::Arc;

/// `max-min-fairness`.
pub const MAX_MIN_FAIRNESS: Descriptor = Descriptor::new("max-min-fairness", Family::GavelAllocation, "Gavel LAS: max-min fair time shares, heterogeneity-agnostic, in rounds (OSDI'20)")
    .paper("Gavel (OSDI'20)")
    .detail("Gavel's LAS: max-min fair time shares X[job][GPU type] from an LP, heterogeneity-agnostic, realized by Gavel's rounds");
/// `max-min-fairness-het`.
pub const MAX_MIN_FAIRNESS_HET: Descriptor = Descriptor::new("max-min-fairness-het", Family::GavelAllocation, "Gavel LAS-het: max-min fair normalized throughput over GPU types, in rounds (OSDI'20)")
    .aliases(&["las-het"])
    .paper("Gavel (OSDI'20)")
    .detail("the same over throughputs normalized by each job's equal-share throughput: puts jobs on the GPU types they gain most on");
/// `finish-time-fairness`.
pub const FINISH_TIME_FAIRNESS: Descriptor = Descriptor::new("finish-time-fairness", Family::GavelAllocation, "Themis finish-time fairness (NSDI'20) as a Gavel allocation, agnostic of GPU types").fairness_columns()
    .aliases(&["ftf"])
    .paper("Themis (NSDI'20), Gavel")
    .detail("Themis' finish-time fairness ρ = T_shared / T_isolated, minimise the largest ρ (bisection over feasibility LPs), agnostic of GPU types");
/// `finish-time-fairness-het`.
pub const FINISH_TIME_FAIRNESS_HET: Descriptor = Descriptor::new(
    "finish-time-fairness-het",
    Family::GavelAllocation,
    "finish-time fairness over per-type throughputs (Gavel OSDI'20)",
)
.fairness_columns()
.aliases(&["ftf-het"])
.paper("Themis (NSDI'20), Gavel")
.detail("`finish-time-fairness` over per-type throughputs");
/// `min-makespan`.
pub const MIN_MAKESPAN: Descriptor = Descriptor::new(
    "min-makespan",
    Family::GavelAllocation,
    "minimum makespan as a Gavel allocation, agnostic of GPU types",
)
.paper("Gavel")
.detail("finish all active jobs as early as possible (one LP), agnostic of GPU types");
/// `min-makespan-het`.
pub const MIN_MAKESPAN_HET: Descriptor = Descriptor::new(
    "min-makespan-het",
    Family::GavelAllocation,
    "minimum makespan over per-type throughputs (Gavel OSDI'20)",
)
.paper("Gavel")
.detail("`min-makespan` over per-type throughputs");
/// `fifo-het`.
pub const FIFO_HET: Descriptor = Descriptor::new("fifo-het", Family::GavelAllocation, "FIFO, each job on its fastest type with room, in Gavel's rounds (OSDI'20)")
    .paper("Gavel")
    .detail("FIFO where each job takes whole GPUs of its fastest type with room, realized by Gavel's rounds");
/// `max-throughput`.
pub const MAX_THROUGHPUT: Descriptor = Descriptor::new(
    "max-throughput",
    Family::GavelAllocation,
    "maximum total throughput over GPU types (Gavel OSDI'20)",
)
.paper("Gavel")
.detail("maximise the cluster's total steps per second");
/// `min-cost`.
pub const MIN_COST: Descriptor = Descriptor::new("min-cost", Family::GavelAllocation, "most throughput per dollar (GPU-type prices), meeting SLOs where possible (Gavel OSDI'20)")
    .paper("Gavel")
    .detail("most steps per dollar (GPU-hour prices: Gavel's GCP spot prices V100 $0.74, P100 $0.43, K80 $0.135), with every job's SLO deadline met where feasible (dropped otherwise, as Gavel does)");
/// `hierarchical`.
pub const HIERARCHICAL: Descriptor = Descriptor::new("hierarchical", Family::GavelAllocation, "weighted max-min fairness across tenants (water-filling), then among their jobs (Gavel OSDI'20)")
    .paper("Gavel")
    .detail("weighted max-min fairness across tenants (`policy.tenant_weights`), by water-filling, then max-min fairness (or FIFO: `policy.hierarchical.inner`) among each tenant's jobs; with `policy.fairshare.half_life_s`, each weight times Slurm's fair-share factor 2^(-usage share ÷ weight share) of the tenants' decayed GPU-seconds");
/// `max-min-fairness-packed`.
pub const MAX_MIN_FAIRNESS_PACKED: Descriptor = Descriptor::new("max-min-fairness-packed", Family::GavelAllocation, "LAS-het with space sharing: pairs of jobs share GPUs at measured co-located speeds (Gavel OSDI'20)").pair_speeds().daemon(DaemonSupport::NeedsColocation)
    .paper("Gavel (OSDI'20)")
    .detail("`max-min-fairness-het` with space sharing: two jobs of the same size may share GPUs, each at its measured co-located speed (pair throughputs of Gavel's table); the LP chooses how long each job runs alone and with each kind of partner");

/// `hierarchical`'s parameters (scenario table `[policy.hierarchical]`; the weights are
/// `policy.tenant_weights`).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HierarchicalParams {
    /// How a tenant's share is split among its jobs: `fairness` or `fifo`.
    pub inner: InnerPolicy,
}

/// `descriptor`'s objective on the rounds of `[policy.gavel]`; `aware`: over per-type
/// throughputs. (Gavel places by its rounds, whatever the strategy.)
fn gavel(
    descriptor: &Descriptor,
    objective: Objective,
    aware: bool,
    rounds: &RoundOptions,
) -> Result<Gavel, PolicyError> {
    Gavel::new(descriptor.name, objective, aware, *rounds)
}

/// The builders of the objectives that read nothing but `[policy.gavel]`: each one's name, its
/// descriptor, its objective and whether it sees per-type throughputs (heterogeneity-aware).
macro_rules! rounds_only {
    ($($build:ident: $descriptor:ident, $objective:ident, $aware:literal;)*) => {$(
        #[doc = concat!("Builds the policy of [`", stringify!($descriptor), "`].")]
        pub fn $build(rounds: &RoundOptions, _: Placing) -> Result<Gavel, PolicyError> {
            gavel(&$descriptor, Objective::$objective, $aware, rounds)
        }
    )*};
}

rounds_only! {
    build_max_min_fairness: MAX_MIN_FAIRNESS, MaxMinFairness, false;
    build_max_min_fairness_het: MAX_MIN_FAIRNESS_HET, MaxMinFairness, true;
    build_finish_time_fairness: FINISH_TIME_FAIRNESS, FinishTimeFairness, false;
    build_finish_time_fairness_het: FINISH_TIME_FAIRNESS_HET, FinishTimeFairness, true;
    build_min_makespan: MIN_MAKESPAN, MinMakespan, false;
    build_min_makespan_het: MIN_MAKESPAN_HET, MinMakespan, true;
    build_fifo_het: FIFO_HET, Fifo, true;
    build_max_throughput: MAX_THROUGHPUT, MaxThroughput, true;
    build_min_cost: MIN_COST, MinCost, true;
}

/// Builds `hierarchical`: the tenants' weights (unlisted tenants weigh 1) and how a tenant's
/// share is split among its jobs.
pub fn build_hierarchical(
    rounds: &RoundOptions,
    tenant_weights: &TenantWeights,
    hierarchical: &HierarchicalParams,
    fairshare: &crate::fairshare::FairShareConfig,
    _: Placing,
) -> Result<Gavel, PolicyError> {
    Ok(gavel(&HIERARCHICAL, Objective::Hierarchical, true, rounds)?
        .with_tenant_weights(tenant_weights.clone())
        .with_inner_policy(hierarchical.inner)
        .with_fairshare(fairshare.half_life_s()?))
}

/// Builds `max-min-fairness-packed`: it needs measured pair speeds.
pub fn build_max_min_fairness_packed(
    rounds: &RoundOptions,
    pair_speeds: &Option<Arc<PairSpeeds>>,
    _: Placing,
) -> Result<Gavel, PolicyError> {
    let name = MAX_MIN_FAIRNESS_PACKED.name;
    let pairs = pair_speeds.clone().ok_or_else(|| {
        PolicyError::Config(format!(
            "{name} needs co-location speeds (a scenario's `throughputs` table with pair entries)"
        ))
    })?;
    Ok(gavel(
        &MAX_MIN_FAIRNESS_PACKED,
        Objective::MaxMinFairnessPacked,
        true,
        rounds,
    )?
    .with_pair_speeds(pairs))
}
