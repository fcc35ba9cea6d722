//! Gavel's heterogeneity-aware scheduling (Narayanan et al., OSDI'20): an allocation policy
//! computes X[j][k], the share of time each job should get on each GPU type
//! ([`allocation`]), and a round-based mechanism realizes it (§5).
//!
//! The mechanism, as in Gavel's `scheduler.py`:
//! - The engine calls the policy once per round (default 360 s). Each job keeps, per GPU type,
//!   the time it has received since the last allocation reset (starting at half a round) and the
//!   time all jobs received on each type.
//! - X is recomputed when the set of jobs has changed and at least `recompute_interval_s`
//!   (Gavel: 1,920 s) have passed since the last recomputation (or there is none yet). A newly
//!   arrived job gets no GPU before the recomputation that includes it. At each recomputation
//!   the received times are reset to half a round, and each job's deficit per type —
//!   X × elapsed time − time received — carries over.
//! - Priority of job j on type k = X[j][k] / (time j received on k ÷ time all jobs received on
//!   k); 0 where X or the throughput is 0. Per type, entries are sorted by (priority, deficit,
//!   allocation) descending; the types are visited fastest first for heterogeneity-aware
//!   policies and in a seeded random order for agnostic ones; GPUs are filled greedily, a job at
//!   most once per round, never on a type where it cannot run.
//! - A job scheduled on the type it ran on keeps its GPUs when they are still free (a lease
//!   extension, counted); others get free GPUs of the type, largest jobs first.
//! - Space sharing (`max-min-fairness-packed`, [`packing`]): the candidates of a round are job
//!   *combinations* — single jobs and the pairs the allocation gives time together — each with
//!   its own allocation, received time and deficit, as in Gavel. A pair takes its scale factor's
//!   GPUs once; both jobs run on them at their measured co-located speeds.

pub mod allocation;
mod combo;
/// Gandiva as Gavel's artifact implements it: on Gavel's own round machinery and state (it is
/// that implementation the reproduced numbers come from), hence here rather than beside Gavel.
pub mod gandiva;
pub mod objectives;
pub mod packing;

use crate::TenantWeights;
use crate::mechanisms::colocation::{PairKey, PairSpeeds};
use crate::mechanisms::placement::{PlacementStrategy, Placer};
use crate::{Policy, PolicyError, SchedulerView};
use allocation::AllocJob;
use arbiter_model::{
    ActiveJob, Assignment, Colocation, Decision, GpuTypeId, JobId, JobSpec, PendingReason,
    Placement, SimDuration, SimTime,
};
use combo::{Candidate, Combo};
use packing::PackJob;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Which allocation policy computes X.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// Max-min fairness over (normalized) throughput: Gavel's LAS.
    MaxMinFairness,
    /// Themis' finish-time fairness: minimise the largest ρ.
    FinishTimeFairness,
    /// Minimise the time until every active job is done.
    MinMakespan,
    /// Maximise total throughput (steps per second).
    MaxThroughput,
    /// Arrival order, whole GPUs per job.
    Fifo,
    /// Throughput per dollar, subject to SLOs.
    MinCost,
    /// Weighted max-min fairness across tenants (water-filling), then among a tenant's jobs.
    Hierarchical,
    /// Max-min fairness with space sharing: pairs of jobs may share GPUs.
    MaxMinFairnessPacked,
    /// Gandiva as Gavel runs it: equal time shares over job combinations, random pairs kept
    /// while they pay ([`gandiva`]).
    Gandiva,
}

/// Mechanism settings (scenario table `[policy.gavel]`: `recompute_interval_s`, `solver`; the
/// round length is the simulation's `round_s`, the seed the run's).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoundOptions {
    /// Round length, seconds (Gavel: 360). The engine's rounds should match.
    #[serde(skip)]
    pub round_s: f64,
    /// Minimum time between allocation recomputations, seconds (Gavel: 1,920).
    pub recompute_interval_s: f64,
    /// Which method solves the allocation programs (`interior-point`, the default, or
    /// `simplex`; see [`AllocationSolver`]).
    pub solver: AllocationSolver,
    /// Seed of the type-order shuffle of heterogeneity-agnostic policies.
    #[serde(skip)]
    pub seed: u64,
}

/// Which method solves Gavel's allocation programs (`policy.gavel.solver`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocationSolver {
    /// Clarabel's interior point. Where the optimum is not unique (max-min fairness pins only
    /// the bottleneck jobs), it returns a point near the centre of the optimal face, as Gavel's
    /// ECOS does: the published comparisons are reproduced with it.
    #[default]
    InteriorPoint,
    /// A dense revised simplex ([`arbiter_solver::simplex`]): the same optimum, at a vertex of
    /// the optimal face, in tens of microseconds instead of ≈ 0.14 ms per program. The other
    /// jobs' shares, and so the schedule, differ from the interior point's. Programs the simplex
    /// cannot start from the origin (the hierarchical policy's frozen tenants, min-cost's SLOs),
    /// programs of more than [`arbiter_solver::simplex::MAX_ROWS`] rows and any it fails on
    /// numerically are still solved by the interior point. Space sharing's program leaves out
    /// every dominated pair (the interior point only those neither of whose jobs keeps half its
    /// speed): the same optimum, fewer columns to price.
    Simplex,
}

impl AllocationSolver {
    fn method(self) -> arbiter_solver::SolveMethod {
        match self {
            AllocationSolver::InteriorPoint => arbiter_solver::SolveMethod::InteriorPoint,
            AllocationSolver::Simplex => arbiter_solver::SolveMethod::Simplex,
        }
    }
}

/// GPUs of each type in the cluster, indexed by type id.
fn gpus_per_type(view: &SchedulerView<'_>) -> Vec<f64> {
    let mut gpus = vec![0.0; view.cluster.gpu_type_names.len()];
    for node in &view.cluster.nodes {
        gpus[node.gpu_type.index()] += node.gpus as f64;
    }
    gpus
}

impl Default for RoundOptions {
    fn default() -> Self {
        RoundOptions {
            round_s: 360.0,
            recompute_interval_s: 1920.0,
            solver: AllocationSolver::InteriorPoint,
            seed: 0,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct JobBook {
    /// X[k] from the last recomputation that included the job.
    allocation: Option<Vec<f64>>,
    /// Seconds received per type since the last reset (starts at half a round).
    received_s: Vec<f64>,
    /// Deficit per type, carried over resets.
    deficit_s: Vec<f64>,
    /// Pairs: both jobs' co-located speeds per type (empty for single jobs).
    pair_speeds: Vec<(f64, f64)>,
}

/// The least pair in the books' order: every single job's book comes before it.
const FIRST_PAIR: Combo = Combo::Pair(JobId(0), JobId(0));

/// Gavel: an allocation objective realized by rounds.
#[derive(Clone, Debug)]
pub struct Gavel {
    name: &'static str,
    objective: Objective,
    aware: bool,
    options: RoundOptions,
    books: BTreeMap<Combo, JobBook>,
    /// Seconds all jobs received per type since the last reset.
    type_time_s: Vec<f64>,
    last_reset: Option<SimTime>,
    last_round: Option<SimTime>,
    job_set_changed: bool,
    /// Type each combination ran on in the last round.
    last_type: BTreeMap<Combo, GpuTypeId>,
    rng: ChaCha8Rng,
    /// Lease extensions granted (a job kept its GPUs from one round to the next).
    pub lease_extensions: u64,
    /// Tenant weights (hierarchical policy).
    tenant_weights: TenantWeights,
    /// How a tenant's share is split among its jobs (hierarchical policy).
    inner: allocation::InnerPolicy,
    /// Decayed fair share (hierarchical policy, `[policy.fairshare]`): the half-life, the
    /// tenants' usage as last given, and the usage fractions the allocation in force was
    /// computed from.
    half_life_s: Option<f64>,
    tenant_usage: crate::fairshare::TenantUsage,
    usage_fractions: BTreeMap<String, f64>,
    /// Allocation recomputations, and those whose LP failed (the previous X was kept).
    pub recomputations: u64,
    /// Recomputations that failed.
    pub failed_recomputations: u64,
    /// Co-location speeds (space sharing).
    pair_speeds: Option<Arc<PairSpeeds>>,
    /// Gandiva's pairs, kept across recomputations (the `Gandiva` objective only).
    gandiva: gandiva::Pairing,
    /// Max-min programs solved so far (they recur as jobs come and go).
    max_min_memo: allocation::MaxMinMemo,
    /// Scratch, sized to the trace: each job id's position in the view (`usize::MAX`: none),
    /// reset after every round, so a round costs nothing per job of the trace.
    position: Vec<usize>,
    /// Per job id: whether it has its book (`books` holds `Combo::Single` of it), so that a
    /// round looks up only the jobs that are new, not every active job in the tree.
    admitted: Vec<bool>,
}

impl Gavel {
    /// A Gavel policy; `aware` selects the heterogeneity-aware form.
    pub fn new(
        name: &'static str,
        objective: Objective,
        aware: bool,
        options: RoundOptions,
    ) -> Result<Self, PolicyError> {
        if !(options.round_s > 0.0 && options.recompute_interval_s >= 0.0) {
            return Err(PolicyError::Config(
                "round_s must be > 0 and recompute_interval_s >= 0".into(),
            ));
        }
        Ok(Gavel {
            name,
            objective,
            aware,
            options,
            books: BTreeMap::new(),
            type_time_s: Vec::new(),
            last_reset: None,
            last_round: None,
            job_set_changed: false,
            last_type: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(options.seed),
            lease_extensions: 0,
            tenant_weights: TenantWeights::new(),
            inner: allocation::InnerPolicy::Fairness,
            half_life_s: None,
            tenant_usage: BTreeMap::new(),
            usage_fractions: BTreeMap::new(),
            recomputations: 0,
            failed_recomputations: 0,
            pair_speeds: None,
            gandiva: gandiva::Pairing::default(),
            max_min_memo: allocation::MaxMinMemo::default(),
            position: Vec::new(),
            admitted: Vec::new(),
        })
    }

    /// Sets the co-location speeds space sharing uses (required by the packed objective).
    pub fn with_pair_speeds(mut self, speeds: Arc<PairSpeeds>) -> Self {
        self.pair_speeds = Some(speeds);
        self
    }

    /// Speeds of `a` and `b` sharing GPUs of type `k`, if measured.
    fn pair_speed(
        &self,
        view: &SchedulerView<'_>,
        a: JobId,
        b: JobId,
        k: GpuTypeId,
    ) -> Option<(f64, f64)> {
        let pairs = self.pair_speeds.as_ref()?;
        let key = |id: JobId| -> Option<PairKey> {
            let spec = &view.specs[id.index()];
            Some((spec.model.clone()?, spec.gpus))
        };
        let solo = (
            view.specs[a.index()].speed_on(k),
            view.specs[b.index()].speed_on(k),
        );
        pairs.speeds(&key(a)?, &key(b)?, k.index(), solo)
    }

    /// Whether every job of `combo` (with its book) can make progress on type `k`.
    fn can_run(view: &SchedulerView<'_>, combo: Combo, book: &JobBook, k: GpuTypeId) -> bool {
        match combo {
            Combo::Single(a) => view.specs[a.index()].speed_on(k) > 0.0,
            Combo::Pair(..) => book
                .pair_speeds
                .get(k.index())
                .is_some_and(|&(x, y)| x > 0.0 && y > 0.0),
        }
    }

    /// Sets the tenant weights the hierarchical objective uses.
    pub fn with_tenant_weights(mut self, weights: TenantWeights) -> Self {
        self.tenant_weights = weights;
        self
    }

    /// Weighs tenants by their decayed usage too (hierarchical policy): Slurm's fair-share
    /// factor times their weight ([`crate::fairshare`]); `None`: by weight only.
    pub fn with_fairshare(mut self, half_life_s: Option<f64>) -> Self {
        self.half_life_s = half_life_s;
        self
    }

    /// The hierarchical objective's weight of each of `tenants`: its configured weight, times
    /// its fair-share factor among them when fair share is on.
    fn hierarchical_weights(&self, tenants: &[&str]) -> Vec<f64> {
        let weights: Vec<f64> = tenants
            .iter()
            .map(|t| self.tenant_weights.get(*t).copied().unwrap_or(1.0))
            .collect();
        if self.half_life_s.is_none() {
            return weights;
        }
        let usage: Vec<f64> = tenants
            .iter()
            .map(|t| self.tenant_usage.get(*t).copied().unwrap_or(0.0))
            .collect();
        let (total_usage, total_weight) = (usage.iter().sum::<f64>(), weights.iter().sum::<f64>());
        weights
            .iter()
            .zip(&usage)
            .map(|(w, u)| w * crate::fairshare::fairshare_factor(*u, *w, total_usage, total_weight))
            .collect()
    }

    /// Sets how the hierarchical objective splits a tenant's share among its jobs.
    pub fn with_inner_policy(mut self, inner: allocation::InnerPolicy) -> Self {
        self.inner = inner;
        self
    }

    fn half_round(&self) -> f64 {
        self.options.round_s / 2.0
    }

    /// Credits the round that just ended to the jobs that ran in it (`position`: each job id's
    /// position in the view, `usize::MAX` for none).
    fn credit_round(&mut self, view: &SchedulerView<'_>, position: &[usize], now: SimTime) {
        let Some(last) = self.last_round else { return };
        let elapsed = now.saturating_since(last).as_secs_f64();
        let running = |id: JobId| {
            position
                .get(id.index())
                .and_then(|&i| view.jobs.get(i))
                .is_some_and(ActiveJob::is_running)
        };
        for (&combo, &k) in &self.last_type {
            if !combo.jobs().any(running) {
                continue;
            }
            if let Some(book) = self.books.get_mut(&combo) {
                book.received_s[k.index()] += elapsed;
            }
            self.type_time_s[k.index()] += elapsed * view.specs[combo.first().index()].gpus as f64;
        }
    }

    /// Gavel's `_reset_time_run_so_far`: deficits absorb the difference between the share each
    /// job should have had since the last reset and what it got; received times restart.
    fn reset(&mut self, now: SimTime) {
        let elapsed = self
            .last_reset
            .map_or(0.0, |r| now.saturating_since(r).as_secs_f64());
        let half = self.half_round();
        for t in &mut self.type_time_s {
            *t = 0.0;
        }
        for book in self.books.values_mut() {
            for k in 0..book.received_s.len() {
                let received = book.received_s[k] - half;
                let should = book.allocation.as_ref().map_or(0.0, |x| x[k] * elapsed);
                book.deficit_s[k] += should - received;
                book.received_s[k] = half;
                self.type_time_s[k] += half;
            }
        }
        self.last_reset = Some(now);
    }

    fn recompute(&mut self, view: &SchedulerView<'_>, gpus_per_type: &[f64], now: SimTime) {
        let m = gpus_per_type.len();
        // Jobs too large for every type they can run on never get GPUs; they are left out of the
        // program (with a zero allocation) so they cannot make it infeasible or degenerate.
        let fits = |spec: &JobSpec| {
            (0..m).any(|k| {
                spec.speed_on(GpuTypeId(k as u8)) > 0.0 && spec.gpus as f64 <= gpus_per_type[k]
            })
        };
        let singles = self.books.keys().filter_map(|c| match c {
            Combo::Single(id) => Some(*id),
            Combo::Pair(..) => None,
        });
        let (ids, unplaceable): (Vec<JobId>, Vec<JobId>) =
            singles.partition(|id| fits(&view.specs[id.index()]));
        let zeros = vec![vec![0.0; m]; unplaceable.len()];
        self.set_allocations(&unplaceable, zeros);
        // Pairs get a fresh share from every recomputation (none unless the objective packs).
        for (_, book) in self.books.range_mut(FIRST_PAIR..) {
            book.allocation = Some(vec![0.0; m]);
        }
        let jobs: Vec<AllocJob> = ids
            .iter()
            .map(|id| {
                let spec = &view.specs[id.index()];
                AllocJob {
                    scale_factor: spec.gpus as f64,
                    weight: spec.priority.max(1) as f64,
                    throughput: (0..m).map(|k| spec.speed_on(GpuTypeId(k as u8))).collect(),
                }
            })
            .collect();
        self.recomputations += 1;
        let active_by_id: BTreeMap<JobId, &ActiveJob> =
            view.jobs.iter().map(|j| (j.id, j)).collect();
        let progress: Vec<allocation::JobProgress> = ids
            .iter()
            .map(|id| {
                let active = active_by_id.get(id);
                allocation::JobProgress {
                    remaining_s: active.map_or(0.0, |j| j.remaining_s_at(now)),
                    since_arrival_s: active
                        .map_or(0.0, |j| now.saturating_since(j.submit).as_secs_f64()),
                }
            })
            .collect();
        let absolute: Vec<AllocJob> = if matches!(
            self.objective,
            Objective::MaxThroughput | Objective::MinCost
        ) {
            // Gavel sums absolute steps/s: the reference (V100) rate is steps ÷ V100 run time.
            ids.iter()
                .zip(&jobs)
                .map(|(id, job)| {
                    let spec = &view.specs[id.index()];
                    let steps_per_s = match (spec.iterations, spec.run_time_s > 0.0) {
                        (Some(steps), true) => steps as f64 / spec.run_time_s,
                        _ => 1.0,
                    };
                    AllocJob {
                        throughput: job.throughput.iter().map(|t| t * steps_per_s).collect(),
                        ..job.clone()
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let result = match self.objective {
            Objective::MaxThroughput => {
                allocation::max_throughput(&absolute, gpus_per_type, self.options.solver.method())
            }
            Objective::MinCost => {
                let relative: Vec<Vec<f64>> = jobs.iter().map(|j| j.throughput.clone()).collect();
                let time_left: Vec<Option<f64>> = ids
                    .iter()
                    .map(|id| {
                        view.specs[id.index()]
                            .deadline
                            .map(|d| d.saturating_since(now).as_secs_f64())
                    })
                    .collect();
                let costs: Vec<f64> = view
                    .cluster
                    .gpu_type_names
                    .iter()
                    .map(|n| arbiter_model::default_price_per_gpu_hour(n))
                    .collect();
                allocation::min_cost(
                    &absolute,
                    &progress,
                    &time_left,
                    &relative,
                    &costs,
                    gpus_per_type,
                    self.options.solver.method(),
                )
            }
            Objective::Hierarchical => {
                let tenants: Vec<&str> = {
                    let mut t: Vec<&str> = ids
                        .iter()
                        .map(|id| view.specs[id.index()].tenant.as_str())
                        .collect();
                    t.sort_unstable();
                    t.dedup();
                    t
                };
                let tenant_of: Vec<usize> = ids
                    .iter()
                    .map(|id| {
                        tenants
                            .binary_search(&view.specs[id.index()].tenant.as_str())
                            .unwrap_or(0)
                    })
                    .collect();
                let weights = self.hierarchical_weights(&tenants);
                self.usage_fractions = usage_fractions(&self.tenant_usage);
                allocation::hierarchical(
                    &jobs,
                    &tenant_of,
                    &weights,
                    gpus_per_type,
                    self.aware,
                    self.inner,
                    self.options.solver.method(),
                )
            }
            Objective::Fifo => {
                let order: Vec<usize> = self.type_order(view).iter().map(|t| t.index()).collect();
                Ok(allocation::fifo(&jobs, gpus_per_type, self.aware, &order))
            }
            Objective::MaxMinFairness => allocation::max_min_fairness_memo(
                &jobs,
                gpus_per_type,
                self.aware,
                &mut self.max_min_memo,
                self.options.solver.method(),
            ),
            Objective::MaxMinFairnessPacked => {
                let pack_jobs: Vec<PackJob> = ids
                    .iter()
                    .zip(&jobs)
                    .map(|(id, job)| {
                        let spec = &view.specs[id.index()];
                        PackJob {
                            job: job.clone(),
                            pair_key: spec.model.clone().map(|m| (m, spec.gpus)),
                        }
                    })
                    .collect();
                let no_pairs = PairSpeeds::default();
                let pairs = self.pair_speeds.as_deref().unwrap_or(&no_pairs);
                match packing::max_min_fairness_packed(
                    &pack_jobs,
                    pairs,
                    gpus_per_type,
                    self.options.solver.method(),
                ) {
                    Ok(packed) => {
                        let half = self.half_round();
                        for ((i, j), x) in packed.pairs {
                            let (a, b) = (ids[i].min(ids[j]), ids[i].max(ids[j]));
                            let combo = Combo::Pair(a, b);
                            if !self.books.contains_key(&combo) {
                                let pair_speeds = (0..m)
                                    .map(|k| {
                                        self.pair_speed(view, a, b, GpuTypeId(k as u8))
                                            .unwrap_or((0.0, 0.0))
                                    })
                                    .collect();
                                let book = JobBook {
                                    allocation: None,
                                    received_s: vec![half; m],
                                    deficit_s: vec![0.0; m],
                                    pair_speeds,
                                };
                                self.books.insert(combo, book);
                            }
                            if let Some(book) = self.books.get_mut(&combo) {
                                book.allocation = Some(x);
                            }
                        }
                        Ok(packed.solo)
                    }
                    Err(e) => Err(e),
                }
            }
            Objective::FinishTimeFairness => allocation::finish_time_fairness(
                &jobs,
                &progress,
                gpus_per_type,
                self.aware,
                self.options.solver.method(),
            ),
            Objective::MinMakespan => allocation::min_makespan(
                &jobs,
                &progress,
                gpus_per_type,
                self.aware,
                self.options.solver.method(),
            ),
            Objective::Gandiva => Ok(self.gandiva_allocation(view, &ids, gpus_per_type)),
        };
        match result {
            Ok(x) => self.set_allocations(&ids, x),
            // Counted, and every job falls back to its equal share so none waits forever for
            // an allocation.
            Err(_) => {
                self.failed_recomputations += 1;
                self.set_allocations(&ids, allocation::equal_share(&jobs, gpus_per_type));
            }
        }
    }

    /// The allocation in force at `now` for the active jobs of `view`, recomputing it under the
    /// same rule as the rounds (the job set changed and the interval has passed). For Gavel's
    /// "ideal" mechanism, which gives every job exactly X; `job_finished` keeps the set current.
    /// Jobs not yet included in a recomputation get no row.
    pub fn allocation_at(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> BTreeMap<JobId, Vec<f64>> {
        let gpus_per_type = gpus_per_type(view);
        self.admit_new_jobs(view);
        if self.job_set_changed && self.recompute_due(now) {
            self.last_reset = Some(now);
            self.recompute(view, &gpus_per_type, now);
            self.job_set_changed = false;
        }
        self.books
            .iter()
            .filter_map(|(combo, b)| match combo {
                Combo::Single(id) => b.allocation.clone().map(|x| (*id, x)),
                Combo::Pair(..) => None,
            })
            .collect()
    }

    /// Gives jobs `ids` (ascending, as the books list them) their rows of an allocation: one walk
    /// along the single jobs' books, not a lookup per job.
    fn set_allocations(&mut self, ids: &[JobId], rows: impl IntoIterator<Item = Vec<f64>>) {
        debug_assert!(ids.is_sorted());
        let mut books = self.books.range_mut(..FIRST_PAIR).peekable();
        for (&id, row) in ids.iter().zip(rows) {
            while books.next_if(|(c, _)| **c < Combo::Single(id)).is_some() {}
            if let Some((_, book)) = books.next_if(|(c, _)| **c == Combo::Single(id)) {
                book.allocation = Some(row);
            }
        }
    }

    /// Opens a book for every job seen for the first time (received time starts at half a
    /// round); a new job marks the job set as changed.
    fn admit_new_jobs(&mut self, view: &SchedulerView<'_>) {
        let m = view.cluster.gpu_type_names.len();
        let half = self.half_round();
        for job in view.jobs {
            let at = job.id.index();
            if self.admitted.get(at).is_some_and(|&a| a) {
                continue;
            }
            if self.admitted.len() <= at {
                self.admitted.resize(view.specs.len().max(at + 1), false);
            }
            self.admitted[at] = true;
            self.books.entry(Combo::Single(job.id)).or_insert_with(|| {
                self.job_set_changed = true;
                JobBook {
                    allocation: None,
                    received_s: vec![half; m],
                    deficit_s: vec![0.0; m],
                    pair_speeds: Vec::new(),
                }
            });
        }
    }

    /// Whether a recomputation may happen at `now` (none yet, or the interval has passed).
    fn recompute_due(&self, now: SimTime) -> bool {
        self.last_reset.is_none_or(|r| {
            now.saturating_since(r).as_secs_f64() >= self.options.recompute_interval_s
        })
    }

    /// When the next recomputation may happen, if the job set has changed since the last one.
    pub fn next_recompute_at(&self) -> Option<SimTime> {
        if !self.job_set_changed {
            return None;
        }
        Some(self.last_reset.map_or(SimTime::ZERO, |r| {
            r + SimDuration::from_secs_f64(self.options.recompute_interval_s)
        }))
    }

    /// GPU types in the order their GPUs are handed out this round.
    fn type_order(&mut self, view: &SchedulerView<'_>) -> Vec<GpuTypeId> {
        let m = view.cluster.gpu_type_names.len();
        let mut types: Vec<GpuTypeId> = (0..m).map(|k| GpuTypeId(k as u8)).collect();
        if self.aware {
            // Fastest first: by mean speed over the active jobs (V100, P100, K80 on Gavel's data).
            let mean = |t: GpuTypeId| -> f64 {
                let n = view.jobs.len().max(1) as f64;
                view.jobs
                    .iter()
                    .map(|j| view.spec(j).speed_on(t))
                    .sum::<f64>()
                    / n
            };
            let means: Vec<f64> = types.iter().map(|t| mean(*t)).collect();
            types.sort_by(|a, b| means[b.index()].total_cmp(&means[a.index()]).then(a.cmp(b)));
        } else {
            types.shuffle(&mut self.rng);
        }
        types
    }
}

impl Gavel {
    /// The round's hand-out: per GPU type in `order`, the combinations (of jobs all offered,
    /// pairs the allocation still uses) that can run there, taken by their claim
    /// ([`Candidate`]'s order, highest first) while the type has GPUs, each job at most once.
    fn hand_out(
        &self,
        view: &SchedulerView<'_>,
        order: &[GpuTypeId],
        gpus_per_type: &[f64],
        index_of: &impl Fn(JobId) -> Option<usize>,
    ) -> Vec<Vec<Combo>> {
        let m = gpus_per_type.len();
        let mut left: Vec<u32> = gpus_per_type.iter().map(|g| *g as u32).collect();
        let mut chosen: Vec<Vec<Combo>> = vec![Vec::new(); m];
        // Per position in the view: scheduled this round.
        let mut scheduled = vec![false; view.jobs.len()];
        // Read once a round, not once per type (with space sharing: thousands of pairs).
        let offered: Vec<(Combo, &JobBook, &[f64], u32)> = self
            .books
            .iter()
            .filter_map(|(&combo, book)| {
                let x = book.allocation.as_deref()?;
                let first = index_of(combo.first())?;
                if !combo.jobs().all(|id| index_of(id).is_some()) {
                    return None;
                }
                if matches!(combo, Combo::Pair(..)) && x.iter().all(|v| *v <= 0.0) {
                    return None; // a pair the allocation no longer uses is no candidate
                }
                Some((combo, book, x, view.jobs[first].gpus))
            })
            .collect();
        for &k in order {
            let ki = k.index();
            // Claims above zero (the allocation gives the combination time on k) come before
            // every other in the order, so the others are looked at only if GPUs are left.
            let (mut ahead, mut behind) = (Vec::new(), Vec::new());
            for &(combo, book, x, gpus) in &offered {
                // A combination that needs more GPUs than are left, or one of whose jobs was
                // scheduled on a type before, would be passed over when its turn came (what is
                // left only shrinks, what is scheduled only grows): not a candidate.
                if gpus > left[ki]
                    || any_scheduled(combo, &scheduled, index_of)
                    || !Self::can_run(view, combo, book, k)
                {
                    continue;
                }
                let candidate = self.claim(combo, book, x, ki);
                if candidate.priority.total_cmp(&0.0).is_gt() {
                    ahead.push((candidate, gpus));
                } else {
                    behind.push((candidate, gpus));
                }
            }
            for candidates in [ahead, behind] {
                take_by_claim(
                    candidates,
                    &mut left[ki],
                    &mut scheduled,
                    index_of,
                    |combo| chosen[ki].push(combo),
                );
            }
        }
        chosen
    }

    /// A combination's claim on type `ki`: its allocation there over the share of the type's
    /// time it received since the last reset (an allocation with nothing received yet comes
    /// first; none at all, last).
    fn claim(&self, combo: Combo, book: &JobBook, x: &[f64], ki: usize) -> Candidate {
        let allocation = x[ki];
        let fraction = if self.type_time_s[ki] > 0.0 {
            book.received_s[ki] / self.type_time_s[ki]
        } else {
            0.0
        };
        let priority = if allocation <= 0.0 {
            0.0
        } else if fraction > 0.0 {
            allocation / fraction
        } else {
            allocation * 1e9
        };
        Candidate {
            priority,
            deficit_s: book.deficit_s[ki],
            allocation,
            combo,
        }
    }

    /// Adds the assignment(s) of a combination placed on `placement` of type `k`.
    fn assign(&self, combo: Combo, k: GpuTypeId, placement: Placement, decision: &mut Decision) {
        match combo {
            Combo::Single(id) => decision.run.push(Assignment::exclusive(id, placement)),
            Combo::Pair(a, b) => {
                // `can_run` checked the pair is measured with both speeds positive on k.
                let (speed_a, speed_b) = self
                    .books
                    .get(&combo)
                    .and_then(|book| book.pair_speeds.get(k.index()).copied())
                    .unwrap_or((f64::MIN_POSITIVE, f64::MIN_POSITIVE));
                decision.run.push(Assignment {
                    job: a,
                    placement: placement.clone(),
                    colocation: Some(Colocation {
                        partner: b,
                        speed: speed_a,
                    }),
                    host: None,
                    guest: None,
                });
                decision.run.push(Assignment {
                    job: b,
                    placement,
                    colocation: Some(Colocation {
                        partner: a,
                        speed: speed_b,
                    }),
                    host: None,
                    guest: None,
                });
            }
        }
    }
}

/// The drift of a tenant's fraction of the total decayed usage after which the hierarchical
/// allocation is recomputed.
pub const USAGE_FRACTION_STEP: f64 = 0.01;

/// Whether a job of `combo` is `scheduled` already (by position in the view, `index_of`).
fn any_scheduled(
    combo: Combo,
    scheduled: &[bool],
    index_of: &impl Fn(JobId) -> Option<usize>,
) -> bool {
    combo
        .jobs()
        .any(|id| index_of(id).is_some_and(|i| scheduled[i]))
}

/// Takes `candidates` (each with its GPU count) in their order, greatest claim first, while
/// `left` GPUs remain, passing over those larger than what is left and those with a job already
/// `scheduled` (by position, `index_of`); `take` is told each one taken.
///
/// One heap per GPU count: the next taken is the greatest top among the counts that fit. That is
/// the one a single heap popped in order would take next — what it passes over on the way is
/// passed over for good, since what is left only shrinks and what is scheduled only grows — but
/// a candidate larger than what is left is never popped (with a queue of thousands of jobs and
/// a few GPUs left, nearly all were).
fn take_by_claim(
    candidates: Vec<(Candidate, u32)>,
    left: &mut u32,
    scheduled: &mut [bool],
    index_of: &impl Fn(JobId) -> Option<usize>,
    mut take: impl FnMut(Combo),
) {
    let mut sizes: Vec<u32> = candidates.iter().map(|(_, gpus)| *gpus).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut by_size: Vec<Vec<Candidate>> = vec![Vec::new(); sizes.len()];
    for (candidate, gpus) in candidates {
        if let Ok(at) = sizes.binary_search(&gpus) {
            by_size[at].push(candidate);
        }
    }
    let mut heaps: Vec<std::collections::BinaryHeap<Candidate>> =
        by_size.into_iter().map(Into::into).collect();
    while *left > 0 {
        let mut best: Option<(usize, Candidate)> = None;
        for (at, heap) in heaps.iter_mut().enumerate() {
            if sizes[at] > *left {
                break; // (sizes ascend)
            }
            while heap
                .peek()
                .is_some_and(|top| any_scheduled(top.combo, scheduled, index_of))
            {
                heap.pop();
            }
            if let Some(&top) = heap.peek()
                && best.is_none_or(|(_, b)| top > b)
            {
                best = Some((at, top));
            }
        }
        let Some((at, Candidate { combo, .. })) = best else {
            break;
        };
        heaps[at].pop();
        *left -= sizes[at];
        for i in combo.jobs().filter_map(index_of) {
            scheduled[i] = true;
        }
        take(combo);
    }
}

/// Each tenant's fraction of the total usage.
fn usage_fractions(usage: &crate::fairshare::TenantUsage) -> BTreeMap<String, f64> {
    let total: f64 = usage.values().sum();
    if total <= 0.0 {
        return BTreeMap::new();
    }
    usage.iter().map(|(t, u)| (t.clone(), u / total)).collect()
}

impl Policy for Gavel {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Replaces the co-location table (a daemon's learned one). New speeds are new input: the
    /// allocation is recomputed at the next due recomputation, as when the job set changes.
    fn set_pair_speeds(&mut self, speeds: Arc<PairSpeeds>) {
        if self.pair_speeds.is_some() || self.objective == Objective::MaxMinFairnessPacked {
            self.pair_speeds = Some(speeds);
            self.job_set_changed = true;
        }
    }

    fn fairshare_half_life_s(&self) -> Option<f64> {
        self.half_life_s
    }

    /// New usage is new input once it has moved a tenant's fraction of the total by more than
    /// [`USAGE_FRACTION_STEP`] since the allocation in force: X is then recomputed at the next
    /// due recomputation (a smaller drift does not re-solve the program every round).
    fn set_tenant_usage(&mut self, usage: &crate::fairshare::TenantUsage) {
        if self.half_life_s.is_none() {
            return;
        }
        self.tenant_usage.clone_from(usage);
        let now = usage_fractions(usage);
        let moved = now.keys().chain(self.usage_fractions.keys()).any(|t| {
            let (a, b) = (
                now.get(t).copied().unwrap_or(0.0),
                self.usage_fractions.get(t).copied().unwrap_or(0.0),
            );
            (a - b).abs() > USAGE_FRACTION_STEP
        });
        if moved {
            self.job_set_changed = true;
        }
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let m = view.cluster.gpu_type_names.len();
        if self.type_time_s.len() != m {
            self.type_time_s = vec![0.0; m];
        }
        let gpus_per_type = gpus_per_type(view);
        // Position in `view.jobs` by job id (a dense table: looked up for every entry of every
        // type), kept across rounds and cleared at the end of this one.
        let mut index_table = std::mem::take(&mut self.position);
        if index_table.len() < view.specs.len() {
            index_table.resize(view.specs.len(), usize::MAX);
        }
        for (i, job) in view.jobs.iter().enumerate() {
            if let Some(slot) = index_table.get_mut(job.id.index()) {
                *slot = i;
            }
        }
        self.credit_round(view, &index_table, now);
        self.admit_new_jobs(view);
        if self.job_set_changed && self.recompute_due(now) {
            self.reset(now);
            self.recompute(view, &gpus_per_type, now);
            self.job_set_changed = false;
        }

        // Priority entries per type, in hand-out order.
        let order = self.type_order(view);
        let index_of = |id: JobId| {
            index_table
                .get(id.index())
                .copied()
                .filter(|i| *i != usize::MAX)
        };
        let mut chosen = self.hand_out(view, &order, &gpus_per_type, &index_of);

        // Placement: per type, largest jobs first; lease extensions before new placements.
        let mut placer = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        let mut decision = Decision::default();
        let mut placed_type: BTreeMap<Combo, GpuTypeId> = BTreeMap::new();
        for (ki, combos) in chosen.iter_mut().enumerate() {
            let k = GpuTypeId(ki as u8);
            combos.sort_by_cached_key(|c| {
                (
                    std::cmp::Reverse(view.jobs[index_of(c.first()).unwrap_or(0)].gpus),
                    *c,
                )
            });
            let mut fresh = Vec::new();
            for &combo in combos.iter() {
                let job = &view.jobs[index_of(combo.first()).unwrap_or(0)];
                // A lease extends when the combination ran on this type last round and all its
                // jobs still sit on the same GPUs.
                let same_gpus = combo
                    .jobs()
                    .all(|id| view.jobs[index_of(id).unwrap_or(0)].placement() == job.placement());
                match job.placement() {
                    Some(p)
                        if same_gpus
                            && self.last_type.get(&combo) == Some(&k)
                            && placer.take(p) =>
                    {
                        self.lease_extensions += 1;
                        self.assign(combo, k, p.clone(), &mut decision);
                        placed_type.insert(combo, k);
                    }
                    _ => fresh.push(combo),
                }
            }
            for combo in fresh {
                let job: &ActiveJob = &view.jobs[index_of(combo.first()).unwrap_or(0)];
                let spec: &JobSpec = view.spec(job);
                // `place_on_type` takes the GPUs it finds.
                let placed = placer
                    .place_on_type(spec, k, job.pending_since, now)
                    .or_else(|_| {
                        // GPU counts were checked; only fragmentation across servers can stop a
                        // consolidated placement, so fall back to any free GPUs of the type.
                        let mut any = Placer::new(view.cluster, PlacementStrategy::Anywhere);
                        any.take_overlap_all(&placer);
                        let found = any.place_on_type(spec, k, job.pending_since, now);
                        if let Ok(p) = &found {
                            placer.take(p);
                        }
                        found
                    });
                match placed {
                    Ok(p) => {
                        self.assign(combo, k, p, &mut decision);
                        placed_type.insert(combo, k);
                    }
                    Err(reason) => decision.pending.extend(combo.jobs().map(|id| (id, reason))),
                }
            }
        }
        // Per position in the view: placed, or its reason given.
        let mut accounted = vec![false; view.jobs.len()];
        for i in placed_type
            .keys()
            .flat_map(|c| c.jobs())
            .chain(decision.pending.iter().map(|(id, _)| *id))
            .filter_map(index_of)
        {
            accounted[i] = true;
        }
        for (job, _) in view
            .jobs
            .iter()
            .zip(&accounted)
            .filter(|(_, accounted)| !**accounted)
        {
            decision
                .pending
                .push((job.id, PendingReason::LowerPriority));
        }
        // Clear the positions for the next round (only the entries this round set).
        for job in view.jobs {
            if let Some(slot) = index_table.get_mut(job.id.index()) {
                *slot = usize::MAX;
            }
        }
        self.position = index_table;
        self.last_type = placed_type;
        self.last_round = Some(now);
        // The mechanism works in rounds: ask for the next one even where the engine has no
        // round timer of its own — while something can change: a job runs, or a job waits for
        // the recomputation that will include it. (Otherwise the next round would see the same
        // state, e.g. a job larger than the cluster waiting forever.)
        if !decision.run.is_empty() || self.job_set_changed {
            decision.wake_at = Some(now + SimDuration::from_secs_f64(self.options.round_s));
        }
        Ok(decision)
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        // Credit the partial round the job ran before finishing, then forget it and every
        // combination it was part of (where no pair has a book, only the job's own: not a pass
        // over every book at every end).
        let no_pairs = self.books.range(FIRST_PAIR..).next().is_none();
        let combos: Vec<Combo> = if no_pairs {
            vec![Combo::Single(job.id)]
        } else {
            self.books
                .keys()
                .copied()
                .filter(|c| c.contains(job.id))
                .collect()
        };
        if let Some(a) = self.admitted.get_mut(job.id.index()) {
            *a = false;
        }
        for combo in combos {
            if let (Some(last), Some(k)) = (self.last_round, self.last_type.remove(&combo)) {
                let ran = now.saturating_since(last).as_secs_f64();
                if let Some(t) = self.type_time_s.get_mut(k.index()) {
                    *t += ran * spec.gpus as f64;
                }
            }
            self.books.remove(&combo);
        }
        self.job_set_changed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{Cluster, Node, NodeId, RackId, RunState};

    /// The hand-out as it was: one heap, popped in order, passing over what does not fit.
    fn take_by_one_heap(
        candidates: &[(Candidate, u32)],
        mut left: u32,
        scheduled: &mut [bool],
    ) -> Vec<Combo> {
        let gpus_of: BTreeMap<Combo, u32> = candidates.iter().map(|(c, g)| (c.combo, *g)).collect();
        let mut heap: std::collections::BinaryHeap<Candidate> =
            candidates.iter().map(|(c, _)| *c).collect();
        let mut taken = Vec::new();
        while let Some(Candidate { combo, .. }) = heap.pop() {
            if left == 0 {
                break;
            }
            let gpus = gpus_of[&combo];
            if gpus > left || combo.jobs().any(|id| scheduled[id.index()]) {
                continue;
            }
            left -= gpus;
            combo.jobs().for_each(|id| scheduled[id.index()] = true);
            taken.push(combo);
        }
        taken
    }

    proptest::proptest! {
        /// Heaps by GPU count take the same combinations, in the same order, as one heap.
        #[test]
        fn taking_by_size_is_taking_in_order(
            claims in proptest::collection::vec(
                (0u8..4, 0u8..3, 0u8..3, 0usize..12, 0usize..12, 0usize..5), 0..40),
            left in 0u32..20,
        ) {
            let sizes = [1u32, 2, 4, 8, 3];
            let mut seen = std::collections::BTreeSet::new();
            let candidates: Vec<(Candidate, u32)> = claims
                .iter()
                .filter_map(|&(p, d, a, i, j, g)| {
                    let combo = match i.cmp(&j) {
                        std::cmp::Ordering::Equal => Combo::Single(JobId(i as u32)),
                        std::cmp::Ordering::Less => Combo::Pair(JobId(i as u32), JobId(j as u32)),
                        std::cmp::Ordering::Greater => return None,
                    };
                    seen.insert(combo).then_some((
                        Candidate {
                            priority: f64::from(p),
                            deficit_s: f64::from(d),
                            allocation: f64::from(a),
                            combo,
                        },
                        sizes[g],
                    ))
                })
                .collect();
            let expected = take_by_one_heap(&candidates, left, &mut [false; 12]);
            let mut taken = Vec::new();
            let (mut l, mut scheduled) = (left, [false; 12]);
            take_by_claim(candidates, &mut l, &mut scheduled, &|id: JobId| Some(id.index()), |c| {
                taken.push(c)
            });
            proptest::prop_assert_eq!(taken, expected);
        }
    }

    /// 2 V100s (type 0) and 4 K80s (type 1), one GPU per server.
    fn cluster() -> Cluster {
        let mut nodes = Vec::new();
        for (t, count) in [(0u8, 2u32), (1, 4)] {
            for _ in 0..count {
                let id = NodeId(nodes.len() as u32);
                nodes.push(Node {
                    id,
                    name: format!("n{}", id.0),
                    rack: RackId(0),
                    gpu_type: GpuTypeId(t),
                    gpus: 1,
                    cpus: 4,
                    memory_gib: 16,
                });
            }
        }
        Cluster::new(vec!["V100".into(), "K80".into()], nodes).expect("valid")
    }

    /// Steps the mechanism by hand for `rounds` rounds over a fixed set of jobs that never
    /// finish, applying each decision, and returns the fraction of time each job spent on each
    /// type after the first recomputation.
    fn realized_shares(
        policy: &mut Gavel,
        cluster: &Cluster,
        specs: &[JobSpec],
        rounds: usize,
    ) -> Vec<Vec<f64>> {
        let mut jobs: Vec<ActiveJob> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
            .collect();
        let mut time_on = vec![vec![0.0; 2]; specs.len()];
        for round in 0..rounds {
            let now = SimTime::from_ms(round as u64 * 360_000);
            let view = SchedulerView {
                cluster,
                jobs: &jobs,
                specs,
                current: None,
            };
            let decision = policy.schedule(&view, now).expect("decides");
            let placed: BTreeMap<JobId, arbiter_model::Placement> = decision
                .run
                .into_iter()
                .map(|a| (a.job, a.placement))
                .collect();
            for job in &mut jobs {
                job.state = match placed.get(&job.id) {
                    Some(p) => {
                        let t = cluster.nodes[p.slots[0].0.index()].gpu_type;
                        if round > 0 {
                            time_on[job.id.index()][t.index()] += 360.0;
                        }
                        RunState::Running {
                            placement: p.clone(),
                            since: now,
                            speed: 1.0,
                        }
                    }
                    None => RunState::Pending,
                };
            }
        }
        let total = 360.0 * (rounds - 1) as f64;
        time_on
            .iter()
            .map(|row| row.iter().map(|t| t / total).collect())
            .collect()
    }

    #[test]
    fn rounds_realize_the_allocation_over_time() {
        // Five jobs on six GPUs of two types; speeds differ so the het-aware X is uneven.
        let speeds = [[1.0, 0.1], [1.0, 0.9], [1.0, 0.5], [1.0, 0.3], [1.0, 0.8]];
        let specs: Vec<JobSpec> = speeds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut spec = JobSpec::new(JobId(i as u32), SimTime::ZERO, 1, 1e12);
                spec.speed_by_gpu_type = s.to_vec();
                spec
            })
            .collect();
        let c = cluster();
        let mut policy = Gavel::new(
            "max-min-fairness-het",
            Objective::MaxMinFairness,
            true,
            RoundOptions::default(),
        )
        .expect("valid");
        let realized = realized_shares(&mut policy, &c, &specs, 400);
        let jobs: Vec<AllocJob> = speeds
            .iter()
            .map(|s| AllocJob {
                scale_factor: 1.0,
                weight: 1.0,
                throughput: s.to_vec(),
            })
            .collect();
        let x = allocation::max_min_fairness(&jobs, &[2.0, 4.0], true).expect("solves");
        for (j, (want, got)) in x.iter().zip(&realized).enumerate() {
            for k in 0..2 {
                assert!(
                    (want[k] - got[k]).abs() < 0.05,
                    "job {j} type {k}: X {want:?}, realized {got:?}"
                );
            }
        }
        assert!(policy.lease_extensions > 0);
    }

    #[test]
    fn new_jobs_wait_for_the_next_recomputation() {
        let c = cluster();
        let mut specs = vec![JobSpec::new(JobId(0), SimTime::ZERO, 1, 1e9)];
        let mut policy = Gavel::new(
            "max-min-fairness",
            Objective::MaxMinFairness,
            false,
            RoundOptions::default(),
        )
        .expect("valid");
        let jobs = vec![ActiveJob::submitted(JobId(0), 1, SimTime::ZERO, 1e9)];
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &c,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::ZERO,
            )
            .expect("decides");
        assert_eq!(d.run.len(), 1);
        // A job arriving 360 s later (< 1,920 s since the last recomputation) gets nothing yet.
        specs.push(JobSpec::new(JobId(1), SimTime::from_ms(360_000), 1, 1e9));
        let mut jobs = jobs;
        jobs[0].state = RunState::Running {
            placement: d.run[0].placement.clone(),
            since: SimTime::ZERO,
            speed: 1.0,
        };
        jobs.push(ActiveJob::submitted(
            JobId(1),
            1,
            SimTime::from_ms(360_000),
            1e9,
        ));
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &c,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::from_ms(360_000),
            )
            .expect("decides");
        assert!(d.run.iter().all(|a| a.job != JobId(1)));
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &c,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::from_ms(1_920_000),
            )
            .expect("decides");
        assert!(d.run.iter().any(|a| a.job == JobId(1)));
    }

    #[test]
    fn complementary_pairs_share_gpus_every_round() {
        // Two GPUs (one type), four jobs of types A and B that each keep 0.8 of their speed when
        // an A shares with a B, but only 0.3 when two of a kind share. Taking turns would give
        // each job half the time (0.5); the packed allocation pairs every A with a B, and the
        // rounds run those pairs every round at 0.8 each.
        let c = Cluster::homogeneous(1, 1, 2, 8, 64, "V100").expect("valid");
        let specs: Vec<JobSpec> = (0..4)
            .map(|i| {
                let mut spec = JobSpec::new(JobId(i), SimTime::ZERO, 1, 1e12);
                spec.model = Some(if i % 2 == 0 { "A".into() } else { "B".into() });
                spec
            })
            .collect();
        let mut pairs = PairSpeeds::default();
        pairs.insert(("A".into(), 1), ("B".into(), 1), vec![(0.8, 0.8)]);
        pairs.insert(("A".into(), 1), ("A".into(), 1), vec![(0.3, 0.3)]);
        pairs.insert(("B".into(), 1), ("B".into(), 1), vec![(0.3, 0.3)]);
        let mut policy = Gavel::new(
            "max-min-fairness-packed",
            Objective::MaxMinFairnessPacked,
            true,
            RoundOptions::default(),
        )
        .expect("valid")
        .with_pair_speeds(Arc::new(pairs));
        let mut jobs: Vec<ActiveJob> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
            .collect();
        let mut rounds_of_pair: BTreeMap<(JobId, JobId), u32> = BTreeMap::new();
        for round in 0..50u64 {
            let now = SimTime::from_ms(round * 360_000);
            let d = policy
                .schedule(
                    &SchedulerView {
                        cluster: &c,
                        jobs: &jobs,
                        specs: &specs,
                        current: None,
                    },
                    now,
                )
                .expect("decides");
            assert_eq!(d.run.len(), 4, "round {round}: every job runs");
            for a in &d.run {
                let partner = a.colocation.expect("every job shares").partner;
                assert_ne!(partner.0 % 2, a.job.0 % 2, "an A shares with a B");
                assert!((a.colocation.expect("shares").speed - 0.8).abs() < 1e-12);
                let other = d
                    .run
                    .iter()
                    .find(|b| b.job == partner)
                    .expect("partner assigned");
                assert_eq!(other.placement, a.placement);
                if a.job < partner {
                    *rounds_of_pair.entry((a.job, partner)).or_insert(0u32) += 1;
                }
            }
            let placed: BTreeMap<JobId, arbiter_model::Placement> =
                d.run.into_iter().map(|a| (a.job, a.placement)).collect();
            for job in &mut jobs {
                job.state = RunState::Running {
                    placement: placed[&job.id].clone(),
                    since: now,
                    speed: 0.8,
                };
            }
        }
        // The allocation gives each of the four A–B pairs half of the time; the rounds realize it.
        assert_eq!(rounds_of_pair.len(), 4, "{rounds_of_pair:?}");
        for (pair, rounds) in &rounds_of_pair {
            assert!(
                (23..=27).contains(rounds),
                "{pair:?} ran {rounds} of 50 rounds"
            );
        }
    }

    #[test]
    fn multi_gpu_servers_are_filled() {
        // One server with four GPUs and four one-GPU jobs: all four run (a placement takes its
        // GPUs once).
        let c = Cluster::homogeneous(1, 1, 4, 8, 64, "V100").expect("valid");
        let specs: Vec<JobSpec> = (0..4)
            .map(|i| JobSpec::new(JobId(i), SimTime::ZERO, 1, 1e9))
            .collect();
        let jobs: Vec<ActiveJob> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
            .collect();
        let mut policy = Gavel::new(
            "max-min-fairness",
            Objective::MaxMinFairness,
            false,
            RoundOptions::default(),
        )
        .expect("valid");
        let d = policy
            .schedule(
                &SchedulerView {
                    cluster: &c,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::ZERO,
            )
            .expect("decides");
        assert_eq!(d.run.len(), 4, "{d:?}");
    }

    /// Decayed fair share, by hand: 3 GPUs, tenants a and b (weight 1 each) with three 1-GPU
    /// jobs each. Usage a = 3000, b = 1000 GPU-s: usage shares ¾ and ¼ of equal ½ shares, so the
    /// factors are 2^-1.5 and 2^-0.5 — effective weights 1 : 2, and water-filling gives a one
    /// GPU and b two. Without fair share the weights are equal: 1.5 each.
    #[test]
    fn hierarchical_with_fair_share_weighs_tenants_by_their_decayed_usage() {
        let cluster = Cluster::homogeneous(1, 1, 3, 32, 256, "V100").expect("cluster");
        let specs: Vec<JobSpec> = (0..6)
            .map(|i| {
                let mut spec = JobSpec::new(JobId(i), SimTime::ZERO, 1, 1e12);
                spec.tenant = if i < 3 { "a" } else { "b" }.into();
                spec
            })
            .collect();
        let jobs: Vec<ActiveJob> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s))
            .collect();
        let per_tenant = |half_life_s: f64, usage: &[(&str, f64)]| {
            let fairshare = crate::fairshare::FairShareConfig { half_life_s };
            let mut policy = objectives::build_hierarchical(
                &RoundOptions::default(),
                &TenantWeights::new(),
                &objectives::HierarchicalParams::default(),
                &fairshare,
                crate::Placing {
                    strategy: crate::PlacementStrategy::Consolidated,
                    keep_placements: true,
                },
            )
            .expect("valid");
            policy.set_tenant_usage(&usage.iter().map(|(t, u)| (t.to_string(), *u)).collect());
            let x = policy.allocation_at(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::ZERO,
            );
            let sum = |from: u32, to: u32| {
                x.iter()
                    .filter(|(id, _)| (from..to).contains(&id.0))
                    .map(|(_, row)| row.iter().sum::<f64>())
                    .sum::<f64>()
            };
            (sum(0, 3), sum(3, 6))
        };
        let close = |(a, b): (f64, f64), (ea, eb): (f64, f64)| {
            (a - ea).abs() < 1e-4 && (b - eb).abs() < 1e-4
        };
        let (a, b) = per_tenant(3600.0, &[("a", 3000.0), ("b", 1000.0)]);
        assert!(close((a, b), (1.0, 2.0)), "a {a}, b {b}");
        let (a, b) = per_tenant(3600.0, &[("a", 1000.0), ("b", 3000.0)]);
        assert!(close((a, b), (2.0, 1.0)), "a {a}, b {b}");
        let (a, b) = per_tenant(0.0, &[("a", 3000.0), ("b", 1000.0)]);
        assert!(close((a, b), (1.5, 1.5)), "off: a {a}, b {b}");
    }
}
