//! `arbiter bench`: replays the whole Philly trace (82k jobs) the way Helios does — every virtual
//! cluster alone on its own cluster sized by `philly_vc.csv` (nodes × 8 GPUs; the 18 jobs of the
//! four VCs that file does not size are left out) — with each policy, one simulation after the
//! other on one thread, and prints total wall time, events per second and peak memory. Release
//! builds only give meaningful numbers.

use anyhow::{Context, Result};

use arbiter_model::Cluster;
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{SimConfig, Summary, Window, simulate};
use arbiter_trace::Trace;
use std::path::PathBuf;
use std::time::Instant;

use crate::bench_util::{median, peak_rss_mib, status_mib};

pub fn run(
    trace: Option<PathBuf>,
    vc_sizes: Option<PathBuf>,
    policies: &[PolicyKind],
    json: bool,
) -> Result<()> {
    let started = Instant::now();
    // (The load's time includes the VC sizes' small file.)
    let (trace, sizes) = crate::bench_util::read_philly(trace, vc_sizes)?;
    let load_s = started.elapsed().as_secs_f64();
    let total_jobs = trace.jobs.len();
    let mut by_tenant: std::collections::BTreeMap<String, Vec<arbiter_model::JobSpec>> =
        std::collections::BTreeMap::new();
    for job in trace.jobs {
        by_tenant
            .entry(job.tenant.to_string())
            .or_default()
            .push(job);
    }
    let mut tenants = Vec::new();
    for (vc, nodes) in &sizes {
        let jobs = Trace::from_jobs(by_tenant.remove(vc).unwrap_or_default(), None);
        let cluster = Cluster::homogeneous(1, *nodes, 8, 64, 512, "V100")?;
        tenants.push((cluster, jobs));
    }
    drop(by_tenant);
    let replayed: usize = tenants.iter().map(|(_, t)| t.jobs.len()).sum();
    let mut rows = Vec::new();
    if !json {
        outln!(
            "philly.csv: {} jobs loaded in {:.3} s; replaying {} jobs of {} VCs, each on its own cluster",
            total_jobs,
            load_s,
            replayed,
            tenants.len()
        );
        outln!(
            "{:<8} {:>9} {:>10} {:>12} {:>13} {:>13}",
            "policy",
            "wall s",
            "events",
            "events/s",
            "avg JCT s",
            "peak RSS MiB"
        );
    }
    for &kind in policies {
        let t = Instant::now();
        let mut events = 0;
        let mut scheduling_points = 0;
        let mut jct_sum = 0.0;
        let mut jct_count = 0usize;
        for (cluster, jobs) in &tenants {
            let mut policy = build(kind, &PolicyConfig::default())?;
            let out = simulate(cluster, &jobs.jobs, policy.as_mut(), &SimConfig::default())?;
            events += out.stats.events;
            scheduling_points += out.stats.scheduling_points;
            let summary = Summary::compute(&out.records, Window::default(), out.capacity_gpus);
            jct_sum += summary.avg_jct_s * summary.jobs as f64;
            jct_count += summary.jobs;
        }
        let wall = t.elapsed().as_secs_f64();
        let rss = peak_rss_mib().unwrap_or(f64::NAN);
        let events_per_s = events as f64 / wall.max(1e-9);
        let avg_jct_s = jct_sum / jct_count.max(1) as f64;
        if !json {
            outln!(
                "{:<8} {:>9.3} {:>10} {:>12.0} {:>13.0} {:>13.1}",
                kind.name(),
                wall,
                events,
                events_per_s,
                avg_jct_s,
                rss
            );
        }
        rows.push(serde_json::json!({
            "policy": kind.name(), "wall_s": wall, "events": events,
            "scheduling_points": scheduling_points, "events_per_s": events_per_s,
            "avg_jct_s": avg_jct_s, "peak_rss_mib": rss,
        }));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "jobs": total_jobs, "replayed": replayed, "results": rows })
            )?
        );
    }
    Ok(())
}

/// `arbiter bench --suite gavel`: solve times of Gavel's allocation LPs at the sizes the issue
/// names, then Figure-8 points per policy ([`figure8_points`]).
pub fn run_gavel(json: bool) -> Result<()> {
    use arbiter_policy::gavel::allocation::{self, AllocJob, JobProgress, MaxMinMemo};
    use arbiter_solver::SolveMethod;
    /// Each program by both methods (`policy.gavel.solver`), the label's suffix naming it.
    const METHODS: [(SolveMethod, &str); 2] = [
        (SolveMethod::InteriorPoint, ""),
        (SolveMethod::Simplex, " (simplex)"),
    ];
    let table = arbiter_trace::gavel::ThroughputTable::read(std::path::Path::new(
        "data/gavel/simulation_throughputs.json",
    ))
    .context("reading data/gavel/simulation_throughputs.json (run from the repository root)")?;
    let types = table.job_types("v100");
    let gpu_types = ["v100".to_string(), "p100".to_string(), "k80".to_string()];
    let jobs_of = |n: usize| -> Vec<AllocJob> {
        (0..n)
            .map(|i| {
                let t = &types[i % types.len()];
                AllocJob {
                    scale_factor: 1.0,
                    weight: 1.0,
                    throughput: table
                        .relative_speeds(t, 1, &gpu_types, "v100")
                        .unwrap_or_else(|| vec![1.0; 3]),
                }
            })
            .collect()
    };
    let progress_of = |n: usize| -> Vec<JobProgress> {
        (0..n)
            .map(|i| JobProgress {
                remaining_s: 1000.0 + (i * 37 % 5000) as f64,
                since_arrival_s: (i * 13 % 900) as f64,
            })
            .collect()
    };
    let mut rows = Vec::new();
    let mut time = |label: &str,
                    f: &dyn Fn() -> Result<allocation::Allocation, arbiter_solver::SolverError>|
     -> Result<()> {
        let t = Instant::now();
        f()?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if !json {
            outln!("{label:<48} {ms:>9.1} ms");
        }
        rows.push(serde_json::json!({ "case": label, "ms": ms }));
        Ok(())
    };
    let gpus = [36.0 * 19.0, 36.0 * 19.0, 36.0 * 19.0];
    // The max-min program by each method (a fresh memo each time: nothing answered from it).
    let max_min = |jobs: &[AllocJob], g: &[f64], method: SolveMethod| {
        allocation::max_min_fairness_memo(jobs, g, true, &mut MaxMinMemo::default(), method)
    };
    for n in [256usize, 2048] {
        let jobs = jobs_of(n);
        let g: Vec<f64> = gpus.iter().map(|x| x * n as f64 / 2048.0).collect();
        for (method, by) in METHODS {
            time(
                &format!("max-min-fairness-het LP, {n} jobs x 3 types{by}"),
                &|| max_min(&jobs, &g, method),
            )?;
        }
    }
    // Every job's throughputs distinct (no two jobs interchangeable): the LP cannot be reduced
    // to job classes. 94 jobs are 191 rows, about the most the simplex takes
    // (`arbiter_solver::simplex::MAX_ROWS`; larger programs go to the interior point).
    for n in [30usize, 62, 94, 2048] {
        let jobs: Vec<AllocJob> = jobs_of(n)
            .into_iter()
            .enumerate()
            .map(|(i, mut job)| {
                job.throughput
                    .iter_mut()
                    .for_each(|t| *t *= 1.0 + i as f64 * 1e-6);
                job
            })
            .collect();
        for (method, by) in METHODS {
            time(
                &format!("max-min-fairness-het LP, {n} distinct jobs{by}"),
                &|| max_min(&jobs, &gpus, method),
            )?;
        }
    }
    {
        let jobs = jobs_of(512);
        let progress = progress_of(512);
        let g = [170.0, 170.0, 170.0];
        for (method, by) in METHODS {
            time(
                &format!("finish-time-fairness-het, 512 jobs (bisection){by}"),
                &|| allocation::finish_time_fairness(&jobs, &progress, &g, true, method),
            )?;
            time(&format!("min-makespan-het LP, 512 jobs{by}"), &|| {
                allocation::min_makespan(&jobs, &progress, &g, true, method)
            })?;
        }
    }
    {
        // Space sharing over every measured pair of the table's single-GPU job types.
        use arbiter_policy::gavel::packing::{self, PackJob};
        use arbiter_policy::mechanisms::colocation::PairSpeeds;
        let mut pairs = PairSpeeds::default();
        for a in &types {
            for b in &types {
                let (Some(ra), Some(rb)) = (table.solo("v100", a, 1), table.solo("v100", b, 1))
                else {
                    continue;
                };
                let key = |t: &String| (t.clone(), 1u32);
                let per_type: Vec<(f64, f64)> = gpu_types
                    .iter()
                    .map(|g| {
                        table
                            .pair(g, &key(a), &key(b))
                            .map_or((0.0, 0.0), |(x, y)| (x / ra, y / rb))
                    })
                    .collect();
                pairs.insert(key(a), key(b), per_type);
            }
        }
        for n in [32usize, 256] {
            let jobs: Vec<PackJob> = jobs_of(n)
                .into_iter()
                .enumerate()
                .map(|(i, job)| PackJob {
                    job,
                    pair_key: Some((types[i % types.len()].clone(), 1)),
                })
                .collect();
            let g: Vec<f64> = gpus
                .iter()
                .map(|x| (x * n as f64 / 2048.0).max(1.0))
                .collect();
            for (method, by) in METHODS {
                time(
                    &format!("max-min-fairness-packed LP, {n} jobs{by}"),
                    &|| packing::max_min_fairness_packed(&jobs, &pairs, &g, method).map(|x| x.solo),
                )?;
            }
        }
    }
    let points = figure8_points(json)?;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "lp": rows, "figure8": points }))?
        );
    }
    Ok(())
}

/// Figure-8 points as `arbiter run` simulates them, one at a time (seed 0, 1,000 measured jobs of
/// 6,500): LAS and LAS-het at 2 jobs/hour (`gavel-continuous-single.toml`), LAS-het and space
/// sharing at 5 jobs/hour (`gavel-space-sharing.toml`), each with the interior point (the
/// reproductions') and with the simplex (`policy.gavel.solver`). Wall time is the runner's, per
/// simulation.
fn figure8_points(json: bool) -> Result<Vec<serde_json::Value>> {
    use arbiter_sim::scenario::Scenario;
    const SINGLE: &str = "scenarios/gavel-continuous-single.toml";
    const SHARING: &str = "scenarios/gavel-space-sharing.toml";
    let mut points = Vec::new();
    for solver in ["interior-point", "simplex"] {
        points.extend([
            (SINGLE, "max-min-fairness", solver),
            (SINGLE, "max-min-fairness-het", solver),
            (SHARING, "max-min-fairness-het", solver),
            (SHARING, "max-min-fairness-packed", solver),
        ]);
    }
    if !json {
        outln!();
        outln!(
            "{:<24} {:<15} {:>10} {:>8} {:>12}",
            "Figure-8 point, seed 0",
            "solver",
            "jobs/hour",
            "wall s",
            "avg JCT s"
        );
    }
    let mut rows = Vec::new();
    for (file, policy, solver) in points {
        let overrides = [
            format!("policies=[\"{policy}\"]"),
            "workload.seeds=[0]".to_string(),
            format!("policy.gavel.solver=\"{solver}\""),
        ];
        let scenario = Scenario::load(std::path::Path::new(file), &overrides)
            .with_context(|| format!("reading {file} (run from the repository root)"))?;
        let origin = Instant::now();
        let results = scenario.run(&|_, _| {}, &|| origin.elapsed().as_secs_f64())?;
        let row = results
            .iter()
            .find(|r| r.tenant == "all")
            .context("the scenario gave no result")?;
        let rate = scenario
            .workload
            .as_ref()
            .and_then(|w| w.jobs_per_hour)
            .unwrap_or(0.0);
        if !json {
            outln!(
                "{policy:<24} {solver:<15} {rate:>10.1} {:>8.2} {:>12.0}",
                row.wall_s,
                row.summary.avg_jct_s
            );
        }
        rows.push(serde_json::json!({ "policy": policy, "solver": solver, "jobs_per_hour": rate, "wall_s": row.wall_s, "avg_jct_s": row.summary.avg_jct_s }));
    }
    Ok(rows)
}

/// `arbiter bench --suite synergy`: one 128-GPU point of `scenarios/synergy-single-gpu.toml` at
/// 9 jobs/hour (7,000 jobs, about 9,300 rounds of 300 s) per mechanism, one simulation after the
/// other on one thread; for `opt`, how many per-server splits were solved and their mean cost
/// (opt's wall time over tune's, per split).
pub fn run_synergy(json: bool) -> Result<()> {
    use arbiter_policy::synergy::{Mechanism, Synergy, SynergyOrder};
    use arbiter_sim::scenario::Scenario;
    let overrides = [
        "workload.jobs_per_hour=9".to_string(),
        "workload.jobs=7000".to_string(),
    ];
    let scenario = Scenario::load(
        std::path::Path::new("scenarios/synergy-single-gpu.toml"),
        &overrides,
    )
    .context("reading scenarios/synergy-single-gpu.toml (run from the repository root)")?;
    let traces = scenario.load_traces(None)?;
    let trace = &traces
        .first()
        .context("the scenario generates no workload")?
        .trace;
    let (_, cluster) = scenario
        .clusters_for(trace)?
        .into_iter()
        .next()
        .context("no cluster")?;
    let sim = SimConfig {
        stop_when_finished: Some(scenario.window),
        ..scenario.simulation.clone()
    };
    if !json {
        outln!(
            "synergy point: {} jobs at 9 jobs/hour on {} GPUs, 300 s rounds, one thread",
            trace.jobs.len(),
            cluster.total_gpus()
        );
        outln!(
            "{:<20} {:>8} {:>8} {:>12} {:>22}",
            "policy",
            "wall s",
            "rounds",
            "avg JCT s",
            "opt splits (mean ms)"
        );
    }
    let mut rows = Vec::new();
    // `opt` is tune's placement plus per-server splits: its extra wall time over tune's, divided
    // by the splits solved, is the cost of one split (timed here, never inside the policy).
    let mut tune_wall_s = 0.0;
    for mechanism in Mechanism::ALL {
        let name = arbiter_policy::PolicyKind::Synergy(SynergyOrder::Fifo, mechanism).name();
        let mut policy = Synergy::new(name, SynergyOrder::Fifo, mechanism);
        let t = Instant::now();
        let out = simulate(&cluster, &trace.jobs, &mut policy, &sim)?;
        let wall_s = t.elapsed().as_secs_f64();
        let summary = Summary::compute(&out.records, scenario.window, out.capacity_gpus);
        if mechanism == Mechanism::Tune {
            tune_wall_s = wall_s;
        }
        let solves = policy.opt_splits();
        let per_solve_ms = if solves > 0 {
            (wall_s - tune_wall_s).max(0.0) * 1000.0 / solves as f64
        } else {
            0.0
        };
        if !json {
            let opt = if mechanism == Mechanism::Opt {
                format!("{solves} ({per_solve_ms:.3})")
            } else {
                "-".into()
            };
            outln!(
                "{:<20} {:>8.3} {:>8} {:>12.0} {:>22}",
                name,
                wall_s,
                out.stats.scheduling_points,
                summary.avg_jct_s,
                opt
            );
        }
        rows.push(serde_json::json!({
            "policy": name, "wall_s": wall_s, "rounds": out.stats.scheduling_points, "avg_jct_s": summary.avg_jct_s,
            "opt_splits": solves, "opt_split_mean_ms": per_solve_ms,
        }));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "synergy": rows }))?
        );
    }
    Ok(())
}

/// `arbiter bench --suite muri`: the whole `scenarios/muri-traces.toml` (every policy of Muri's
/// evaluation on its eight traces) as `arbiter run` runs it, all simulations in parallel: the
/// total wall time, then per policy the sum of its eight simulations' wall times (each timed by
/// the runner) and the slowest trace.
pub fn run_muri(json: bool) -> Result<()> {
    run_scenario("muri", "scenarios/muri-traces.toml", json)
}

/// `arbiter bench --suite report`: the reports' own cost — the whole Muri scenario's run report
/// (figures built, then written with every PNG; goal < 2 s) after its simulations (with the
/// timeline recorded), and `trace analyze` of the whole Philly trace with its report (goal < 1 s).
pub fn run_report(json: bool) -> Result<()> {
    use arbiter_sim::scenario::Scenario;
    let file = "scenarios/muri-traces.toml";
    let mut scenario = Scenario::load(std::path::Path::new(file), &[])
        .with_context(|| format!("reading {file} (run from the repository root)"))?;
    scenario.simulation.record_timeline = true;
    let t = Instant::now();
    let rows = scenario.run(&|_, _| {}, &|| 0.0)?;
    let simulations_s = t.elapsed().as_secs_f64();
    let comparisons = scenario.compare(&rows);
    let dir = tempfile_dir()?;
    let t = Instant::now();
    let report = arbiter_report::run::report(&arbiter_report::run::RunInput {
        scenario: &scenario,
        rows: &rows,
        comparisons: &comparisons,
    });
    let built_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    report.write(&dir.join("muri"))?;
    let written_s = t.elapsed().as_secs_f64();
    let figures = report.figures().count();
    let t = Instant::now();
    let trace = arbiter_trace::read(
        std::path::Path::new("data/philly/philly.csv"),
        arbiter_trace::TraceFormat::Philly,
        &arbiter_trace::ReadOptions::default(),
    )?;
    let analysis = arbiter_trace::analysis::analyze(&trace);
    arbiter_report::trace::report("philly.csv", &analysis).write(&dir.join("philly"))?;
    let philly_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    let rows = vec![
        (
            format!("muri-traces: {} simulations, timeline recorded", rows.len()),
            simulations_s,
            "s",
        ),
        (
            format!("muri-traces report: {figures} figures built"),
            built_s,
            "s",
        ),
        (
            "muri-traces report: written (HTML, SVG, PNG at 2x)".to_string(),
            written_s,
            "s",
        ),
        (
            "philly.csv: read, analyzed, report written".to_string(),
            philly_s,
            "s",
        ),
    ];
    print_rows("report", &rows, 2, json)
}

/// `arbiter bench --suite pollux`: `scenarios/pollux-workloads.toml` (8 workloads × 4 loads ×
/// pollux-tiresias, optimus, afs), timed like the Muri suite (goal: under 20 s).
pub fn run_pollux(json: bool) -> Result<()> {
    run_scenario("pollux", "scenarios/pollux-workloads.toml", json)
}

/// `arbiter bench --suite chronus`: `scenarios/chronus-deadlines.toml` (Chronus' three
/// 30,940-job traces at 960 GPUs × chronus, edf, las, fifo, min-cost; goal: Chronus under 30 s
/// per trace).
pub fn run_chronus(json: bool) -> Result<()> {
    run_scenario("chronus", "scenarios/chronus-deadlines.toml", json)
}

/// A whole scenario as `arbiter run` runs it: total wall time, then per policy the sum of its
/// simulations' wall times and its slowest trace.
fn run_scenario(suite: &str, file: &str, json: bool) -> Result<()> {
    use arbiter_sim::scenario::Scenario;
    use std::collections::BTreeMap;
    let scenario = Scenario::load(std::path::Path::new(file), &[])
        .with_context(|| format!("reading {file} (run from the repository root)"))?;
    let origin = Instant::now();
    let rows = scenario.run(&|_, _| {}, &|| origin.elapsed().as_secs_f64())?;
    let total_s = origin.elapsed().as_secs_f64();
    // Per policy, in the scenario's order: (summed wall s, slowest trace, its wall s).
    let mut per_policy: BTreeMap<usize, (String, f64, String, f64)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.tenant == "all") {
        let at = scenario
            .policies
            .iter()
            .position(|p| *p == r.policy)
            .unwrap_or(usize::MAX);
        let entry = per_policy
            .entry(at)
            .or_insert_with(|| (r.policy.name().to_string(), 0.0, String::new(), 0.0));
        entry.1 += r.wall_s;
        if r.wall_s >= entry.3 {
            (entry.2, entry.3) = (r.trace.clone(), r.wall_s);
        }
    }
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    if json {
        let policies: Vec<_> = per_policy.values().map(|(p, sum, slowest, slowest_s)| serde_json::json!({ "policy": p, "wall_s": sum, "slowest_trace": slowest, "slowest_wall_s": slowest_s })).collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ suite: { "total_wall_s": total_s, "threads": threads, "simulations": rows.len(), "policies": policies } })
            )?
        );
        return Ok(());
    }
    outln!(
        "{}: {} simulations on {threads} threads in {total_s:.1} s",
        scenario.name,
        rows.len()
    );
    outln!(
        "{:<12} {:>12} {:>14} {:>10}",
        "policy",
        "sum wall s",
        "slowest trace",
        "wall s"
    );
    for (policy, sum, slowest, slowest_s) in per_policy.values() {
        outln!("{policy:<12} {sum:>12.2} {slowest:>14} {slowest_s:>10.2}");
    }
    Ok(())
}

/// `arbiter bench --suite external`: the overhead of a policy outside Rust. Muri's trace3 (992
/// jobs) on 8×8 GPUs under the built-in `sjf` and under `python/examples/sjf_agent.py` through
/// `--policy external` (the same decisions): wall time of each, scheduling points, and the
/// extra time per decision (JSON both ways, the agent's sort, the pipe round trip).
pub fn run_external(json: bool) -> Result<()> {
    use arbiter_trace::{ReadOptions, TraceFormat, read};
    let path = std::path::Path::new("data/muri/trace3.csv");
    let options = ReadOptions {
        iteration_time_factor: Some(1.015),
        ..ReadOptions::default()
    };
    let trace = read(path, TraceFormat::Muri, &options)
        .context("reading data/muri/trace3.csv (run from the repository root)")?;
    let cluster = arbiter_model::Cluster::homogeneous(1, 8, 8, 64, 512, "GPU")?;
    let sim = SimConfig::default();
    let config = arbiter_policy::PolicyConfig::default();
    let mut builtin = arbiter_policy::build(PolicyKind::Sjf, &config)?;
    let t = Instant::now();
    let base = simulate(&cluster, &trace.jobs, builtin.as_mut(), &sim)?;
    let builtin_s = t.elapsed().as_secs_f64();
    let options = arbiter_policy::mechanisms::greedy::GreedyOptions {
        preemptive: false,
        head_of_line_blocking: false,
        keep_placements: true,
        strategy: config.placement,
    };
    let t = Instant::now();
    let out = {
        let mut agent = arbiter_policy::external::ExternalPolicy::spawn(
            "python3 python/examples/sjf_agent.py 2>/dev/null",
            std::time::Duration::from_secs(10),
            options,
        )?;
        simulate(&cluster, &trace.jobs, &mut agent, &sim)?
    };
    let external_s = t.elapsed().as_secs_f64();
    anyhow::ensure!(
        out.records == base.records,
        "the example agent decided otherwise than sjf"
    );
    let points = out.stats.scheduling_points.max(1);
    let rows = vec![
        ("sjf (built in), wall".to_string(), builtin_s, "s"),
        ("sjf_agent.py (external), wall".to_string(), external_s, "s"),
        ("scheduling points".to_string(), points as f64, ""),
        (
            "overhead per decision".to_string(),
            (external_s - builtin_s).max(0.0) * 1000.0 / points as f64,
            "ms",
        ),
    ];
    print_rows("external", &rows, 3, json)
}

/// `arbiter bench --suite daemon`: starts `arbiter serve` (this binary) on a declared 1-GPU
/// machine in a temporary directory and measures submit → running latency on the idle daemon
/// (as the client sees it, and inside the daemon), submissions per second from 8 client threads,
/// and the daemon's memory with 10,000 queued jobs.
pub fn run_daemon(json_out: bool) -> Result<()> {
    use arbiter_daemon::api::client::Client;
    use serde_json::json;
    let dir = tempfile_dir()?;
    let exe = std::env::current_exe()?;
    // 10,000 queued jobs of one tenant: the default cap (max_queued_per_tenant) is exactly that.
    let config = dir.with_extension("toml");
    std::fs::write(&config, "max_queued_per_tenant = 20000\n")?;
    let mut child = std::process::Command::new(&exe)
        .args([
            "serve",
            "--data-dir",
            dir.to_str().context("utf-8 path")?,
            "--listen",
            "127.0.0.1:0",
            "--gpus",
            "1xa100",
            "--policy",
            "fifo",
            "--round-s",
            "30",
        ])
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let result = (|| -> Result<Vec<(String, f64, &'static str)>> {
        let addr_file = dir.join("daemon.addr");
        let started = Instant::now();
        let addr = loop {
            match std::fs::read_to_string(&addr_file) {
                Ok(a) if a.ends_with('\n') => break a.trim().to_string(),
                _ if started.elapsed().as_secs() > 20 => anyhow::bail!("the daemon did not start"),
                _ => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        };
        let url = format!("http://{addr}");
        let token = std::fs::read_to_string(dir.join("admin.token"))?;
        let client = Client::new(&url, &token);
        let mut rows = Vec::new();
        // 1. Latency on an idle daemon: one short job at a time.
        let mut latencies = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let id = client.post("/v1/jobs", &json!({ "command": "sleep 0.05" }))?["id"]
                .as_u64()
                .context("id")?;
            loop {
                let state = client.get(&format!("/v1/jobs/{id}"))?["state"]["state"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                if state != "queued" {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            while client.get(&format!("/v1/jobs/{id}"))?["state"]["state"] != "succeeded" {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        latencies.sort_by(f64::total_cmp);
        rows.push((
            "submit → running, median (client, 1 ms polling)".to_string(),
            latencies[latencies.len() / 2],
            "ms",
        ));
        rows.push((
            "submit → running, max of 20".to_string(),
            latencies[latencies.len() - 1],
            "ms",
        ));
        let metrics = client.get_text("/metrics")?;
        let metric = |name: &str| {
            metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix(name)
                        .and_then(|v| v.trim().parse::<f64>().ok())
                })
                .unwrap_or(0.0)
        };
        let inside = metric("arbiter_submit_to_start_seconds_sum")
            / metric("arbiter_submit_to_start_seconds_count").max(1.0)
            * 1000.0;
        rows.push((
            "submit → running, mean inside the daemon".to_string(),
            inside,
            "ms",
        ));
        // 2. Throughput: the GPU held, 8 threads submit 2,000 jobs that stay queued.
        client.post("/v1/jobs", &json!({ "command": "sleep 600", "grace_s": 1 }))?;
        let t = Instant::now();
        submit_many(&url, &token, 8, 250)?;
        rows.push((
            "submissions per second (8 clients, each persisted)".to_string(),
            2000.0 / t.elapsed().as_secs_f64(),
            "/s",
        ));
        // 3. Memory with 10,000 queued jobs.
        submit_many(&url, &token, 8, 1000)?;
        // (The job list comes in pages of 1,000; the dashboard's snapshot counts them all.)
        let queued = client.get("/v1/dashboard")?["queued_total"]
            .as_u64()
            .unwrap_or(0);
        let rss_mib = status_mib(Some(child.id()), "VmRSS").unwrap_or(0.0);
        rows.push((
            format!("daemon memory with {queued} queued jobs"),
            rss_mib,
            "MiB",
        ));
        // 4. What the dashboard polls, with those jobs: its snapshot, and a page of the job list.
        for (case, path) in [
            (
                "dashboard poll (GET /v1/dashboard), median of 20",
                "/v1/dashboard",
            ),
            (
                "job list page (GET /v1/jobs?limit=1000), median of 20",
                "/v1/jobs?limit=1000",
            ),
        ] {
            let mut times = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                client.get_text(path)?;
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            rows.push((format!("{case}, {queued} jobs"), median(times), "ms"));
        }
        rows.push((
            "dashboard page weight (HTML, script, styles, icon)".to_string(),
            arbiter_daemon::api::page_weight_bytes() as f64 / 1024.0,
            "KiB",
        ));
        Ok(rows)
    })();
    let _ = child.kill();
    let _ = child.wait();
    // The `sleep 600` job outlives the daemon in its own process group: stop it.
    kill_leftover_runs(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
    print_rows("daemon", &result?, 1, json_out)
}

/// Prints a suite's `(case, value, unit)` rows: a table, or `{SUITE: [{case, value, unit}]}`.
pub(crate) fn print_rows(
    suite: &str,
    rows: &[(String, f64, &'static str)],
    decimals: usize,
    json_out: bool,
) -> Result<()> {
    if json_out {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(k, v, u)| serde_json::json!({ "case": k, "value": v, "unit": u }))
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ suite: v }))?
        );
    } else {
        let width = rows
            .iter()
            .map(|(k, _, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, v, u) in rows {
            outln!("{k:<width$} {v:>10.decimals$} {u}");
        }
    }
    Ok(())
}

/// Submits `threads × per_thread` trivial jobs from parallel clients.
fn submit_many(url: &str, token: &str, threads: usize, per_thread: usize) -> Result<()> {
    use arbiter_daemon::api::client::Client;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (url, token) = (url.to_string(), token.to_string());
            std::thread::spawn(move || -> Result<()> {
                let client = Client::new(&url, &token);
                for _ in 0..per_thread {
                    client.post("/v1/jobs", &serde_json::json!({ "command": "true" }))?;
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
    }
    Ok(())
}

/// A fresh directory under the system temporary directory.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("arbiter-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Kills process groups whose command line mentions the bench directory's `sleep 600`.
fn kill_leftover_runs(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&environ).contains(&dir.display().to_string())
            && let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>()
        {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
