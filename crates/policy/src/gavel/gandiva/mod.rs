//! Gandiva (Xiao et al., OSDI'18) as Gavel runs it (`scheduler/policies/gandiva.py`, Gavel
//! OSDI'20 §7 baseline "LAS w/ Gandiva SS"), realized by Gavel's round mechanism ([`super`]).
//!
//! The allocation is computed over *job combinations* — single jobs and pairs of jobs sharing
//! GPUs — at every recomputation of Gavel's mechanism (the job set changed and the recompute
//! interval has passed):
//!
//! 1. **Introspection.** Every pair kept from earlier recomputations is checked first and
//!    dissolved when one of its jobs has left or when its normalized packed throughput is below
//!    one. As in Gavel, that throughput sums `packed[i][k] / isolated[i][k]` over the GPU types k
//!    and both jobs i of the pair, and is 0 when either job makes no progress sharing on some
//!    type (so a pair that cannot share on every type is always dissolved).
//! 2. **Not over-subscribed** (the jobs' GPUs, Σ scale factors, fit the cluster): no packing,
//!    every job gets an equal share of every type, `X[j][k] = G_k / (n · sf_j)`, scaled so that
//!    `Σ_k X[j][k] <= 1` — time slicing. Pairs formed earlier are kept but not used.
//! 3. **Over-subscribed:** the jobs not in a pair are paired at random — n draws of two jobs from
//!    the pool (seeded from `rounds.seed`), a draw whose jobs have different scale factors is
//!    wasted, as in Gavel — and every combination (pair or single) gets the equal share
//!    `G_k / (M · sf)` over the M combinations. A paired job has no share of its own; the pair
//!    runs on its scale factor's GPUs once, each job at its measured co-located speed.
//!
//! Pairs are kept across recomputations until introspection dissolves them. Only jobs with a job
//! type (`model`) pair, and only when the policy has a co-location table (without one, Gandiva
//! is pure time slicing).
//!
//! In production the table is learned ([`PairSpeeds::solo_fractions`], from the daemon's progress
//! reports, given with [`Policy::set_pair_speeds`]): a pair not measured yet counts as exactly as
//! good as taking turns, so it is tried; new measurements trigger a recomputation, whose
//! introspection dissolves a pair measured below 1; and a draw of a pair the learned table
//! already measured below 1 is wasted rather than formed again.
//!
//! Round by round the allocation is realized by Gavel's mechanism exactly as for the other Gavel
//! policies (priorities = share ÷ time received, lease extensions, fastest type first: Gavel
//! does not shuffle the types for its packing policies). On top of it, a pass over each round's
//! decision adds Gandiva's **migration to defragment**: a multi-GPU job that fits a server but
//! got GPUs across servers is given a whole server by moving the jobs on it elsewhere (a changed
//! placement of a running job is a migration the engine carries out and counts). Gavel's
//! simulator has no such step (it places by GPU type and ignores locality); with one GPU per
//! server, as in Gavel's Figure 8, it never fires.
//!
//! Differences from Gavel's code, all in the over-subscribed regime (no job of Figure 8's
//! window at 2.0 jobs/hour ever shares a GPU): the pairing draws from a ChaCha8 stream, not
//! Python's `random`; a round offers only the pairs the allocation uses (Gavel also lists every
//! other pair of equal-size jobs at priority 0, which can take GPUs left over); a dissolved
//! pair's round bookkeeping (time received, deficit) is dropped rather than kept for a re-draw
//! of the same two jobs. Jobs that can run on no type with enough GPUs are left out of the
//! combinations.

mod defrag;

use super::allocation::Allocation;
use super::{Combo, Gavel, JobBook, Objective, RoundOptions};
use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::colocation::PairSpeeds;
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, GpuTypeId, JobId, JobSpec, SimTime};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `gandiva`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("gandiva", Family::OtherRounds, "Gandiva: time-slicing, random pairing kept while it pays (introspection), migration to defragment (OSDI'18, as Gavel runs it)").pair_speeds()
    .paper("Gandiva (OSDI'18), as in Gavel (OSDI'20)")
    .detail("Gandiva as Gavel runs it: equal time shares in rounds; when over-subscribed, random pairs of equal-size jobs share GPUs at their measured co-located speeds, kept across rounds until introspection (normalized packed throughput < 1) dissolves them; a running job is migrated to free a server for a spread multi-GPU job");

/// Builds `gandiva` on Gavel's rounds, with the measured pair speeds where there are some (it
/// places as Gavel's rounds do, whatever the strategy).
pub fn build(
    rounds: &RoundOptions,
    pair_speeds: &Option<Arc<PairSpeeds>>,
    _: Placing,
) -> Result<Gandiva, PolicyError> {
    Gandiva::new(*rounds, pair_speeds.clone())
}

/// Gandiva's pairs and what happened to them (kept in [`Gavel`] so that its recomputation can
/// update them).
#[derive(Clone, Debug, Default)]
pub(super) struct Pairing {
    /// Partner of every paired job, both directions.
    partner: BTreeMap<JobId, JobId>,
    /// Pairs formed so far.
    formed: u64,
    /// Pairs dissolved by introspection (both jobs still active, packing did not pay).
    dissolved: u64,
}

impl Pairing {
    /// The pairs, smaller id first, in id order.
    fn pairs(&self) -> Vec<(JobId, JobId)> {
        self.partner
            .iter()
            .filter(|(a, b)| a < b)
            .map(|(a, b)| (*a, *b))
            .collect()
    }

    fn is_paired(&self, id: JobId) -> bool {
        self.partner.contains_key(&id)
    }

    fn pair(&mut self, a: JobId, b: JobId) {
        self.partner.insert(a, b);
        self.partner.insert(b, a);
        self.formed += 1;
    }

    fn dissolve(&mut self, a: JobId, b: JobId) {
        self.partner.remove(&a);
        self.partner.remove(&b);
    }
}

/// Gavel's `_get_normalized_throughput`: Σ over types and both jobs of the packed speed over the
/// job's solo speed; 0 when either job makes no progress sharing some type (or alone there).
pub fn normalized_packed_throughput(speeds: &[(f64, f64)], solo_a: &[f64], solo_b: &[f64]) -> f64 {
    let mut sum = 0.0;
    for (k, &(a, b)) in speeds.iter().enumerate() {
        let (iso_a, iso_b) = (
            solo_a.get(k).copied().unwrap_or(0.0),
            solo_b.get(k).copied().unwrap_or(0.0),
        );
        if a <= 0.0 || b <= 0.0 || iso_a <= 0.0 || iso_b <= 0.0 {
            return 0.0;
        }
        sum += a / iso_a + b / iso_b;
    }
    sum
}

/// Gavel's `GandivaPolicy._get_allocation` for one combination of scale factor `sf` among `m`
/// combinations: `G_k / (m · sf)` per type, scaled so the row sums to at most 1.
fn equal_share(gpus_per_type: &[f64], combinations: usize, sf: f64) -> Vec<f64> {
    let denominator = combinations.max(1) as f64 * sf.max(1.0);
    let row: Vec<f64> = gpus_per_type.iter().map(|g| g / denominator).collect();
    let sum: f64 = row.iter().sum();
    let scale = if sum > 1.0 { 1.0 / sum } else { 1.0 };
    row.iter().map(|x| x * scale).collect()
}

impl Gavel {
    /// Both jobs' co-located speeds per type (0 where not measured).
    fn pair_speeds_per_type(
        &self,
        view: &SchedulerView<'_>,
        a: JobId,
        b: JobId,
    ) -> Vec<(f64, f64)> {
        let m = view.cluster.gpu_type_names.len();
        (0..m)
            .map(|k| {
                self.pair_speed(view, a, b, GpuTypeId(k as u8))
                    .unwrap_or((0.0, 0.0))
            })
            .collect()
    }

    /// The Gandiva objective's recomputation (see the module docs): introspection, then equal
    /// shares over single jobs or over combinations with new random pairs. Returns the single
    /// jobs' rows (in `ids` order) and sets the pairs' own allocations.
    pub(super) fn gandiva_allocation(
        &mut self,
        view: &SchedulerView<'_>,
        ids: &[JobId],
        gpus_per_type: &[f64],
    ) -> Allocation {
        let m = gpus_per_type.len();
        let active: BTreeSet<JobId> = ids.iter().copied().collect();
        let solo = |id: JobId| -> Vec<f64> {
            (0..m)
                .map(|k| view.specs[id.index()].speed_on(GpuTypeId(k as u8)))
                .collect()
        };

        // 1. Introspection.
        for (a, b) in self.gandiva.pairs() {
            let both_active = active.contains(&a) && active.contains(&b);
            let pays = both_active
                && normalized_packed_throughput(
                    &self.pair_speeds_per_type(view, a, b),
                    &solo(a),
                    &solo(b),
                ) >= 1.0;
            if !pays {
                self.gandiva.dissolve(a, b);
                self.books.remove(&Combo::Pair(a, b));
                if both_active {
                    self.gandiva.dissolved += 1;
                }
            }
        }

        let sf = |id: JobId| view.specs[id.index()].gpus as f64;
        let requested: f64 = ids.iter().map(|&id| sf(id)).sum();
        let available: f64 = gpus_per_type.iter().sum();
        if requested <= available {
            // 2. Time slicing, no packing.
            return ids
                .iter()
                .map(|&id| equal_share(gpus_per_type, ids.len(), sf(id)))
                .collect();
        }

        // 3. Random pairs for the jobs not yet in one (Gavel: n draws of two).
        let pairable =
            |id: JobId| self.pair_speeds.is_some() && view.specs[id.index()].model.is_some();
        let mut pool: Vec<JobId> = ids
            .iter()
            .copied()
            .filter(|&id| !self.gandiva.is_paired(id) && pairable(id))
            .collect();
        let draws = pool.len();
        let learned = self
            .pair_speeds
            .as_ref()
            .is_some_and(|p| p.is_solo_fractions());
        let mut drawn = 0;
        while pool.len() > 1 && drawn < draws {
            drawn += 1;
            let i = self.rng.random_range(0..pool.len());
            let mut j = self.rng.random_range(0..pool.len() - 1);
            if j >= i {
                j += 1;
            }
            let (a, b) = (pool[i], pool[j]);
            if view.specs[a.index()].gpus != view.specs[b.index()].gpus {
                continue;
            }
            // A learned table (a daemon's measurements) that already says the pair does not pay
            // wastes the draw too: introspection would dissolve it at once. (With Gavel's table
            // the pair is formed and dissolved at the next recomputation, as in Gavel.)
            if learned
                && normalized_packed_throughput(
                    &self.pair_speeds_per_type(view, a, b),
                    &solo(a),
                    &solo(b),
                ) < 1.0
            {
                continue;
            }
            pool.remove(i.max(j));
            pool.remove(i.min(j));
            self.gandiva.pair(a.min(b), a.max(b));
        }

        let pairs = self.gandiva.pairs();
        let combinations = pairs.len()
            + ids
                .iter()
                .filter(|&&id| !self.gandiva.is_paired(id))
                .count();
        let half = self.half_round();
        for (a, b) in pairs {
            let share = equal_share(gpus_per_type, combinations, sf(a));
            let pair_speeds = self.pair_speeds_per_type(view, a, b);
            let book = self
                .books
                .entry(Combo::Pair(a, b))
                .or_insert_with(|| JobBook {
                    allocation: None,
                    received_s: vec![half; m],
                    deficit_s: vec![0.0; m],
                    pair_speeds,
                });
            book.allocation = Some(share);
        }
        ids.iter()
            .map(|&id| {
                if self.gandiva.is_paired(id) {
                    vec![0.0; m]
                } else {
                    equal_share(gpus_per_type, combinations, sf(id))
                }
            })
            .collect()
    }
}

/// The `gandiva` policy: Gavel's round mechanism with Gandiva's allocation (time slicing, random
/// pairs kept while they pay) plus migration to defragment.
#[derive(Clone, Debug)]
pub struct Gandiva {
    gavel: Gavel,
    /// Multi-GPU jobs given a whole server by migration.
    gangs_consolidated: u64,
    /// Running jobs moved to free a server for one (each a migration).
    jobs_migrated: u64,
}

impl Gandiva {
    /// Gandiva over Gavel's rounds; without `pair_speeds` no job ever pairs (pure time slicing).
    pub fn new(
        options: RoundOptions,
        pair_speeds: Option<Arc<PairSpeeds>>,
    ) -> Result<Self, PolicyError> {
        let mut gavel = Gavel::new("gandiva", Objective::Gandiva, true, options)?;
        if let Some(speeds) = pair_speeds {
            gavel = gavel.with_pair_speeds(speeds);
        }
        Ok(Gandiva {
            gavel,
            gangs_consolidated: 0,
            jobs_migrated: 0,
        })
    }

    /// The current pairs (smaller id first, in id order), including those kept but unused while
    /// the cluster is not over-subscribed.
    pub fn pairs(&self) -> Vec<(JobId, JobId)> {
        self.gavel.gandiva.pairs()
    }

    /// Pairs formed so far.
    pub fn pairs_formed(&self) -> u64 {
        self.gavel.gandiva.formed
    }

    /// Pairs dissolved by introspection so far (not counting pairs whose job left).
    pub fn pairs_dissolved(&self) -> u64 {
        self.gavel.gandiva.dissolved
    }

    /// Multi-GPU jobs given a whole server by migrating other jobs.
    pub fn gangs_consolidated(&self) -> u64 {
        self.gangs_consolidated
    }

    /// Running jobs migrated to defragment.
    pub fn jobs_migrated(&self) -> u64 {
        self.jobs_migrated
    }

    /// Lease extensions granted (a combination kept its GPUs from one round to the next).
    pub fn lease_extensions(&self) -> u64 {
        self.gavel.lease_extensions
    }

    /// Allocation recomputations so far.
    pub fn recomputations(&self) -> u64 {
        self.gavel.recomputations
    }

    /// The single jobs' allocation in force at `now`, recomputing it under the rounds' rule (see
    /// [`Gavel::allocation_at`]); paired jobs have all-zero rows (their time is the pair's).
    pub fn allocation_at(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> BTreeMap<JobId, Vec<f64>> {
        self.gavel.allocation_at(view, now)
    }
}

impl Policy for Gandiva {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut decision = self.gavel.schedule(view, now)?;
        let moves = defrag::defragment(view, &mut decision);
        self.gangs_consolidated += moves.gangs;
        self.jobs_migrated += moves.jobs_migrated;
        // A combination moved off the GPUs it kept did not get its lease extended after all.
        self.gavel.lease_extensions = self
            .gavel
            .lease_extensions
            .saturating_sub(moves.leases_undone);
        Ok(decision)
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        self.gavel.job_finished(spec, job, now);
    }

    /// Replaces the co-location table (a daemon's learned one): the pairs are kept, and the next
    /// due recomputation (new speeds count as a change, like a new job) judges them by the new
    /// speeds.
    fn set_pair_speeds(&mut self, speeds: Arc<PairSpeeds>) {
        self.gavel.pair_speeds = Some(speeds);
        self.gavel.job_set_changed = true;
    }
}

#[cfg(test)]
mod tests;
