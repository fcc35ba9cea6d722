//! Where a job's GPUs go: the placement strategies and the free-GPU bookkeeping policies use
//! while building a decision.

use arbiter_model::{
    Cluster, GpuTypeId, JobSpec, NodeId, Occupancy, PendingReason, Placement, SimDuration, SimTime,
};
use serde::{Deserialize, Serialize};

/// How a gang of GPUs is laid out on nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PlacementStrategy {
    /// Fewest nodes, in one rack (YARN-CS / Tiresias' `yarn` scheme): a job that fits on a node
    /// takes the first node with enough free GPUs; a larger job takes whole free nodes plus one
    /// node for the remainder. All or nothing.
    #[default]
    Consolidated,
    /// As many nodes as possible: one GPU at a time to the node with the most free GPUs.
    Spread,
    /// Philly's locality relaxation: consolidated, but after a job has waited `after_s` seconds it
    /// accepts any GPUs (fullest-free nodes first, across racks).
    Relaxed {
        /// Seconds of waiting after which locality is given up.
        after_s: f64,
    },
    /// Only counts GPUs: any free GPUs anywhere (fullest-free nodes first). Muri's `count` scheme.
    Anywhere,
}

impl PlacementStrategy {
    /// Names accepted by [`PlacementStrategy::from_name`].
    pub const NAMES: [&'static str; 4] = ["consolidated", "spread", "relaxed", "anywhere"];

    /// Parses a strategy name; `relax_after_s` is used by `relaxed`.
    pub fn from_name(name: &str, relax_after_s: f64) -> Option<Self> {
        Some(match name {
            "consolidated" => PlacementStrategy::Consolidated,
            "spread" => PlacementStrategy::Spread,
            "anywhere" => PlacementStrategy::Anywhere,
            "relaxed" => PlacementStrategy::Relaxed {
                after_s: relax_after_s,
            },
            _ => return None,
        })
    }
}

/// How the caller wants jobs placed, handed to every policy's builder: the strategy (a
/// scenario's `[placement]`) and whether a preemptive policy keeps a continuing job's GPUs when
/// they are free (true) or re-places every job from an empty cluster at each scheduling point
/// (false, as Tiresias' and Muri's simulators do).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placing {
    /// Where a gang's GPUs go.
    pub strategy: PlacementStrategy,
    /// Keep a continuing job's GPUs.
    pub keep_placements: bool,
}

/// Whether `spec` may run on GPUs of type `t` at all.
fn type_allowed(spec: &JobSpec, t: GpuTypeId) -> bool {
    spec.gpu_type.is_none_or(|g| g == t) && spec.speed_on(t) > 0.0
}

/// Free GPUs while a decision is being built.
#[derive(Clone, Debug)]
pub struct Placer<'a> {
    cluster: &'a Cluster,
    free: FreeGpus<'a>,
    free_total: u32,
    strategy: PlacementStrategy,
    /// While set, only GPUs of this type are considered ([`Placer::place_on_type`]).
    only_type: Option<GpuTypeId>,
    /// GPUs of the largest node (fixed for the cluster), found the first time it is needed: a
    /// scheduling point that places a job or two must not cost a pass over every node.
    max_gpus_per_node: Option<u32>,
    /// Nodes by rack, built the first time a job larger than a node is placed.
    racks: Option<RackIndex>,
}

/// A placer's free GPUs per node: the present's, read where they are until the placer first
/// changes them, then its own copy (in the buffer it was given to reuse).
#[derive(Clone, Debug)]
struct FreeGpus<'a> {
    /// The present's, while nothing has changed.
    present: Option<&'a [u32]>,
    /// The placer's own (a spare buffer while `present` is read).
    own: Vec<u32>,
}

impl FreeGpus<'_> {
    #[inline]
    fn read(&self) -> &[u32] {
        self.present.unwrap_or(&self.own)
    }

    /// The free GPUs to change (copied from the present the first time).
    fn write(&mut self) -> &mut [u32] {
        if let Some(present) = self.present.take() {
            self.own.clear();
            self.own.extend_from_slice(present);
        }
        &mut self.own
    }
}

/// The cluster's nodes by rack: a multi-node placement looks at one rack's nodes, not at every
/// node once per rack (O(racks × nodes) per attempt on a large cluster).
#[derive(Clone, Debug)]
struct RackIndex {
    /// Per rack id, its node indices in id order.
    members: Vec<Vec<usize>>,
    /// Per GPU type, the GPUs of its largest rack.
    largest_rack_gpus: Vec<u32>,
}

impl RackIndex {
    fn new(cluster: &Cluster) -> Self {
        let mut members = vec![Vec::new(); cluster.rack_count()];
        let mut per_rack_type = vec![vec![0u32; cluster.gpu_type_names.len()]; members.len()];
        for (i, node) in cluster.nodes.iter().enumerate() {
            members[node.rack.index()].push(i);
            per_rack_type[node.rack.index()][node.gpu_type.index()] += node.gpus;
        }
        let largest_rack_gpus = (0..cluster.gpu_type_names.len())
            .map(|t| per_rack_type.iter().map(|r| r[t]).max().unwrap_or(0))
            .collect();
        RackIndex {
            members,
            largest_rack_gpus,
        }
    }
}

impl<'a> Placer<'a> {
    /// An empty cluster.
    pub fn new(cluster: &'a Cluster, strategy: PlacementStrategy) -> Self {
        let free: Vec<u32> = cluster.nodes.iter().map(|n| n.gpus).collect();
        let free_total = free.iter().sum();
        Self::with_free(
            cluster,
            strategy,
            FreeGpus {
                present: None,
                own: free,
            },
            free_total,
        )
    }

    /// The cluster with `occupancy`'s free GPUs (`None` if it is not this cluster's: another
    /// node count), read where they are and copied into `buffer` (a spare from
    /// [`Placer::into_free`], or empty) only when the placer first takes or gives back GPUs: a
    /// policy deciding at every event spares a copy of a number per node each time nothing
    /// starts (a queue whose head does not fit), and an allocation of them each time something
    /// does (kilobytes on a large cluster, past the allocator's per-thread cache).
    pub fn from_occupancy_reusing(
        cluster: &'a Cluster,
        occupancy: &'a Occupancy,
        strategy: PlacementStrategy,
        buffer: Vec<u32>,
    ) -> Option<Self> {
        let present = occupancy.free_per_node();
        (present.len() == cluster.nodes.len()).then(|| {
            let free = FreeGpus {
                present: Some(present),
                own: buffer,
            };
            Self::with_free(cluster, strategy, free, occupancy.free_total())
        })
    }

    /// The placer's buffer of free GPUs per node, to reuse.
    pub fn into_free(self) -> Vec<u32> {
        self.free.own
    }

    fn with_free(
        cluster: &'a Cluster,
        strategy: PlacementStrategy,
        free: FreeGpus<'a>,
        free_total: u32,
    ) -> Self {
        Placer {
            cluster,
            free,
            free_total,
            strategy,
            only_type: None,
            max_gpus_per_node: None,
            racks: None,
        }
    }

    /// GPUs free in total.
    #[inline]
    pub fn free_total(&self) -> u32 {
        self.free_total
    }

    /// Takes exactly `placement` if it is free; returns whether it did.
    pub fn take(&mut self, placement: &Placement) -> bool {
        let fits = placement.slots.iter().all(|&(node, gpus)| {
            self.free
                .read()
                .get(node.index())
                .is_some_and(|f| *f >= gpus)
        });
        if fits {
            let free = self.free.write();
            for &(node, gpus) in &placement.slots {
                free[node.index()] -= gpus;
                self.free_total -= gpus;
            }
        }
        fits
    }

    /// Takes whatever part of `placement` is still free (for bookkeeping of GPUs that another
    /// view of the cluster has handed out).
    pub fn take_overlap(&mut self, placement: &Placement) {
        let free = self.free.write();
        for &(node, gpus) in &placement.slots {
            if let Some(f) = free.get_mut(node.index()) {
                let taken = gpus.min(*f);
                *f -= taken;
                self.free_total -= taken;
            }
        }
    }

    /// Makes every GPU that is taken in `other` taken here too (both over the same cluster).
    pub fn take_overlap_all(&mut self, other: &Placer<'_>) {
        for (mine, theirs) in self.free.write().iter_mut().zip(other.free.read()) {
            let taken = (*mine).saturating_sub(*theirs);
            *mine -= taken;
            self.free_total -= taken;
        }
    }

    /// Gives back `placement` (it must have been taken).
    pub fn give_back(&mut self, placement: &Placement) {
        let free = self.free.write();
        for &(node, gpus) in &placement.slots {
            if let Some(f) = free.get_mut(node.index()) {
                *f += gpus;
                self.free_total += gpus;
            }
        }
    }

    /// Why a job the placer could not place waits: `reason`, or [`PendingReason::NeverFits`] when
    /// no GPUs of the whole cluster would do.
    pub fn pending_reason(
        cluster: &Cluster,
        spec: &JobSpec,
        reason: PendingReason,
    ) -> PendingReason {
        if Self::could_ever_fit(cluster, spec) {
            reason
        } else {
            PendingReason::NeverFits
        }
    }

    /// Whether the job could ever be placed on the empty cluster with any strategy.
    pub fn could_ever_fit(cluster: &Cluster, spec: &JobSpec) -> bool {
        (0..cluster.gpu_type_names.len())
            .map(|t| GpuTypeId(t as u8))
            .filter(|t| type_allowed(spec, *t))
            .any(|t| {
                let total: u32 = cluster
                    .nodes
                    .iter()
                    .filter(|n| n.gpu_type == t)
                    .map(|n| n.gpus)
                    .sum();
                spec.gpus <= total
            })
    }

    /// Finds and takes GPUs for a job that has waited since `pending_since`, per the strategy,
    /// on nodes it may use (not its [`JobSpec::avoid_nodes`]).
    pub fn place(
        &mut self,
        spec: &JobSpec,
        pending_since: SimTime,
        now: SimTime,
    ) -> Result<Placement, PendingReason> {
        let Some(avoid) = spec.avoid_nodes.as_ref().filter(|a| !a.is_empty()) else {
            return self.place_anywhere(spec, pending_since, now);
        };
        // The nodes it may not use look full while it is placed.
        let hidden: Vec<(usize, u32)> = avoid
            .iter()
            .filter_map(|n| self.free.read().get(n.index()).map(|&f| (n.index(), f)))
            .collect();
        for &(n, f) in &hidden {
            self.free.write()[n] = 0;
            self.free_total -= f;
        }
        let placed = self.place_anywhere(spec, pending_since, now);
        for &(n, f) in &hidden {
            self.free.write()[n] += f;
            self.free_total += f;
        }
        placed
    }

    fn place_anywhere(
        &mut self,
        spec: &JobSpec,
        pending_since: SimTime,
        now: SimTime,
    ) -> Result<Placement, PendingReason> {
        let gpus = spec.gpus;
        if gpus > self.free_total {
            return Err(PendingReason::InsufficientGpus);
        }
        let placement = match self.strategy {
            PlacementStrategy::Consolidated => self.consolidated(gpus, spec),
            PlacementStrategy::Spread => self.spread(gpus, spec),
            PlacementStrategy::Anywhere => self.packed_anywhere(gpus, spec),
            PlacementStrategy::Relaxed { after_s } => {
                let waited = now.saturating_since(pending_since);
                match self.consolidated(gpus, spec) {
                    Some(p) => Some(p),
                    None if waited >= SimDuration::from_secs_f64(after_s) => {
                        self.packed_anywhere(gpus, spec)
                    }
                    None => None,
                }
            }
        };
        match placement {
            Some(p) => {
                let taken = self.take(&p);
                debug_assert!(taken, "a placement found on free GPUs must be takeable");
                Ok(p)
            }
            None => Err(PendingReason::Fragmented),
        }
    }

    /// Whether the job may use GPUs of type `t`: it is not pinned to another type, it makes
    /// progress there, and the placer is not restricted to another type.
    #[inline]
    fn allows(&self, spec: &JobSpec, t: GpuTypeId) -> bool {
        self.only_type.is_none_or(|o| o == t) && type_allowed(spec, t)
    }

    /// Like [`Placer::place`], but only on GPUs of type `gpu_type` (for policies that decide the
    /// type themselves, like Gavel's round mechanism).
    pub fn place_on_type(
        &mut self,
        spec: &JobSpec,
        gpu_type: GpuTypeId,
        pending_since: SimTime,
        now: SimTime,
    ) -> Result<Placement, PendingReason> {
        self.only_type = Some(gpu_type);
        let placed = self.place(spec, pending_since, now);
        self.only_type = None;
        placed
    }

    /// Tiresias' `yarn` scheme, per rack in order: first fit on one node, or whole free nodes plus
    /// a remainder node. A job that is not pinned to a type stays on one type. A job larger than
    /// any rack may span racks.
    fn consolidated(&mut self, gpus: u32, spec: &JobSpec) -> Option<Placement> {
        let nodes = &self.cluster.nodes;
        // First fit on one node. (A node with that many GPUs free has at least that many, so
        // only when none is found does it matter whether the job is larger than a node.)
        let mut from = 0;
        while let Some(i) = first_with_free(self.free.read(), from, gpus) {
            if self.allows(spec, nodes[i].gpu_type) {
                return Some(Placement::single(NodeId(i as u32), gpus));
            }
            from = i + 1;
        }
        let largest = *self
            .max_gpus_per_node
            .get_or_insert_with(|| self.cluster.max_gpus_per_node());
        if gpus <= largest {
            return None;
        }
        // One rack per job where a rack is big enough; a job larger than every rack of its type
        // spans racks (whole nodes first) rather than waiting forever.
        let index = self
            .racks
            .take()
            .unwrap_or_else(|| RackIndex::new(self.cluster));
        let found = self.multi_node(gpus, spec, &index);
        self.racks = Some(index);
        found
    }

    /// [`Placer::consolidated`] for a job larger than a node: per rack in order (then all racks
    /// together), per type, whole free nodes first, then one node for the remainder.
    fn multi_node(&self, gpus: u32, spec: &JobSpec, index: &RackIndex) -> Option<Placement> {
        let nodes = &self.cluster.nodes;
        let free = self.free.read();
        let racks = index.members.len();
        // Every node, for a job larger than every rack (built only then).
        let mut all: Option<Vec<usize>> = None;
        for rack in 0..=racks {
            for t in 0..self.cluster.gpu_type_names.len() {
                let t = GpuTypeId(t as u8);
                if !self.allows(spec, t) {
                    continue;
                }
                let group: &[usize] = if rack == racks {
                    if gpus <= index.largest_rack_gpus[t.index()] {
                        continue;
                    }
                    all.get_or_insert_with(|| (0..nodes.len()).collect())
                } else {
                    &index.members[rack]
                };
                let in_type = |i: &&usize| nodes[**i].gpu_type == t;
                let mut placement = Placement::default();
                let mut left = gpus;
                for &i in group.iter().filter(in_type) {
                    let node = &nodes[i];
                    if left >= node.gpus && free[i] == node.gpus && node.gpus > 0 {
                        placement.slots.push((NodeId(i as u32), node.gpus));
                        left -= node.gpus;
                    }
                }
                if left > 0 {
                    let used = |i: usize| placement.slots.iter().any(|(n, _)| n.index() == i);
                    match group
                        .iter()
                        .filter(in_type)
                        .find(|&&i| !used(i) && free[i] >= left)
                    {
                        Some(&i) => placement.slots.push((NodeId(i as u32), left)),
                        None => continue,
                    }
                }
                return Some(placement);
            }
        }
        None
    }

    /// Any free GPUs, taking from the nodes with the most free GPUs first (so as few nodes as
    /// the free space allows), one type per job.
    fn packed_anywhere(&self, gpus: u32, spec: &JobSpec) -> Option<Placement> {
        self.by_type(spec, |placer, t| {
            let free = placer.free.read();
            let mut order: Vec<usize> = (0..free.len())
                .filter(|&i| free[i] > 0 && placer.cluster.nodes[i].gpu_type == t)
                .collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(free[i]), i));
            let mut placement = Placement::default();
            let mut left = gpus;
            for i in order {
                if left == 0 {
                    break;
                }
                let take = left.min(free[i]);
                placement.slots.push((NodeId(i as u32), take));
                left -= take;
            }
            (left == 0).then_some(placement)
        })
    }

    /// One GPU at a time to the node with the most free GPUs (ties: lowest id).
    fn spread(&self, gpus: u32, spec: &JobSpec) -> Option<Placement> {
        self.by_type(spec, |placer, t| {
            let present = placer.free.read();
            let mut free: Vec<(u32, usize)> = (0..present.len())
                .filter(|&i| present[i] > 0 && placer.cluster.nodes[i].gpu_type == t)
                .map(|i| (present[i], i))
                .collect();
            if free.iter().map(|(f, _)| *f).sum::<u32>() < gpus {
                return None;
            }
            let mut taken = vec![0u32; present.len()];
            for _ in 0..gpus {
                let best = free
                    .iter_mut()
                    .filter(|(f, _)| *f > 0)
                    .max_by_key(|(f, i)| (*f, std::cmp::Reverse(*i)))?;
                best.0 -= 1;
                taken[best.1] += 1;
            }
            let slots = taken
                .iter()
                .enumerate()
                .filter(|(_, g)| **g > 0)
                .map(|(i, g)| (NodeId(i as u32), *g))
                .collect();
            Some(Placement { slots })
        })
    }

    fn by_type(
        &self,
        spec: &JobSpec,
        f: impl Fn(&Self, GpuTypeId) -> Option<Placement>,
    ) -> Option<Placement> {
        (0..self.cluster.gpu_type_names.len())
            .map(|t| GpuTypeId(t as u8))
            .filter(|t| self.allows(spec, *t))
            .find_map(|t| f(self, t))
    }
}

/// The first node at or after `from` with at least `gpus` GPUs free. A busy cluster's first fit
/// passes most of its nodes (a job waiting at the head of the queue scans them all at every
/// event), so nodes are compared a block at a time, without a branch per node (the compiler
/// compares a block in a few vector instructions), and only the block with a fit is searched.
fn first_with_free(free: &[u32], from: usize, gpus: u32) -> Option<usize> {
    const BLOCK: usize = 16;
    let rest = free.get(from..)?;
    let mut blocks = rest.chunks_exact(BLOCK);
    let mut start = from;
    for block in blocks.by_ref() {
        if block.iter().fold(false, |any, &f| any | (f >= gpus)) {
            return block.iter().position(|&f| f >= gpus).map(|p| start + p);
        }
        start += BLOCK;
    }
    blocks
        .remainder()
        .iter()
        .position(|&f| f >= gpus)
        .map(|p| start + p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::JobId;

    fn job(gpus: u32) -> JobSpec {
        JobSpec::new(JobId(0), SimTime::ZERO, gpus, 10.0)
    }

    #[test]
    fn nodes_a_job_must_avoid_look_full_to_it_alone() {
        let cluster = Cluster::homogeneous(1, 3, 4, 64, 256, "V100").expect("valid");
        let mut placer = Placer::new(&cluster, PlacementStrategy::Consolidated);
        let mut avoiding = job(4);
        avoiding.avoid_nodes = Some(std::sync::Arc::new(vec![NodeId(0), NodeId(1)]));
        assert_eq!(
            placer.place(&avoiding, SimTime::ZERO, SimTime::ZERO),
            Ok(Placement::single(NodeId(2), 4))
        );
        assert_eq!(
            placer.place(&avoiding, SimTime::ZERO, SimTime::ZERO),
            Err(PendingReason::InsufficientGpus)
        );
        assert_eq!(
            placer.free_total(),
            8,
            "the avoided nodes are free again for the others"
        );
        assert_eq!(
            placer.place(&job(4), SimTime::ZERO, SimTime::ZERO),
            Ok(Placement::single(NodeId(0), 4))
        );
    }

    proptest::proptest! {
        #[test]
        fn the_block_scan_finds_the_first_node_with_room_from_any_start(
            free in proptest::collection::vec(0u32..9, 0..80),
            gpus in 0u32..10,
        ) {
            for from in 0..=free.len() + 1 {
                let naive = (from..free.len()).find(|&i| free[i] >= gpus);
                assert_eq!(
                    first_with_free(&free, from, gpus),
                    naive,
                    "{free:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn consolidated_takes_first_fitting_node_then_whole_nodes() {
        let c = Cluster::homogeneous(1, 3, 4, 32, 64, "V100").expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Consolidated);
        assert_eq!(
            p.place(&job(3), SimTime::ZERO, SimTime::ZERO),
            Ok(Placement::single(NodeId(0), 3))
        );
        assert_eq!(
            p.place(&job(2), SimTime::ZERO, SimTime::ZERO),
            Ok(Placement::single(NodeId(1), 2))
        );
        // Free now: 1, 2, 4. Seven GPUs need one whole node plus a node with 3 free: none.
        assert_eq!(
            p.place(&job(7), SimTime::ZERO, SimTime::ZERO),
            Err(PendingReason::Fragmented)
        );
        assert_eq!(
            p.place(&job(8), SimTime::ZERO, SimTime::ZERO),
            Err(PendingReason::InsufficientGpus)
        );
        let six = p
            .place(&job(6), SimTime::ZERO, SimTime::ZERO)
            .expect("whole node 2 plus node 1");
        assert_eq!(six.slots.as_slice(), &[(NodeId(2), 4), (NodeId(1), 2)]);
        assert_eq!(p.free_total(), 1);
    }

    #[test]
    fn relaxed_placement_accepts_spread_after_the_wait() {
        let c = Cluster::homogeneous(1, 2, 4, 32, 64, "V100").expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Relaxed { after_s: 60.0 });
        p.place(&job(3), SimTime::ZERO, SimTime::ZERO)
            .expect("fits");
        p.place(&job(3), SimTime::ZERO, SimTime::ZERO)
            .expect("fits");
        // 1 + 1 free on two nodes: a 2-GPU job waits for locality, then takes both halves.
        assert_eq!(
            p.place(&job(2), SimTime::ZERO, SimTime::from_ms(59_000)),
            Err(PendingReason::Fragmented)
        );
        let spread = p
            .place(&job(2), SimTime::ZERO, SimTime::from_ms(60_000))
            .expect("relaxed");
        assert_eq!(spread.node_count(), 2);
        assert_eq!(p.free_total(), 0);
    }

    #[test]
    fn spread_uses_as_many_nodes_as_possible() {
        let c = Cluster::homogeneous(1, 4, 4, 32, 64, "V100").expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Spread);
        let placement = p
            .place(&job(4), SimTime::ZERO, SimTime::ZERO)
            .expect("fits");
        assert_eq!(placement.node_count(), 4);
    }

    #[test]
    fn a_job_larger_than_any_rack_spans_racks() {
        let c = Cluster::homogeneous(2, 2, 4, 32, 64, "V100").expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Consolidated);
        let big = p
            .place(&job(12), SimTime::ZERO, SimTime::ZERO)
            .expect("spans racks");
        assert_eq!(big.node_count(), 3);
        assert_eq!(p.free_total(), 4);
    }

    #[test]
    fn multi_node_jobs_use_their_racks_nodes_in_id_order_wherever_the_racks_nodes_sit() {
        use arbiter_model::{Node, NodeId, RackId};
        // Racks interleaved (node i in rack i % 2), two GPU types in rack 1: 4-GPU nodes.
        let node = |i: u32, rack: u32, t: u8| Node {
            id: NodeId(i),
            name: format!("n{i}"),
            rack: RackId(rack),
            gpu_type: GpuTypeId(t),
            gpus: 4,
            cpus: 32,
            memory_gib: 64,
        };
        let nodes = vec![
            node(0, 0, 0),
            node(1, 1, 0),
            node(2, 0, 0),
            node(3, 1, 1),
            node(4, 0, 0),
            node(5, 1, 0),
            node(6, 1, 0),
        ];
        let c = Cluster::new(vec!["V100".into(), "K80".into()], nodes).expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Consolidated);
        p.place(&job(1), SimTime::ZERO, SimTime::ZERO)
            .expect("fits"); // node 0: 3 free
        // 10 GPUs in rack 0 (V100: nodes 0, 2, 4): whole nodes 2 and 4, the remainder on node 0.
        let ten = p
            .place(&job(10), SimTime::ZERO, SimTime::ZERO)
            .expect("rack 0");
        assert_eq!(
            ten.slots.as_slice(),
            &[(NodeId(2), 4), (NodeId(4), 4), (NodeId(0), 2)]
        );
        // 12 V100 GPUs fit no rack now (rack 1 has three V100 nodes, 12 GPUs: whole nodes 1, 5, 6).
        let twelve = p
            .place(&job(12), SimTime::ZERO, SimTime::ZERO)
            .expect("rack 1's V100 nodes");
        assert_eq!(
            twelve.slots.as_slice(),
            &[(NodeId(1), 4), (NodeId(5), 4), (NodeId(6), 4)]
        );
    }

    #[test]
    fn multi_rack_jobs_stay_in_one_rack() {
        let c = Cluster::homogeneous(2, 2, 4, 32, 64, "V100").expect("valid");
        let mut p = Placer::new(&c, PlacementStrategy::Consolidated);
        p.place(&job(1), SimTime::ZERO, SimTime::ZERO)
            .expect("fits"); // node 0, rack 0
        let big = p
            .place(&job(8), SimTime::ZERO, SimTime::ZERO)
            .expect("rack 1 is free");
        assert!(big.slots.iter().all(|(n, _)| n.0 >= 2));
    }
}
