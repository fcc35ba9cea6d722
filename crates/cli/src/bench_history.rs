//! `arbiter bench --suite history`: issue 30's goal, "exporting and replaying 1,000,000 history
//! records < 10 s". A Philly-like stream of a million jobs (Gavel's Philly-fitted sizes and run
//! times, Poisson arrivals offering 80% of 16,384 GPUs: 2,048 nodes of 8, the cost curve's
//! largest point) runs under `fifo` — what happened — and becomes a million job records as the
//! daemon keeps them (each with its request, command and environment included, and its
//! transitions). Then, timed as `arbiter history export` and `arbiter whatif` do it, with the
//! network left out: the daemon renders its history a page at a time (`GET /v1/history`'s
//! pages of 100,000, as JSON), the client parses each page, builds the history and writes it
//! as a native trace; then the trace is read back with what happened, simulated under `fifo`
//! on the same cluster and compared.
//!
//! Whole seconds throughout (the daemon keeps seconds), so the replay reproduces what happened
//! exactly: the averages printed side by side are equal.

use crate::production::history;
use anyhow::{Context, Result, anyhow};
use arbiter_daemon::api::history::MAX_HISTORY_PAGE;
use arbiter_daemon::config::ServeConfig;
use arbiter_daemon::records::history::{HistoryPage, page};
use arbiter_daemon::records::job::{JobRecord, JobState, StateKind, SubmitRequest, Transition};
use arbiter_daemon::records::topology::{NodeSpec, Topology};
use arbiter_policy::{PolicyConfig, PolicyKind, build};
use arbiter_sim::{SimConfig, simulate};
use std::time::Instant;

/// Jobs in the history (`--point N` for another count).
pub const JOBS: usize = 1_000_000;
/// GPUs of the cluster (8-GPU nodes).
const GPUS: u32 = 16_384;
/// Unix seconds of the history's first submission.
const T0_S: i64 = 1_790_000_000;

/// CPU seconds this process has used (user and system), from `/proc/self/stat`; 0 where it
/// cannot be read.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// A step's wall and CPU seconds.
struct Timed {
    wall_s: f64,
    cpu_s: f64,
}

/// Runs `f`, timing it.
fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, Timed)> {
    let (wall, cpu) = (Instant::now(), cpu_s());
    let out = f()?;
    Ok((
        out,
        Timed {
            wall_s: wall.elapsed().as_secs_f64(),
            cpu_s: cpu_s() - cpu,
        },
    ))
}

/// The suite; `point` may give another job count.
pub fn run(point: Option<&str>, json: bool) -> Result<()> {
    let jobs: usize = match point {
        Some(p) => p
            .parse()
            .with_context(|| format!("--point `{p}`: a number of jobs"))?,
        None => JOBS,
    };
    let nodes: Vec<NodeSpec> = (0..GPUS / 8)
        .map(|i| NodeSpec {
            name: format!("n{i:04}"),
            gpu_type: "a100".into(),
            devices: (0..8).collect(),
            cpus: 64,
            memory_gib: 512,
            rack: format!("r{:02}", i / 32),
        })
        .collect();
    let topology = Topology::new(nodes.clone()).map_err(|e| anyhow!(e))?;
    let config = ServeConfig {
        policy: "fifo".into(),
        ..ServeConfig::default()
    };

    // What happened, as the daemon keeps it (setup, not timed).
    let setup = Instant::now();
    let records = happened(jobs, &topology, &config)?;
    let setup_s = setup.elapsed().as_secs_f64();

    // The export: the daemon renders its pages, the client reads them and writes the history.
    let dir = crate::bench_daemon_scale::ScratchDir::new(&std::env::temp_dir(), "history")?;
    let path = dir.0.join("hist.csv");
    let now_s = T0_S + 100_000_000;
    let mut api_bytes = 0;
    let mut rendered = Timed {
        wall_s: 0.0,
        cpu_s: 0.0,
    };
    let (parsed, parse) = timed(|| {
        let mut parsed = Vec::with_capacity(jobs);
        let mut start = 0;
        loop {
            // The daemon's side (timed apart below).
            let (text, daemon) = timed(|| {
                let (jobs, more) = page(records[start..].iter(), i64::MIN, MAX_HISTORY_PAGE, now_s);
                let next_after = if more {
                    jobs.last().map(|r| r.id)
                } else {
                    None
                };
                Ok(serde_json::to_string(&HistoryPage { jobs, next_after })?)
            })?;
            rendered.wall_s += daemon.wall_s;
            rendered.cpu_s += daemon.cpu_s;
            api_bytes += text.len();
            let page: HistoryPage = serde_json::from_str(&text)?;
            parsed.extend(page.jobs);
            match page.next_after {
                Some(next) => start = next as usize + 1,
                None => return Ok(parsed),
            }
        }
    })?;
    let parse = Timed {
        wall_s: parse.wall_s - rendered.wall_s,
        cpu_s: parse.cpu_s - rendered.cpu_s,
    };
    // The client then builds and writes the history, and frees what it read, as `arbiter
    // history export` does before it exits. The daemon's records stay: they are another
    // process's (freeing a million of them here would leave the allocator's consolidation of
    // their chunks to whatever step allocates next — 0.8 s of the client's write, measured).
    let ((), written) = timed(|| {
        let exported = history::export(&parsed);
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        exported.write(&mut out)?;
        std::io::Write::flush(&mut out)?;
        drop(exported);
        drop(parsed);
        Ok(())
    })?;
    let csv_mib = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / (1 << 20) as f64);

    // The replay: `arbiter whatif` on the file.
    let (comparison, replay) = timed(|| {
        crate::whatif::replay(
            &path,
            &config,
            PolicyKind::Fifo,
            &nodes,
            "2048 nodes of 8 a100",
            None,
            &[],
        )
    })?;
    let peak = crate::bench_util::peak_rss_mib().unwrap_or(f64::NAN);
    drop(records);
    let export = Timed {
        wall_s: rendered.wall_s + parse.wall_s + written.wall_s,
        cpu_s: rendered.cpu_s + parse.cpu_s + written.cpu_s,
    };
    let total = Timed {
        wall_s: export.wall_s + replay.wall_s,
        cpu_s: export.cpu_s + replay.cpu_s,
    };
    let (actual, simulated) = (comparison.actual.avg_jct_s, comparison.simulated.avg_jct_s);
    let api_mib = api_bytes as f64 / (1 << 20) as f64;
    if json {
        let step = |t: &Timed| serde_json::json!({ "wall_s": t.wall_s, "cpu_s": t.cpu_s });
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "jobs": jobs, "gpus": GPUS, "compared": comparison.compared, "setup_s": setup_s, "history_json_mib": api_mib, "csv_mib": csv_mib,
                "daemon_renders_pages": step(&rendered), "client_parses_pages": step(&parse), "history_built_and_written": step(&written),
                "export": step(&export), "replay": step(&replay), "export_and_replay": step(&total),
                "avg_jct_actual_s": actual, "avg_jct_simulated_s": simulated, "peak_rss_mib": peak,
            }))?
        );
    } else {
        outln!(
            "history: {jobs} jobs on {GPUS} GPUs (2,048 nodes of 8), fifo; {} compared (setup {setup_s:.1} s)",
            comparison.compared
        );
        outln!("{:<56} {:>8} {:>8}", "step", "wall s", "CPU s");
        let row =
            |name: String, t: &Timed| format!("{name:<56} {:>8.2} {:>8.2}", t.wall_s, t.cpu_s);
        outln!(
            "{}",
            row(
                format!("daemon: GET /v1/history pages rendered ({api_mib:.0} MiB JSON)"),
                &rendered
            )
        );
        outln!("{}", row("client: pages parsed".into(), &parse));
        outln!(
            "{}",
            row(
                format!("client: history built and written ({csv_mib:.0} MiB)"),
                &written
            )
        );
        outln!("{}", row("export (the three above)".into(), &export));
        outln!(
            "{}",
            row(
                "replay: arbiter whatif (read, simulate, compare)".into(),
                &replay
            )
        );
        outln!("{}   (goal < 10 s)", row("export + replay".into(), &total));
        outln!("avg JCT actual {actual:.0} s, simulated {simulated:.0} s; peak RSS {peak:.0} MiB");
    }
    Ok(())
}

/// A Philly-like stream of `jobs` jobs in whole seconds, run under fifo as the daemon would on
/// `topology`, as the daemon's job records: each submitted, started and succeeded when the
/// simulation says.
fn happened(jobs: usize, topology: &Topology, config: &ServeConfig) -> Result<Vec<JobRecord>> {
    let mut trace = arbiter_trace::generator::philly_like(jobs, GPUS, 0.8, 0);
    for job in &mut trace.jobs {
        job.submit = arbiter_model::SimTime::from_ms(job.submit.as_ms() / 1000 * 1000);
        job.run_time_s = job.run_time_s.round().max(1.0);
        job.tenant = format!("team-{}", job.id.0 % 8).into();
    }
    let mut policy = build(PolicyKind::Fifo, &PolicyConfig::default())?;
    let out = simulate(
        topology.cluster(),
        &trace.jobs,
        policy.as_mut(),
        &SimConfig {
            round_s: Some(config.round_s),
            ..SimConfig::default()
        },
    )?;
    let template: SubmitRequest = serde_json::from_value(serde_json::json!({
        "command": "python train.py --config configs/resnet50.yaml --lr 0.1", "env": { "WANDB_PROJECT": "history-bench" },
    }))?;
    let mut records = Vec::with_capacity(jobs);
    for r in &out.records {
        let spec = &trace.jobs[r.job as usize];
        let mut request = template.clone();
        (request.gpus, request.name, request.expected_run_time_s) = (
            spec.gpus,
            Some(format!("job-{}", r.job)),
            Some(spec.run_time_s as u64),
        );
        let submit_s = T0_S + r.submit_s as i64;
        let mut record = JobRecord::submitted(
            r.job,
            &spec.tenant,
            request,
            (submit_s as u64) * 1000,
            "x".repeat(64),
        );
        let (start, end) = (
            r.first_start_s.unwrap_or(r.submit_s),
            r.finish_s.unwrap_or(r.submit_s),
        );
        let at = |s: f64| T0_S + s.round() as i64;
        record.history.push(Transition {
            at_unix_s: at(start),
            to: StateKind::Running,
            why: "started on GPUs 0,1".into(),
        });
        record.history.push(Transition {
            at_unix_s: at(end),
            to: StateKind::Succeeded,
            why: "exit code 0".into(),
        });
        record.state = JobState::Succeeded;
        record.runs = 1;
        record.exit_code = Some(0);
        record.executed_s = r.executed_s;
        records.push(record);
    }
    Ok(records)
}
