//! `fifo-backfill`: FIFO with EASY backfilling (Lifka, 1995; Slurm's backfill scheduler).
//!
//! Jobs start in submission order. When the head job does not fit, it gets a *reservation*: the
//! earliest time at which, as running jobs finish, its placement becomes free (the shadow time).
//! A later job may start now ("backfill") only if it cannot delay that reservation: it finishes by
//! the shadow time, or it leaves the head's reserved GPUs free. Run times come from the trace
//! (an oracle, as Slurm's user-given time limits would be). Non-preemptive.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::placement::{PlacementStrategy, Placer, Placing};
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{
    ActiveJob, Assignment, Decision, JobId, PendingReason, Placement, SimDuration, SimTime,
};

/// `fifo-backfill`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("fifo-backfill", Family::Events, "FIFO with EASY backfilling (Lifka'95; Slurm's backfill)")
    .paper("Lifka'95; Slurm's backfill")
    .detail("FIFO with EASY backfilling: a later job may start if it cannot delay the head job's reservation (run times from the trace); non-preemptive");

/// Builds `fifo-backfill` (no parameters; it places by the caller's strategy).
pub fn build(placing: Placing) -> Result<FifoBackfill, PolicyError> {
    Ok(FifoBackfill::new(placing.strategy))
}

/// FIFO with EASY backfilling.
#[derive(Clone, Debug)]
pub struct FifoBackfill {
    strategy: PlacementStrategy,
}

impl FifoBackfill {
    /// With the given placement strategy.
    pub fn new(strategy: PlacementStrategy) -> Self {
        FifoBackfill { strategy }
    }
}

/// The head job's reservation: the cluster as it will be at the shadow time, without the head.
struct Reservation<'a> {
    shadow: SimTime,
    future: Placer<'a>,
    head: usize,
}

impl Policy for FifoBackfill {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut placer = Placer::new(view.cluster, self.strategy);
        let mut decision = Decision::default();
        // Every job that will hold GPUs after this decision: (end time, id, placement).
        let mut holders: Vec<(SimTime, JobId, Placement)> = Vec::new();
        let mut pending: Vec<usize> = Vec::new();
        for (index, job) in view.jobs.iter().enumerate() {
            match job.placement() {
                Some(placement) => {
                    placer.take(placement);
                    decision
                        .run
                        .push(Assignment::exclusive(job.id, placement.clone()));
                    holders.push((finish_time(job, now), job.id, placement.clone()));
                }
                None => pending.push(index),
            }
        }
        pending.sort_by_key(|&i| (view.jobs[i].submit, view.jobs[i].id));
        let mut reservation: Option<Reservation<'_>> = None;
        for &index in &pending {
            let job = &view.jobs[index];
            let spec = view.spec(job);
            if !Placer::could_ever_fit(view.cluster, spec) {
                decision.pending.push((job.id, PendingReason::NeverFits));
                continue;
            }
            let Some(res) = reservation.as_mut() else {
                match placer.place(spec, job.pending_since, now) {
                    Ok(placement) => {
                        holders.push((finish_time(job, now), job.id, placement.clone()));
                        decision.run.push(Assignment::exclusive(job.id, placement));
                    }
                    Err(reason) => {
                        decision.pending.push((job.id, reason));
                        reservation = reserve(view, &placer, &mut holders, index, now);
                    }
                }
                continue;
            };
            if placer.free_total() == 0 {
                break;
            }
            let mut trial = placer.clone();
            let Ok(placement) = trial.place(spec, job.pending_since, now) else {
                decision
                    .pending
                    .push((job.id, PendingReason::InsufficientGpus));
                continue;
            };
            let ends = finish_time(job, now);
            let harmless = ends <= res.shadow || {
                let mut future = res.future.clone();
                let head = &view.jobs[res.head];
                future.take(&placement)
                    && future
                        .place(view.spec(head), head.pending_since, res.shadow)
                        .is_ok()
            };
            if harmless {
                if ends > res.shadow {
                    res.future.take(&placement);
                }
                placer = trial;
                decision.run.push(Assignment::exclusive(job.id, placement));
            } else {
                decision
                    .pending
                    .push((job.id, PendingReason::WouldDelayReservation));
            }
        }
        Ok(decision)
    }
}

fn finish_time(job: &ActiveJob, now: SimTime) -> SimTime {
    now + SimDuration::from_secs_f64_ceil(job.time_to_finish_s_at(now))
}

/// Releases holders in order of their end times until the head fits: that end time is the
/// shadow time. `None` if the head cannot fit even on the emptied cluster.
fn reserve<'a>(
    view: &SchedulerView<'a>,
    placer: &Placer<'a>,
    holders: &mut [(SimTime, JobId, Placement)],
    head: usize,
    now: SimTime,
) -> Option<Reservation<'a>> {
    holders.sort_by_key(|(end, id, _)| (*end, *id));
    let mut future = placer.clone();
    let job = &view.jobs[head];
    let spec = view.spec(job);
    for (end, _, placement) in holders.iter() {
        future.give_back(placement);
        if future
            .clone()
            .place(spec, job.pending_since, (*end).max(now))
            .is_ok()
        {
            return Some(Reservation {
                shadow: *end,
                future,
                head,
            });
        }
    }
    None
}
