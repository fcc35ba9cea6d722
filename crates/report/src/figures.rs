//! The data behind each figure, computed from a simulation's records and timeline: thinned CDFs,
//! time series averaged over bins, per-tenant shares with Jain's index. Pure functions, tested
//! on hand-made runs.

use arbiter_sim::{JobOutcome, JobRecord, QuotaLayout, QuotaReclaim, RunSegment, Window};
use std::collections::BTreeMap;

/// Points a CDF is thinned to: smooth on a screen, a few kilobytes in an SVG.
pub const CDF_POINTS: usize = 300;
/// Bins of a time series.
pub const TIME_BINS: usize = 400;

/// The empirical CDF of `values` (finite ones), thinned to [`CDF_POINTS`] steps from the
/// smallest value, as [`steps`].
pub fn cdf(values: impl IntoIterator<Item = f64>) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let Some(&first) = sorted.first() else {
        return Vec::new();
    };
    let mut points = arbiter_trace::analysis::thinned_cdf(&sorted, CDF_POINTS);
    if points.first().is_some_and(|&(x, _)| x > first) {
        points.insert(0, (first, 1.0 / sorted.len() as f64));
    }
    steps(&points)
}

/// The step function that CDF points `(x, F(x))` define, as the corners a line through them
/// must visit: from 0 at the first x, a horizontal run at the level reached so far up to each
/// x, then a vertical jump to F(x); points at one x make one jump, to the highest. A line through
/// the result draws steps, never a ramp between two samples (which, for a few jobs, reads as
/// jobs that never were). Points are sorted first; non-finite ones are left out.
pub fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(sorted.len() * 2);
    for (x, y) in sorted {
        match out.last_mut() {
            Some(top) if top.0 == x => top.1 = top.1.max(y),
            last => {
                let level = last.map_or(0.0, |top| top.1);
                out.push((x, level));
                out.push((x, y.max(level)));
            }
        }
    }
    out
}

/// JCTs of the completed jobs inside `window`, seconds.
pub fn jcts(records: &[JobRecord], window: Window) -> Vec<f64> {
    records
        .iter()
        .filter(|r| window.contains(r.job) && r.outcome == JobOutcome::Completed)
        .filter_map(JobRecord::jct_s)
        .collect()
}

/// Queueing delays (first start − submit) of the jobs inside `window` that started, seconds.
pub fn queueing_delays(records: &[JobRecord], window: Window) -> Vec<f64> {
    records
        .iter()
        .filter(|r| window.contains(r.job))
        .filter_map(JobRecord::queue_s)
        .collect()
}

/// The time average of a step function given by its changes `(time, delta)` over `bins` equal
/// bins of `[from, to]`: `(bin middle, mean value)`.
pub fn step_average(
    mut changes: Vec<(f64, f64)>,
    from: f64,
    to: f64,
    bins: usize,
) -> Vec<(f64, f64)> {
    if to.partial_cmp(&from) != Some(std::cmp::Ordering::Greater) || bins == 0 {
        return Vec::new();
    }
    // Decreases first at equal times: a job handing its GPUs to the next is never counted twice.
    // (Equal keys are equal entries: an unstable sort gives the same sums.)
    changes.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let width = (to - from) / bins as f64;
    let mut area = vec![0.0; bins];
    let (mut value, mut at) = (0.0, from);
    // Walks the bins by index: recomputing the bin from `t` at each boundary could land on the
    // bin just left (`(t - from) / width` rounding down to b + 0.999…) and stop there, dropping
    // the rest of the stretch (a 2.8-million-second run lost most of its long segments so).
    let add = |area: &mut Vec<f64>, value: f64, start: f64, end: f64| {
        let (mut t, end) = (start.max(from), end.min(to));
        if t >= end {
            return;
        }
        let mut bin = (((t - from) / width) as usize).min(bins - 1);
        loop {
            let last = bin + 1 == bins;
            let bin_end = if last {
                end
            } else {
                (from + (bin + 1) as f64 * width).min(end)
            };
            if bin_end > t {
                area[bin] += value * (bin_end - t);
                t = bin_end;
            }
            if last || t >= end {
                break;
            }
            bin += 1;
        }
    };
    for (t, delta) in changes {
        if t > at {
            add(&mut area, value, at, t);
            at = t;
        }
        value += delta;
    }
    add(&mut area, value, at, to);
    area.iter()
        .enumerate()
        .map(|(i, a)| (from + (i as f64 + 0.5) * width, a / width))
        .collect()
}

/// The span a run's time series cover: first submission to last finish (or last segment end).
pub fn span(records: &[JobRecord], timeline: &[RunSegment]) -> Option<(f64, f64)> {
    let from = records
        .iter()
        .map(|r| r.submit_s)
        .fold(f64::INFINITY, f64::min);
    let to = records
        .iter()
        .filter_map(|r| r.finish_s)
        .chain(timeline.iter().map(|s| s.end_s))
        .fold(f64::NEG_INFINITY, f64::max);
    (from.is_finite() && to > from).then_some((from, to))
}

/// GPU utilization over time (GPUs with at least one job on them / capacity, each GPU once:
/// [`arbiter_sim::gpu_time`], the rule of the `gpu_utilization` metric), averaged per bin.
pub fn utilization(
    timeline: &[RunSegment],
    capacity_gpus: u32,
    from: f64,
    to: f64,
) -> Vec<(f64, f64)> {
    counted_over_time(timeline, capacity_gpus, from, to, |s| s.gpus_counted().busy)
}

/// GPUs with more than one job on them / capacity over time (the shared part of
/// [`utilization`]), averaged per bin.
pub fn shared_utilization(
    timeline: &[RunSegment],
    capacity_gpus: u32,
    from: f64,
    to: f64,
) -> Vec<(f64, f64)> {
    counted_over_time(timeline, capacity_gpus, from, to, |s| {
        s.gpus_counted().shared
    })
}

/// The GPUs `count` counts per segment, over capacity, averaged per bin.
fn counted_over_time(
    timeline: &[RunSegment],
    capacity_gpus: u32,
    from: f64,
    to: f64,
    count: impl Fn(&RunSegment) -> f64,
) -> Vec<(f64, f64)> {
    let capacity = capacity_gpus.max(1) as f64;
    let changes = timeline
        .iter()
        .flat_map(|s| {
            let gpus = count(s) / capacity;
            [(s.start_s, gpus), (s.end_s, -gpus)]
        })
        .filter(|&(_, gpus)| gpus != 0.0)
        .collect();
    step_average(changes, from, to, TIME_BINS)
}

/// Jobs waiting (submitted, not finished, not running) over time, averaged per bin. Jobs that
/// can never run on the cluster are left out.
pub fn queue_length(
    records: &[JobRecord],
    timeline: &[RunSegment],
    from: f64,
    to: f64,
) -> Vec<(f64, f64)> {
    let mut changes: Vec<(f64, f64)> = Vec::with_capacity(records.len() * 2 + timeline.len() * 2);
    for r in records
        .iter()
        .filter(|r| r.outcome != JobOutcome::Unplaceable)
    {
        changes.push((r.submit_s, 1.0));
        if let Some(f) = r.finish_s {
            changes.push((f, -1.0));
        }
    }
    for s in timeline {
        changes.push((s.start_s, -1.0));
        changes.push((s.end_s, 1.0));
    }
    // A job's last segment ends where it finishes: +1 then −1 at the same time, net zero.
    step_average(changes, from, to, TIME_BINS)
}

/// One tenant's GPU time against its entitlement.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantShare {
    /// Tenant.
    pub tenant: String,
    /// GPU time it held, as a share of the cluster's GPU time over the run.
    pub received: f64,
    /// GPU time it was entitled to, as a share of the cluster's GPU time over the run.
    pub entitled: f64,
}

/// Weighted max-min fair shares of `capacity` among `demands` (`(demand, weight)`): no tenant
/// gets more than it asks for, and what one leaves is shared among the rest by weight.
pub fn water_fill(capacity: f64, demands: &[(f64, f64)]) -> Vec<f64> {
    let mut share = vec![0.0; demands.len()];
    let mut open: Vec<usize> = (0..demands.len())
        .filter(|&i| demands[i].0 > 0.0 && demands[i].1 > 0.0)
        .collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-12 {
        let weight: f64 = open.iter().map(|&i| demands[i].1).sum();
        let satisfied: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| demands[i].0 - share[i] <= left * demands[i].1 / weight)
            .collect();
        if satisfied.is_empty() {
            for &i in &open {
                share[i] += left * demands[i].1 / weight;
            }
            break;
        }
        for &i in &satisfied {
            left -= demands[i].0 - share[i];
            share[i] = demands[i].0;
        }
        open.retain(|i| !satisfied.contains(i));
    }
    share
}

/// GPU time received vs entitled per tenant (name order). At every moment a tenant is entitled
/// to its weighted max-min fair share of the cluster given what each tenant then asks for (the
/// GPUs of its jobs in the system: submitted, not finished), so a tenant that asks for less
/// than its share is not counted as short-changed; it received the GPUs its jobs held
/// (`timeline`). Both are integrated over the run and divided by the cluster's GPU time.
/// `weights` from the scenario's `policy.tenant_weights` (missing tenants weigh 1).
pub fn tenant_shares(
    records: &[JobRecord],
    timeline: &[RunSegment],
    capacity_gpus: u32,
    weights: &BTreeMap<String, f64>,
) -> Vec<TenantShare> {
    let mut tenants: Vec<&str> = records.iter().map(|r| r.tenant.as_str()).collect();
    tenants.sort_unstable();
    tenants.dedup();
    let index = |t: &str| tenants.binary_search(&t).unwrap_or(0);
    let Some((from, to)) = span(records, timeline) else {
        return Vec::new();
    };
    // (time, tenant, demand change, held change)
    let mut changes: Vec<(f64, usize, f64, f64)> =
        Vec::with_capacity(records.len() * 2 + timeline.len() * 2);
    for r in records
        .iter()
        .filter(|r| r.outcome != JobOutcome::Unplaceable)
    {
        let t = index(&r.tenant);
        changes.push((r.submit_s, t, r.gpus as f64, 0.0));
        changes.push((r.finish_s.unwrap_or(to), t, -(r.gpus as f64), 0.0));
    }
    let tenant_of = |job: u32| {
        records
            .get(job as usize)
            .filter(|r| r.job == job)
            .map(|r| index(&r.tenant))
    };
    for s in timeline.iter().filter(|s| !s.guest) {
        if let Some(t) = tenant_of(s.job) {
            let gpus = s.gpus() as f64 * s.gpu_share;
            changes.push((s.start_s, t, 0.0, gpus));
            changes.push((s.end_s, t, 0.0, -gpus));
        }
    }
    // Deterministic: the same changes always come out in the same order.
    changes.sort_unstable_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.total_cmp(&b.2))
            .then(a.3.total_cmp(&b.3))
    });
    let weight = |t: &str| {
        weights
            .get(t)
            .copied()
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or(1.0)
    };
    let mut demand = vec![(0.0, 0.0); tenants.len()];
    for (i, t) in tenants.iter().enumerate() {
        demand[i].1 = weight(t);
    }
    let mut held = vec![0.0; tenants.len()];
    let (mut received, mut entitled) = (vec![0.0; tenants.len()], vec![0.0; tenants.len()]);
    let capacity = capacity_gpus as f64;
    let mut at = from;
    let mut k = 0;
    while k < changes.len() {
        let t = changes[k].0;
        if t > at {
            let dt = t - at;
            for (i, f) in water_fill(capacity, &demand).into_iter().enumerate() {
                entitled[i] += f * dt;
                received[i] += held[i] * dt;
            }
            at = t;
        }
        while k < changes.len() && changes[k].0 == t {
            let (_, i, d, h) = changes[k];
            demand[i].0 += d;
            held[i] += h;
            k += 1;
        }
    }
    let total = capacity * (to - from);
    tenants
        .iter()
        .enumerate()
        .map(|(i, t)| TenantShare {
            tenant: t.to_string(),
            received: received[i] / total,
            entitled: entitled[i] / total,
        })
        .collect()
}

/// Jain's fairness index of received / entitled over tenants: 1 when every tenant got exactly
/// its entitlement, 1/n when one tenant got everything.
pub fn jain_index(shares: &[TenantShare]) -> f64 {
    let x: Vec<f64> = shares
        .iter()
        .filter(|s| s.entitled > 0.0)
        .map(|s| s.received / s.entitled)
        .collect();
    let (sum, squares): (f64, f64) = (x.iter().sum(), x.iter().map(|v| v * v).sum());
    if squares > 0.0 {
        sum * sum / (x.len() as f64 * squares)
    } else {
        0.0
    }
}

/// One leaf (tenant) of a quota tree over a run: the GPUs its jobs held, as the quota counts
/// them (every GPU of a job's placement; guests hold none), and how many of them were
/// borrowed (held beyond its guaranteed quota, per GPU type, summed).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaUse {
    /// GPUs held, averaged per bin (`(bin middle, GPUs)`, as [`step_average`]).
    pub held: Vec<(f64, f64)>,
    /// GPUs held beyond the guaranteed quota, averaged per bin.
    pub borrowed: Vec<(f64, f64)>,
    /// GPUs held, averaged over the run's span.
    pub mean_held: f64,
    /// GPUs borrowed, averaged over the run's span.
    pub mean_borrowed: f64,
    /// The most GPUs it held at once.
    pub peak_held: u32,
    /// The most GPUs it borrowed at once.
    pub peak_borrowed: u32,
    /// When its jobs were reclaimed (seconds, in time order) and their GPUs.
    pub reclaims: Vec<(f64, u32)>,
}

/// Each leaf of `layout` over `[from, to]` (in the order of `layout.leaves`): GPUs held and
/// borrowed from the run segments (a job counts in its tenant's leaf; a tenant the layout does
/// not list counts nowhere), and the reclaims of its jobs.
pub fn quota_use(
    layout: &QuotaLayout,
    records: &[JobRecord],
    timeline: &[RunSegment],
    reclaimed: &[QuotaReclaim],
    from: f64,
    to: f64,
) -> Vec<QuotaUse> {
    let leaves = layout.leaves.len();
    let dims = layout.dims.len().max(1);
    let by_tenant: BTreeMap<&str, usize> = layout
        .leaves
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.tenants.iter().map(move |t| (t.as_str(), i)))
        .collect();
    let record_of = |job: u32| records.get(job as usize).filter(|r| r.job == job);
    let leaf_of = |job: u32| record_of(job).and_then(|r| by_tenant.get(r.tenant.as_str()).copied());
    // (time, change, leaf, dimension): decreases first at equal times, as in `step_average`.
    let mut changes: Vec<(f64, i64, usize, usize)> = Vec::with_capacity(timeline.len() * 2);
    for s in timeline.iter().filter(|s| !s.guest) {
        let Some(leaf) = leaf_of(s.job) else {
            continue;
        };
        let mut by_dim = vec![0i64; dims];
        for &(node, gpus) in &s.slots {
            let d = layout.dim_of_node.get(node as usize).copied().unwrap_or(0);
            by_dim[d.min(dims - 1)] += i64::from(gpus);
        }
        for (d, &gpus) in by_dim.iter().enumerate().filter(|(_, g)| **g > 0) {
            changes.push((s.start_s, gpus, leaf, d));
            changes.push((s.end_s, -gpus, leaf, d));
        }
    }
    changes.sort_unstable_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let guaranteed = |leaf: usize, d: usize| {
        i64::from(layout.leaves[leaf].guaranteed.get(d).copied().unwrap_or(0))
    };
    let mut held = vec![0i64; leaves * dims];
    let (mut total, mut beyond) = (vec![0i64; leaves], vec![0i64; leaves]);
    let mut peaks = vec![(0i64, 0i64); leaves];
    let mut held_changes: Vec<Vec<(f64, f64)>> = vec![Vec::new(); leaves];
    let mut borrowed_changes: Vec<Vec<(f64, f64)>> = vec![Vec::new(); leaves];
    for (t, delta, leaf, d) in changes {
        let at = leaf * dims + d;
        let before = (held[at] - guaranteed(leaf, d)).max(0);
        held[at] += delta;
        let after = (held[at] - guaranteed(leaf, d)).max(0);
        total[leaf] += delta;
        beyond[leaf] += after - before;
        held_changes[leaf].push((t, delta as f64));
        if after != before {
            borrowed_changes[leaf].push((t, (after - before) as f64));
        }
        // Only what is held once every change at `t` is in counts (decreases come first).
        peaks[leaf] = (
            peaks[leaf].0.max(total[leaf]),
            peaks[leaf].1.max(beyond[leaf]),
        );
    }
    let mean = |series: &[(f64, f64)]| {
        if series.is_empty() {
            0.0
        } else {
            series.iter().map(|p| p.1).sum::<f64>() / series.len() as f64
        }
    };
    let mut reclaims: Vec<Vec<(f64, u32)>> = vec![Vec::new(); leaves];
    for r in reclaimed {
        if let (Some(leaf), Some(record)) = (leaf_of(r.job), record_of(r.job)) {
            reclaims[leaf].push((r.at_s, record.gpus));
        }
    }
    (0..leaves)
        .map(|leaf| {
            let held = step_average(std::mem::take(&mut held_changes[leaf]), from, to, TIME_BINS);
            let borrowed = step_average(
                std::mem::take(&mut borrowed_changes[leaf]),
                from,
                to,
                TIME_BINS,
            );
            let mut reclaims = std::mem::take(&mut reclaims[leaf]);
            reclaims.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            QuotaUse {
                mean_held: mean(&held),
                mean_borrowed: mean(&borrowed),
                held,
                borrowed,
                peak_held: u32::try_from(peaks[leaf].0).unwrap_or(0),
                peak_borrowed: u32::try_from(peaks[leaf].1).unwrap_or(0),
                reclaims,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{is_staircase, record, segment};

    #[test]
    fn a_cdf_of_many_values_is_thinned_and_keeps_both_ends() {
        let points = cdf((1..=80_000).map(f64::from));
        assert!(points.len() <= 2 * (CDF_POINTS + 2), "{}", points.len());
        assert_eq!(points[..2], [(1.0, 0.0), (1.0, 1.0 / 80_000.0)]);
        assert_eq!(points.last(), Some(&(80_000.0, 1.0)));
        assert_eq!(
            cdf([2.0, f64::NAN, 1.0]),
            vec![(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
        assert!(cdf([]).is_empty());
    }

    #[test]
    fn a_small_sample_cdf_is_a_staircase_from_zero() {
        // Three jobs: 10 s, 30 s (twice). F jumps to 1/3 at 10 s and to 1 at 30 s; a line
        // through the raw points would ramp from 1/3 to 2/3 between them.
        let points = cdf([30.0, 10.0, 30.0]);
        assert_eq!(
            points,
            vec![
                (10.0, 0.0),
                (10.0, 1.0 / 3.0),
                (30.0, 1.0 / 3.0),
                (30.0, 1.0)
            ]
        );
        assert!(is_staircase(&points));
        assert!(is_staircase(&cdf(
            (0..1_000).map(|i| f64::from(i * i % 977))
        )));
        // Points from elsewhere (a trace's duration CDF, thinned, with ties), even unsorted.
        let thinned = [
            (60.0, 0.25),
            (3_600.0, 0.5),
            (3_600.0, 0.75),
            (7_200.0, 1.0),
            (f64::NAN, 0.1),
        ];
        let drawn = steps(&thinned);
        assert_eq!(
            drawn,
            vec![
                (60.0, 0.0),
                (60.0, 0.25),
                (3_600.0, 0.25),
                (3_600.0, 0.75),
                (7_200.0, 0.75),
                (7_200.0, 1.0)
            ]
        );
        assert_eq!(
            steps(&[(2.0, 1.0), (1.0, 0.5)]),
            vec![(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
        assert!(steps(&[]).is_empty());
    }

    #[test]
    fn time_series_by_hand() {
        // Two 4-GPU jobs on 8 GPUs: job 0 runs 0–100, job 1 waits until 100, runs to 200.
        let records = vec![
            record(0, "a", 0.0, 0.0, 100.0, 4),
            record(1, "b", 0.0, 100.0, 200.0, 4),
        ];
        let timeline = vec![segment(0, 0.0, 100.0, 4), segment(1, 100.0, 200.0, 4)];
        assert_eq!(span(&records, &timeline), Some((0.0, 200.0)));
        let u = step_average(
            timeline
                .iter()
                .flat_map(|s| {
                    [
                        (s.start_s, s.gpus() as f64 / 8.0),
                        (s.end_s, -(s.gpus() as f64) / 8.0),
                    ]
                })
                .collect(),
            0.0,
            200.0,
            4,
        );
        assert_eq!(
            u,
            vec![(25.0, 0.5), (75.0, 0.5), (125.0, 0.5), (175.0, 0.5)]
        );
        assert_eq!(utilization(&timeline, 8, 0.0, 200.0).len(), TIME_BINS);
        let q = step_average(
            {
                let mut c = vec![(0.0, 1.0), (100.0, -1.0), (0.0, 1.0), (200.0, -1.0)];
                c.extend(
                    timeline
                        .iter()
                        .flat_map(|s| [(s.start_s, -1.0), (s.end_s, 1.0)]),
                );
                c
            },
            0.0,
            200.0,
            2,
        );
        // Job 1 waits for the whole first half, nobody in the second.
        assert_eq!(q, vec![(50.0, 1.0), (150.0, 0.0)]);
        let q = queue_length(&records, &timeline, 0.0, 200.0);
        assert!((q[0].1 - 1.0).abs() < 1e-9 && q[TIME_BINS - 1].1.abs() < 1e-9);
        // A bin cut in the middle of a change averages it.
        assert_eq!(
            step_average(vec![(0.0, 2.0), (150.0, -2.0)], 0.0, 200.0, 2),
            vec![(50.0, 2.0), (150.0, 1.0)]
        );
    }

    #[test]
    fn quota_use_by_hand() {
        use arbiter_sim::{QuotaLeaf, QuotaReclaim};
        let leaf = |name: &str, guaranteed: Vec<u32>| QuotaLeaf {
            name: name.into(),
            path: format!("org/{name}"),
            limit: vec![None; guaranteed.len()],
            guaranteed,
            tenants: vec![name.into()],
        };
        // a (2 guaranteed) holds 4 GPUs for 0–100 s, until reclaimed; b (2) holds 2 for 0–200 s;
        // x, a tenant the layout does not list, counts nowhere.
        let layout = QuotaLayout {
            dims: vec!["all".into()],
            dim_of_node: vec![0],
            leaves: vec![leaf("a", vec![2]), leaf("b", vec![2])],
        };
        let records = vec![
            record(0, "a", 0.0, 0.0, 100.0, 4),
            record(1, "b", 0.0, 0.0, 200.0, 2),
            record(2, "x", 0.0, 0.0, 200.0, 2),
        ];
        let timeline = vec![
            segment(0, 0.0, 100.0, 4),
            segment(1, 0.0, 200.0, 2),
            segment(2, 0.0, 200.0, 2),
        ];
        let reclaimed = [QuotaReclaim {
            job: 0,
            at_s: 100.0,
        }];
        let uses = quota_use(&layout, &records, &timeline, &reclaimed, 0.0, 200.0);
        assert_eq!(uses.len(), 2);
        let (a, b) = (&uses[0], &uses[1]);
        assert_eq!((a.mean_held, a.mean_borrowed), (2.0, 1.0));
        assert_eq!((a.peak_held, a.peak_borrowed), (4, 2));
        assert_eq!(a.reclaims, vec![(100.0, 4)]);
        assert_eq!(
            (a.held.len(), a.held[0].1, a.held[TIME_BINS - 1].1),
            (TIME_BINS, 4.0, 0.0)
        );
        assert_eq!(
            (b.mean_held, b.mean_borrowed, b.peak_borrowed),
            (2.0, 0.0, 0)
        );
        assert!(b.reclaims.is_empty());

        // By GPU type: 2 of a100 guaranteed and none of v100; a job on 2 a100 and 1 v100 borrows
        // the v100 only; handing GPUs from one job to the next at one instant is never a peak.
        let layout = QuotaLayout {
            dims: vec!["a100".into(), "v100".into()],
            dim_of_node: vec![0, 1],
            leaves: vec![leaf("a", vec![2, 0])],
        };
        let split = RunSegment {
            slots: vec![(0, 2), (1, 1)],
            ..segment(0, 0.0, 100.0, 3)
        };
        let next = RunSegment {
            slots: vec![(0, 2), (1, 1)],
            ..segment(1, 100.0, 200.0, 3)
        };
        let records = vec![
            record(0, "a", 0.0, 0.0, 100.0, 3),
            record(1, "a", 0.0, 100.0, 200.0, 3),
        ];
        let uses = quota_use(&layout, &records, &[split, next], &[], 0.0, 200.0);
        assert_eq!((uses[0].mean_held, uses[0].mean_borrowed), (3.0, 1.0));
        assert_eq!((uses[0].peak_held, uses[0].peak_borrowed), (3, 1));
    }

    #[test]
    fn a_long_stretch_keeps_its_whole_area_whatever_the_bin_boundaries() {
        // Regression: bins found again from the time at each boundary rounded back into the bin
        // just left and dropped the rest (from 123456.789 over 2.8e6 s: all but two bins lost).
        let (from, to) = (123_456.789, 123_456.789 + 2.8e6);
        for (start, end) in [
            (from + 0.5, to - 3.0),
            (from, to),
            (from + 1e6 / 3.0, from + 2e6),
        ] {
            let bins = step_average(vec![(start, 1.0), (end, -1.0)], from, to, TIME_BINS);
            let mean = bins.iter().map(|b| b.1).sum::<f64>() / TIME_BINS as f64;
            let expected = (end - start) / (to - from);
            assert!(
                (mean - expected).abs() < 1e-9,
                "{start}..{end}: {mean} vs {expected}"
            );
        }
    }

    #[test]
    fn utilization_over_time_counts_each_gpu_once() {
        // 2 GPUs, 0–100 s: job 0 holds one; job 1 a guest on it; job 2 a guest on the other
        // GPU 0–50 s. Busy: both GPUs 0–50, one 50–100; shared: one GPU 0–100 (issue 32: the
        // guests were left out of the figure, and added on top in the metric).
        let guest = |job, end_s, on_held| RunSegment {
            guest: true,
            on_held,
            ..segment(job, 0.0, end_s, 1)
        };
        let timeline = vec![
            segment(0, 0.0, 100.0, 1),
            guest(1, 100.0, 1),
            guest(2, 50.0, 0),
        ];
        let busy = utilization(&timeline, 2, 0.0, 100.0);
        assert!(
            busy[..TIME_BINS / 2]
                .iter()
                .all(|&(_, u)| (u - 1.0).abs() < 1e-9)
                && busy[TIME_BINS / 2..]
                    .iter()
                    .all(|&(_, u)| (u - 0.5).abs() < 1e-9),
            "{busy:?}"
        );
        assert!(
            shared_utilization(&timeline, 2, 0.0, 100.0)
                .iter()
                .all(|&(_, u)| (u - 0.5).abs() < 1e-9)
        );
    }

    #[test]
    fn water_filling_by_hand() {
        // 8 GPUs, equal weights: a asks 2, b and c 10 each: a gets 2, b and c 3 each.
        assert_eq!(
            water_fill(8.0, &[(2.0, 1.0), (10.0, 1.0), (10.0, 1.0)]),
            vec![2.0, 3.0, 3.0]
        );
        // Weights 3:1 when both ask for everything.
        assert_eq!(water_fill(8.0, &[(8.0, 3.0), (8.0, 1.0)]), vec![6.0, 2.0]);
        // Enough for all.
        assert_eq!(water_fill(8.0, &[(1.0, 1.0), (0.0, 1.0)]), vec![1.0, 0.0]);
    }

    #[test]
    fn shares_and_jain_by_hand() {
        // 4 GPUs. a submits a 4-GPU job at 0 and holds the cluster 0–100; b submits a 4-GPU job
        // at 0 that runs 100–200. Both asked for all 4 GPUs during 0–100: each was entitled to
        // 2; then b alone, entitled to all 4. Received: a 4×100, b 4×100.
        let records = vec![
            record(0, "a", 0.0, 0.0, 100.0, 4),
            record(1, "b", 0.0, 100.0, 200.0, 4),
        ];
        let timeline = vec![segment(0, 0.0, 100.0, 4), segment(1, 100.0, 200.0, 4)];
        let shares = tenant_shares(&records, &timeline, 4, &BTreeMap::new());
        // Cluster GPU time: 4 × 200 = 800.
        assert_eq!(
            shares,
            vec![
                TenantShare {
                    tenant: "a".into(),
                    received: 0.5,
                    entitled: 0.25
                },
                TenantShare {
                    tenant: "b".into(),
                    received: 0.5,
                    entitled: 0.75
                }
            ]
        );
        // x = (2, 2/3): (8/3)² / (2 × (4 + 4/9)) = 0.8.
        assert!((jain_index(&shares) - 0.8).abs() < 1e-12);
        // With weight 3 for a, a is entitled to 3 GPUs of 4 while both wait: closer to fair.
        let weights = BTreeMap::from([("a".to_string(), 3.0)]);
        let weighted = tenant_shares(&records, &timeline, 4, &weights);
        assert!((weighted[0].entitled - 300.0 / 800.0).abs() < 1e-12);
        assert!(jain_index(&weighted) > jain_index(&shares));
    }
}
