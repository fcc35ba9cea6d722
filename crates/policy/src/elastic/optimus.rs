//! `optimus`: Optimus+Oracle as Pollux's simulator runs it (OSDI'21 artifact,
//! `simulator/optimus.py`), the baseline behind Pollux's published Optimus numbers:
//!
//! - every job first gets its smallest GPU count (one GPU for an elastic job) in submission
//!   order, while GPUs last; the rest wait;
//! - then the remaining GPUs go one at a time to the job with the largest marginal gain:
//!   predicted iteration time saved by one more GPU × iterations left (the oracle: the job's
//!   profile, [`arbiter_model::PlacementSpeed::predicted_iteration_s`]; the first of equals in
//!   submission order), up to its largest count;
//! - placement as [`crate::mechanisms::elastic::place_counts`], smallest counts first: a job keeps its GPUs
//!   while its count is unchanged, the others are placed most-free-node first — every change of count is a
//!   restart.
//!
//! A job without a profile is predicted to scale linearly, its iterations left taken as its
//! remaining run time; a rigid job (no elastic range) runs with its gang or waits.

use crate::descriptor::{Descriptor, Family};
use crate::mechanisms::elastic::{gpu_bounds, place_counts};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{ActiveJob, Decision, JobSpec, PendingReason, SimTime};

/// `optimus`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("optimus", Family::OtherRounds, "Optimus+Oracle as Pollux's simulator runs it: one GPU each, then GPUs by step-time gain x iterations left; elastic jobs resized (OSDI'21 artifact)").elastic()
    .paper("Optimus (EuroSys'18), as in Pollux (OSDI'21)")
    .detail("Optimus+Oracle as Pollux's simulator runs it: one GPU per job in submission order while GPUs last, then GPUs one at a time to the largest marginal gain — predicted step time saved × iterations left (the profile as oracle) — up to batch ÷ smallest local batch (NCF: 1); a job keeps its GPUs while its count is unchanged; every resize is a checkpoint-restart");

/// Builds `optimus` (no parameters; it places as Pollux's simulator does).
pub fn build(_: Placing) -> Result<Optimus, PolicyError> {
    Ok(Optimus)
}

/// Pollux's Optimus+Oracle baseline.
#[derive(Clone, Debug, Default)]
pub struct Optimus;

/// Predicted seconds per iteration with `n` GPUs, and iterations left.
fn predicted(
    spec: &JobSpec,
    job: &ActiveJob,
    n: u32,
    gpus_per_node: u32,
    now: SimTime,
) -> Option<f64> {
    match &spec.scaling {
        Some(s) => s.0.predicted_iteration_s(n, gpus_per_node),
        None => Some(1.0 / f64::from(n.max(1))),
    }
    .map(|t| t * remaining_iterations(spec, job, now))
}

fn remaining_iterations(spec: &JobSpec, job: &ActiveJob, now: SimTime) -> f64 {
    let left_s = job.remaining_s_at(now);
    match &spec.scaling {
        Some(s) => {
            let done = if spec.run_time_s > 0.0 {
                (1.0 - left_s / spec.run_time_s).clamp(0.0, 1.0)
            } else {
                1.0
            };
            s.0.remaining_iterations(done).unwrap_or(left_s)
        }
        None => left_s,
    }
}

impl Policy for Optimus {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut jobs: Vec<&ActiveJob> = view.jobs.iter().collect();
        jobs.sort_by_key(|j| j.id);
        let per_node = view.cluster.max_gpus_per_node();
        // Smallest counts first (a stable sort: submission order among equals).
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&k| gpu_bounds(view.spec(jobs[k])).0);
        let mut left = view.cluster.total_gpus();
        let mut count = vec![0u32; jobs.len()];
        let mut gain = vec![0.0f64; jobs.len()];
        let gain_of = |k: usize, n: u32, left: u32| -> f64 {
            let spec = view.spec(jobs[k]);
            let (_, most) = gpu_bounds(spec);
            if n + 1 > most || left < 1 {
                return 0.0;
            }
            match (
                predicted(spec, jobs[k], n, per_node, now),
                predicted(spec, jobs[k], n + 1, per_node, now),
            ) {
                (Some(a), Some(b)) => a - b,
                _ => 0.0,
            }
        };
        for &k in &order {
            let least = gpu_bounds(view.spec(jobs[k])).0;
            if least > left {
                continue;
            }
            count[k] = least;
            left -= least;
            gain[k] = gain_of(k, count[k], left);
        }
        while left > 0 {
            // The first of the largest gains, in the order above.
            let Some(&k) = order
                .iter()
                .filter(|&&k| gain[k] > 0.0)
                .reduce(|best, k| if gain[*k] > gain[*best] { k } else { best })
            else {
                break;
            };
            count[k] += 1;
            gain[k] = gain_of(k, count[k], left);
            left -= 1;
        }
        // Placed in ascending order of count (a stable sort: the order above among equals).
        let mut counts: Vec<_> = order
            .iter()
            .filter(|&&k| count[k] > 0)
            .map(|&k| (jobs[k].id, count[k]))
            .collect();
        counts.sort_by_key(|(_, gpus)| *gpus);
        let run = place_counts(view.cluster, &jobs, &counts);
        let pending = order
            .iter()
            .filter(|&&k| count[k] == 0)
            .map(|&k| (jobs[k].id, PendingReason::InsufficientGpus))
            .collect();
        Ok(Decision {
            run,
            pending,
            ..Decision::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cluster, spec_with};
    use arbiter_model::{GpuRange, JobId};

    #[test]
    fn everyone_gets_one_gpu_then_the_largest_marginal_gain_takes_the_rest() {
        // Linear scaling without profiles: gain of the n-th → (n+1)-th GPU is left/n − left/(n+1).
        let cluster = cluster(1, 4);
        let mut specs = vec![spec_with(0, 0, 1, 1000.0), spec_with(1, 0, 1, 100.0)];
        for s in &mut specs {
            s.elastic = Some(GpuRange { min: 1, max: 4 });
        }
        let jobs: Vec<_> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, SimTime::ZERO, s.run_time_s))
            .collect();
        let d = Optimus
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::ZERO,
            )
            .expect("ok");
        let gpus = |id: u32| {
            d.run
                .iter()
                .find(|a| a.job == JobId(id))
                .map(|a| a.placement.gpus())
        };
        // Gains: long 500 (1→2), then 166.7 (2→3) > short's 50; long gets all three extra.
        assert_eq!((gpus(0), gpus(1)), (Some(3), Some(1)));
    }

    #[test]
    fn more_jobs_than_gpus_leave_the_last_submitted_waiting() {
        let cluster = cluster(1, 2);
        let specs: Vec<_> = (0..3).map(|i| spec_with(i, 0, 1, 10.0)).collect();
        let jobs: Vec<_> = specs
            .iter()
            .map(|s| ActiveJob::submitted(s.id, s.gpus, SimTime::ZERO, s.run_time_s))
            .collect();
        let d = Optimus
            .schedule(
                &SchedulerView {
                    cluster: &cluster,
                    jobs: &jobs,
                    specs: &specs,
                    current: None,
                },
                SimTime::ZERO,
            )
            .expect("ok");
        assert_eq!(
            d.run.iter().map(|a| a.job).collect::<Vec<_>>(),
            vec![JobId(0), JobId(1)]
        );
        assert_eq!(d.pending, vec![(JobId(2), PendingReason::InsufficientGpus)]);
    }
}
