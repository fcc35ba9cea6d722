//! Gavel's "ideal" mechanism, for checking the round mechanism against the policy: every job
//! receives exactly its allocation X at every instant — a fluid model in which job j progresses
//! at Σ_k X[j][k] · speed_k (reference seconds per second) and holds Σ_k sf_j · X[j][k] GPUs.
//! X is recomputed under the same rule as in rounds (job set changed and the interval passed);
//! jobs not yet covered by a recomputation wait. No placement, no rounds, no overheads.

use crate::engine::{EngineStats, SimConfig, SimError, SimOutput};
use crate::metrics::{JobOutcome, JobRecord};
use arbiter_model::{ActiveJob, Cluster, GpuTypeId, JobId, JobSpec, SimDuration, SimTime};
use arbiter_policy::gavel::Gavel;
use arbiter_policy::{Policy, SchedulerView};
use std::collections::BTreeMap;

/// Runs `policy`'s allocation under the ideal mechanism.
pub fn simulate_ideal(
    cluster: &Cluster,
    specs: &[JobSpec],
    policy: &mut Gavel,
    config: &SimConfig,
) -> Result<SimOutput, SimError> {
    if let Some(s) = specs
        .iter()
        .enumerate()
        .find(|(i, s)| s.id.index() != *i)
        .map(|(_, s)| s)
    {
        return Err(SimError::BadJobIds(s.id));
    }
    let m = cluster.gpu_type_names.len();
    let mut records: Vec<JobRecord> = specs.iter().map(JobRecord::new).collect();
    let mut active: Vec<ActiveJob> = Vec::new();
    let mut stats = EngineStats::default();
    let mut next_arrival = 0usize;
    let mut now = specs.first().map_or(SimTime::ZERO, |s| s.submit);
    let window = config.stop_when_finished;
    let pools = crate::unplaceable::GpuPools::new(cluster);
    let mut window_left = window.map(|w| {
        specs
            .iter()
            .filter(|s| w.contains(s.id.0) && pools.check(s).is_none())
            .count()
    });
    loop {
        while let Some(spec) = specs.get(next_arrival).filter(|s| s.submit <= now) {
            active.push(ActiveJob::submitted(
                spec.id,
                spec.gpus,
                spec.submit,
                spec.run_time_s,
            ));
            next_arrival += 1;
            stats.events += 1;
        }
        if active.is_empty() && next_arrival >= specs.len() {
            break;
        }
        if window_left == Some(0) {
            break;
        }
        // A raised stop flag (Ctrl-C from Python) ends the run here, as the engine's does: an
        // atomic load per step, against an LP solve per recomputation.
        if config.stop.is_raised() {
            return Err(SimError::Stopped(now));
        }
        stats.scheduling_points += 1;
        let allocation: BTreeMap<JobId, Vec<f64>> = policy.allocation_at(
            &SchedulerView {
                cluster,
                jobs: &active,
                specs,
                current: None,
            },
            now,
        );
        // Rates and GPUs held under X.
        let rates: Vec<(f64, f64)> = active
            .iter()
            .map(|job| {
                let spec = &specs[job.id.index()];
                allocation.get(&job.id).map_or((0.0, 0.0), |x| {
                    let rate: f64 = (0..m)
                        .map(|k| x[k] * spec.speed_on(GpuTypeId(k as u8)))
                        .sum();
                    let gpus: f64 = x.iter().sum::<f64>() * spec.gpus as f64;
                    (rate, gpus)
                })
            })
            .collect();
        // Next event: an arrival, a completion, or the next allowed recomputation.
        let mut next = specs.get(next_arrival).map(|s| s.submit);
        let earliest = |a: Option<SimTime>, b: SimTime| Some(a.map_or(b, |a| a.min(b)));
        for (job, &(rate, _)) in active.iter().zip(&rates) {
            if rate > 0.0 {
                next = earliest(
                    next,
                    now + SimDuration::from_secs_f64_ceil(job.remaining_s / rate),
                );
            }
        }
        if let Some(at) = policy.next_recompute_at() {
            next = earliest(next, at.max(now + SimDuration::from_ms(1)));
        }
        let Some(next) = next else {
            break; // nothing can progress: the remaining jobs never get an allocation
        };
        let dt = next.saturating_since(now).as_secs_f64();
        let mut finished = Vec::new();
        for (i, (job, &(rate, gpus))) in active.iter_mut().zip(&rates).enumerate() {
            if rate <= 0.0 {
                continue;
            }
            let record = &mut records[job.id.index()];
            record.first_start_s.get_or_insert(now.as_secs_f64());
            record.gpu_s_allocated += gpus * dt;
            record.busy_gpu_s += gpus * dt;
            record.executed_s += dt;
            job.remaining_s -= rate * dt;
            if job.remaining_s <= 1e-6 * rate.max(1.0) {
                finished.push(i);
            }
        }
        now = next;
        for &i in finished.iter().rev() {
            let job = active.swap_remove(i);
            let record = &mut records[job.id.index()];
            record.finish_s = Some(now.as_secs_f64());
            record.outcome = JobOutcome::Completed;
            stats.events += 1;
            if let (Some(left), Some(w)) = (window_left.as_mut(), window)
                && w.contains(job.id.0)
            {
                *left -= 1;
            }
            policy.job_finished(&specs[job.id.index()], &job, now);
        }
    }
    crate::unplaceable::mark(cluster, specs, &mut records);
    Ok(SimOutput {
        records,
        capacity_gpus: cluster.total_gpus(),
        stats,
        timeline: Vec::new(),
        quota_reclaims: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_policy::{PolicyConfig, PolicyKind, build_gavel};

    #[test]
    fn a_raised_stop_flag_stops_the_ideal_mechanism_at_its_next_step() {
        let cluster = Cluster::homogeneous(1, 2, 4, 32, 128, "V100").expect("cluster");
        let specs: Vec<JobSpec> = (0..4)
            .map(|i| JobSpec::new(JobId(i), SimTime::from_ms(u64::from(i) * 1000), 2, 100.0))
            .collect();
        let gavel = || {
            build_gavel(PolicyKind::MaxMinFairness, &PolicyConfig::default())
                .expect("builds")
                .expect("a Gavel policy")
        };
        let config = SimConfig {
            stop: crate::StopFlag::new(),
            ..SimConfig::default()
        };
        let finished = simulate_ideal(&cluster, &specs, &mut gavel(), &config).expect("runs");
        assert!(finished.records.iter().all(|r| r.finish_s.is_some()));
        config.stop.raise();
        assert!(matches!(
            simulate_ideal(&cluster, &specs, &mut gavel(), &config),
            Err(SimError::Stopped(_))
        ));
    }
}
