//! The one check of a policy's decision, shared by the simulator's engine and the daemon: can
//! this decision be carried out on this cluster?
//!
//! Known active jobs, each assigned once, the right gang size, a GPU type the job may run on,
//! co-located pairs that name each other on the same GPUs, all placements fitting the cluster
//! together (a shared placement counted once), and CPU/memory shares fitting every node. The
//! answer is a [`Plan`] — the decision's GPU occupancy and what it asks of each job (preempt,
//! start, keep, migrate, re-share) — or a [`PlanError`] naming the job and the rule. The engine
//! and the daemon both carry out the plan; neither diffs a decision by itself.

use crate::{
    AllocError, Assignment, Cluster, Colocation, Decision, Guest, HostShare, JobId, JobSpec, Node,
    Occupancy, Placement,
};

/// Most jobs that may share the same GPUs (Muri interleaves up to four).
pub const MAX_GROUP: usize = 4;

/// Where an active job stands before a decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Standing<'a> {
    /// Waiting for GPUs.
    Queued,
    /// Holding GPUs.
    Running {
        /// Its GPUs.
        placement: &'a Placement,
        /// The job it shares them with, if any.
        partner: Option<JobId>,
        /// Its CPU/memory share, if it has its own (`None`: the GPU-proportional one).
        host: Option<HostShare>,
    },
}

/// What a decision asks of one job it assigns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action<'d> {
    /// A queued job starts (alone, or on its partner's GPUs, or with its own CPU/memory share).
    Start(&'d Assignment),
    /// A running job stays on its GPUs with the same partner and CPU/memory share.
    Keep(&'d Assignment),
    /// A running job stays on its GPUs, but its partner or CPU/memory share changes.
    Reshare(&'d Assignment),
    /// A running job moves to other GPUs (stop here, start there).
    Migrate(&'d Assignment),
}

impl<'d> Action<'d> {
    /// The assignment the action carries out.
    pub fn assignment(&self) -> &'d Assignment {
        match self {
            Action::Start(a) | Action::Keep(a) | Action::Reshare(a) | Action::Migrate(a) => a,
        }
    }
}

/// A checked decision, as actions: first the preemptions and the stopping side of migrations,
/// then the starts (new jobs and the other side of migrations) — GPUs handed from one job to
/// another are free when taken.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<'d> {
    /// The decision's GPU occupancy once it is in force.
    pub occupancy: PlannedOccupancy,
    /// Running jobs the decision does not assign, in the order the caller listed its running jobs.
    pub preempt: Vec<JobId>,
    /// One action per assignment, in the decision's order.
    pub actions: Vec<Action<'d>>,
}

/// The GPU occupancy a plan puts in force.
#[derive(Clone, Debug, PartialEq)]
pub enum PlannedOccupancy {
    /// The decision's, counted whole (a decision that lists every job it runs).
    Whole(Occupancy),
    /// A decision by changes (its running jobs kept as they are, queued jobs started alone):
    /// the occupancy it was checked against with each start's GPUs taken. Counted as changes,
    /// not on a copy of that occupancy: at every event of a large cluster a copy of every
    /// node's free GPUs cost more than the decision.
    CurrentWithStarts,
}

impl PlannedOccupancy {
    /// Puts the plan's occupancy in force on `current`, the occupancy the decision was checked
    /// against (its `actions`: the plan's). Returns the occupancy it replaced, if any, whose
    /// memory [`Planner::give_back`] can reuse.
    pub fn put_in_force(
        self,
        current: &mut Occupancy,
        actions: &[Action<'_>],
    ) -> Option<Occupancy> {
        match self {
            PlannedOccupancy::Whole(occupancy) => Some(std::mem::replace(current, occupancy)),
            PlannedOccupancy::CurrentWithStarts => {
                for action in actions {
                    if let Action::Start(a) = action {
                        // Checked by the planner against this occupancy: cannot fail.
                        let taken = current.allocate(&a.placement);
                        debug_assert!(taken.is_ok(), "a checked start did not fit: {taken:?}");
                    }
                }
                None
            }
        }
    }

    /// The occupancy counted whole, if it was (`None`: a decision by changes).
    pub fn into_whole(self) -> Option<Occupancy> {
        match self {
            PlannedOccupancy::Whole(occupancy) => Some(occupancy),
            PlannedOccupancy::CurrentWithStarts => None,
        }
    }
}

/// How a check counts a decision's GPUs: on an empty cluster, or on top of the current
/// occupancy (a decision by changes, its GPUs taken in [`Planner`]'s `taken`).
enum Counted<'b> {
    Whole(Occupancy),
    OnTop(&'b Occupancy),
}

/// Why a decision cannot be carried out.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The job is not queued or running.
    #[error("{0} is not an active job")]
    NotActive(JobId),
    /// The decision names the job twice.
    #[error("{0} is assigned twice")]
    AssignedTwice(JobId),
    /// The placement's GPU count is not the job's gang size (nor in its elastic range).
    #[error("{job} asks for {wanted} GPUs, placement {placement} has {got}")]
    GangSize {
        /// The job.
        job: JobId,
        /// Its gang size, or its elastic range (`2..8`).
        wanted: String,
        /// The placement, as text.
        placement: String,
        /// GPUs in the placement.
        got: u32,
    },
    /// The placement uses a node the job may not be placed on (a reservation holds it).
    #[error("{job} may not be placed on {node} (reserved)")]
    AvoidedNode {
        /// The job.
        job: JobId,
        /// The node, by name.
        node: String,
    },
    /// The job asked for one GPU type; the placement uses another.
    #[error("{job} needs GPU type {gpu_type}, placement {placement} has others")]
    WrongGpuType {
        /// The job.
        job: JobId,
        /// The type it needs.
        gpu_type: String,
        /// The placement, as text.
        placement: String,
    },
    /// The job cannot run on a node's GPU type (speed 0 there).
    #[error("{job} cannot run on {gpu_type} GPUs ({node})")]
    CannotRunOn {
        /// The job.
        job: JobId,
        /// The node's GPU type.
        gpu_type: String,
        /// The node.
        node: String,
    },
    /// The job's scaling profile has no speed for the placement's shape (nothing measured or
    /// interpolated covers it).
    #[error("{job} ({profile}) has no measured speed for placement {placement}")]
    NoSpeedFor {
        /// The job.
        job: JobId,
        /// Its profile.
        profile: String,
        /// The placement, as text.
        placement: String,
    },
    /// A co-located job's partner is not in the decision.
    #[error("{job} shares GPUs with {partner}, which is not assigned")]
    PartnerNotAssigned {
        /// The job.
        job: JobId,
        /// Its partner.
        partner: JobId,
    },
    /// Co-located jobs do not form one group on the same GPUs: each names the next, back to
    /// the first, at most [`MAX_GROUP`] of them (a pair names each other).
    #[error("{job} and {partner} do not form one group of at most 4 jobs on the same GPUs")]
    PartnersDisagree {
        /// The job.
        job: JobId,
        /// Its partner.
        partner: JobId,
    },
    /// A shared speed that is not finite and positive.
    #[error("{job} shares GPUs at speed {speed}; it must be finite and > 0")]
    BadSharedSpeed {
        /// The job.
        job: JobId,
        /// The speed.
        speed: f64,
    },
    /// An opportunistic job that also shares GPUs in a group or sets its own CPU/memory share.
    #[error("{0} runs opportunistically (a guest) and also names a partner or a CPU/memory share")]
    GuestWithShares(JobId),
    /// A guest speed that is not finite and positive.
    #[error("{job} runs opportunistically at speed {speed}; it must be finite and > 0")]
    BadGuestSpeed {
        /// The job.
        job: JobId,
        /// The speed.
        speed: f64,
    },
    /// More opportunistic jobs on a node than it has GPUs.
    #[error("{job}: opportunistic jobs over-commit: {reason}")]
    GuestsOverAllocated {
        /// The job.
        job: JobId,
        /// The occupancy's reason.
        reason: String,
    },
    /// Guests' GPUs that do not add up: a guest on more held GPUs than it has, or the guests
    /// together on more GPUs nobody holds than the decision leaves free, or on more held GPUs
    /// than it holds.
    #[error("{job}: opportunistic jobs' GPUs do not add up: {reason}")]
    GuestsMiscounted {
        /// The job (the last guest of the decision for the totals).
        job: JobId,
        /// What does not add up.
        reason: String,
    },
    /// A co-located job that also sets its own CPU/memory share.
    #[error("{0} shares GPUs and sets its own CPU/memory; a pair keeps the proportional share")]
    SharedWithHostShare(JobId),
    /// More GPUs than a node has.
    #[error("{job}: {reason}")]
    OverAllocated {
        /// The job.
        job: JobId,
        /// The occupancy's reason.
        reason: String,
    },
    /// A CPU/memory share that is negative or not finite.
    #[error("{job}: {share} is not valid")]
    BadHostShare {
        /// The job.
        job: JobId,
        /// The share, as text.
        share: String,
    },
    /// A decision by changes ([`Decision::keep_unlisted`]) from a caller that offered no current
    /// state to change.
    #[error(
        "the decision keeps unlisted running jobs (a decision by changes), but no current occupancy was offered"
    )]
    NoCurrentState,
    /// A decision by changes that does more than start jobs alone on their GPUs or keep running
    /// jobs as they are.
    #[error(
        "{0}: a decision by changes may only start jobs, each alone on its GPUs, or keep running jobs as they are"
    )]
    ChangeNotAllowed(JobId),
    /// More CPU or memory than a node has.
    #[error(
        "{job}: {node} has {cpus} CPUs and {memory_gib} memory; the decision uses {used_cpus:.3} and {used_memory:.3}"
    )]
    HostCapacity {
        /// The job that went over.
        job: JobId,
        /// The node.
        node: String,
        /// Its CPUs.
        cpus: u32,
        /// Its memory.
        memory_gib: u32,
        /// CPUs the decision uses there.
        used_cpus: f64,
        /// Memory the decision uses there.
        used_memory: f64,
    },
}

/// A node's CPU cores and memory per GPU: what a job gets when its assignment names no share.
pub fn proportional_share(node: &Node) -> HostShare {
    let gpus = node.gpus.max(1) as f64;
    HostShare {
        cpus_per_gpu: node.cpus as f64 / gpus,
        memory_per_gpu: node.memory_gib as f64 / gpus,
    }
}

/// Checks decisions, one after another (it keeps scratch space between calls so that checking
/// costs no allocation per job).
#[derive(Clone, Debug, Default)]
pub struct Planner {
    /// Per job id: the round in which it was last assigned.
    stamp: Vec<u64>,
    round: u64,
    /// Whether the last decision shared GPUs or set CPU/memory shares.
    shares: bool,
    /// Memory of earlier plans handed back ([`Planner::give_back`]): the simulator plans at
    /// every event, and an allocation or two each time showed in its benchmark.
    spare_occupancy: Option<Occupancy>,
    spare_actions: Vec<Action<'static>>,
    spare_preempt: Vec<JobId>,
    /// GPUs a decision by changes takes on top of the current occupancy, per node, and the
    /// nodes it took them on (cleared at the next check).
    taken: Vec<u32>,
    taken_on: Vec<u32>,
}

impl Planner {
    /// A planner for job ids below `jobs` (it grows when it meets larger ids).
    pub fn new(jobs: usize) -> Self {
        Planner {
            stamp: vec![0; jobs],
            ..Default::default()
        }
    }

    /// Whether the last checked decision assigned `job`.
    pub fn assigned(&self, job: JobId) -> bool {
        self.stamp
            .get(job.index())
            .is_some_and(|s| *s == self.round && self.round > 0)
    }

    /// Whether the last checked decision shared GPUs or set its own CPU/memory shares.
    pub fn last_decision_had_shares(&self) -> bool {
        self.shares
    }

    /// Checks `decision` and turns it into actions. `standing(id)` says where each job stands
    /// (`None`: not active), `running` lists the running jobs (preemptions come in its order).
    /// `current` is the occupancy now, when the caller keeps one that no shared GPUs complicate:
    /// a decision by changes ([`Decision::keep_unlisted`]) is checked against it, in time
    /// proportional to the changes (`running` is then not read); without it such a decision is
    /// refused.
    pub fn plan<'a, 'd>(
        &mut self,
        cluster: &Cluster,
        specs: &[JobSpec],
        standing: impl Fn(JobId) -> Option<Standing<'a>>,
        running: impl IntoIterator<Item = JobId>,
        current: Option<&Occupancy>,
        decision: &'d Decision,
    ) -> Result<Plan<'d>, PlanError> {
        let mut actions = relifetime(std::mem::take(&mut self.spare_actions));
        let mut preempt = std::mem::take(&mut self.spare_preempt);
        let base = match (decision.keep_unlisted, current) {
            (false, _) => None,
            (true, Some(current)) => Some(current),
            (true, None) => return Err(PlanError::NoCurrentState),
        };
        let occupancy =
            self.check_each(cluster, specs, standing, base, decision, |a, standing| {
                actions.push(match standing {
                    Standing::Running {
                        placement,
                        partner,
                        host,
                    } if *placement == a.placement => {
                        if partner == a.colocation.map(|c| c.partner) && host == a.host {
                            Action::Keep(a)
                        } else {
                            Action::Reshare(a)
                        }
                    }
                    Standing::Running { .. } => Action::Migrate(a),
                    Standing::Queued => Action::Start(a),
                })
            })?;
        if !decision.keep_unlisted {
            preempt.extend(running.into_iter().filter(|id| !self.assigned(*id)));
        }
        Ok(Plan {
            occupancy,
            preempt,
            actions,
        })
    }

    /// Hands a carried-out plan's memory back for the next one: its action and preemption lists
    /// and an occupancy no longer needed (the one the plan's replaced). Optional.
    pub fn give_back(
        &mut self,
        occupancy: Option<Occupancy>,
        actions: Vec<Action<'_>>,
        preempt: Vec<JobId>,
    ) {
        if occupancy.is_some() {
            self.spare_occupancy = occupancy;
        }
        self.spare_actions = relifetime(actions);
        self.spare_preempt = preempt;
        self.spare_preempt.clear();
    }

    /// Checks `decision` for `cluster`, where `specs[id]` is each job's spec and `is_active(id)`
    /// says whether it is queued or running. Returns the decision's GPU occupancy.
    pub fn check(
        &mut self,
        cluster: &Cluster,
        specs: &[JobSpec],
        is_active: impl Fn(JobId) -> bool,
        decision: &Decision,
    ) -> Result<Occupancy, PlanError> {
        if decision.keep_unlisted {
            return Err(PlanError::NoCurrentState);
        }
        self.check_each(
            cluster,
            specs,
            |id| is_active(id).then_some(Standing::Queued),
            None,
            decision,
            |_, _| {},
        )?
        .into_whole()
        // (Only a decision by changes is counted on top; it was refused above.)
        .ok_or(PlanError::NoCurrentState)
    }

    /// The check, calling `each` with every assignment and where its job stands (`standing` is
    /// asked once per assignment: for the engine it is a memory access per running job). With
    /// `base`, the decision is one by changes, checked on top of that occupancy.
    fn check_each<'a, 'd>(
        &mut self,
        cluster: &Cluster,
        specs: &[JobSpec],
        standing: impl Fn(JobId) -> Option<Standing<'a>>,
        base: Option<&Occupancy>,
        decision: &'d Decision,
        mut each: impl FnMut(&'d Assignment, Standing<'a>),
    ) -> Result<PlannedOccupancy, PlanError> {
        self.round += 1;
        let round = self.round;
        if self.stamp.len() < specs.len() {
            self.stamp.resize(specs.len(), 0);
        }
        // A decision by changes counts its starts on top of `base` (`taken`); any other, whole.
        let mut counted = match base {
            Some(base) => {
                self.clear_taken(cluster);
                Counted::OnTop(base)
            }
            None => Counted::Whole(self.empty_occupancy(cluster)),
        };
        // Only decisions that share GPUs or set CPU/memory need the extra checks (GPU-proportional
        // CPU and memory always fit where the GPUs fit).
        let (any_colocation, check_host, any_guest) =
            decision
                .run
                .iter()
                .fold((false, false, false), |(c, h, g), a| {
                    (
                        c || a.colocation.is_some(),
                        h || a.host.is_some(),
                        g || a.guest.is_some(),
                    )
                });
        self.shares = any_colocation || check_host || any_guest;
        let mut guests = GuestTally {
            occupancy: if any_guest {
                Some(Occupancy::new(cluster))
            } else {
                None
            },
            gpus: (0, 0),
            last: None,
        };
        let assigned: std::collections::BTreeMap<JobId, &Assignment> = if any_colocation {
            decision.run.iter().map(|a| (a.job, a)).collect()
        } else {
            std::collections::BTreeMap::new()
        };
        // CPU cores and memory taken per node.
        let mut host_used: Vec<(f64, f64)> = if check_host {
            vec![(0.0, 0.0); cluster.nodes.len()]
        } else {
            Vec::new()
        };
        for a in &decision.run {
            let i = a.job.index();
            let Some(stands) = standing(a.job).filter(|_| i < specs.len()) else {
                return Err(PlanError::NotActive(a.job));
            };
            each(a, stands);
            if self.stamp[i] == round {
                return Err(PlanError::AssignedTwice(a.job));
            }
            self.stamp[i] = round;
            check_placement(cluster, &specs[i], a)?;
            // A decision by changes: starts alone, or running jobs kept exactly as they are
            // (their GPUs are in the base occupancy already).
            if base.is_some() && kept_as_it_is(a, stands)? {
                continue;
            }
            if let Some(g) = a.guest {
                guests.add(a, g)?;
                continue;
            }
            if let Some(c) = a.colocation
                && !counts_its_group(&assigned, a, c)?
            {
                continue; // the group's GPUs were counted with its smallest job
            }
            match &mut counted {
                Counted::Whole(occupancy) => occupancy.allocate(&a.placement),
                Counted::OnTop(base) => self.take_on_top(base, &a.placement),
            }
            .map_err(|e| PlanError::OverAllocated {
                job: a.job,
                reason: e.to_string(),
            })?;
            if let Some(share) = a.host
                && !share.is_valid()
            {
                return Err(PlanError::BadHostShare {
                    job: a.job,
                    share: share.to_string(),
                });
            }
            if check_host {
                take_host_share(cluster, &mut host_used, a)?;
            }
        }
        match counted {
            Counted::Whole(occupancy) => {
                guests.check_totals(cluster, &occupancy)?;
                Ok(PlannedOccupancy::Whole(occupancy))
            }
            // (Guests are refused in a decision by changes: none to count.)
            Counted::OnTop(_) => Ok(PlannedOccupancy::CurrentWithStarts),
        }
    }

    /// Forgets the GPUs the last decision by changes took, sized for `cluster`.
    fn clear_taken(&mut self, cluster: &Cluster) {
        for &node in &self.taken_on {
            if let Some(t) = self.taken.get_mut(node as usize) {
                *t = 0;
            }
        }
        self.taken_on.clear();
        if self.taken.len() != cluster.nodes.len() {
            self.taken = vec![0; cluster.nodes.len()];
        }
    }

    /// Takes `placement`'s GPUs on top of `base` and what the decision took before, or takes
    /// nothing and says why not.
    fn take_on_top(&mut self, base: &Occupancy, placement: &Placement) -> Result<(), AllocError> {
        base.check_less(placement, &self.taken)?;
        for &(node, gpus) in &placement.slots {
            // (Checked: the node is the cluster's, so within `taken`.)
            self.taken[node.index()] += gpus;
            self.taken_on.push(node.0);
        }
        Ok(())
    }

    /// An empty cluster for a whole decision's check, in the memory of an occupancy handed back
    /// when there is one.
    fn empty_occupancy(&mut self, cluster: &Cluster) -> Occupancy {
        match self.spare_occupancy.take() {
            Some(mut spare) => {
                spare.reset(cluster);
                spare
            }
            None => Occupancy::new(cluster),
        }
    }
}

// The checks of one assignment below are called from `Planner::check_each`, which is generic
// (over its callers' closures) and so compiled in the caller's crate: `#[inline]` lets them be
// inlined there, as they were when they were written inside it (the simulator's hot path).

/// Checks that `a`'s placement suits its job (`spec`): the gang size (or elastic range), a
/// measured speed for the placement's shape, the GPU type it asked for, and only GPU types it can
/// run on.
#[inline]
fn check_placement(cluster: &Cluster, spec: &JobSpec, a: &Assignment) -> Result<(), PlanError> {
    if !spec.allows_gpus(a.placement.gpus()) {
        let wanted = match spec.elastic {
            Some(range) => format!("{} or {range}", spec.gpus),
            None => spec.gpus.to_string(),
        };
        return Err(PlanError::GangSize {
            job: a.job,
            wanted,
            placement: a.placement.to_string(),
            got: a.placement.gpus(),
        });
    }
    if let Some(avoid) = &spec.avoid_nodes
        && let Some((node, _)) = a.placement.slots.iter().find(|(n, _)| avoid.contains(n))
    {
        let name = cluster
            .node(*node)
            .map_or_else(|| node.to_string(), |n| n.name.clone());
        return Err(PlanError::AvoidedNode {
            job: a.job,
            node: name,
        });
    }
    if let Some(scaling) = spec
        .scaling
        .as_ref()
        .filter(|_| spec.placement_speed(&a.placement).is_none())
    {
        return Err(PlanError::NoSpeedFor {
            job: a.job,
            profile: scaling.0.describe(),
            placement: a.placement.to_string(),
        });
    }
    if let Some(t) = spec.gpu_type
        && a.placement.slots.iter().any(|(n, _)| {
            cluster
                .nodes
                .get(n.index())
                .is_none_or(|node| node.gpu_type != t)
        })
    {
        return Err(PlanError::WrongGpuType {
            job: a.job,
            gpu_type: cluster.gpu_type_name(t).to_string(),
            placement: a.placement.to_string(),
        });
    }
    if let Some(node) = a
        .placement
        .slots
        .iter()
        .filter_map(|(n, _)| cluster.node(*n))
        .find(|n| spec.speed_on(n.gpu_type) <= 0.0)
    {
        return Err(PlanError::CannotRunOn {
            job: a.job,
            gpu_type: cluster.gpu_type_name(node.gpu_type).to_string(),
            node: node.name.clone(),
        });
    }
    Ok(())
}

/// In a decision by changes, whether `a` keeps a running job exactly as it is (`true`: nothing
/// to count) or starts a queued one alone (`false`); anything else is refused.
#[inline]
fn kept_as_it_is(a: &Assignment, stands: Standing<'_>) -> Result<bool, PlanError> {
    let alone = a.colocation.is_none() && a.host.is_none() && a.guest.is_none();
    match stands {
        Standing::Running {
            placement,
            partner,
            host,
        } if alone && *placement == a.placement && partner.is_none() && host.is_none() => Ok(true),
        Standing::Queued if alone => Ok(false),
        _ => Err(PlanError::ChangeNotAllowed(a.job)),
    }
}

/// Checks the group `a` shares GPUs in (`c`: its partner and speed; `assigned`: the decision's
/// assignments by job): each member names the next, back to the first, all on the same GPUs, at
/// most [`MAX_GROUP`] of them, at a valid speed and without a CPU/memory share of its own.
/// Returns whether `a` is the group's smallest job, the one that counts the group's GPUs.
#[inline]
fn counts_its_group(
    assigned: &std::collections::BTreeMap<JobId, &Assignment>,
    a: &Assignment,
    c: Colocation,
) -> Result<bool, PlanError> {
    let mut smallest = a.job;
    let mut at = c.partner;
    let mut members = 1;
    while at != a.job {
        let member = assigned.get(&at).ok_or(PlanError::PartnerNotAssigned {
            job: a.job,
            partner: at,
        })?;
        let next = member.colocation.map(|p| p.partner);
        if member.placement != a.placement || members >= MAX_GROUP {
            return Err(PlanError::PartnersDisagree {
                job: a.job,
                partner: c.partner,
            });
        }
        let Some(next) = next else {
            return Err(PlanError::PartnersDisagree {
                job: a.job,
                partner: c.partner,
            });
        };
        smallest = smallest.min(at);
        at = next;
        members += 1;
    }
    if members < 2 {
        return Err(PlanError::PartnersDisagree {
            job: a.job,
            partner: c.partner,
        });
    }
    if !(c.speed.is_finite() && c.speed > 0.0) {
        return Err(PlanError::BadSharedSpeed {
            job: a.job,
            speed: c.speed,
        });
    }
    if a.host.is_some() {
        return Err(PlanError::SharedWithHostShare(a.job));
    }
    Ok(smallest >= a.job)
}

/// Adds `a`'s CPU cores and memory (its own share, else the node's GPU-proportional one) to
/// `host_used` per node, and checks that every node still has them.
#[inline]
fn take_host_share(
    cluster: &Cluster,
    host_used: &mut [(f64, f64)],
    a: &Assignment,
) -> Result<(), PlanError> {
    for &(node_id, gpus) in &a.placement.slots {
        let Some(node) = cluster.node(node_id) else {
            continue;
        };
        let share = a.host.unwrap_or_else(|| proportional_share(node));
        let used = &mut host_used[node_id.index()];
        used.0 += share.cpus_per_gpu * gpus as f64;
        used.1 += share.memory_per_gpu * gpus as f64;
        // A little slack for floating-point sums of fractional shares.
        if used.0 > node.cpus as f64 + 1e-6 || used.1 > node.memory_gib as f64 + 1e-6 {
            return Err(PlanError::HostCapacity {
                job: a.job,
                node: node.name.clone(),
                cpus: node.cpus,
                memory_gib: node.memory_gib,
                used_cpus: used.0,
                used_memory: used.1,
            });
        }
    }
    Ok(())
}

/// Opportunistic jobs (guests) are counted apart: on top of the GPUs' holders, one each.
struct GuestTally {
    /// The guests' own occupancy (`None` when the decision has no guest).
    occupancy: Option<Occupancy>,
    /// The guests' GPUs nobody holds and their GPUs held by others, in total (placements do not
    /// name GPUs: checked against the decision's free and held GPUs once it is complete).
    gpus: (u32, u32),
    /// The decision's last guest.
    last: Option<JobId>,
}

impl GuestTally {
    /// Checks guest `a` (`g`: its speed and GPUs on held ones) and counts its GPUs.
    #[inline]
    fn add(&mut self, a: &Assignment, g: Guest) -> Result<(), PlanError> {
        if a.colocation.is_some() || a.host.is_some() {
            return Err(PlanError::GuestWithShares(a.job));
        }
        if !(g.speed.is_finite() && g.speed > 0.0) {
            return Err(PlanError::BadGuestSpeed {
                job: a.job,
                speed: g.speed,
            });
        }
        if let Some(guests) = self.occupancy.as_mut() {
            guests
                .allocate(&a.placement)
                .map_err(|e| PlanError::GuestsOverAllocated {
                    job: a.job,
                    reason: e.to_string(),
                })?;
        }
        let gpus = a.placement.gpus();
        if g.on_held > gpus {
            return Err(PlanError::GuestsMiscounted {
                job: a.job,
                reason: format!("on {} held GPUs of its {gpus}", g.on_held),
            });
        }
        self.gpus.0 += gpus - g.on_held;
        self.gpus.1 += g.on_held;
        self.last = Some(a.job);
        Ok(())
    }

    /// Once the decision is counted (`occupancy`): the guests together use at most the GPUs it
    /// leaves free and those it holds.
    #[inline]
    fn check_totals(&self, cluster: &Cluster, occupancy: &Occupancy) -> Result<(), PlanError> {
        if let Some(job) = self.last {
            let (free, held) = (
                occupancy.free_total(),
                cluster.total_gpus() - occupancy.free_total(),
            );
            if self.gpus.0 > free || self.gpus.1 > held {
                return Err(PlanError::GuestsMiscounted {
                    job,
                    reason: format!(
                        "guests on {} free GPUs of {free} and on {} held GPUs of {held}",
                        self.gpus.0, self.gpus.1
                    ),
                });
            }
        }
        Ok(())
    }
}

/// An empty list of actions borrowing from another decision, in the same memory: the list is
/// emptied, and collecting a `Vec`'s own iterator into a `Vec` of an element of the same size
/// reuses its allocation (no `unsafe`, no element survives to outlive what it borrowed).
#[expect(
    clippy::unnecessary_filter_map,
    reason = "filter cannot change the element's lifetime; filter_map can"
)]
fn relifetime<'to>(mut actions: Vec<Action<'_>>) -> Vec<Action<'to>> {
    actions.clear();
    actions.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Colocation, GpuTypeId, NodeId, Placement, RackId, SimTime};

    fn cluster() -> Cluster {
        let node = |i: u32, t: u8| Node {
            id: NodeId(i),
            name: format!("n{i}"),
            rack: RackId(0),
            gpu_type: GpuTypeId(t),
            gpus: 2,
            cpus: 8,
            memory_gib: 32,
        };
        Cluster::new(
            vec!["v100".into(), "k80".into()],
            vec![node(0, 0), node(1, 1)],
        )
        .expect("valid")
    }

    fn specs() -> Vec<JobSpec> {
        let mut specs: Vec<JobSpec> = (0..4)
            .map(|i| JobSpec::new(JobId(i), SimTime::ZERO, 1, 10.0))
            .collect();
        specs[2].gpus = 2;
        specs[3].speed_by_gpu_type = vec![1.0, 0.0];
        specs
    }

    /// `current` with a decision by changes' `plan` put in force.
    fn in_force(plan: &Plan<'_>, current: &Occupancy) -> Occupancy {
        let mut after = current.clone();
        let replaced = plan
            .occupancy
            .clone()
            .put_in_force(&mut after, &plan.actions);
        assert_eq!(replaced, None, "counted on top, nothing replaced");
        after
    }

    fn on(job: u32, node: u32, gpus: u32) -> Assignment {
        Assignment::exclusive(JobId(job), Placement::single(NodeId(node), gpus))
    }

    fn check(decision: Vec<Assignment>) -> Result<Occupancy, PlanError> {
        let (cluster, specs) = (cluster(), specs());
        Planner::new(4).check(
            &cluster,
            &specs,
            |_| true,
            &Decision {
                run: decision,
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_valid_decision_gives_its_occupancy() {
        let occupancy = check(vec![on(0, 0, 1), on(2, 1, 2)]).expect("valid");
        assert_eq!(occupancy.free_on(NodeId(0)), 1);
        assert_eq!(occupancy.free_on(NodeId(1)), 0);
    }

    #[test]
    fn every_rule_has_its_error() {
        assert!(matches!(
            check(vec![on(0, 0, 1), on(0, 1, 1)]),
            Err(PlanError::AssignedTwice(_))
        ));
        assert!(
            matches!(check(vec![on(2, 0, 1)]), Err(PlanError::GangSize { ref wanted, got: 1, .. }) if wanted == "2")
        );
        assert!(matches!(
            check(vec![on(3, 1, 1)]),
            Err(PlanError::CannotRunOn { .. })
        ));
        assert!(matches!(
            check(vec![on(0, 0, 1), on(1, 0, 1), on(3, 0, 1)]),
            Err(PlanError::OverAllocated { .. })
        ));
        let (cluster, specs) = (cluster(), specs());
        let inactive = Planner::new(4).check(
            &cluster,
            &specs,
            |id| id.0 != 1,
            &Decision {
                run: vec![on(1, 0, 1)],
                ..Default::default()
            },
        );
        assert!(matches!(inactive, Err(PlanError::NotActive(JobId(1)))));
        let mut typed = specs.clone();
        typed[0].gpu_type = Some(GpuTypeId(1));
        let wrong = Planner::new(4).check(
            &cluster,
            &typed,
            |_| true,
            &Decision {
                run: vec![on(0, 0, 1)],
                ..Default::default()
            },
        );
        assert!(matches!(wrong, Err(PlanError::WrongGpuType { .. })));
        let pair = |a: u32, b: u32, speed: f64| Assignment {
            colocation: Some(Colocation {
                partner: JobId(b),
                speed,
            }),
            ..on(a, 0, 1)
        };
        assert!(matches!(
            check(vec![pair(0, 1, 0.5)]),
            Err(PlanError::PartnerNotAssigned { .. })
        ));
        assert!(matches!(
            check(vec![pair(0, 1, 0.5), on(1, 0, 1)]),
            Err(PlanError::PartnersDisagree { .. })
        ));
        assert!(matches!(
            check(vec![pair(0, 1, f64::NAN), pair(1, 0, 0.5)]),
            Err(PlanError::BadSharedSpeed { .. })
        ));
        check(vec![pair(0, 1, 0.5), pair(1, 0, 0.5)]).expect("a pair counts its GPUs once");
        // Groups of up to four: a ring of partners, counted once.
        let ring = |ids: &[u32]| {
            ids.iter()
                .enumerate()
                .map(|(i, &id)| pair(id, ids[(i + 1) % ids.len()], 0.3))
                .collect::<Vec<_>>()
        };
        let mut wide = specs.clone();
        wide.extend((4..8).map(|i| JobSpec::new(JobId(i), crate::SimTime::ZERO, 1, 10.0)));
        let check_wide = |run: Vec<Assignment>| {
            Planner::new(8).check(
                &cluster,
                &wide,
                |_| true,
                &Decision {
                    run,
                    ..Default::default()
                },
            )
        };
        let three = check_wide(ring(&[0, 1, 4])).expect("three jobs on one GPU");
        assert_eq!(three.free_total(), 3);
        check_wide(ring(&[4, 0, 5, 1])).expect("four");
        assert!(
            matches!(
                check_wide(ring(&[0, 1, 4, 5, 6])),
                Err(PlanError::PartnersDisagree { .. })
            ),
            "five is too many"
        );
        let mut open = ring(&[0, 1, 4]);
        open[2].colocation = None;
        assert!(
            matches!(check_wide(open), Err(PlanError::PartnersDisagree { .. })),
            "a chain that does not close"
        );
        let mut apart = ring(&[0, 1, 4]);
        apart[1].placement = Placement::single(NodeId(0), 1);
        apart[2].placement = Placement::single(NodeId(0), 1);
        apart[0].placement = Placement::single(NodeId(1), 1);
        assert!(check_wide(apart).is_err(), "members on other GPUs");
        let hosted = |job: u32, cpus: f64| Assignment {
            host: Some(HostShare {
                cpus_per_gpu: cpus,
                memory_per_gpu: 1.0,
            }),
            ..on(job, 0, 1)
        };
        assert!(matches!(
            check(vec![
                Assignment {
                    host: Some(HostShare {
                        cpus_per_gpu: 1.0,
                        memory_per_gpu: 1.0
                    }),
                    ..pair(0, 1, 0.5)
                },
                pair(1, 0, 0.5)
            ]),
            Err(PlanError::SharedWithHostShare(_))
        ));
        assert!(matches!(
            check(vec![hosted(0, -1.0)]),
            Err(PlanError::BadHostShare { .. })
        ));
        assert!(matches!(
            check(vec![hosted(0, 6.0), hosted(1, 6.0)]),
            Err(PlanError::HostCapacity { .. })
        ));
    }

    #[test]
    fn a_plans_memory_is_reused() {
        let a = on(0, 0, 1);
        let mut actions = Vec::with_capacity(64);
        actions.push(Action::Start(&a));
        let reused: Vec<Action<'static>> = relifetime(actions);
        assert!(reused.is_empty() && reused.capacity() >= 64);
    }

    #[test]
    fn a_plan_names_each_jobs_action() {
        let (cluster, specs) = (cluster(), specs());
        let on_0 = Placement::single(NodeId(0), 1);
        let on_1 = Placement::single(NodeId(1), 1);
        // Job 0 runs on node 0, job 1 on node 1, job 3 on node 0 with its own CPU share; job 2 waits.
        let share = HostShare {
            cpus_per_gpu: 2.0,
            memory_per_gpu: 4.0,
        };
        let standing = |id: JobId| match id.0 {
            0 => Some(Standing::Running {
                placement: &on_0,
                partner: None,
                host: None,
            }),
            1 => Some(Standing::Running {
                placement: &on_1,
                partner: None,
                host: None,
            }),
            3 => Some(Standing::Running {
                placement: &on_0,
                partner: None,
                host: Some(share),
            }),
            _ => Some(Standing::Queued),
        };
        // Job 0 moves to node 1, job 1 is preempted, job 3 stays but drops its share, job 2 starts.
        let decision = Decision {
            run: vec![on(0, 1, 1), on(3, 0, 1), on(2, 0, 1)],
            ..Default::default()
        };
        let mut narrow = specs.clone();
        narrow[2].gpus = 1;
        let plan = Planner::new(4)
            .plan(
                &cluster,
                &narrow,
                standing,
                [JobId(0), JobId(1), JobId(3)],
                None,
                &decision,
            )
            .expect("valid");
        assert_eq!(plan.preempt, vec![JobId(1)]);
        assert_eq!(
            plan.actions,
            vec![
                Action::Migrate(&decision.run[0]),
                Action::Reshare(&decision.run[1]),
                Action::Start(&decision.run[2])
            ]
        );
        let keep = Decision {
            run: vec![on(0, 0, 1)],
            ..Default::default()
        };
        let plan = Planner::new(4)
            .plan(&cluster, &narrow, standing, [JobId(0)], None, &keep)
            .expect("valid");
        assert_eq!(plan.actions, vec![Action::Keep(&keep.run[0])]);
        // A job that is not active is refused by the same rules as `check`.
        let none = |_: JobId| None;
        assert!(matches!(
            Planner::new(4).plan(&cluster, &narrow, none, [], None, &keep),
            Err(PlanError::NotActive(JobId(0)))
        ));
    }

    #[test]
    fn starts_by_changes_are_counted_together_on_top_and_forgotten_at_the_next_check() {
        let (cluster, specs) = (cluster(), specs());
        // Nothing runs; jobs 0, 1 and 3 (one GPU each) wait. Node 0 has two GPUs.
        let current = Occupancy::new(&cluster);
        let by_changes = |run: Vec<Assignment>| Decision {
            run,
            keep_unlisted: true,
            ..Default::default()
        };
        let unread = || -> std::iter::Empty<JobId> { std::iter::empty() };
        let mut planner = Planner::new(4);
        // Three starts on node 0's two GPUs: the third is over, counting the first two.
        let over = by_changes(vec![on(0, 0, 1), on(1, 0, 1), on(3, 0, 1)]);
        let e = planner.plan(
            &cluster,
            &specs,
            |_| Some(Standing::Queued),
            unread(),
            Some(&current),
            &over,
        );
        assert!(
            matches!(&e, Err(PlanError::OverAllocated { job: JobId(3), reason }) if reason.contains("0 free GPUs")),
            "{e:?}"
        );
        // The refused check's GPUs are not counted in the next one.
        let two = by_changes(vec![on(0, 0, 1), on(1, 0, 1)]);
        let plan = planner
            .plan(
                &cluster,
                &specs,
                |_| Some(Standing::Queued),
                unread(),
                Some(&current),
                &two,
            )
            .expect("node 0's two GPUs");
        assert_eq!(plan.occupancy, PlannedOccupancy::CurrentWithStarts);
        let after = in_force(&plan, &current);
        assert_eq!(
            (after.free_on(NodeId(0)), after.free_total()),
            (0, current.free_total() - 2)
        );
    }

    #[test]
    fn a_decision_by_changes_starts_on_the_current_occupancy_and_keeps_the_rest() {
        let (cluster, specs) = (cluster(), specs());
        let on_0 = Placement::single(NodeId(0), 1);
        // Job 0 runs on node 0 (one of its two GPUs); jobs 1 and 2 wait.
        let standing = |id: JobId| match id.0 {
            0 => Some(Standing::Running {
                placement: &on_0,
                partner: None,
                host: None,
            }),
            _ => Some(Standing::Queued),
        };
        let mut current = Occupancy::new(&cluster);
        current.allocate(&on_0).expect("free");
        let by_changes = |run: Vec<Assignment>| Decision {
            run,
            keep_unlisted: true,
            ..Default::default()
        };
        // Job 1 starts on node 0's other GPU; job 0, unlisted, keeps its GPU (not preempted).
        let start = by_changes(vec![on(1, 0, 1)]);
        let unread = || -> std::iter::Empty<JobId> { std::iter::empty() };
        let plan = Planner::new(4)
            .plan(&cluster, &specs, standing, unread(), Some(&current), &start)
            .expect("valid");
        assert_eq!(
            (plan.preempt.clone(), plan.actions.clone()),
            (vec![], vec![Action::Start(&start.run[0])])
        );
        let after = in_force(&plan, &current);
        assert_eq!(after.free_on(NodeId(0)), 0, "job 0's GPU and job 1's");
        // Listing job 0 as it is keeps it, without counting its GPU twice.
        let keep = by_changes(vec![on(0, 0, 1), on(1, 0, 1)]);
        let plan = Planner::new(4)
            .plan(&cluster, &specs, standing, unread(), Some(&current), &keep)
            .expect("valid");
        assert_eq!(
            plan.actions,
            vec![Action::Keep(&keep.run[0]), Action::Start(&keep.run[1])]
        );
        // Over-commit against the current occupancy: job 2 (two GPUs) on node 0.
        let over = by_changes(vec![on(2, 0, 2)]);
        assert!(matches!(
            Planner::new(4).plan(&cluster, &specs, standing, unread(), Some(&current), &over),
            Err(PlanError::OverAllocated { .. })
        ));
        // Anything but starts alone and kept jobs is refused: a move, a shared start.
        let moved = by_changes(vec![on(0, 1, 1)]);
        assert!(matches!(
            Planner::new(4).plan(&cluster, &specs, standing, unread(), Some(&current), &moved),
            Err(PlanError::ChangeNotAllowed(JobId(0)))
        ));
        let pair = |a: u32, b: u32| Assignment {
            colocation: Some(Colocation {
                partner: JobId(b),
                speed: 0.5,
            }),
            ..on(a, 0, 1)
        };
        let shared = by_changes(vec![pair(1, 0), pair(0, 1)]);
        assert!(matches!(
            Planner::new(4).plan(
                &cluster,
                &specs,
                standing,
                unread(),
                Some(&current),
                &shared
            ),
            Err(PlanError::ChangeNotAllowed(JobId(1)))
        ));
        // A caller that keeps no current state (the daemon) refuses decisions by changes.
        assert!(matches!(
            Planner::new(4).plan(&cluster, &specs, standing, unread(), None, &start),
            Err(PlanError::NoCurrentState)
        ));
        assert!(matches!(
            Planner::new(4).check(&cluster, &specs, |_| true, &start),
            Err(PlanError::NoCurrentState)
        ));
    }

    #[test]
    fn the_planner_remembers_what_the_last_decision_assigned() {
        let (cluster, specs) = (cluster(), specs());
        let mut planner = Planner::new(4);
        planner
            .check(
                &cluster,
                &specs,
                |_| true,
                &Decision {
                    run: vec![on(0, 0, 1)],
                    ..Default::default()
                },
            )
            .expect("valid");
        assert!(planner.assigned(JobId(0)) && !planner.assigned(JobId(1)));
        planner
            .check(
                &cluster,
                &specs,
                |_| true,
                &Decision {
                    run: vec![on(1, 0, 1)],
                    ..Default::default()
                },
            )
            .expect("valid");
        assert!(!planner.assigned(JobId(0)) && planner.assigned(JobId(1)));
    }

    #[test]
    fn guests_use_at_most_the_free_gpus_and_the_held_ones() {
        // Two nodes of two GPUs. Job 0 holds one GPU of node 0: three free, one held.
        let guest = |job: u32, node: u32, gpus: u32, on_held: u32| {
            Assignment::guest(
                JobId(job),
                Placement::single(NodeId(node), gpus),
                0.5,
                on_held,
            )
        };
        check(vec![on(0, 0, 1), guest(1, 0, 1, 1), guest(2, 1, 2, 0)])
            .expect("one guest on the held GPU, one on two free ones");
        check(vec![on(0, 0, 1), guest(1, 0, 1, 0), guest(2, 1, 2, 0)])
            .expect("three guests' GPUs on three free ones");
        // More on held GPUs than it has.
        assert!(matches!(
            check(vec![on(0, 0, 1), guest(1, 0, 1, 2)]),
            Err(PlanError::GuestsMiscounted { job: JobId(1), .. })
        ));
        // Two guests on the one held GPU.
        assert!(matches!(
            check(vec![on(0, 0, 1), guest(1, 0, 1, 1), guest(2, 1, 2, 1)]),
            Err(PlanError::GuestsMiscounted { job: JobId(2), .. })
        ));
        // Every GPU held: a guest that says it runs on a free one.
        let full = [on(0, 0, 1), on(1, 0, 1), on(2, 1, 2)];
        let with = |g: Assignment| full.iter().cloned().chain([g]).collect::<Vec<_>>();
        assert!(matches!(
            check(with(guest(3, 0, 1, 0))),
            Err(PlanError::GuestsMiscounted { job: JobId(3), .. })
        ));
        check(with(guest(3, 0, 1, 1))).expect("on a held GPU");
    }
}
