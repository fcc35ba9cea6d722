//! `arbiter bench`: replays the whole Philly trace (82k jobs, all virtual clusters together on
//! one cluster the size of Helios' Philly replay: 352 nodes × 8 GPUs) with each policy and
//! prints wall time, events per second and peak memory. Release builds only give meaningful
//! numbers.

use anyhow::{Context, Result};
use arbiter_model::Cluster;
use arbiter_policy::{build, PolicyConfig, PolicyKind};
use arbiter_sim::{simulate, SimConfig, Summary, Window};
use arbiter_trace::{ReadOptions, TraceFormat};
use std::path::PathBuf;
use std::time::Instant;

/// Peak resident memory of this process in MiB (Linux `VmHWM`), if known.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub fn run(trace: Option<PathBuf>, policies: &[PolicyKind], json: bool) -> Result<()> {
    let path = trace.unwrap_or_else(|| PathBuf::from("data/philly/philly.csv"));
    let started = Instant::now();
    let trace = arbiter_trace::read(&path, TraceFormat::Philly, &ReadOptions::default())
        .with_context(|| format!("reading {} (run from the repository root or pass --trace)", path.display()))?;
    let load_s = started.elapsed().as_secs_f64();
    let cluster = Cluster::homogeneous(1, 352, 8, 64, 512, "V100")?;
    let mut rows = Vec::new();
    if !json {
        println!("philly.csv: {} jobs loaded in {:.3} s; cluster 352 x 8 GPUs", trace.jobs.len(), load_s);
        println!("{:<8} {:>9} {:>10} {:>12} {:>13} {:>13}", "policy", "wall s", "events", "events/s", "avg JCT s", "peak RSS MiB");
    }
    for &kind in policies {
        let mut policy = build(kind, &PolicyConfig::default())?;
        let t = Instant::now();
        let out = simulate(&cluster, &trace.jobs, policy.as_mut(), &SimConfig::default())?;
        let wall = t.elapsed().as_secs_f64();
        let summary = Summary::compute(&out.records, Window::default(), out.capacity_gpus);
        let rss = peak_rss_mib().unwrap_or(f64::NAN);
        let events_per_s = out.stats.events as f64 / wall.max(1e-9);
        if !json {
            println!(
                "{:<8} {:>9.3} {:>10} {:>12.0} {:>13.0} {:>13.1}",
                kind.name(),
                wall,
                out.stats.events,
                events_per_s,
                summary.avg_jct_s,
                rss
            );
        }
        rows.push(serde_json::json!({
            "policy": kind.name(), "wall_s": wall, "events": out.stats.events,
            "scheduling_points": out.stats.scheduling_points, "events_per_s": events_per_s,
            "avg_jct_s": summary.avg_jct_s, "peak_rss_mib": rss,
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "jobs": trace.jobs.len(), "results": rows }))?);
    }
    Ok(())
}
