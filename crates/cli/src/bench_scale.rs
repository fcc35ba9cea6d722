//! `arbiter bench --suite scale`: the simulator's cost curve. Synthetic Philly-like streams
//! (Gavel's Philly-fitted sizes and run times, Poisson arrivals offering 80% of the cluster) from
//! 10,000 jobs on 64 GPUs to 1,000,000 jobs on 16,384 GPUs, under `fifo`, `srtf`, `las` and
//! Gavel's `max-min-fairness` (in Gavel's 360 s rounds only, as Gavel runs it). Each simulation
//! runs in its own process (so its peak memory is its own), under a time limit; the suite prints
//! wall time, events/s and peak RSS and writes a log-log plot of wall time against jobs.

use anyhow::{Context, Result, bail};
use arbiter_model::Cluster;
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{OverheadModel, SimConfig, simulate};
use std::time::{Duration, Instant};

/// (jobs, GPUs): the cluster grows with the stream, so every point is equally loaded.
pub const POINTS: [(usize, u32); 5] = [
    (10_000, 64),
    (30_000, 256),
    (100_000, 1_024),
    (300_000, 4_096),
    (1_000_000, 16_384),
];
/// Offered load.
pub const LOAD: f64 = 0.8;
/// One simulation's time limit.
pub const LIMIT: Duration = Duration::from_secs(300);
const POLICIES: [PolicyKind; 4] = [
    PolicyKind::Fifo,
    PolicyKind::Srtf,
    PolicyKind::Las,
    PolicyKind::MaxMinFairness,
];

/// GPUs as 8-GPU nodes, in racks of 32 where they make whole racks (one rack otherwise, so
/// that the cluster has the GPUs asked for, not a rack's worth more).
pub(crate) fn cluster(gpus: u32) -> Result<Cluster> {
    let nodes = gpus.div_ceil(8).max(1);
    let (racks, per_rack) = if nodes.is_multiple_of(32) {
        (nodes / 32, 32)
    } else {
        (1, nodes)
    };
    Ok(Cluster::homogeneous(racks, per_rack, 8, 64, 512, "V100")?)
}

/// The child: one simulation, `JOBS:GPUS:POLICY`; prints `{wall_s, events, peak_rss_mib}`.
pub fn run_point(point: &str) -> Result<()> {
    let parts: Vec<&str> = point.split(':').collect();
    let [jobs, gpus, policy] = parts.as_slice() else {
        bail!("--point `{point}`: expected JOBS:GPUS:POLICY")
    };
    let (jobs, gpus): (usize, u32) = (
        jobs.parse().context("--point jobs")?,
        gpus.parse().context("--point GPUs")?,
    );
    let kind: PolicyKind = policy
        .parse()
        .map_err(|e| anyhow::anyhow!("--point policy: {e}"))?;
    let trace = arbiter_trace::generator::philly_like(jobs, gpus, LOAD, 0);
    let cluster = cluster(gpus)?;
    let mut policy = build(kind, &PolicyConfig::default())?;
    // Gavel's policies decide in rounds (Gavel's 360 s), as Gavel's simulator and the Gavel
    // scenarios run them (`schedule_on_events = false`): a job that arrives or a GPU that frees
    // mid-round waits for the next round. The others decide at arrivals and completions.
    let gavel = kind.is_gavel();
    let config = SimConfig {
        overhead: OverheadModel::None,
        round_s: gavel.then_some(360.0),
        schedule_on_events: !gavel,
        ..SimConfig::default()
    };
    let started = Instant::now();
    let out = simulate(&cluster, &trace.jobs, policy.as_mut(), &config)?;
    let wall_s = started.elapsed().as_secs_f64();
    outln!(
        "{}",
        serde_json::json!({ "wall_s": wall_s, "events": out.stats.events, "peak_rss_mib": crate::bench_util::peak_rss_mib().unwrap_or(0.0) })
    );
    Ok(())
}

/// The parent: every (policy, point) in a child process, smaller points first; a policy whose
/// point ran out of time is not tried on larger ones.
pub fn run(json: bool) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for kind in POLICIES {
        for (jobs, gpus) in POINTS {
            let mut child = std::process::Command::new(&exe)
                .args([
                    "bench",
                    "--suite",
                    "scale",
                    "--point",
                    &format!("{jobs}:{gpus}:{}", kind.name()),
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .spawn()?;
            let started = Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait()? {
                    break Some(status);
                }
                if started.elapsed() > LIMIT {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let mut row = serde_json::json!({ "policy": kind.name(), "jobs": jobs, "gpus": gpus });
            match status {
                Some(s) if s.success() => {
                    let mut text = String::new();
                    std::io::Read::read_to_string(
                        &mut child.stdout.take().context("child stdout")?,
                        &mut text,
                    )?;
                    let measured: serde_json::Value =
                        serde_json::from_str(text.trim()).context("child output")?;
                    for key in ["wall_s", "events", "peak_rss_mib"] {
                        row[key] = measured[key].clone();
                    }
                    let (events, wall) = (
                        measured["events"].as_f64().unwrap_or(0.0),
                        measured["wall_s"].as_f64().unwrap_or(0.0),
                    );
                    row["events_per_s"] =
                        serde_json::json!(if wall > 0.0 { events / wall } else { 0.0 });
                    if !json {
                        eprintln!("{} {jobs} jobs on {gpus} GPUs: {wall:.2} s", kind.name());
                    }
                    rows.push(row);
                }
                Some(s) => bail!(
                    "{} at {jobs} jobs: the simulation failed ({s})",
                    kind.name()
                ),
                None => {
                    row["timed_out_after_s"] = serde_json::json!(LIMIT.as_secs());
                    rows.push(row);
                    break;
                }
            }
        }
    }
    let plot = std::path::Path::new("out").join("bench-scale.svg");
    std::fs::create_dir_all("out")?;
    let lines = POLICIES
        .iter()
        .map(|k| arbiter_report::chart::Line {
            label: k.name().to_string(),
            points: rows
                .iter()
                .filter(|r| r["policy"] == k.name() && r["wall_s"].is_number())
                .map(|r| {
                    (
                        r["jobs"].as_f64().unwrap_or(0.0),
                        r["wall_s"].as_f64().unwrap_or(0.0),
                    )
                })
                .collect(),
        })
        .collect();
    let chart = arbiter_report::chart::LineChart {
        title: "simulator cost: wall time against jobs (GPUs grow with jobs, 80% load)".into(),
        caption: format!(
            "arbiter bench --suite scale · Philly-like synthetic streams · Arbiter {}",
            arbiter_report::VERSION
        ),
        x: arbiter_report::chart::Axis::log(
            "jobs (64 → 16,384 GPUs)",
            arbiter_report::chart::Format::Number,
        ),
        y: arbiter_report::chart::Axis::log(
            "wall time, seconds",
            arbiter_report::chart::Format::Number,
        ),
        lines,
    };
    std::fs::write(&plot, chart.to_svg())?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "scale": rows }))?
        );
        return Ok(());
    }
    outln!(
        "{:<18} {:>9} {:>7} {:>10} {:>12} {:>12} {:>10}",
        "policy",
        "jobs",
        "GPUs",
        "wall s",
        "events",
        "events/s",
        "peak MiB"
    );
    for r in &rows {
        match r["wall_s"].as_f64() {
            Some(wall) => outln!(
                "{:<18} {:>9} {:>7} {:>10.2} {:>12} {:>12.0} {:>10.1}",
                r["policy"].as_str().unwrap_or(""),
                r["jobs"].as_u64().unwrap_or(0),
                r["gpus"].as_u64().unwrap_or(0),
                wall,
                r["events"].as_u64().unwrap_or(0),
                r["events_per_s"].as_f64().unwrap_or(0.0),
                r["peak_rss_mib"].as_f64().unwrap_or(0.0)
            ),
            None => outln!(
                "{:<18} {:>9} {:>7} {:>10}",
                r["policy"].as_str().unwrap_or(""),
                r["jobs"].as_u64().unwrap_or(0),
                r["gpus"].as_u64().unwrap_or(0),
                format!("> {} s", LIMIT.as_secs())
            ),
        }
    }
    outln!("wrote {}", plot.display());
    Ok(())
}
