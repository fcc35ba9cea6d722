//! What the Philly study (Jeon et al., ATC'19) and Helios (Hu et al., SC'21) report about a
//! trace: jobs and GPU-time by job size, durations by size, arrivals by hour of day and day of
//! week, load per tenant (virtual cluster), and how concentrated GPU-time is in the largest jobs.
//! Pure numbers from a [`Trace`]; the CLI prints them (`arbiter trace analyze`).

use crate::Trace;
use arbiter_model::JobSpec;
use serde::Serialize;
use std::collections::BTreeMap;

/// The Philly study's job-size classes, GPUs inclusive.
pub const SIZE_CLASSES: [(&str, u32, u32); 4] = [
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-8", 5, 8),
    (">8", 9, u32::MAX),
];

/// Points kept of a CDF: enough for a screen.
pub const CDF_POINTS: usize = 200;

/// One job-size class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeClass {
    /// Its name: `1`, `2-4`, `5-8`, `>8` GPUs.
    pub gpus: String,
    /// Jobs in it.
    pub jobs: usize,
    /// Share of all jobs.
    pub job_share: f64,
    /// GPU-hours of work in it.
    pub gpu_hours: f64,
    /// Share of all GPU-time.
    pub gpu_time_share: f64,
    /// Median duration, seconds.
    pub p50_duration_s: f64,
    /// 90th-percentile duration, seconds.
    pub p90_duration_s: f64,
    /// Duration CDF: (seconds, fraction of the class's jobs at most that long), at most
    /// [`CDF_POINTS`] points.
    pub duration_cdf: Vec<(f64, f64)>,
}

/// One tenant's load.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantLoad {
    /// The tenant (Philly: the virtual cluster).
    pub tenant: String,
    /// Its jobs.
    pub jobs: usize,
    /// GPU-hours of work.
    pub gpu_hours: f64,
    /// Share of all GPU-time.
    pub gpu_time_share: f64,
    /// Mean GPUs per job.
    pub mean_gpus: f64,
}

/// A trace characterised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceAnalysis {
    /// Jobs.
    pub jobs: usize,
    /// GPU-hours of work.
    pub gpu_hours: f64,
    /// By job size.
    pub sizes: Vec<SizeClass>,
    /// By tenant, most GPU-time first.
    pub tenants: Vec<TenantLoad>,
    /// Share of GPU-time in the largest 1% of jobs (by GPU-time).
    pub top_1pct_gpu_time_share: f64,
    /// Share of GPU-time in the largest 10% of jobs.
    pub top_10pct_gpu_time_share: f64,
    /// Submissions per hour of day (0–23, in the trace's own clock), when it has timestamps.
    pub arrivals_by_hour: Option<Vec<usize>>,
    /// Submissions per day of week (Monday first), when it has timestamps.
    pub arrivals_by_weekday: Option<Vec<usize>>,
}

fn gpu_hours(job: &JobSpec) -> f64 {
    job.gpu_seconds() / 3600.0
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The empirical CDF of sorted values, thinned to at most `points` points (always keeping the
/// last, where the CDF reaches 1).
pub fn thinned_cdf(sorted: &[f64], points: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 || points == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(points);
    let mut cdf: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| (sorted[i], (i + 1) as f64 / n as f64))
        .collect();
    if cdf.last().is_none_or(|&(_, f)| f < 1.0) {
        cdf.push((sorted[n - 1], 1.0));
    }
    cdf
}

/// Characterises `trace`.
pub fn analyze(trace: &Trace) -> TraceAnalysis {
    let jobs = trace.jobs.len();
    let total_hours: f64 = trace.jobs.iter().map(gpu_hours).sum();
    let share = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
    let sizes = SIZE_CLASSES
        .iter()
        .map(|&(name, lo, hi)| {
            let members: Vec<&JobSpec> = trace
                .jobs
                .iter()
                .filter(|j| j.gpus >= lo && j.gpus <= hi)
                .collect();
            let mut durations: Vec<f64> = members.iter().map(|j| j.run_time_s).collect();
            durations.sort_by(f64::total_cmp);
            let hours: f64 = members.iter().map(|j| gpu_hours(j)).sum();
            SizeClass {
                gpus: name.to_string(),
                jobs: members.len(),
                job_share: share(members.len() as f64, jobs as f64),
                gpu_hours: hours,
                gpu_time_share: share(hours, total_hours),
                p50_duration_s: quantile(&durations, 0.5),
                p90_duration_s: quantile(&durations, 0.9),
                duration_cdf: thinned_cdf(&durations, CDF_POINTS),
            }
        })
        .collect();
    let mut by_tenant: BTreeMap<&str, (usize, f64, u64)> = BTreeMap::new();
    for j in &trace.jobs {
        let e = by_tenant.entry(j.tenant.as_str()).or_insert((0, 0.0, 0));
        e.0 += 1;
        e.1 += gpu_hours(j);
        e.2 += u64::from(j.gpus);
    }
    let mut tenants: Vec<TenantLoad> = by_tenant
        .into_iter()
        .map(|(tenant, (n, hours, gpus))| TenantLoad {
            tenant: tenant.to_string(),
            jobs: n,
            gpu_hours: hours,
            gpu_time_share: share(hours, total_hours),
            mean_gpus: gpus as f64 / n as f64,
        })
        .collect();
    tenants.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then_with(|| a.tenant.cmp(&b.tenant))
    });
    let mut work: Vec<f64> = trace.jobs.iter().map(gpu_hours).collect();
    work.sort_by(|a, b| b.total_cmp(a));
    let top = |fraction: f64| {
        let n = ((fraction * jobs as f64).ceil() as usize).min(jobs);
        share(work[..n].iter().sum(), total_hours)
    };
    let (arrivals_by_hour, arrivals_by_weekday) = match trace.origin_unix_s {
        Some(origin) => {
            let mut hours = vec![0; 24];
            let mut days = vec![0; 7];
            for j in &trace.jobs {
                let t = origin + (j.submit.as_ms() / 1000) as i64;
                hours[(t.rem_euclid(86_400) / 3600) as usize] += 1;
                // 1970-01-01 was a Thursday: day 0 + 3 is Monday-based index 3.
                days[((t.div_euclid(86_400) + 3).rem_euclid(7)) as usize] += 1;
            }
            (Some(hours), Some(days))
        }
        None => (None, None),
    };
    TraceAnalysis {
        jobs,
        gpu_hours: total_hours,
        sizes,
        tenants,
        top_1pct_gpu_time_share: top(0.01),
        top_10pct_gpu_time_share: top(0.10),
        arrivals_by_hour,
        arrivals_by_weekday,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{JobId, SimTime};

    fn job(tenant: &str, submit_s: u64, gpus: u32, run_s: f64) -> JobSpec {
        let mut j = JobSpec::new(JobId(0), SimTime::from_ms(submit_s * 1000), gpus, run_s);
        j.tenant = tenant.into();
        j
    }

    #[test]
    fn a_hand_made_trace_is_characterised_exactly() {
        // Ten jobs: eight 1-GPU jobs of an hour (tenant a), one 4-GPU job of 2 h (b), one
        // 16-GPU job of 10 h (b): 8 + 8 + 160 = 176 GPU-hours. Monday 2024-01-01 00:00 UTC is the
        // origin; submissions an hour apart, the last at 09:00.
        let mut jobs: Vec<JobSpec> = (0..8).map(|i| job("a", i * 3600, 1, 3600.0)).collect();
        jobs.push(job("b", 8 * 3600, 4, 7200.0));
        jobs.push(job("b", 9 * 3600, 16, 36_000.0));
        let trace = Trace::from_jobs(jobs, Some(1_704_067_200));
        let a = analyze(&trace);
        assert_eq!(a.jobs, 10);
        assert!((a.gpu_hours - 176.0).abs() < 1e-9);
        let by: Vec<(&str, usize, f64)> = a
            .sizes
            .iter()
            .map(|s| (s.gpus.as_str(), s.jobs, s.gpu_hours))
            .collect();
        assert_eq!(
            by,
            vec![
                ("1", 8, 8.0),
                ("2-4", 1, 8.0),
                ("5-8", 0, 0.0),
                (">8", 1, 160.0)
            ]
        );
        assert!((a.sizes[3].gpu_time_share - 160.0 / 176.0).abs() < 1e-12);
        assert_eq!(
            (a.sizes[0].p50_duration_s, a.sizes[0].p90_duration_s),
            (3600.0, 3600.0)
        );
        assert_eq!(
            a.sizes[0].duration_cdf,
            vec![
                (3600.0, 0.125),
                (3600.0, 0.25),
                (3600.0, 0.375),
                (3600.0, 0.5),
                (3600.0, 0.625),
                (3600.0, 0.75),
                (3600.0, 0.875),
                (3600.0, 1.0)
            ]
        );
        // The largest 1% (one job) holds 160 of 176 GPU-hours; the largest 10% is the same job.
        assert!((a.top_1pct_gpu_time_share - 160.0 / 176.0).abs() < 1e-12);
        assert!((a.top_10pct_gpu_time_share - 160.0 / 176.0).abs() < 1e-12);
        assert_eq!(
            a.tenants
                .iter()
                .map(|t| (t.tenant.as_str(), t.jobs, t.gpu_hours, t.mean_gpus))
                .collect::<Vec<_>>(),
            vec![("b", 2, 168.0, 10.0), ("a", 8, 8.0, 1.0)]
        );
        let hours = a.arrivals_by_hour.expect("timestamps");
        assert_eq!(hours[..10], [1; 10]);
        assert_eq!(hours[10..].iter().sum::<usize>(), 0);
        assert_eq!(a.arrivals_by_weekday, Some(vec![10, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn cdfs_are_thinned_to_what_a_screen_shows_and_end_at_one() {
        let values: Vec<f64> = (1..=80_000).map(f64::from).collect();
        let cdf = thinned_cdf(&values, CDF_POINTS);
        assert!(cdf.len() <= CDF_POINTS + 1, "{}", cdf.len());
        assert_eq!(cdf.last(), Some(&(80_000.0, 1.0)));
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert!(thinned_cdf(&[], 10).is_empty());
        // Without timestamps there are no arrival histograms.
        let a = analyze(&Trace::from_jobs(vec![job("a", 0, 1, 10.0)], None));
        assert_eq!((a.arrivals_by_hour, a.arrivals_by_weekday), (None, None));
    }
}
