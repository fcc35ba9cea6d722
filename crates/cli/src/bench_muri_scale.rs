//! `arbiter bench --suite muri-scale`: Muri-S on a trace far larger than Muri's own (issue 31:
//! "Muri-S fast on 100,000 jobs ≤ 30 s"). A Philly-like stream (`--suite scale`'s: Gavel's
//! Philly-fitted sizes and run times, Poisson arrivals offering 80% of the cluster), 100,000
//! jobs on 1,024 GPUs by default (`--point N` for N jobs, the cluster scaled alike), each job
//! given the stage and iteration times of one of the distinct job profiles in Muri's four
//! traces (`data/muri/trace*.csv`: model, batch size, profiled I/O, CPU and GPU times), drawn
//! by a hash of its number. Runs `muri-s` with `policy.muri.matching = "fast"` (Muri's own
//! blossom cannot follow a class of thousands of groups) and prints wall time, events, the
//! scheduling points that matched, and average JCT.

use anyhow::{Context, Result, bail};
use arbiter_model::{IterationStages, JobSpec};
use arbiter_policy::muri::{MuriConfig, MuriMatching, MuriRanking};
use arbiter_sim::{OverheadModel, SimConfig, Summary, Window, simulate};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// Jobs by default (`--suite scale`'s 100,000-job point, on 1,024 GPUs).
const JOBS: usize = 100_000;
/// Offered load by default (`--suite scale`'s).
const OFFERED_LOAD: f64 = crate::bench_scale::LOAD;

/// A job profile of Muri's traces: stage times and iteration time.
#[derive(Clone, Copy, Debug)]
struct Profile {
    stages: IterationStages,
    iteration_s: f64,
}

/// The distinct profiles of Muri's four traces, in a fixed order.
fn muri_profiles() -> Result<Vec<Profile>> {
    let mut by_bits: BTreeMap<[u64; 4], Profile> = BTreeMap::new();
    for n in 1..=4 {
        let path = format!("data/muri/trace{n}.csv");
        let trace = arbiter_trace::muri::read(Path::new(&path), 1.015)
            .with_context(|| format!("reading {path} (run from the repository root)"))?;
        for job in &trace.jobs {
            let (Some(stages), Some(iteration_s)) = (job.stages, job.iteration_s) else {
                continue;
            };
            let bits = [
                stages.io_s.to_bits(),
                stages.cpu_s.to_bits(),
                stages.gpu_s.to_bits(),
                iteration_s.to_bits(),
            ];
            by_bits.insert(
                bits,
                Profile {
                    stages,
                    iteration_s,
                },
            );
        }
    }
    if by_bits.is_empty() {
        bail!("no job of data/muri/trace*.csv has stage times");
    }
    Ok(by_bits.into_values().collect())
}

/// A well-mixed hash of a job's number (SplitMix64's finaliser): which profile it gets.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream of `jobs` jobs on `gpus` GPUs, each with a Muri profile.
fn stream(jobs: usize, gpus: u32, load: f64, profiles: &[Profile]) -> Vec<JobSpec> {
    let mut out = arbiter_trace::generator::philly_like(jobs, gpus, load, 0).jobs;
    for job in &mut out {
        let p = profiles[(mix(job.id.0 as u64) % profiles.len() as u64) as usize];
        job.stages = Some(p.stages);
        job.iteration_s = Some(p.iteration_s);
        job.iterations = Some((job.run_time_s / p.iteration_s).round() as u64);
    }
    out
}

/// Runs the suite (`point`: `JOBS` or `JOBS:LOAD` instead of 100,000 jobs offering 0.8 of the
/// cluster; a load above 1 keeps a queue, so that groups are merged and matched).
pub fn run(point: Option<&str>, json: bool) -> Result<()> {
    let (jobs, load): (usize, f64) = match point.map(|p| p.split_once(':').unwrap_or((p, ""))) {
        None => (JOBS, OFFERED_LOAD),
        Some((jobs, load)) => (
            jobs.parse().context("--point: JOBS or JOBS:LOAD")?,
            if load.is_empty() {
                OFFERED_LOAD
            } else {
                load.parse().context("--point: JOBS:LOAD")?
            },
        ),
    };
    // 1,024 GPUs per 100,000 jobs (`--suite scale`'s clusters), in whole 8-GPU nodes.
    let gpus = ((jobs as f64 * 1024.0 / 100_000.0 / 8.0).round() as u32).max(1) * 8;
    let cluster = crate::bench_scale::cluster(gpus)?;
    let profiles = muri_profiles()?;
    let trace = stream(jobs, cluster.total_gpus(), load, &profiles);
    let config = MuriConfig {
        matching: MuriMatching::Fast,
        ..MuriConfig::default()
    };
    let mut policy = arbiter_policy::muri::Muri::new(MuriRanking::RemainingService, config)?;
    let sim = SimConfig {
        overhead: OverheadModel::None,
        ..SimConfig::default()
    };
    let started = Instant::now();
    let out = simulate(&cluster, &trace, &mut policy, &sim)?;
    let wall_s = started.elapsed().as_secs_f64();
    let summary = Summary::compute(&out.records, Window::default(), out.capacity_gpus);
    let row = serde_json::json!({
        "policy": "muri-s",
        "matching": "fast",
        "jobs": jobs,
        "offered_load": load,
        "gpus": cluster.total_gpus(),
        "profiles": profiles.len(),
        "wall_s": wall_s,
        "events": out.stats.events,
        "avg_jct_s": summary.avg_jct_s,
        "colocated_fraction": summary.colocated_fraction,
    });
    if json {
        outln!("{}", serde_json::to_string_pretty(&row)?);
    } else {
        outln!(
            "muri-s (matching = fast): {jobs} Philly-like jobs (offered load {load}) with Muri's {} job profiles on {} GPUs",
            profiles.len(),
            cluster.total_gpus()
        );
        outln!(
            "  {wall_s:.2} s, {} events, average JCT {:.0} s, {:.1}% of GPU time shared",
            out.stats.events,
            summary.avg_jct_s,
            summary.colocated_fraction * 100.0
        );
    }
    Ok(())
}
