//! `arbiter bench --suite philly-quotas`: what enforcing a quota tree costs the simulator. The
//! whole Philly trace (82k jobs) replayed on one shared cluster of every VC's nodes
//! (`philly_vc.csv`, nodes × 8 GPUs), each policy without a quota tree and under one that
//! guarantees every VC its own nodes' GPUs (borrowing without limit; the VCs the file does not
//! size share the rest). Prints wall time (the fastest of five runs, taken in turns), events, average JCT and reclaims, and the overhead.

use anyhow::Result;
use arbiter_model::Cluster;
use arbiter_policy::quotas::{GpuQuota, QuotaGroup, Quotas};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{SimConfig, Summary, Window, simulate};
use std::path::PathBuf;
use std::time::Instant;

/// Runs per point; the fastest is reported.
const RUNS: usize = 5;

/// One simulation's numbers.
struct Point {
    wall_s: f64,
    events: u64,
    avg_jct_s: f64,
    reclaims: u64,
}

pub fn run(
    trace: Option<PathBuf>,
    vc_sizes: Option<PathBuf>,
    policies: &[PolicyKind],
    json: bool,
) -> Result<()> {
    let (trace, sizes) = crate::bench_util::read_philly(trace, vc_sizes)?;
    let nodes: u32 = sizes.iter().map(|(_, n)| n).sum();
    let cluster = Cluster::homogeneous(1, nodes, 8, 64, 512, "V100")?;
    let groups: Vec<QuotaGroup> = sizes
        .iter()
        .map(|(vc, n)| {
            QuotaGroup::all_gpus(
                vc,
                None,
                GpuQuota {
                    guaranteed: n * 8,
                    borrowing_limit: None,
                    lending_limit: None,
                },
            )
        })
        .collect();
    if !json {
        outln!(
            "philly.csv: {} jobs on one cluster of {} GPUs ({} VCs guaranteed their own nodes' GPUs)",
            trace.jobs.len(),
            nodes * 8,
            sizes.len()
        );
        outln!(
            "{:<8} {:<10} {:>9} {:>10} {:>13} {:>9} {:>9}",
            "policy",
            "quotas",
            "wall s",
            "events",
            "avg JCT s",
            "reclaims",
            "overhead"
        );
    }
    let mut rows = Vec::new();
    for &kind in policies {
        let simulate_with = |tree: Option<&[QuotaGroup]>| -> Result<Point> {
            let mut policy = match tree {
                Some(groups) => Box::new(Quotas::new(
                    groups,
                    &cluster,
                    build(kind, &PolicyConfig::default())?,
                )?),
                None => build(kind, &PolicyConfig::default())?,
            };
            let t = Instant::now();
            let out = simulate(
                &cluster,
                &trace.jobs,
                policy.as_mut(),
                &SimConfig::default(),
            )?;
            let wall_s = t.elapsed().as_secs_f64();
            let summary = Summary::compute(&out.records, Window::default(), out.capacity_gpus);
            Ok(Point {
                wall_s,
                events: out.stats.events,
                avg_jct_s: summary.avg_jct_s,
                reclaims: out.stats.quota_reclaims,
            })
        };
        // The fastest of a few runs each, taken in turns: a run of a tenth of a second is at the
        // mercy of the machine's other work, which only ever adds.
        let (mut alone, mut under) = (simulate_with(None)?, simulate_with(Some(&groups))?);
        for _ in 1..RUNS {
            let (a, u) = (simulate_with(None)?, simulate_with(Some(&groups))?);
            alone.wall_s = alone.wall_s.min(a.wall_s);
            under.wall_s = under.wall_s.min(u.wall_s);
        }
        let overhead = under.wall_s / alone.wall_s.max(1e-9) - 1.0;
        if !json {
            for (label, p, o) in [
                ("none", &alone, String::new()),
                ("guaranteed", &under, format!("{:+.1}%", overhead * 100.0)),
            ] {
                outln!(
                    "{:<8} {:<10} {:>9.3} {:>10} {:>13.0} {:>9} {:>9}",
                    kind.name(),
                    label,
                    p.wall_s,
                    p.events,
                    p.avg_jct_s,
                    p.reclaims,
                    o
                );
            }
        }
        rows.push(serde_json::json!({
            "policy": kind.name(),
            "without": { "wall_s": alone.wall_s, "events": alone.events, "avg_jct_s": alone.avg_jct_s },
            "with_quotas": { "wall_s": under.wall_s, "events": under.events, "avg_jct_s": under.avg_jct_s, "reclaims": under.reclaims },
            "overhead": overhead,
        }));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "jobs": trace.jobs.len(), "gpus": nodes * 8, "results": rows })
            )?
        );
    }
    Ok(())
}
