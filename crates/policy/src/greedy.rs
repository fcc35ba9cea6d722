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

use crate::placement::{PlacementStrategy, Placer};
use crate::SchedulerView;
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
    let mut decision = Decision { run: Vec::with_capacity(view.jobs.len().min(placer.free_total() as usize)), ..Decision::default() };
    let mut candidates: Vec<(K, u32, u32)> = Vec::with_capacity(view.jobs.len());
    let mut demand: u64 = 0;
    for (index, job) in view.jobs.iter().enumerate() {
        if !options.preemptive
            && let Some(placement) = job.placement() {
                // Non-preemptive: a running job keeps its GPUs. They were allocated consistently
                // by the engine, so taking them again cannot fail.
                placer.take(placement);
                decision.run.push(Assignment::exclusive(job.id, placement.clone()));
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
                && placer.take(current) {
                    decision.run.push(Assignment::exclusive(job.id, current.clone()));
                    continue;
                }
        let preferred = unclaimed.as_mut().and_then(|u| u.place(spec, job.pending_since, now).ok());
        let placed = match preferred {
            Some(p) if placer.take(&p) => Ok(p),
            _ => placer.place(spec, job.pending_since, now),
        };
        match placed {
            Ok(placement) => {
                if let Some(u) = unclaimed.as_mut() {
                    u.take_overlap(&placement);
                }
                decision.run.push(Assignment::exclusive(job.id, placement))
            }
            Err(reason) => {
                let reason = if Placer::could_ever_fit(view.cluster, spec) { reason } else { PendingReason::NeverFits };
                decision.pending.push((job.id, reason));
                if options.head_of_line_blocking && reason != PendingReason::NeverFits {
                    break;
                }
            }
        }
    }
    decision
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
            Order::Heap(BinaryHeap::from(candidates.into_iter().map(Reverse).collect::<Vec<_>>()))
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
