//! Muri-S and Muri-L (Zhao et al., SIGCOMM'22), as Muri's simulator runs them
//! (`multi_resource_blossom_same_sim_jobs`; see `docs/muri-reference.md` §3): jobs whose
//! iterations stress different resources (storage I/O, CPU, GPU) are interleaved on the same
//! GPUs, up to four per group, all members advancing one iteration per interleaved iteration.
//!
//! At each scheduling point:
//! 1. the jobs are ranked — Muri-S by remaining GPU time (for a job that never ran: its trace's
//!    duration × GPUs), Muri-L by attained service (seconds run × GPUs) — by a stable sort of a
//!    list kept between points (arrivals at its end; after each point it is re-sorted by GPU count,
//!    largest first, which breaks the next point's ties);
//! 2. walking that order on an empty cluster (consolidated placement), each job that still fits
//!    opens a slot that takes it and the next `packing - 1` not yet taken jobs with the same GPU
//!    count as candidates;
//! 3. while the candidates need more GPUs than the cluster has, groups of each GPU-size class are
//!    merged by a maximum-weight matching (Muri's own blossom code, [`crate::muri::matching::muri`];
//!    edges between groups of at most `packing` jobs together, weighted by the resources their
//!    jobs use over four resources' time in the merged group's interleaved iteration), at most
//!    `packing` rounds, merging pairs in order only while demand exceeds capacity;
//! 4. with autopack, a group slower than its members run in turn is split, and groups are placed
//!    in rank order (dropping those that no longer fit); without, all go on;
//! 5. groups are placed (largest jobs first); members share their first member's GPUs and run at
//!    the group's speed (their own iteration time over the group's, [`crate::muri::interleave`]).
//!
//! Jobs without stage times (not from a Muri trace) run alone, as SRSF / LAS would place them.

pub mod interleave;
pub mod matching;

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::muri::interleave::{GroupFactors, JobOrder, Stages, iteration_time_with_s, used_ratio};
use crate::muri::matching::by_shape;
use crate::muri::matching::muri::muri_max_weight_matching;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{
    ActiveJob, Assignment, Colocation, Decision, JobId, JobSpec, Placement, SimTime,
};
use smallvec::{SmallVec, smallvec};
use std::collections::{BTreeMap, HashMap};

/// `muri-s`.
pub const MURI_S: Descriptor = Descriptor::new("muri-s", Family::Events, "Muri-S: interleave up to 4 jobs with different resource needs per GPU set, least remaining service first (SIGCOMM'22)")
    .paper("Muri (SIGCOMM'22), as its simulator runs it")
    .detail("Muri-S: up to `policy.muri.packing` jobs whose iterations stress different resources (storage I/O, CPU, GPU, network) share one set of GPUs, interleaved; jobs ranked by remaining GPU time, groups formed by Muri's maximum-weight (Blossom) matching while demand exceeds the cluster, placed once per group; with `policy.muri.autopack`, a group slower than its members in turn is split; `policy.muri.matching = \"fast\"` matches classes of over `policy.muri.fast_above_groups` (64) groups over their shapes instead, for large traces; preemptive");
/// `muri-l`.
pub const MURI_L: Descriptor = Descriptor::new(
    "muri-l",
    Family::Events,
    "Muri-L: Muri's interleaving, least attained service first, durations unknown (SIGCOMM'22)",
)
.paper("Muri (SIGCOMM'22)")
.detail("Muri-L: the same, ranked by attained GPU service (durations unknown)");

/// Builds `muri-s` with Muri's knobs (checked). It places as Muri's simulator does, whatever the
/// strategy.
pub fn build_muri_s(muri: &MuriConfig, _: Placing) -> Result<Muri, PolicyError> {
    Muri::new(MuriRanking::RemainingService, *muri)
}

/// Builds `muri-l`, as [`build_muri_s`].
pub fn build_muri_l(muri: &MuriConfig, _: Placing) -> Result<Muri, PolicyError> {
    Muri::new(MuriRanking::AttainedService, *muri)
}

/// Which of Muri's two rankings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MuriRanking {
    /// Muri-S: least remaining GPU time first (durations known).
    RemainingService,
    /// Muri-L: least attained GPU time first (durations unknown).
    AttainedService,
}

/// Muri's knobs (scenario table `[policy.muri]`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MuriConfig {
    /// Most jobs in one group (`--packing_num`, 4).
    pub packing: usize,
    /// Split groups slower than running their members in turn (`--autopack`).
    pub autopack: bool,
    /// Which job order inside a group the interleaving assumes (best, as Muri; worst for its
    /// ablation).
    pub order: JobOrder,
    /// Merge groups by maximum-weight matching (Muri). `false` is its ablation "without
    /// Blossom" (`multi-resource-gpu-unaware`): each slot's candidates are merged into the
    /// slot's first job, in list order, while demand exceeds capacity; Muri's simulator also
    /// takes four interleaved jobs' slowdown as 1.3 instead of 1.37 then
    /// ([`GroupFactors::MURI_WITHOUT_BLOSSOM`]).
    pub blossom: bool,
    /// Which maximum-weight matching merges the groups: Muri's own blossom, tie for tie
    /// (`exact`, the default: the reproductions depend on it), or one over job shapes for
    /// traces too large for its O(n³) search (`fast`; [`matching::by_shape`]).
    pub matching: MuriMatching,
    /// With `matching = "fast"`: a class of at most this many groups is still matched by
    /// Muri's blossom (exact: ≈ 0.15 ms at 64 groups, 8 ms at 255); larger ones over their shapes. 0 matches
    /// every class over shapes (how its deviation is measured).
    pub fast_above_groups: usize,
}

/// Which matching merges Muri's groups (`policy.muri.matching`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MuriMatching {
    /// Muri's blossom, which picks the same matching as Muri's simulator among equally heavy
    /// ones: O(n³) in the groups of a class (≈ 8 ms for 255).
    #[default]
    Exact,
    /// Above `fast_above_groups` groups in a class, a b-matching over the groups' shapes (a
    /// small integer program), then the best-ranked groups of each pair of shapes paired: its
    /// cost grows with the shapes, not the groups. Below, Muri's blossom. Either way, no
    /// matching where no pair would be merged.
    Fast,
}

impl Default for MuriConfig {
    fn default() -> Self {
        MuriConfig {
            packing: 4,
            autopack: false,
            order: JobOrder::Best,
            blossom: true,
            matching: MuriMatching::Exact,
            fast_above_groups: 64,
        }
    }
}

/// Muri-S or Muri-L.
#[derive(Clone, Debug)]
pub struct Muri {
    ranking: MuriRanking,
    config: MuriConfig,
    /// The runnable jobs in Muri's list order (see the module docs).
    list: Vec<JobId>,
    /// Per job id: whether it is in `list`.
    listed: Vec<bool>,
    /// Per job id: its last rank value (Muri-S keeps a waiting job's last one).
    sort_val: Vec<f64>,
    /// Interleaving results by group shape, computed once.
    memo: ShapeMemo,
}

/// Jobs with the same stage and iteration times interleave alike: Muri's traces have a handful
/// of such shapes and thousands of jobs, and the matching asks for the weight of every pair of
/// groups at every scheduling point (a third of the run time before this memo). Looked up, never
/// iterated, so the hash maps cannot reorder a decision.
#[derive(Clone, Debug)]
struct ShapeMemo {
    /// The group slowdowns of the interleaving (Muri's; other for its ablation).
    factors: GroupFactors,
    /// Shape number by (io, cpu, gpu, iteration) bits.
    shapes: HashMap<[u64; 4], u32>,
    /// Per job id: its shape number (`NO_SHAPE` before it is looked up, `NO_STAGES` without
    /// stage times).
    shape_of: Vec<u32>,
    /// `used_ratio` by the members' shapes in group order (`NO_SHAPE` pads) and job order.
    weights: HashMap<([u32; 4], JobOrder), f64>,
    /// Interleaved iteration time by the members' shapes in group order and job order.
    times: HashMap<([u32; 4], JobOrder), f64>,
}

const NO_SHAPE: u32 = u32::MAX;
/// A job id's entry in [`Muri::update_list`]'s positions when the view does not hold it.
const NOT_IN_VIEW: u32 = u32::MAX;
const NO_STAGES: u32 = u32::MAX - 1;

impl ShapeMemo {
    fn new(factors: GroupFactors) -> Self {
        ShapeMemo {
            factors,
            shapes: HashMap::new(),
            shape_of: Vec::new(),
            weights: HashMap::new(),
            times: HashMap::new(),
        }
    }

    /// The shape of a job (assigned on first sight).
    fn shape(&mut self, spec: &JobSpec) -> u32 {
        let i = spec.id.index();
        if self.shape_of.len() <= i {
            self.shape_of.resize(i + 1, NO_SHAPE);
        }
        if self.shape_of[i] == NO_SHAPE {
            self.shape_of[i] = match spec.stages {
                None => NO_STAGES,
                Some(st) => {
                    let key = [
                        st.io_s.to_bits(),
                        st.cpu_s.to_bits(),
                        st.gpu_s.to_bits(),
                        spec.iteration_s.unwrap_or(1.0).to_bits(),
                    ];
                    let next = self.shapes.len() as u32;
                    *self.shapes.entry(key).or_insert(next)
                }
            };
        }
        self.shape_of[i]
    }

    /// The key of a group (`None` when a member has no stage times or it has over 4 members).
    fn key(&mut self, members: &[&JobSpec]) -> Option<[u32; 4]> {
        if members.len() > 4 {
            return None;
        }
        let mut key = [NO_SHAPE; 4];
        for (k, spec) in key.iter_mut().zip(members) {
            *k = self.shape(spec);
            if *k == NO_STAGES {
                return None;
            }
        }
        Some(key)
    }

    /// Muri's edge weight of a would-be group, `None` if its members cannot interleave.
    fn weight(&mut self, members: &[&JobSpec], order: JobOrder) -> Option<f64> {
        let key = self.key(members)?;
        let w = *self.weights.entry((key, order)).or_insert_with(|| {
            let stages: Vec<Stages> = members.iter().filter_map(|s| s.stages).collect();
            used_ratio(
                &stages,
                members[0].iteration_s.unwrap_or(1.0),
                order,
                self.factors,
            )
        });
        (w > 0.0).then_some(w)
    }

    /// A group's interleaved iteration time (a job alone, or one without stages: its own).
    fn time(&mut self, members: &[&JobSpec], order: JobOrder) -> f64 {
        match self.key(members) {
            Some(key) => *self
                .times
                .entry((key, order))
                .or_insert_with(|| group_time(members, order, self.factors)),
            None => group_time(members, order, self.factors),
        }
    }
}

/// The matching's edge weights for one class at one round: the groups' shapes numbered in
/// order of first sight, and the weight of every ordered pair of those shapes, computed (or
/// memoised) once. The matching asks for all `n·(n−1)` ordered pairs of up to 256 groups, while
/// a class holds a few dozen distinct shapes.
struct PairTable {
    /// Per group: its row in `weights` (`None`: it cannot interleave with anyone — a member
    /// without stage times).
    row: Vec<Option<usize>>,
    /// Per group: its member count.
    size: Vec<usize>,
    /// Weight by (row, row), `rows × rows`, `None` where the pair cannot interleave.
    weights: Vec<Option<f64>>,
    rows: usize,
    packing: usize,
}

impl PairTable {
    fn new<'a>(
        memo: &mut ShapeMemo,
        groups: &[Group],
        spec: &impl Fn(usize) -> &'a JobSpec,
        packing: usize,
        order: JobOrder,
    ) -> Self {
        let mut keys: Vec<[u32; 4]> = Vec::new();
        let mut representative: Vec<usize> = Vec::new();
        let mut row = Vec::with_capacity(groups.len());
        let mut members: Vec<&JobSpec> = Vec::with_capacity(4);
        for (k, group) in groups.iter().enumerate() {
            members.clear();
            members.extend(group.jobs.iter().map(|&i| spec(i)));
            row.push(
                memo.key(&members)
                    .map(|key| match keys.iter().position(|x| *x == key) {
                        Some(r) => r,
                        None => {
                            keys.push(key);
                            representative.push(k);
                            keys.len() - 1
                        }
                    }),
            );
        }
        let rows = keys.len();
        let mut weights = vec![None; rows * rows];
        for (a, &ga) in representative.iter().enumerate() {
            for (b, &gb) in representative.iter().enumerate() {
                if groups[ga].jobs.len() + groups[gb].jobs.len() > packing {
                    continue;
                }
                members.clear();
                members.extend(
                    groups[ga]
                        .jobs
                        .iter()
                        .chain(&groups[gb].jobs)
                        .map(|&i| spec(i)),
                );
                weights[a * rows + b] = memo.weight(&members, order);
            }
        }
        PairTable {
            row,
            size: groups.iter().map(|g| g.jobs.len()).collect(),
            weights,
            rows,
            packing,
        }
    }

    /// The weight of merging a group of row `a` with one of row `b` (in that order). Groups of
    /// one row have the same members' shapes, so the same size: the packing limit is already in
    /// the table.
    fn shape_weight(&self, a: usize, b: usize) -> Option<f64> {
        *self.weights.get(a * self.rows + b)?
    }

    /// The weight of merging group `u` with group `v` (in that order), as [`ShapeMemo::weight`].
    fn weight(&self, u: usize, v: usize) -> Option<f64> {
        if self.size[u] + self.size[v] > self.packing {
            return None;
        }
        self.weights[self.row[u]? * self.rows + self.row[v]?]
    }
}

/// One group: its jobs (list order; at most `MAX_GROUP`, kept inline: every candidate is a
/// group at every scheduling point), and their GPU count.
#[derive(Clone, Debug)]
struct Group {
    jobs: SmallVec<[usize; arbiter_model::MAX_GROUP]>,
    gpus: u32,
}

impl Muri {
    /// A Muri policy.
    pub fn new(ranking: MuriRanking, config: MuriConfig) -> Result<Self, PolicyError> {
        if !(1..=arbiter_model::MAX_GROUP).contains(&config.packing) {
            return Err(PolicyError::Config(format!(
                "muri packing must be 1 to {}, got {}",
                arbiter_model::MAX_GROUP,
                config.packing
            )));
        }
        Ok(Muri {
            ranking,
            config,
            list: Vec::new(),
            listed: Vec::new(),
            sort_val: Vec::new(),
            memo: ShapeMemo::new(if config.blossom {
                GroupFactors::MURI
            } else {
                GroupFactors::MURI_WITHOUT_BLOSSOM
            }),
        })
    }

    fn rank_value(&self, job: &ActiveJob, spec: &JobSpec, now: SimTime) -> f64 {
        let g = job.gpus as f64;
        match self.ranking {
            MuriRanking::AttainedService => job.executed_s_at(now) * g,
            MuriRanking::RemainingService => match job.first_start {
                None => spec.trace_duration_s.unwrap_or(spec.run_time_s) * g,
                Some(_) if job.is_running() => job.remaining_s_at(now) * g,
                // A waiting job keeps the value it had when it last ran.
                Some(_) => self
                    .sort_val
                    .get(job.id.index())
                    .copied()
                    .unwrap_or(job.remaining_s * g),
            },
        }
    }
}

/// Muri's grouping without Blossom (`blossom=False` in `multi_resource_blossom_same_sim_jobs`):
/// per class (in order of first appearance), the candidates come in slots of `packing`
/// consecutive jobs; a slot's later jobs join its first while the demand (over all classes)
/// exceeds `capacity`, and once it does not they stay alone, listed before their slot's group.
fn merge_slots_in_order(
    classes: &[u32],
    singles: &BTreeMap<u32, Vec<Group>>,
    packing: usize,
    required: &mut u64,
    capacity: u64,
) -> BTreeMap<u32, Vec<Group>> {
    let mut merged = BTreeMap::new();
    for g in classes {
        let Some(candidates) = singles.get(g) else {
            continue;
        };
        let mut out: Vec<Group> = Vec::new();
        for slot in candidates.chunks(packing) {
            let mut group = slot[0].clone();
            for single in &slot[1..] {
                if *required > capacity {
                    group.jobs.extend(single.jobs.iter().copied());
                    *required -= u64::from(*g);
                } else {
                    out.push(single.clone());
                }
            }
            out.push(group);
        }
        merged.insert(*g, out);
    }
    merged
}

/// A group's interleaved iteration time (a job alone: its own).
fn group_time(members: &[&JobSpec], order: JobOrder, factors: GroupFactors) -> f64 {
    let stages: Vec<Stages> = members.iter().filter_map(|s| s.stages).collect();
    let solo = members.first().and_then(|s| s.iteration_s).unwrap_or(1.0);
    if stages.len() != members.len() {
        return solo;
    }
    iteration_time_with_s(&stages, solo, order, factors)
}

impl Muri {
    /// Brings the list up to date with the view: finished jobs out, arrivals appended in arrival
    /// order. Returns each job's index in the view, by id (`NOT_IN_VIEW` for others): a vector,
    /// not a map — it is built at every scheduling point over every job.
    fn update_list(&mut self, view: &SchedulerView<'_>) -> Vec<u32> {
        let n_ids = view
            .jobs
            .iter()
            .map(|j| j.id.index() + 1)
            .max()
            .unwrap_or(0);
        if self.listed.len() < n_ids {
            self.listed.resize(n_ids, false);
            self.sort_val.resize(n_ids, 0.0);
        }
        let mut position = vec![NOT_IN_VIEW; n_ids];
        for (i, j) in view.jobs.iter().enumerate() {
            position[j.id.index()] = i as u32;
        }
        // A job can leave the view and come back (the daemon leaves out a run that is still
        // stopping): it is then an arrival again, not forgotten.
        let listed = &mut self.listed;
        self.list.retain(|id| {
            let here = position.get(id.index()).is_some_and(|&p| p != NOT_IN_VIEW);
            if !here {
                listed[id.index()] = false;
            }
            here
        });
        let mut arrivals: Vec<&ActiveJob> = view
            .jobs
            .iter()
            .filter(|j| !self.listed[j.id.index()])
            .collect();
        arrivals.sort_by_key(|j| (j.submit, j.id));
        for j in arrivals {
            self.listed[j.id.index()] = true;
            self.list.push(j.id);
        }
        position
    }

    /// Step 1: ranks the list (a stable sort, so the last point's order breaks ties) and returns
    /// the jobs' view indexes in that order.
    fn rank(&mut self, view: &SchedulerView<'_>, now: SimTime, position: Vec<u32>) -> Vec<usize> {
        for j in view.jobs {
            let v = self.rank_value(j, view.spec(j), now);
            self.sort_val[j.id.index()] = v;
        }
        // Sorted with the values beside the ids (a stable sort on the same keys: the same
        // order), not looked up by id at every comparison.
        let mut keyed: Vec<(f64, JobId)> = self
            .list
            .iter()
            .map(|id| (self.sort_val[id.index()], *id))
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.list.clear();
        self.list.extend(keyed.iter().map(|&(_, id)| id));
        self.list
            .iter()
            .filter_map(|id| match position.get(id.index()) {
                Some(&p) if p != NOT_IN_VIEW => Some(p as usize),
                _ => None,
            })
            .collect()
    }

    /// Step 2, the slots: walking `order` on an empty cluster (consolidated placement), each job
    /// not yet taken that still fits opens a slot of the next `packing` jobs of its class (GPU
    /// count). Returns per class how many of its jobs (`by_class` order) became candidates.
    fn open_slots(
        &self,
        view: &SchedulerView<'_>,
        now: SimTime,
        order: &[usize],
        by_class: &BTreeMap<u32, Vec<usize>>,
    ) -> BTreeMap<u32, usize> {
        let job = |i: usize| &view.jobs[i];
        let mut placer = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        let mut chosen: BTreeMap<u32, usize> = BTreeMap::new();
        let mut taken = vec![false; view.jobs.len()];
        for &i in order {
            if taken[i] {
                continue;
            }
            let g = job(i).gpus;
            if placer
                .place(view.spec(job(i)), job(i).pending_since, now)
                .is_ok()
            {
                let list = &by_class[&g];
                let from = chosen.get(&g).copied().unwrap_or(0);
                let up = (from + self.config.packing).min(list.len());
                for &k in &list[from..up] {
                    taken[k] = true;
                }
                chosen.insert(g, up);
            }
        }
        chosen
    }

    /// Step 2: the classes (GPU counts, in order of first appearance in `order`), each class's
    /// candidates as groups of one, and the GPUs the candidates need together.
    fn candidates(
        &self,
        view: &SchedulerView<'_>,
        now: SimTime,
        order: &[usize],
    ) -> (Vec<u32>, BTreeMap<u32, Vec<Group>>, u64) {
        let mut classes: Vec<u32> = Vec::new();
        let mut by_class: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &i in order {
            let g = view.jobs[i].gpus;
            if !by_class.contains_key(&g) {
                classes.push(g);
            }
            by_class.entry(g).or_default().push(i);
        }
        let chosen = self.open_slots(view, now, order, &by_class);
        let required: u64 = chosen.iter().map(|(g, c)| u64::from(*g) * *c as u64).sum();
        let groups: BTreeMap<u32, Vec<Group>> = classes
            .iter()
            .map(|g| {
                (
                    *g,
                    by_class[g][..chosen.get(g).copied().unwrap_or(0)]
                        .iter()
                        .map(|&i| Group {
                            jobs: smallvec![i],
                            gpus: *g,
                        })
                        .collect(),
                )
            })
            .collect();
        (classes, groups, required)
    }

    /// Step 3 with Blossom: up to `packing` rounds, each merging every class's groups by a
    /// maximum-weight matching; rounds after the first run only while demand exceeds capacity.
    fn merge_by_matching(
        &mut self,
        view: &SchedulerView<'_>,
        classes: &[u32],
        groups: &mut BTreeMap<u32, Vec<Group>>,
        required: &mut u64,
        capacity: u64,
    ) -> Result<(), PolicyError> {
        for round in 0..self.config.packing {
            if round > 0 && *required <= capacity {
                break;
            }
            for g in classes {
                let Some(current) = groups.get(g) else {
                    continue;
                };
                let next = self.match_class(view, *g, current, required, capacity)?;
                groups.insert(*g, next);
            }
        }
        Ok(())
    }

    /// One matching round of one class (`gpus` GPUs per job): the class's groups after merging
    /// matched pairs, in order, only while demand (`required`, lowered per merge) exceeds
    /// `capacity`.
    fn match_class(
        &mut self,
        view: &SchedulerView<'_>,
        gpus: u32,
        current: &[Group],
        required: &mut u64,
        capacity: u64,
    ) -> Result<Vec<Group>, PolicyError> {
        let fast = self.config.matching == MuriMatching::Fast;
        if *required <= capacity && (fast || !self.config.autopack) {
            // No pair would be merged: the matching would only reorder the groups (a pair
            // moves to its later member's place), which matters to nothing but autopack's
            // ranking of tied groups. Muri matches anyway; the result is the same without.
            return Ok(current.to_vec());
        }
        let spec = |i: usize| view.spec(&view.jobs[i]);
        let packing = self.config.packing;
        let table = PairTable::new(&mut self.memo, current, &spec, packing, self.config.order);
        let mate = if fast && current.len() > self.config.fast_above_groups {
            by_shape::match_by_shape(&table.row, table.rows, |a, b| table.shape_weight(a, b))
        } else {
            muri_max_weight_matching(current.len(), |u, v| table.weight(u, v))
                .map_err(|e| PolicyError::Config(format!("muri matching: {e}")))?
        };
        // Ready list: unmatched in order; a pair when the loop reaches its larger index.
        let mut ready: Vec<Vec<usize>> = Vec::new();
        for u in 0..current.len() {
            match mate[u] {
                Some(v) if v < u && mate[v] == Some(u) => ready.push(vec![v, u]),
                Some(v) if v > u && mate[v] == Some(u) => {}
                _ => ready.push(vec![u]),
            }
        }
        let mut next: Vec<Group> = Vec::new();
        for entry in ready {
            if entry.len() == 2 && *required > capacity {
                let mut jobs = current[entry[0]].jobs.clone();
                jobs.extend(current[entry[1]].jobs.iter().copied());
                next.push(Group { jobs, gpus });
                *required -= u64::from(gpus);
            } else {
                next.extend(entry.iter().map(|&k| current[k].clone()));
            }
        }
        Ok(next)
    }

    /// Step 4, autopack: splits groups slower than their members run in turn, orders the groups
    /// by rank (a group by its best-ranked member) and keeps those that still fit, in that order.
    fn autopack(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
        runnable: Vec<Group>,
    ) -> Vec<Group> {
        let job = |i: usize| &view.jobs[i];
        let spec = |i: usize| view.spec(&view.jobs[i]);
        let mut keyed: Vec<(f64, Group)> = Vec::new();
        for group in runnable {
            let members: Vec<&JobSpec> = group.jobs.iter().map(|&i| spec(i)).collect();
            let together = self.memo.time(&members, JobOrder::Best);
            let in_turn: f64 = members.iter().map(|s| s.iteration_s.unwrap_or(1.0)).sum();
            if group.jobs.len() > 1 && together / in_turn > 1.0 {
                keyed.extend(group.jobs.iter().map(|&i| {
                    (
                        self.sort_val[job(i).id.index()],
                        Group {
                            jobs: smallvec![i],
                            gpus: group.gpus,
                        },
                    )
                }));
            } else {
                let key = group
                    .jobs
                    .iter()
                    .map(|&i| self.sort_val[job(i).id.index()])
                    .fold(f64::INFINITY, f64::min);
                keyed.push((key, group));
            }
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut dry = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        keyed
            .into_iter()
            .filter(|(_, g)| {
                dry.place(spec(g.jobs[0]), job(g.jobs[0]).pending_since, now)
                    .is_ok()
            })
            .map(|(_, g)| g)
            .collect()
    }

    /// How member `i` of `group` shares its GPUs: with the next member, at its own iteration
    /// time over the group's (`None` for a job alone).
    fn colocation(
        &mut self,
        view: &SchedulerView<'_>,
        group: &Group,
        i: usize,
    ) -> Option<Colocation> {
        let spec = |i: usize| view.spec(&view.jobs[i]);
        (group.jobs.len() > 1).then(|| {
            let members: Vec<&JobSpec> = group.jobs.iter().map(|&m| spec(m)).collect();
            let together = self.memo.time(&members, self.config.order);
            let at = group.jobs.iter().position(|&m| m == i).unwrap_or(0);
            let partner = view.jobs[group.jobs[(at + 1) % group.jobs.len()]].id;
            Colocation {
                partner,
                speed: spec(i).iteration_s.unwrap_or(together) / together,
            }
        })
    }

    /// Step 5: places the groups, walking the jobs (rank `order`) largest first (stable); a
    /// group's first member so met takes GPUs and the others share them, and when it does not fit
    /// the whole group waits.
    fn place_groups(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
        mut order: Vec<usize>,
        runnable: &[Group],
    ) -> Decision {
        // Per view index: its group (a vector: every job is looked up).
        let mut group_of: Vec<Option<usize>> = vec![None; view.jobs.len()];
        for (k, group) in runnable.iter().enumerate() {
            for &i in &group.jobs {
                group_of[i] = Some(k);
            }
        }
        order.sort_by_key(|&i| std::cmp::Reverse(view.jobs[i].gpus));
        let mut placer = Placer::new(view.cluster, PlacementStrategy::Consolidated);
        // Per group: its GPUs once its first member (in this order) was placed, or `None` when
        // that failed (the whole group waits).
        let mut placed: Vec<Option<Option<Placement>>> = vec![None; runnable.len()];
        let mut decision = Decision::default();
        for &i in &order {
            let Some(k) = group_of[i] else { continue };
            let job = &view.jobs[i];
            let placement = match &placed[k] {
                Some(Some(p)) => p.clone(),
                Some(None) => continue,
                None => {
                    let p = placer.place(view.spec(job), job.pending_since, now).ok();
                    placed[k] = Some(p.clone());
                    match p {
                        Some(p) => p,
                        None => continue,
                    }
                }
            };
            let colocation = self.colocation(view, &runnable[k], i);
            decision.run.push(Assignment {
                job: job.id,
                placement,
                colocation,
                host: None,
                guest: None,
            });
        }
        decision
    }

    /// The list for the next point: largest GPU count first (stable).
    fn sort_list_by_gpus(&mut self, view: &SchedulerView<'_>) {
        let mut gpus_of = vec![0u32; self.listed.len()];
        for j in view.jobs {
            if let Some(g) = gpus_of.get_mut(j.id.index()) {
                *g = j.gpus;
            }
        }
        let mut keyed: Vec<(u32, JobId)> = self
            .list
            .iter()
            .map(|id| (gpus_of.get(id.index()).copied().unwrap_or(0), *id))
            .collect();
        keyed.sort_by_key(|&(gpus, _)| std::cmp::Reverse(gpus));
        self.list.clear();
        self.list.extend(keyed.iter().map(|&(_, id)| id));
    }
}

impl Policy for Muri {
    fn name(&self) -> &'static str {
        match self.ranking {
            MuriRanking::RemainingService => MURI_S.name,
            MuriRanking::AttainedService => MURI_L.name,
        }
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        // The list: finished jobs out, arrivals appended in arrival order.
        let position = self.update_list(view);
        // 1. Rank (stable).
        let order = self.rank(view, now, position);
        // 2. Slots and candidates per GPU count (classes in order of first appearance).
        let (classes, mut groups, mut required) = self.candidates(view, now, &order);
        let capacity = view.cluster.total_gpus() as u64;
        // 3. Merge by matching while demand exceeds capacity (the first round always runs);
        // without Blossom, each slot's candidates into its first job, in order.
        if self.config.blossom {
            self.merge_by_matching(view, &classes, &mut groups, &mut required, capacity)?;
        } else {
            groups = merge_slots_in_order(
                &classes,
                &groups,
                self.config.packing,
                &mut required,
                capacity,
            );
        }
        // 4. Autopack: split groups slower than their members in turn; place in rank order.
        let mut runnable: Vec<Group> = classes
            .iter()
            .flat_map(|g| groups.remove(g).unwrap_or_default())
            .collect();
        if self.config.autopack {
            runnable = self.autopack(view, now, runnable);
        }
        // 5. Place, largest jobs first (stable), members on their group's GPUs.
        let decision = self.place_groups(view, now, order, &runnable);
        self.sort_list_by_gpus(view);
        Ok(decision)
    }

    fn job_finished(&mut self, _spec: &JobSpec, job: &ActiveJob, _now: SimTime) {
        if let Some(l) = self.listed.get_mut(job.id.index()) {
            *l = false;
        }
        self.list.retain(|id| *id != job.id);
    }
}

#[cfg(test)]
mod tests;
