//! `arbiter bench --suite flood`: what a tenant's flood of jobs costs the daemon (issue 26: 1,500
//! jobs that ended at once took it from 10 to 181 MB, never shrinking). In process, fake
//! executor, virtual clock, one 8-GPU node, FIFO: one tenant submits jobs carrying 60 KB of
//! environment each (a near-maximal body) that run a second and end, twice over; the resident
//! memory and the store's size are read after start and after each flood, with the default
//! retention (ended jobs pruned beyond 64 MiB of records per tenant) and with none. Each run is
//! its own process (resident memory is per process).

use anyhow::{Context, Result, bail};
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::records::retention::Retention;
use arbiter_policy::PolicyKind;
use serde_json::{Value, json};

/// Jobs per flood.
const JOBS: u32 = 3_024;
/// Jobs submitted at once, each wave ending before the next.
const WAVE: u32 = 48;
/// Environment bytes per job.
const ENV_BYTES: usize = 60_000;
/// Virtual Unix time of the start (ms).
const T0_MS: u64 = 1_700_000_000_000;

fn retention(point: &str) -> Result<Retention> {
    // Submissions are not rate-limited here: the flood is the point.
    let bounded = Retention {
        submission_burst: u32::MAX,
        ..Retention::default()
    };
    match point {
        "bounded" => Ok(bounded),
        "unbounded" => Ok(Retention {
            keep_finished_per_tenant: usize::MAX,
            keep_finished_bytes_per_tenant: u64::MAX,
            keep_finished_s: 0,
            ..bounded
        }),
        other => bail!("--point `{other}`: expected bounded or unbounded"),
    }
}

/// The child: one retention's floods; prints one JSON object of measurements.
pub fn run_point(point: &str) -> Result<()> {
    // In the temporary directory (on disk: the store's size is part of what is measured).
    let scratch = crate::bench_daemon_scale::ScratchDir::new(&std::env::temp_dir(), "flood")?;
    let dir = scratch.0.as_path();
    let (daemon, fake, clock) = crate::bench_daemon_scale::daemon_with(
        dir,
        PolicyKind::Fifo,
        crate::bench_daemon_scale::nodes(1),
        retention(point)?,
    )?;
    daemon.put_tenant(arbiter_daemon::records::store::Tenant {
        name: "flood".into(),
        weight: 1.0,
        gpu_quota: None,
        token_sha256: "x".into(),
    })?;
    let rss = || crate::bench_util::status_mib(None, "VmRSS").unwrap_or(0.0);
    let store_mib = || {
        std::fs::metadata(dir.join("arbiter.redb"))
            .map_or(0.0, |m| m.len() as f64 / (1 << 20) as f64)
    };
    let started = rss();
    let mut now = T0_MS;
    let mut after = Vec::new();
    for _ in 0..2 {
        // In waves that each end before the next (the queue stays short: what grows, if
        // anything, is what the daemon keeps of ended jobs).
        for _ in 0..JOBS / WAVE {
            for _ in 0..WAVE {
                let mut request: SubmitRequest = serde_json::from_value(
                    json!({ "command": "python train.py", "gpus": 1, "expected_run_time_s": 1 }),
                )?;
                request.env.insert("PAYLOAD".into(), "x".repeat(ENV_BYTES));
                let id = daemon.submit("flood", request)?.id;
                fake.set_work(id, 1.0, 0);
            }
            // Eight at a time, a second each.
            for _ in 0..WAVE.div_ceil(8) + 1 {
                now += 2_000;
                clock.set(now);
                fake.advance();
                daemon.tick()?;
            }
        }
        after.push((rss(), store_mib()));
    }
    let kept = daemon.with_state(|s| s.jobs.iter().count());
    println!(
        "{}",
        json!({ "rss_start_mib": started, "rss_after_first_mib": after[0].0, "rss_after_second_mib": after[1].0, "store_after_first_mib": after[0].1, "store_after_second_mib": after[1].1, "records_kept": kept, "jobs": 2 * JOBS })
    );
    Ok(())
}

/// The parent: each retention in a child process.
pub fn run(json_out: bool) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut results = serde_json::Map::new();
    for point in ["bounded", "unbounded"] {
        if !json_out {
            eprintln!(
                "flood: {point}: two floods of {JOBS} jobs with {ENV_BYTES} bytes of environment each ..."
            );
        }
        let output = std::process::Command::new(&exe)
            .args(["bench", "--suite", "flood", "--point", point])
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running the benchmark's child")?;
        if !output.status.success() {
            bail!("flood ({point}) failed ({})", output.status);
        }
        let measured: Value = serde_json::from_str(String::from_utf8_lossy(&output.stdout).trim())
            .context("the child's output")?;
        results.insert(point.to_string(), measured);
    }
    if json_out {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "flood": results }))?
        );
        return Ok(());
    }
    outln!(
        "{:<10} {:>10} {:>12} {:>13} {:>12} {:>13} {:>8}",
        "retention",
        "RSS start",
        "RSS flood 1",
        "RSS flood 2",
        "store 1",
        "store 2",
        "kept"
    );
    for (point, m) in &results {
        let f = |k: &str| m[k].as_f64().unwrap_or(0.0);
        outln!(
            "{:<10} {:>7.0} MiB {:>8.0} MiB {:>9.0} MiB {:>8.0} MiB {:>9.0} MiB {:>8}",
            point,
            f("rss_start_mib"),
            f("rss_after_first_mib"),
            f("rss_after_second_mib"),
            f("store_after_first_mib"),
            f("store_after_second_mib"),
            m["records_kept"]
        );
    }
    Ok(())
}
