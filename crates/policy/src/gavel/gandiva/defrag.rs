//! Gandiva's migration to defragment (OSDI'18 §3.3, "migration ... to de-fragment the cluster"),
//! applied to a round's decision.
//!
//! Gavel's mechanism keeps every combination on the GPUs it had (a lease extension) before it
//! places the others, largest first, on one server where one has room and across servers
//! otherwise. Kept single-GPU jobs scattered over the servers can thus leave no server free for a
//! multi-GPU job that would fit one. Then, for each such job (largest first), this pass looks for
//! the server of its type whose occupants are cheapest to move — fewest running jobs migrated,
//! then fewest combinations moved, then lowest id — such that every occupant moved finds room on
//! one other server of the type (best fit); the job gets that server and the occupants their new
//! GPUs. A running job whose placement changes is migrated by the engine. A combination spread
//! over servers blocks its GPUs (it is not moved to make room).

use crate::SchedulerView;
use arbiter_model::{Decision, GpuTypeId, JobId, Node, NodeId, Placement};
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// What one pass moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Moves {
    /// Multi-GPU combinations given one server.
    pub gangs: u64,
    /// Running jobs whose GPUs changed (migrations), the consolidated jobs included.
    pub jobs_migrated: u64,
    /// Combinations that had kept their GPUs (a lease extension) and were moved.
    pub leases_undone: u64,
}

/// Assignments of a decision that share one placement (a job alone, or a pair).
#[derive(Clone, Debug)]
struct Unit {
    /// Indexes into `decision.run`.
    members: Vec<usize>,
    placement: Placement,
    gpus: u32,
    /// Every member runs on exactly this placement now.
    kept: bool,
}

impl Unit {
    fn on_one_node(&self) -> Option<NodeId> {
        match self.placement.slots.as_slice() {
            [(node, _)] => Some(*node),
            _ => None,
        }
    }
}

/// A chosen server for a gang: cost, the server, and the new placements of the units moved.
type Plan = ((u64, usize, usize), usize, Vec<(usize, Placement)>);

/// Whether a placement spreads a multi-GPU combination over servers.
fn spread(p: &Placement) -> bool {
    p.slots.len() > 1 && p.gpus() > 1
}

/// The decision's assignments as units (a job alone, or with the partner that shares its
/// placement), in the decision's order, each marked kept when all its members run there now.
fn units_of(view: &SchedulerView<'_>, decision: &Decision) -> Vec<Unit> {
    let current: BTreeMap<JobId, &Placement> = view
        .jobs
        .iter()
        .filter_map(|j| j.placement().map(|p| (j.id, p)))
        .collect();
    let index: BTreeMap<JobId, usize> = decision
        .run
        .iter()
        .enumerate()
        .map(|(i, a)| (a.job, i))
        .collect();
    let mut grouped = vec![false; decision.run.len()];
    let mut units: Vec<Unit> = Vec::new();
    for i in 0..decision.run.len() {
        if grouped[i] {
            continue;
        }
        grouped[i] = true;
        let a = &decision.run[i];
        let mut members = vec![i];
        let partner = a.colocation.and_then(|c| index.get(&c.partner)).copied();
        if let Some(j) =
            partner.filter(|&j| !grouped[j] && decision.run[j].placement == a.placement)
        {
            grouped[j] = true;
            members.push(j);
        }
        let kept = members.iter().all(|&m| {
            current
                .get(&decision.run[m].job)
                .is_some_and(|p| **p == a.placement)
        });
        units.push(Unit {
            members,
            placement: a.placement.clone(),
            gpus: a.placement.gpus(),
            kept,
        });
    }
    units
}

/// The decision as the pass sees it: its units, the GPUs they use per server, and each unit's
/// first job (ties are broken by it).
struct Layout<'a> {
    nodes: &'a [Node],
    units: Vec<Unit>,
    used: Vec<u32>,
    first_job: Vec<JobId>,
}

impl<'a> Layout<'a> {
    /// The layout of `decision` on the view's cluster.
    fn new(view: &SchedulerView<'a>, decision: &Decision) -> Self {
        let nodes = &view.cluster.nodes;
        let units = units_of(view, decision);
        let mut used = vec![0u32; nodes.len()];
        for unit in &units {
            for &(node, gpus) in &unit.placement.slots {
                if let Some(u) = used.get_mut(node.index()) {
                    *u += gpus;
                }
            }
        }
        let first_job: Vec<JobId> = units
            .iter()
            .map(|u| decision.run[u.members[0]].job)
            .collect();
        Layout {
            nodes,
            units,
            used,
            first_job,
        }
    }

    /// The spread multi-GPU units, largest first (ties: first job).
    fn gangs(&self) -> Vec<usize> {
        let units = &self.units;
        let mut gangs: Vec<usize> = (0..units.len())
            .filter(|&u| spread(&units[u].placement))
            .collect();
        gangs.sort_by_key(|&u| (Reverse(units[u].gpus), self.first_job[u]));
        gangs
    }

    /// The cheapest server of its type to give `gang`, if any (see the module docs).
    fn best_server(&self, gang: usize) -> Option<Plan> {
        let nodes = self.nodes;
        let need = self.units[gang].gpus;
        let gpu_type = self.units[gang]
            .placement
            .slots
            .first()
            .and_then(|(n, _)| nodes.get(n.index()))
            .map(|n| n.gpu_type)?;
        // Free GPUs with the gang's own released.
        let mut free: Vec<u32> = nodes
            .iter()
            .zip(&self.used)
            .map(|(n, u)| n.gpus.saturating_sub(*u))
            .collect();
        for &(node, gpus) in &self.units[gang].placement.slots {
            free[node.index()] += gpus;
        }
        let mut best: Option<Plan> = None;
        for (target, node) in nodes.iter().enumerate() {
            if node.gpu_type != gpu_type || node.gpus < need {
                continue;
            }
            let Some(plan) = self.plan_on(gang, target, gpu_type, &free) else {
                continue;
            };
            if best.as_ref().is_none_or(|(c, _, _)| plan.0 < *c) {
                best = Some(plan);
            }
        }
        best
    }

    /// What giving `gang` the server `target` (of type `gpu_type`, `free` GPUs free per server)
    /// would take: its movers and their new places, with the cost; `None` if impossible.
    fn plan_on(
        &self,
        gang: usize,
        target: usize,
        gpu_type: GpuTypeId,
        free: &[u32],
    ) -> Option<Plan> {
        let (nodes, units, first_job) = (self.nodes, &self.units, &self.first_job);
        let need = units[gang].gpus;
        // Occupants that sit on this server only can move; fresh placements first (moving
        // them costs nothing), then the smallest.
        let mut movable: Vec<usize> = (0..units.len())
            .filter(|&u| u != gang && units[u].on_one_node() == Some(NodeId(target as u32)))
            .collect();
        movable.sort_by_key(|&u| (units[u].kept, units[u].gpus, first_job[u]));
        let mut have = free[target];
        let mut movers = Vec::new();
        for u in movable {
            if have >= need {
                break;
            }
            have += units[u].gpus;
            movers.push(u);
        }
        if have < need {
            return None;
        }
        // Every mover finds one other server of the type (best fit, largest mover first).
        let mut room = free.to_vec();
        room[target] = 0;
        movers.sort_by_key(|&u| (Reverse(units[u].gpus), first_job[u]));
        let mut placed = Vec::with_capacity(movers.len());
        for &u in &movers {
            let gpus = units[u].gpus;
            let fit = (0..nodes.len())
                .filter(|&n| n != target && nodes[n].gpu_type == gpu_type && room[n] >= gpus)
                .min_by_key(|&n| (room[n], n));
            match fit {
                Some(n) => {
                    room[n] -= gpus;
                    placed.push((u, Placement::single(NodeId(n as u32), gpus)));
                }
                None => break,
            }
        }
        if placed.len() < movers.len() {
            return None;
        }
        let migrated: u64 = movers
            .iter()
            .filter(|&&u| units[u].kept)
            .map(|&u| units[u].members.len() as u64)
            .sum();
        Some(((migrated, movers.len(), target), target, placed))
    }

    /// Carries out a plan for `gang`: the movers to their new places and the gang onto
    /// `target`, in the layout and in `decision`, counting the leases undone.
    fn apply(
        &mut self,
        gang: usize,
        target: usize,
        placed: Vec<(usize, Placement)>,
        decision: &mut Decision,
        moves: &mut Moves,
    ) {
        let consolidated = Placement::single(NodeId(target as u32), self.units[gang].gpus);
        for (u, placement) in placed
            .into_iter()
            .chain(std::iter::once((gang, consolidated)))
        {
            let unit = &mut self.units[u];
            for &(node, gpus) in &unit.placement.slots {
                self.used[node.index()] -= gpus;
            }
            for &(node, gpus) in &placement.slots {
                self.used[node.index()] += gpus;
            }
            if unit.kept {
                moves.jobs_migrated += unit.members.len() as u64;
                moves.leases_undone += 1;
            }
            for &m in &unit.members {
                decision.run[m].placement = placement.clone();
            }
            unit.placement = placement;
            unit.kept = false;
        }
    }
}

/// Consolidates multi-GPU combinations the decision spread over servers although one server of
/// their type could hold them, by moving other combinations (see the module docs).
pub(super) fn defragment(view: &SchedulerView<'_>, decision: &mut Decision) -> Moves {
    let nodes = &view.cluster.nodes;
    let mut moves = Moves::default();
    let known = |p: &Placement| p.slots.iter().all(|(n, _)| n.index() < nodes.len());
    // (Placements come from Gavel's placer over this cluster; anything else is left alone.)
    if !decision.run.iter().any(|a| spread(&a.placement))
        || !decision.run.iter().all(|a| known(&a.placement))
    {
        return moves;
    }
    let mut layout = Layout::new(view, decision);
    for gang in layout.gangs() {
        let Some((_, target, placed)) = layout.best_server(gang) else {
            continue;
        };
        layout.apply(gang, target, placed, decision, &mut moves);
        moves.gangs += 1;
    }
    moves
}
