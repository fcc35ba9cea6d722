//! "Order, then place greedily": the mechanism behind FIFO, SJF, SRTF, SRSF, LAS, Gittins and QSSF.
//!
//! Jobs are visited in increasing key order (ties broken by job id) and each is placed if the
//! strategy finds GPUs for it. Two switches select the classic behaviours:
//! - **preemptive**: every active job competes at every scheduling point, running or not; a
//!   running job that is not placed again is preempted (Tiresias/Muri re-plan from an empty
//!   cluster each time). Otherwise running jobs keep their GPUs and only pending jobs compete.
//! - **head-of-line blocking**: the first job that cannot be placed stops the scan (strict FIFO /
//!   YARN-CS); otherwise later jobs may pass it (fit-first).
//!
//! Keys are computed once per job and the order is produced lazily from a binary heap, so a
//! scheduling point costs O(n + k log n) for n active jobs of which k are visited: the scan stops
//! as soon as no GPU is free.

use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::{Current, SchedulerView};
use arbiter_model::{ActiveJob, Assignment, Decision, PendingReason, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The switches of [`schedule_in_order`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GreedyOptions {
    /// Running jobs compete again (and may be preempted) at every scheduling point.
    pub preemptive: bool,
    /// The first job that does not fit blocks all jobs after it.
    pub head_of_line_blocking: bool,
    /// In preemptive mode, a running job that stays keeps its current GPUs when they are still
    /// free, instead of being placed afresh (avoids needless migrations). Muri's simulator
    /// re-places from scratch: set false to reproduce it.
    pub keep_placements: bool,
    /// Where GPUs go.
    pub strategy: PlacementStrategy,
}

impl GreedyOptions {
    /// Non-preemptive and fit-first, placing as `placing` says: what a policy that sets its own
    /// switches starts from.
    pub fn fit_first(placing: Placing) -> Self {
        GreedyOptions {
            preemptive: false,
            head_of_line_blocking: false,
            keep_placements: placing.keep_placements,
            strategy: placing.strategy,
        }
    }
}

/// Visits active jobs in increasing `key` order and places greedily; see the module docs.
pub fn schedule_in_order<K: Ord + Copy>(
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    mut key: impl FnMut(&ActiveJob) -> K,
) -> Decision {
    let mut placer = Placer::new(view.cluster, options.strategy);
    // Every assignment takes a GPU of its own: room for all of them up front (the list is built
    // at every scheduling point; growing it by doubling showed in the simulator's profile).
    let mut decision = Decision {
        run: Vec::with_capacity(view.jobs.len().min(placer.free_total() as usize)),
        ..Decision::default()
    };
    let mut candidates: Vec<(K, u32, u32)> = Vec::with_capacity(view.jobs.len());
    let mut demand: u64 = 0;
    for (index, job) in view.jobs.iter().enumerate() {
        if !options.preemptive
            && let Some(placement) = job.placement()
        {
            // Non-preemptive: a running job keeps its GPUs. They were allocated consistently
            // by the engine, so taking them again cannot fail.
            placer.take(placement);
            decision
                .run
                .push(Assignment::exclusive(job.id, placement.clone()));
            continue;
        }
        demand += u64::from(job.gpus);
        candidates.push((key(job), job.id.0, index as u32));
    }
    // In preemptive mode with kept placements, GPUs held by running jobs are claimed by them: a
    // newcomer is placed on unclaimed GPUs when it can be, so that ranking a new job above a
    // running one does not needlessly move the running one (a migration) when there is room.
    let mut unclaimed = (options.preemptive && options.keep_placements).then(|| {
        let mut p = Placer::new(view.cluster, options.strategy);
        for job in view.jobs {
            if let Some(placement) = job.placement() {
                p.take_overlap(placement);
            }
        }
        p
    });
    let mut order = Order::new(candidates, demand <= 2 * u64::from(placer.free_total()));
    while let Some(index) = order.next() {
        if placer.free_total() == 0 {
            break;
        }
        let job = &view.jobs[index as usize];
        let spec = view.spec(job);
        if options.keep_placements
            && let Some(current) = job.placement()
            && placer.take(current)
        {
            decision
                .run
                .push(Assignment::exclusive(job.id, current.clone()));
            continue;
        }
        // (`place` takes what it finds in `unclaimed`; GPUs found elsewhere are marked taken
        // there below. Taking a preferred placement a second time once hid free GPUs from the
        // newcomers after it, which then displaced running jobs: needless migrations.)
        let preferred = unclaimed
            .as_mut()
            .and_then(|u| u.place(spec, job.pending_since, now).ok());
        let placed = match preferred {
            Some(p) if placer.take(&p) => Ok((p, true)),
            other => {
                if let (Some(p), Some(u)) = (other, unclaimed.as_mut()) {
                    u.give_back(&p);
                }
                placer
                    .place(spec, job.pending_since, now)
                    .map(|p| (p, false))
            }
        };
        match placed {
            Ok((placement, from_unclaimed)) => {
                if let Some(u) = unclaimed.as_mut().filter(|_| !from_unclaimed) {
                    u.take_overlap(&placement);
                }
                decision.run.push(Assignment::exclusive(job.id, placement))
            }
            Err(reason) => {
                let reason = Placer::pending_reason(view.cluster, spec, reason);
                decision.pending.push((job.id, reason));
                if options.head_of_line_blocking && reason != PendingReason::NeverFits {
                    break;
                }
            }
        }
    }
    decision
}

/// [`schedule_in_order`], answered as a decision by changes ([`Decision::keep_unlisted`]) when
/// the caller offers the current state ([`SchedulerView::current`]) and the answer is one:
/// - non-preemptive: always — running jobs keep their GPUs, and the waiting jobs are placed in
///   order on the free GPUs, exactly as the whole scan places them;
/// - preemptive with kept placements: when every waiting job, in order, fits on the GPUs no
///   running job holds. The whole scan then keeps every running job where it is (a newcomer is
///   placed on unclaimed GPUs first, and those are the free ones) and places the newcomers
///   where this places them. When one does not fit, it might displace running jobs ranked below
///   it, and the whole scan decides.
///
/// Either way the decision is the one [`schedule_in_order`] makes, at a cost in the waiting jobs
/// instead of all active jobs: a simulation at a fixed load no longer costs O(events × running
/// jobs).
pub fn schedule_changes_in_order<K: Ord + Copy>(
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    key: impl FnMut(&ActiveJob) -> K,
) -> Decision {
    schedule_changes_in_order_reusing(&mut GreedyScratch::default(), view, now, options, key)
}

/// What [`schedule_changes_in_order_reusing`] keeps between calls: buffers, no state.
#[derive(Clone, Debug, Default)]
pub struct GreedyScratch {
    /// Free GPUs per node, the placer's copy of the present's.
    free: Vec<u32>,
}

/// [`schedule_changes_in_order`] with a policy's buffers (the same decision).
pub fn schedule_changes_in_order_reusing<K: Ord + Copy>(
    scratch: &mut GreedyScratch,
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    mut key: impl FnMut(&ActiveJob) -> K,
) -> Decision {
    if let Some(decision) = view
        .current
        .and_then(|current| by_changes(scratch, view, now, options, current, &mut key))
    {
        return decision;
    }
    schedule_in_order(view, now, options, key)
}

/// The decision by changes of [`schedule_changes_in_order`], or `None` when only the whole scan
/// can tell.
fn by_changes<K: Ord + Copy>(
    scratch: &mut GreedyScratch,
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    current: Current<'_>,
    key: &mut impl FnMut(&ActiveJob) -> K,
) -> Option<Decision> {
    // Preemptive without kept placements, every running job is placed afresh.
    if options.preemptive && !options.keep_placements {
        return None;
    }
    // Nothing waits (most completions): nothing to place, and no copy of every node's free GPUs.
    if current.queued.is_empty() {
        return Some(Decision {
            keep_unlisted: true,
            ..Decision::default()
        });
    }
    let mut placer = Placer::from_occupancy_reusing(
        view.cluster,
        current.free,
        options.strategy,
        std::mem::take(&mut scratch.free),
    )?;
    let decision = place_waiting(&mut placer, view, now, options, current, key);
    scratch.free = placer.into_free();
    decision
}

/// The waiting jobs of `current` placed in order on `placer`'s free GPUs (see [`by_changes`]).
fn place_waiting<K: Ord + Copy>(
    placer: &mut Placer<'_>,
    view: &SchedulerView<'_>,
    now: SimTime,
    options: GreedyOptions,
    current: Current<'_>,
    key: &mut impl FnMut(&ActiveJob) -> K,
) -> Option<Decision> {
    let mut candidates: Vec<(K, u32, u32)> = Vec::with_capacity(current.queued.len());
    let mut demand: u64 = 0;
    for &index in current.queued {
        let job = view.jobs.get(index as usize).filter(|j| !j.is_running())?;
        demand += u64::from(job.gpus);
        candidates.push((key(job), job.id.0, index));
    }
    let mut decision = Decision {
        keep_unlisted: true,
        ..Decision::default()
    };
    let mut order = Order::new(candidates, demand <= 2 * u64::from(placer.free_total()));
    while let Some(index) = order.next() {
        if placer.free_total() == 0 {
            // Preemptive: the jobs left might displace running ones.
            if options.preemptive {
                return None;
            }
            break;
        }
        let job = &view.jobs[index as usize];
        let spec = view.spec(job);
        match placer.place(spec, job.pending_since, now) {
            Ok(placement) => decision.run.push(Assignment::exclusive(job.id, placement)),
            Err(reason) => {
                let reason = Placer::pending_reason(view.cluster, spec, reason);
                // Preemptive: a job that could run might displace running jobs ranked below it.
                if options.preemptive && reason != PendingReason::NeverFits {
                    return None;
                }
                decision.pending.push((job.id, reason));
                if options.head_of_line_blocking && reason != PendingReason::NeverFits {
                    break;
                }
            }
        }
    }
    Some(decision)
}

/// Candidates in increasing key order. When the scan is likely to visit most candidates (their
/// demand is within twice the free GPUs) one sort is cheapest; otherwise a heap yields only the
/// few that fit before the cluster is full.
enum Order<K: Ord> {
    Sorted(std::vec::IntoIter<(K, u32, u32)>),
    Heap(BinaryHeap<Reverse<(K, u32, u32)>>),
}

impl<K: Ord> Order<K> {
    fn new(mut candidates: Vec<(K, u32, u32)>, visit_most: bool) -> Self {
        if visit_most {
            candidates.sort_unstable();
            Order::Sorted(candidates.into_iter())
        } else {
            Order::Heap(BinaryHeap::from(
                candidates.into_iter().map(Reverse).collect::<Vec<_>>(),
            ))
        }
    }

    /// Index (into the view's jobs) of the next candidate.
    fn next(&mut self) -> Option<u32> {
        match self {
            Order::Sorted(it) => it.next().map(|(_, _, index)| index),
            Order::Heap(heap) => heap.pop().map(|Reverse((_, _, index))| index),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Current;
    use crate::test_support::{cluster, running, spec_with};
    use arbiter_model::{ActiveJob, JobId, NodeId, Occupancy, Placement};

    const SRTF: GreedyOptions = GreedyOptions {
        preemptive: true,
        head_of_line_blocking: false,
        keep_placements: true,
        strategy: PlacementStrategy::Consolidated,
    };

    /// Two 4-GPU nodes. Job 0 (4 GPUs, long) fills node 0, job 1 (1 GPU, long) runs on node 1;
    /// jobs 2 (1 GPU) and 3 (2 GPUs), both short, wait.
    fn snapshot() -> (
        arbiter_model::Cluster,
        Vec<arbiter_model::JobSpec>,
        Vec<ActiveJob>,
    ) {
        let cluster = cluster(2, 4);
        let specs = vec![
            spec_with(0, 0, 4, 1000.0),
            spec_with(1, 0, 1, 1000.0),
            spec_with(2, 0, 1, 5.0),
            spec_with(3, 0, 2, 5.0),
        ];
        let jobs = specs
            .iter()
            .map(|s| {
                let job = ActiveJob::submitted(s.id, s.gpus, s.submit, s.run_time_s);
                match s.id.0 {
                    0 => running(job, Placement::single(NodeId(0), 4), SimTime::ZERO),
                    1 => running(job, Placement::single(NodeId(1), 1), SimTime::ZERO),
                    _ => job,
                }
            })
            .collect();
        (cluster, specs, jobs)
    }

    #[test]
    fn newcomers_fill_the_free_gpus_before_displacing_running_jobs() {
        // Node 1 has three GPUs free: the newcomers (ranked above every running job) take them
        // and nobody moves. (A newcomer's GPUs were once counted twice as claimed: job 3 then
        // found no unclaimed room, took node 0 — job 0 not yet re-listed — and job 0 was
        // preempted.)
        let (cluster, specs, jobs) = snapshot();
        let view = SchedulerView {
            cluster: &cluster,
            jobs: &jobs,
            specs: &specs,
            current: None,
        };
        let decision = schedule_in_order(&view, SimTime::ZERO, SRTF, |j| {
            crate::order_key(j.remaining_s_at(SimTime::ZERO))
        });
        let placed = |id: u32| {
            decision
                .run
                .iter()
                .find(|a| a.job == JobId(id))
                .map(|a| a.placement.clone())
        };
        assert_eq!(placed(2), Some(Placement::single(NodeId(1), 1)));
        assert_eq!(placed(3), Some(Placement::single(NodeId(1), 2)));
        for (i, job) in jobs.iter().enumerate().take(2) {
            assert_eq!(
                placed(i as u32).as_ref(),
                job.placement(),
                "job {i} keeps its GPUs"
            );
        }
    }

    #[test]
    fn a_decision_by_changes_is_the_whole_scans_or_none() {
        let (cluster, specs, jobs) = snapshot();
        let mut free = Occupancy::new(&cluster);
        for job in &jobs {
            if let Some(p) = job.placement() {
                free.allocate(p).expect("fits");
            }
        }
        let queued = [2u32, 3];
        let key = |j: &ActiveJob| crate::order_key(j.remaining_s_at(SimTime::ZERO));
        let view = SchedulerView {
            cluster: &cluster,
            jobs: &jobs,
            specs: &specs,
            current: Some(Current {
                free: &free,
                queued: &queued,
                positions: None,
            }),
        };
        let changes = schedule_changes_in_order(&view, SimTime::ZERO, SRTF, key);
        assert!(changes.keep_unlisted);
        let whole = schedule_in_order(&view, SimTime::ZERO, SRTF, key);
        let started: Vec<_> = whole.run.iter().filter(|a| a.job.0 >= 2).cloned().collect();
        assert_eq!(
            changes.run, started,
            "the whole scan starts the same jobs where this does"
        );
        // A third newcomer finds no free GPU: it displaces a running job, which only the whole
        // scan decides.
        let mut more_specs = specs.clone();
        more_specs.push(spec_with(4, 0, 2, 1.0));
        let mut more_jobs = jobs.clone();
        more_jobs.push(ActiveJob::submitted(JobId(4), 2, SimTime::ZERO, 1.0));
        let queued = [2u32, 3, 4];
        let view = SchedulerView {
            cluster: &cluster,
            jobs: &more_jobs,
            specs: &more_specs,
            current: Some(Current {
                free: &free,
                queued: &queued,
                positions: None,
            }),
        };
        let decision = schedule_changes_in_order(&view, SimTime::ZERO, SRTF, key);
        assert!(!decision.keep_unlisted);
        assert_eq!(decision, schedule_in_order(&view, SimTime::ZERO, SRTF, key));
        // Non-preemptive, head-of-line blocking, newest first: job 4 starts, job 3 does not fit
        // and blocks job 2; nobody is displaced.
        let fifo = GreedyOptions {
            preemptive: false,
            head_of_line_blocking: true,
            ..SRTF
        };
        let newest = |j: &ActiveJob| std::cmp::Reverse(j.id.0);
        let decision = schedule_changes_in_order(&view, SimTime::ZERO, fifo, newest);
        assert!(decision.keep_unlisted);
        let whole = schedule_in_order(&view, SimTime::ZERO, fifo, newest);
        assert_eq!(decision.pending, whole.pending);
        assert_eq!(
            decision.run,
            whole
                .run
                .iter()
                .filter(|a| a.job.0 >= 2)
                .cloned()
                .collect::<Vec<_>>()
        );
        assert_eq!(
            decision.run,
            vec![Assignment::exclusive(
                JobId(4),
                Placement::single(NodeId(1), 2)
            )]
        );
        assert_eq!(
            decision.pending,
            vec![(JobId(3), PendingReason::InsufficientGpus)]
        );
    }
}
