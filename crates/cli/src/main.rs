//! `arbiter`: the command-line front end. Argument handling and output only; all logic lives in
//! the library crates.

/// `println!` that treats a closed pipe (`arbiter ... | head`) as a normal end rather than a
/// panic, and other write errors as errors of the command.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        match writeln!(stdout, $($arg)*) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            other => other?,
        }
    }};
}

/// Like `outln!` without the newline.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        match write!(stdout, $($arg)*) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            other => other?,
        }
    }};
}

pub(crate) use {out, outln};

mod bench;
mod bench_daemon_scale;
mod bench_flood;
mod bench_history;
mod bench_muri_scale;
mod bench_quotas;
mod bench_scale;
mod bench_slurm;
mod bench_util;
mod policies_table;
mod production;
mod table;
mod whatif;

use anyhow::{Context, Result, bail};
use arbiter_model::Cluster;
use arbiter_policy::{PlacementStrategy, PolicyConfig, PolicyKind, build};
use arbiter_sim::scenario::{ClusterSpec, Scenario};
use arbiter_sim::{OverheadModel, SimConfig, Summary, Window, simulate};
use arbiter_trace::{ReadOptions, TraceFormat};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Arbiter: a multi-tenant GPU cluster scheduler for deep-learning training jobs.
///
/// Simulation: `arbiter run scenarios/muri-traces.toml` replays Muri's Philly-derived traces
/// with every policy of Muri's evaluation (the file's `policies`) and prints our numbers next to
/// the published ones, each marked within or outside its tolerance (see `scenarios/`).
/// Production: `arbiter serve --gpus 4xa100 --policy las` runs the daemon on this machine; then
/// `arbiter submit -- python train.py`, `arbiter jobs`, `arbiter logs ID` (ARBITER_URL,
/// ARBITER_TOKEN).
#[derive(Parser)]
#[command(name = "arbiter", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print JSON instead of tables: simulation results, or the daemon's JSON for client
    /// commands. Accepted before or after the subcommand (`arbiter jobs --json`).
    #[arg(long, global = true)]
    json: bool,
    /// Client commands: read the bearer token from this file instead of ARBITER_TOKEN.
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file: every (trace × tenant × policy × seed) in parallel, then a table.
    ///
    /// Keys can be overridden with --set, e.g. `--set policies='["srtf"]'`,
    /// `--set trace.0.max_jobs=200`, `--set simulation.restart_overhead_s=30`.
    /// See docs/simulation.md, "Scenario files", for every key.
    Run {
        /// The scenario (TOML).
        file: PathBuf,
        /// Override a scenario key: KEY=VALUE (VALUE in TOML syntax; bare words are strings).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Write one per-job CSV per simulation into this folder.
        #[arg(long, value_name = "DIR")]
        jobs_dir: Option<PathBuf>,
        /// Write a report into this folder: index.html (self-contained, opens offline) with JCT
        /// and queueing-delay CDFs, utilization and queue length over time, per-tenant shares,
        /// finish-time fairness, a Gantt chart and published vs ours; each figure also as SVG
        /// and PNG under figures/.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
    /// Run a scenario at several values of one key and write a table and plots.
    ///
    /// Example (Gavel's Figure 8):
    /// `arbiter sweep scenarios/gavel-continuous-single.toml --key workload.jobs_per_hour
    /// --values 0.4,1,2,3,4,5,6 --out out/fig8`
    /// writes out/fig8/sweep.csv, sweep.json, avg_jct.svg (also p99_jct, avg_queue,
    /// utilization) and one jct_cdf_<value>.svg per value; --report DIR adds an HTML report.
    Sweep {
        /// The scenario (TOML).
        file: PathBuf,
        /// The key to sweep (any key `--set` accepts).
        #[arg(long)]
        key: String,
        /// Values, comma-separated numbers.
        #[arg(long, value_delimiter = ',', required = true)]
        values: Vec<String>,
        /// Other overrides applied at every value.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Output folder.
        #[arg(long, default_value = "out/sweep")]
        out: PathBuf,
        /// Also write a report into this folder: index.html (self-contained) with every figure,
        /// each also as SVG and PNG under figures/.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
    /// Simulate one ad-hoc configuration from flags.
    Simulate {
        /// Trace file.
        #[arg(long)]
        trace: PathBuf,
        /// Trace format: philly, tiresias, muri, gavel, pollux, native.
        #[arg(long, default_value = "native")]
        format: String,
        /// Policy (`arbiter policies` lists them), e.g. fifo, las, max-min-fairness-het, srtf+tune;
        /// or `external`: the program of --policy-cmd decides (docs/policies.md, "External policies").
        #[arg(long, default_value_t = PolicyKind::Fifo)]
        policy: PolicyKind,
        /// With --policy external: the agent, run with `sh -c`, e.g. "python3 agent.py"; it reads
        /// an observation per scheduling point on stdin and answers a job order on stdout.
        #[arg(long)]
        policy_cmd: Option<String>,
        /// With --policy external: seconds the agent may take to answer one observation.
        #[arg(long, default_value_t = 10.0)]
        policy_timeout_s: f64,
        /// Cluster as NODESxGPUS (one rack), e.g. 8x8.
        #[arg(long, default_value = "8x8")]
        cluster: String,
        /// Placement: consolidated, spread, relaxed (consolidated until --relax-after-s of
        /// waiting), anywhere.
        #[arg(long, default_value = "consolidated")]
        placement: String,
        /// For --placement relaxed: seconds of waiting before locality is given up.
        #[arg(long, default_value_t = 600.0)]
        relax_after_s: f64,
        /// Restart overhead, seconds, charged on every (re)start.
        #[arg(long, default_value_t = 0.0)]
        restart_overhead_s: f64,
        /// Scheduling rounds, seconds (in addition to events).
        #[arg(long)]
        round_s: Option<f64>,
        /// Gittins prior (CSV of GPU-seconds), needed for --policy gittins.
        #[arg(long)]
        gittins_prior: Option<PathBuf>,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write per-job CSV here.
        #[arg(long)]
        jobs_csv: Option<PathBuf>,
    },
    /// Work with trace files.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// List the policies with one line each (`--json`: every policy's descriptor).
    Policies {
        /// Print the guide's tables instead, "At a glance" and "In detail" (docs/policies.md holds exactly this).
        #[arg(long)]
        markdown: bool,
    },
    /// Run the scheduler daemon on this machine (production mode): HTTP API, embedded store,
    /// jobs as local processes. `arbiter serve --gpus 4xa100 --policy las`.
    Serve(production::ServeArgs),
    /// Internal: the run wrapper the daemon starts (by absolute path) for every run.
    #[command(hide = true)]
    JobWrapper {
        /// The run's launch spec, written by the daemon.
        spec: Option<PathBuf>,
        /// Be the init (PID 1) of a run's PID namespace; the launch spec comes on stdin.
        #[arg(long)]
        pid_init: bool,
        /// Check that runs can get their own PID namespace and /proc here (the daemon, at start).
        #[arg(long)]
        probe: bool,
    },
    /// Talk to a running daemon (ARBITER_URL, ARBITER_TOKEN): submit, jobs, show, cancel, logs,
    /// cluster, tenants.
    #[command(flatten)]
    Client(production::ClientCommand),
    /// Replay the whole Philly trace per VC (as Helios does) with fifo, srtf and las; print wall
    /// time, events/s and peak memory. Run from the repository root (bundled data) or pass paths.
    Bench {
        /// `philly` (the simulator on all of philly.csv), `philly-quotas` (all of philly.csv on
        /// one shared cluster, without and under a quota tree guaranteeing each VC its nodes:
        /// what enforcing quotas costs the simulator), `gavel` (Gavel's allocation LPs, then Figure-8 points of LAS, LAS-het and space sharing) or
        /// `synergy` (one 128-GPU Synergy point at 9 jobs/hour per allocation mechanism) or
        /// `muri` (the whole scenarios/muri-traces.toml as `arbiter run` runs it: total wall
        /// time and each policy's simulation time over the eight traces) or `muri-scale` (Muri-S
        /// with `policy.muri.matching = "fast"` on 100,000 Philly-like jobs with Muri's job
        /// profiles, 1,024 GPUs; `--point N` for N jobs) or `pollux` / `chronus`
        /// (scenarios/pollux-workloads.toml, scenarios/chronus-deadlines.toml, timed the same
        /// way) or `report` (the Muri scenario's report and the Philly trace's, built and
        /// written) or `scale` (the cost curve: Philly-like streams of 10,000 to 1,000,000 jobs
        /// on 64 to 16,384 GPUs under fifo, srtf, las and max-min-fairness, the last in Gavel's
        /// 360 s rounds only; wall time, events/s, peak memory, and a log-log plot in
        /// out/bench-scale.svg) or `external` (the
        /// per-decision overhead of a policy outside Rust: the example Python agent against
        /// the built-in sjf, same decisions) or
        /// `daemon` (submit → running latency, submissions/s, memory with 10,000 queued jobs) or
        /// `daemon-scale` (in process, fake executor: 100,000 queued jobs on 1,000 8-GPU nodes
        /// under fifo and las; submissions/s, one scheduling round, the API's job list by pages,
        /// peak memory) or `flood` (one tenant's two floods of 3,000 jobs with 60 KB bodies
        /// that end: resident memory and store size with the default retention and with none) or
        /// `slurm` (as root, on an idle Slurm partition such as scripts/slurm-up.sh's: submit →
        /// RUNNING through Arbiter next to sbatch, a 200-job burst, daemon CPU per round) or
        /// `history` (a million job records as the daemon's API gives them, exported as a history
        /// and replayed by `arbiter whatif`: issue 30's goal of under 10 s; `--point N` for N jobs).
        #[arg(long, default_value = "philly")]
        suite: String,
        /// `--suite muri-scale` and `--suite history`: the number of jobs (default 100,000 and
        /// 1,000,000). Internal elsewhere (each measurement run in a child): `--suite scale`
        /// JOBS:GPUS:POLICY, `--suite daemon-scale` POLICY, `--suite flood` bounded or unbounded.
        #[arg(long, value_name = "N")]
        point: Option<String>,
        /// `--suite slurm`: the Slurm partition (Arbiter's alone while the bench runs).
        #[arg(long, default_value = "arbiter")]
        partition: String,
        /// `--suite slurm`: the unix user the benchmark's jobs run as.
        #[arg(long, default_value = "nobody")]
        user: String,
        /// Philly CSV (defaults to the bundled data/philly/philly.csv).
        #[arg(long)]
        trace: Option<PathBuf>,
        /// VC sizes `vc,node num` (defaults to data/philly/philly_vc.csv).
        #[arg(long)]
        vc_sizes: Option<PathBuf>,
        /// Policies to time.
        #[arg(long, value_delimiter = ',', default_values_t = [PolicyKind::Fifo, PolicyKind::Srtf, PolicyKind::Las])]
        policies: Vec<PolicyKind>,
    },
    /// Replay a daemon's history under a policy on the cluster of its configuration, and print
    /// what happened beside what the simulation did: JCT, queueing delay by tenant and by job
    /// size, GPU utilization.
    ///
    /// On the daemon (admin): `arbiter history export --since 30d --out hist.csv`. Then, anywhere:
    /// `arbiter whatif hist.csv --config arbiter.toml --policy las` ("what would LAS have done
    /// to last month's jobs?"). Without --policy, the configuration's own policy: how closely
    /// the simulator reproduces your daemon (docs/production.md, "Your own history as a
    /// trace", has the fidelity measured). Without --config, the daemon's defaults (this
    /// machine's GPUs), and the output says so. The simulator never sees the actual times; it
    /// replays each job's submission, size and measured run time.
    Whatif(whatif::WhatifArgs),
    /// Print a shell completion script: `arbiter completions bash > ~/.local/share/bash-completion/completions/arbiter`,
    /// `arbiter completions zsh > ~/.zfunc/_arbiter`, `arbiter completions fish > ~/.config/fish/completions/arbiter.fish`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Convert any supported trace into Arbiter's native CSV.
    Convert {
        /// Input file.
        input: PathBuf,
        /// Output file (`-` for stdout).
        output: PathBuf,
        /// Input format: philly, tiresias, muri, gavel, pollux, native.
        #[arg(long)]
        format: String,
        /// Muri only: iteration-time factor (Muri's simulator uses 1.015).
        #[arg(long)]
        iteration_time_factor: Option<f64>,
    },
    /// Print a summary of a trace: jobs, tenants, GPU sizes, submit span.
    Stats {
        /// Input file.
        input: PathBuf,
        /// Input format.
        #[arg(long)]
        format: String,
    },
    /// Characterise a trace as the Philly study (ATC'19) and Helios (SC'21) do: jobs and
    /// GPU-time by job size (1, 2-4, 5-8, >8 GPUs) with duration percentiles, GPU-time
    /// concentration in the largest jobs, load per tenant, arrivals by hour of day and day of
    /// week (traces with timestamps). `--json` adds each size class's duration CDF.
    ///
    /// `--format pai-pods` reads an Alibaba PAI pod list (cluster-trace-gpu-v2023, FGD ATC'23):
    /// pods by request (CPU only, a share of one GPU, whole GPUs by size), their final phases
    /// (running, succeeded, failed, pending) per class, the GPU shares asked for, QoS classes
    /// and GPU-type constraints.
    Analyze {
        /// Input file.
        input: PathBuf,
        /// Input format: any trace format, or `pai-pods` (a pod list: characterized only).
        #[arg(long)]
        format: String,
        /// Also write a report into this folder: index.html (self-contained) with the size,
        /// duration, tenant and arrival figures, each also as SVG and PNG under figures/.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn parse_format(name: &str) -> Result<TraceFormat> {
    TraceFormat::parse(name).map_err(anyhow::Error::msg)
}

fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Run {
            file,
            overrides,
            jobs_dir,
            report,
        } => run_scenario(
            &file,
            &overrides,
            json,
            jobs_dir.as_deref(),
            report.as_deref(),
        ),
        Command::Sweep {
            file,
            key,
            values,
            overrides,
            out,
            report,
        } => run_sweep(
            &file,
            &key,
            &values,
            &overrides,
            &out,
            report.as_deref(),
            json,
        ),
        Command::Simulate {
            trace,
            format,
            policy,
            policy_cmd,
            policy_timeout_s,
            cluster,
            placement,
            relax_after_s,
            restart_overhead_s,
            round_s,
            gittins_prior,
            seed,
            jobs_csv,
        } => {
            let format = parse_format(&format)?;
            let trace_path = trace;
            let trace = arbiter_trace::read(&trace_path, format, &ReadOptions::default())?;
            let c = ClusterSpec::nodes_x_gpus(&cluster)
                .map_err(|m| anyhow::anyhow!("--cluster {m}"))?;
            let cluster = Cluster::homogeneous(
                c.racks,
                c.nodes_per_rack,
                c.gpus_per_node,
                c.cpus_per_node,
                c.memory_gib_per_node,
                &c.gpu_type,
            )?;
            if let Some(warning) = arbiter_sim::UnplaceableJobs::count(&cluster, &trace.jobs)
                .warning(&trace_path.display().to_string())
            {
                eprintln!("warning: {warning}");
            }
            let placement =
                PlacementStrategy::from_name(&placement, relax_after_s).with_context(|| {
                    format!(
                        "--placement `{placement}`: expected one of {}",
                        PlacementStrategy::NAMES.join(", ")
                    )
                })?;
            let mut config = PolicyConfig {
                placement,
                ..PolicyConfig::default()
            };
            if let Some(p) = gittins_prior {
                config.gittins_prior_gpu_s = arbiter_trace::tiresias::read_gpu_time_prior(&p)?;
            }
            anyhow::ensure!(
                policy_timeout_s.is_finite() && policy_timeout_s > 0.0,
                "--policy-timeout-s must be > 0, got {policy_timeout_s}"
            );
            match (policy, policy_cmd) {
                (PolicyKind::External, Some(command)) => {
                    config.external = Some(arbiter_policy::external::ExternalConfig {
                        command,
                        timeout: std::time::Duration::from_secs_f64(policy_timeout_s),
                    });
                }
                (PolicyKind::External, None) => anyhow::bail!(
                    "--policy external needs --policy-cmd, the agent to run (e.g. \"python3 python/examples/sjf_agent.py\")"
                ),
                (_, Some(_)) => anyhow::bail!("--policy-cmd is for --policy external"),
                (_, None) => {}
            }
            let mut policy = build(policy, &config)?;
            let sim = SimConfig {
                restart_overhead_s,
                round_s,
                seed,
                overhead: OverheadModel::OnRestart,
                ..SimConfig::default()
            };
            let out = simulate(&cluster, &trace.jobs, policy.as_mut(), &sim)?;
            let summary = Summary::compute(&out.records, Window::default(), out.capacity_gpus);
            if let Some(path) = jobs_csv {
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?;
                arbiter_sim::metrics::write_records_csv(file, &out.records)?;
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                outln!("{}", table::summary_text(&summary));
            }
            Ok(())
        }
        Command::Trace { command } => match command {
            TraceCommand::Convert {
                input,
                output,
                format,
                iteration_time_factor,
            } => {
                let format = parse_format(&format)?;
                let options = ReadOptions {
                    iteration_time_factor,
                    ..ReadOptions::default()
                };
                let trace = arbiter_trace::read(&input, format, &options)?;
                if output.as_os_str() == "-" {
                    arbiter_trace::native::write(std::io::stdout().lock(), &trace.jobs)?;
                } else {
                    let file = std::fs::File::create(&output)
                        .with_context(|| format!("creating {}", output.display()))?;
                    arbiter_trace::native::write(std::io::BufWriter::new(file), &trace.jobs)?;
                    eprintln!("wrote {} jobs to {}", trace.jobs.len(), output.display());
                }
                Ok(())
            }
            TraceCommand::Analyze {
                input,
                format,
                report,
            } => {
                let name = input.file_name().map_or_else(
                    || input.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                if format == "pai-pods" {
                    let analysis = arbiter_trace::pai::analyze(&arbiter_trace::pai::read(&input)?);
                    let page = || arbiter_report::trace::pod_report(&name, &analysis);
                    return print_analysis(
                        &analysis,
                        report.as_deref(),
                        page,
                        json,
                        table::pod_analysis,
                    );
                }
                let trace =
                    arbiter_trace::read(&input, parse_format(&format)?, &ReadOptions::default())?;
                let analysis = arbiter_trace::analysis::analyze(&trace);
                let page = || arbiter_report::trace::report(&name, &analysis);
                print_analysis(
                    &analysis,
                    report.as_deref(),
                    page,
                    json,
                    table::trace_analysis,
                )
            }
            TraceCommand::Stats { input, format } => {
                let trace =
                    arbiter_trace::read(&input, parse_format(&format)?, &ReadOptions::default())?;
                outln!("{}", table::trace_stats(&trace));
                Ok(())
            }
        },
        Command::Serve(args) => production::serve(args),
        Command::JobWrapper {
            spec,
            pid_init,
            probe,
        } => std::process::exit(arbiter_daemon::executor::wrapper::main(
            spec.as_deref(),
            pid_init,
            probe,
        )),
        Command::Client(command) => {
            production::run_client(command, cli.token_file.as_ref(), cli.json)
        }
        Command::Whatif(args) => whatif::run(args, json),
        Command::Policies { markdown: true } => {
            out!("{}", policies_table::markdown());
            Ok(())
        }
        Command::Policies { markdown: false } if json => {
            let all: Vec<_> = PolicyKind::ALL
                .iter()
                .map(|kind| kind.descriptor())
                .collect();
            outln!("{}", serde_json::to_string_pretty(&all)?);
            Ok(())
        }
        Command::Policies { markdown: false } => {
            for kind in PolicyKind::ALL {
                outln!("{:<26} {}", kind.name(), kind.describe());
            }
            Ok(())
        }
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "arbiter", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(())
        }
        Command::Bench {
            suite,
            trace,
            vc_sizes,
            policies,
            partition,
            user,
            point,
        } => match suite.as_str() {
            "philly" => bench::run(trace, vc_sizes, &policies, json),
            "philly-quotas" => bench_quotas::run(trace, vc_sizes, &policies, json),
            "gavel" => bench::run_gavel(json),
            "synergy" => bench::run_synergy(json),
            "muri" => bench::run_muri(json),
            "muri-scale" => bench_muri_scale::run(point.as_deref(), json),
            "pollux" => bench::run_pollux(json),
            "chronus" => bench::run_chronus(json),
            "report" => bench::run_report(json),
            "scale" => match point {
                Some(point) => bench_scale::run_point(&point),
                None => bench_scale::run(json),
            },
            "external" => bench::run_external(json),
            "daemon" => bench::run_daemon(json),
            "daemon-scale" => match point {
                Some(point) => bench_daemon_scale::run_point(&point),
                None => bench_daemon_scale::run(json),
            },
            "flood" => match point {
                Some(point) => bench_flood::run_point(&point),
                None => bench_flood::run(json),
            },
            "slurm" => bench_slurm::run(&partition, &user, json),
            "history" => bench_history::run(point.as_deref(), json),
            other => bail!(
                "--suite `{other}`: expected philly, philly-quotas, gavel, synergy, muri, muri-scale, pollux, chronus, report, scale, external, daemon, daemon-scale, flood, slurm or history"
            ),
        },
    }
}

/// Writes `page()` into `report` when asked, then prints `analysis` as JSON or as `text` says.
fn print_analysis<T: serde::Serialize>(
    analysis: &T,
    report: Option<&Path>,
    page: impl FnOnce() -> arbiter_report::Report,
    json: bool,
    text: impl FnOnce(&T) -> String,
) -> Result<()> {
    if let Some(dir) = report {
        eprintln!("wrote {}", page().write(dir)?.display());
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(analysis)?);
    } else {
        outln!("{}", text(analysis));
    }
    Ok(())
}

fn run_sweep(
    file: &Path,
    key: &str,
    values: &[String],
    overrides: &[String],
    out: &Path,
    report: Option<&Path>,
    json: bool,
) -> Result<()> {
    let bar = progress_bar(!json, "sweep");
    let origin = std::time::Instant::now();
    let sweep = arbiter_sim::sweep::run(file, overrides, key, values, &advance(&bar), &|| {
        origin.elapsed().as_secs_f64()
    })?;
    bar.finish_and_clear();
    print_warnings(sweep.points.iter().flat_map(|p| &p.results));
    let mut written = sweep.write(out)?;
    written.extend(arbiter_report::sweep::write_figures(&sweep, out)?);
    if let Some(dir) = report {
        written.push(arbiter_report::sweep::report(&sweep).write(dir)?);
    }
    if json {
        outln!("{}", serde_json::to_string_pretty(&sweep)?);
    } else {
        outln!("{}", table::sweep_table(&sweep));
        for path in written {
            outln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// A progress callback `(done, total)` that moves `bar`.
fn advance(bar: &indicatif::ProgressBar) -> impl Fn(usize, usize) + Sync + '_ {
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }
}

/// A progress bar on a terminal; hidden when piped or when `enabled` is false.
fn progress_bar(enabled: bool, message: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    if enabled && std::io::stderr().is_terminal() {
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {pos}/{len}, {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(message.to_string());
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}

/// Prints each distinct warning of the result rows once, on stderr.
fn print_warnings<'a>(rows: impl IntoIterator<Item = &'a arbiter_sim::scenario::ResultRow>) {
    let mut seen = std::collections::BTreeSet::new();
    for warning in rows.into_iter().flat_map(|r| &r.warnings) {
        if seen.insert(warning.as_str()) {
            eprintln!("warning: {warning}");
        }
    }
}

fn run_scenario(
    file: &Path,
    overrides: &[String],
    json: bool,
    jobs_dir: Option<&Path>,
    report: Option<&Path>,
) -> Result<()> {
    let mut scenario = Scenario::load(file, overrides)?;
    // The timeline feeds the report's Gantt chart and time series; it changes no result.
    scenario.simulation.record_timeline = report.is_some();
    let bar = progress_bar(!json, &scenario.name);
    let origin = std::time::Instant::now();
    let rows = scenario.run(&advance(&bar), &|| origin.elapsed().as_secs_f64())?;
    bar.finish_and_clear();
    print_warnings(&rows);
    if let Some(dir) = jobs_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for r in &rows {
            let path = dir.join(format!(
                "{}-{}-{}-seed{}.csv",
                r.trace, r.policy, r.tenant, r.seed
            ));
            let f = std::fs::File::create(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            arbiter_sim::metrics::write_records_csv(std::io::BufWriter::new(f), &r.records)?;
        }
    }
    let comparisons = scenario.compare(&rows);
    if let Some(dir) = report {
        let started = std::time::Instant::now();
        let input = arbiter_report::run::RunInput {
            scenario: &scenario,
            rows: &rows,
            comparisons: &comparisons,
        };
        let page = arbiter_report::run::report(&input).write(dir)?;
        eprintln!(
            "wrote {} in {:.2} s",
            page.display(),
            started.elapsed().as_secs_f64()
        );
    }
    if json {
        let out = serde_json::json!({
            "scenario": scenario.name,
            "results": rows,
            "published": comparisons,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!("{}", table::results_table(&scenario.name, &rows));
        if !comparisons.is_empty() {
            outln!("{}", table::comparison_table(&comparisons));
        }
    }
    if rows.is_empty() {
        bail!("the scenario produced no simulations (no tenant of the trace has a cluster?)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The count of policies a help text claims for a scenario must be the scenario's own
    /// (issue 33: `--help` said "four policies" of a file listing nine).
    #[test]
    fn the_help_claims_no_policy_count_the_scenario_does_not_have() {
        let help = Cli::command().render_long_help().to_string();
        let scenario = Scenario::load(
            Path::new(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../scenarios/muri-traces.toml"
            )),
            &[],
        )
        .expect("loads");
        let words = [
            "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve",
        ];
        let text = help.replace('\n', " ");
        let mut said = text.split_whitespace().zip(text.split_whitespace().skip(1));
        let claimed = said.find_map(|(count, next)| {
            let n = words
                .iter()
                .position(|w| w.eq_ignore_ascii_case(count))
                .map(|i| i + 1)
                .or_else(|| count.parse().ok())?;
            next.starts_with("policies").then_some(n)
        });
        assert!(
            claimed.is_none_or(|n| n == scenario.policies.len()),
            "the help claims {claimed:?} policies, the scenario has {}: {help}",
            scenario.policies.len()
        );
        assert!(help.contains("scenarios/muri-traces.toml"), "{help}");
    }

    /// `tenants add --help` names exactly the policies that read weights.
    #[test]
    fn the_weight_help_names_the_policies_that_use_weights() {
        let mut cli = Cli::command();
        let add = cli
            .find_subcommand_mut("tenants")
            .and_then(|t| t.find_subcommand_mut("add"))
            .expect("tenants add");
        let help = add.render_long_help().to_string();
        for kind in PolicyKind::ALL {
            let named = help
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '+'))
                .any(|w| w == kind.name());
            if kind.uses_tenant_weights() {
                assert!(named, "`{kind}` uses weights and is not named: {help}");
            }
        }
        assert!(help.contains("changes nothing"), "{help}");
    }
}
