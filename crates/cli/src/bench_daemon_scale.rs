//! `arbiter bench --suite daemon-scale`: the daemon at cluster scale, in process. A [`Daemon`]
//! with the recording fake executor on a virtual clock, 1,000 nodes of 8 GPUs (32 racks), 10
//! tenants and 100,000 queued jobs submitted through [`Daemon::submit`] (what `POST /v1/jobs`
//! calls: the same validation, idempotency and per-tenant checks, each job persisted in its own
//! store transaction before it is acknowledged). Measured: submissions/s, one scheduling round
//! (the first, which places jobs onto the 8,000 free GPUs, and steady ones in which a few runs
//! end), a restart on that store, the API's job list by pages and its cluster views served over
//! HTTP on 127.0.0.1 with the real router and bearer auth, and the process's peak RSS.
//!
//! Each policy runs in its own process (its peak memory is its own). The data directory is on
//! tmpfs (`/dev/shm`) when there is one, so that the numbers are the daemon's own work, not the
//! disk's: what a transaction costs on disk (an fsync each) is measured beside it with 1,000
//! submissions to a daemon whose data directory is in the temporary directory.

use crate::bench_util::{median, peak_rss_mib, status_mib};
use anyhow::{Context, Result, bail};
use arbiter_daemon::api::client::Client;
use arbiter_daemon::api::{Api, ConnectionLimits, router, serve_connections};
use arbiter_daemon::clock::VirtualClock;
use arbiter_daemon::daemon::{Daemon, Settings};
use arbiter_daemon::executor::fake::FakeExecutor;
use arbiter_daemon::records::job::SubmitRequest;
use arbiter_daemon::records::store::Tenant;
use arbiter_daemon::records::topology::{NodeSpec, Topology};
use arbiter_policy::PolicyKind;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Nodes, GPUs per node, nodes per rack.
const NODES: u32 = 1_000;
const GPUS_PER_NODE: u32 = 8;
const NODES_PER_RACK: u32 = 32;
/// Queued jobs, and the tenants they are spread over.
const JOBS: u32 = 100_000;
const TENANTS: u32 = 10;
/// Jobs submitted to the daemon on disk (the fsync-bound rate).
const DISK_JOBS: u32 = 1_000;
/// Seconds of virtual time between steady rounds, and how many are timed.
const STEP_S: u64 = 10;
const STEADY_ROUNDS: usize = 15;
/// Repetitions of each API request.
const API_REPS: usize = 15;
/// Virtual Unix time of the start (ms).
const T0_MS: u64 = 1_700_000_000_000;
/// The policies measured: the default, a preemptive one, and a tenant-level one without and
/// with decayed fair share (`vtc+fairshare`: what the fair share adds to a round); the default
/// with every tenant's webhook recording events (`fifo+webhooks`); and the default and the
/// preemptive one under a quota tree (`+quotas`: what enforcing it adds to a round).
const POLICIES: [&str; 7] = [
    "fifo",
    "las",
    "vtc",
    "vtc+fairshare",
    "fifo+webhooks",
    "fifo+quotas",
    "las+quotas",
];
/// The suffix of a point under a quota tree.
const QUOTAS: &str = "+quotas";
/// The `+quotas` points' tree: two organizations of five tenants each, every tenant guaranteed
/// 700 of the 8,000 GPUs (its organization 3,600), the second organization borrowing at most
/// 1,000 more, the first tenant lending at most 100 of its idle quota: every part of a round
/// (guaranteed jobs, limits, lending, borrowers) has work to do.
fn set_quota_tree(daemon: &Daemon) -> Result<()> {
    use arbiter_policy::quotas::{GpuQuota, QuotaGroup};
    let group = |name: String,
                 parent: Option<String>,
                 guaranteed: u32,
                 borrowing_limit: Option<u32>,
                 lending_limit: Option<u32>| {
        QuotaGroup::all_gpus(
            &name,
            parent.as_deref(),
            GpuQuota {
                guaranteed,
                borrowing_limit,
                lending_limit,
            },
        )
    };
    for org in 0..2u32 {
        daemon
            .set_quota_group(group(
                format!("org{org}"),
                None,
                3_600,
                (org == 1).then_some(1_000),
                None,
            ))
            .map_err(|e| anyhow::anyhow!("quota tree: {e}"))?;
    }
    for t in 0..TENANTS {
        let lend = (t == 0).then_some(100);
        daemon
            .set_quota_group(group(
                tenant_name(t),
                Some(format!("org{}", t * 2 / TENANTS)),
                700,
                None,
                lend,
            ))
            .map_err(|e| anyhow::anyhow!("quota tree: {e}"))?;
    }
    Ok(())
}

/// The fair share's half-life in the `+fairshare` points: the daemon's default, 7 days.
const FAIRSHARE_HALF_LIFE_S: f64 = 7.0 * 86_400.0;
/// Tasks of the job array submitted after the steady rounds.
const ARRAY_TASKS: u32 = 10_000;
/// Usage rows of the `arbiter usage` measurement.
const USAGE_ROWS: u32 = 1_000_000;
/// The suffix of a point with webhooks.
const WEBHOOKS: &str = "+webhooks";

/// A directory removed when dropped.
pub(crate) struct ScratchDir(pub(crate) PathBuf);

impl ScratchDir {
    pub(crate) fn new(base: &Path, what: &str) -> Result<Self> {
        let dir = base.join(format!("arbiter-bench-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where the big daemon's data directory goes: tmpfs when there is one.
fn fast_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// `count` nodes of 8 GPUs (a100), 64 CPUs and 512 GiB, in racks of 32.
pub(crate) fn nodes(count: u32) -> Vec<NodeSpec> {
    (0..count)
        .map(|i| NodeSpec {
            name: format!("n{i:04}"),
            gpu_type: "a100".into(),
            devices: (0..GPUS_PER_NODE).collect(),
            cpus: 8 * GPUS_PER_NODE,
            memory_gib: 64 * GPUS_PER_NODE,
            rack: format!("r{:02}", i / NODES_PER_RACK),
        })
        .collect()
}

/// A daemon on `nodes` in `dir` with the fake executor on a virtual clock (rounds of 30 s, runs
/// protected for 30 s: `arbiter serve`'s defaults).
fn daemon(
    dir: &Path,
    policy: PolicyKind,
    nodes: Vec<NodeSpec>,
) -> Result<(Daemon, Arc<FakeExecutor>, Arc<VirtualClock>)> {
    daemon_fairshare(dir, policy, nodes, None)
}

/// [`daemon`] with decayed fair share of `half_life_s` (`None`: none).
fn daemon_fairshare(
    dir: &Path,
    policy: PolicyKind,
    nodes: Vec<NodeSpec>,
    half_life_s: Option<f64>,
) -> Result<(Daemon, Arc<FakeExecutor>, Arc<VirtualClock>)> {
    // The bench submits its jobs as fast as it can.
    let retention = arbiter_daemon::records::retention::Retention {
        submission_burst: u32::MAX,
        ..Default::default()
    };
    daemon_settings(dir, policy, nodes, retention, |s| {
        s.fairshare_half_life_s = half_life_s
    })
}

/// [`daemon`] keeping what `retention` says of ended jobs.
pub(crate) fn daemon_with(
    dir: &Path,
    policy: PolicyKind,
    nodes: Vec<NodeSpec>,
    retention: arbiter_daemon::records::retention::Retention,
) -> Result<(Daemon, Arc<FakeExecutor>, Arc<VirtualClock>)> {
    daemon_settings(dir, policy, nodes, retention, |_| {})
}

/// [`daemon_with`], its settings changed by `change`.
pub(crate) fn daemon_settings(
    dir: &Path,
    policy: PolicyKind,
    nodes: Vec<NodeSpec>,
    retention: arbiter_daemon::records::retention::Retention,
    change: impl FnOnce(&mut Settings),
) -> Result<(Daemon, Arc<FakeExecutor>, Arc<VirtualClock>)> {
    let clock = Arc::new(VirtualClock::at(T0_MS));
    let fake = Arc::new(FakeExecutor::new(clock.clone()));
    let topology = Topology::new(nodes.clone()).map_err(|e| anyhow::anyhow!("nodes: {e}"))?;
    let settings = Settings {
        data_dir: dir.to_path_buf(),
        external: None,
        policy,
        fallback: arbiter_policy::PolicyKind::Fifo,
        round_s: 30.0,
        min_run_s: 30.0,
        gpus: topology.inventory(),
        cpus: nodes.iter().map(|n| n.cpus).max().unwrap_or(0),
        memory_gib: nodes.iter().map(|n| n.memory_gib).max().unwrap_or(0),
        public_url: "http://127.0.0.1:1".into(),
        cgroups: None,
        isolation: arbiter_daemon::security::identity::Isolation::Shared {
            acknowledged: true,
            why: "benchmark".into(),
        },
        checkpoint_roots: arbiter_daemon::security::confine::CheckpointRoots::new(&[], dir),
        wrapper_exe: "/nonexistent".into(),
        gittins_prior: Arc::new(
            arbiter_daemon::daemon::policy_support::gittins_prior(None)
                .map_err(|e| anyhow::anyhow!(e))?,
        ),
        max_processes_per_tenant: None,
        containment: arbiter_daemon::security::containment::Containment::none(),
        max_queued_per_tenant: JOBS as usize,
        priority_classes: Default::default(),
        max_array_size: 10_000,
        default_max_run_time_s: None,
        retention,
        max_log_bytes: None,
        nodes,
        clock: clock.clone(),
        fairshare_half_life_s: None,
    };
    let executor = fake.clone();
    let mut settings = settings;
    change(&mut settings);
    let daemon = Daemon::start_with(settings, move |_| executor)?;
    Ok((daemon, fake, clock))
}

/// Job `i`'s request: 1, 2, 4 or 8 GPUs (mostly small), its run time known to the policy.
fn request(i: u32) -> Result<SubmitRequest> {
    let gpus = [1, 1, 1, 1, 2, 2, 4, 8][(i % 8) as usize];
    Ok(serde_json::from_value(json!({
        "command": "python train.py --config cfg.yaml",
        "gpus": gpus,
        "name": format!("job-{i}"),
        "expected_run_time_s": work_s(i) as u64,
    }))?)
}

/// Seconds of work of job `i` (20 s to about 3 h, spread so that a few runs end per step).
fn work_s(i: u32) -> f64 {
    20.0 + f64::from((i.wrapping_mul(7919)) % 10_007)
}

fn tenant_name(t: u32) -> String {
    format!("team-{t:02}")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Serves the API of `daemon` on 127.0.0.1 from a thread of its own (the process ends it).
fn serve_api(daemon: &Daemon, admin_token: &str) -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let api = Api::new(
        daemon.clone(),
        arbiter_daemon::security::auth::sha256_hex(admin_token),
    );
    let app = router(api, 1 << 20, Duration::from_secs(60));
    let limits = ConnectionLimits {
        header_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(60),
        max_connections: 64,
        max_connections_per_client: 64,
        drain: Duration::from_secs(1),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        runtime.block_on(async move {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    serve_connections(listener, app, limits, std::future::pending::<()>()).await
                }
                Err(e) => eprintln!("daemon-scale: cannot serve the API: {e}"),
            }
        })
    });
    Ok(url)
}

/// Median milliseconds of `API_REPS` GETs of `path`, and the response's size (KiB).
fn time_get(client: &Client, path: &str) -> Result<(f64, f64)> {
    let mut times = Vec::with_capacity(API_REPS);
    let mut size = 0;
    for _ in 0..API_REPS {
        let t = Instant::now();
        size = client
            .get_text(path)
            .with_context(|| format!("GET {path}"))?
            .len();
        times.push(ms(t.elapsed()));
    }
    Ok((median(times), size as f64 / 1024.0))
}

/// The child: one policy's whole run; prints one JSON object of measurements.
pub fn run_point(point: &str) -> Result<()> {
    // `fifo+webhooks`: every tenant has a webhook whose receiver never gets anything (no
    // dispatcher runs): what recording events costs the rounds, with the outbox filling up.
    let (point, webhooks) = match point.strip_suffix(WEBHOOKS) {
        Some(name) => (name, true),
        None => (point, false),
    };
    let (point, quotas) = match point.strip_suffix(QUOTAS) {
        Some(name) => (name, true),
        None => (point, false),
    };
    let (name, fairshare) = match point.strip_suffix("+fairshare") {
        Some(name) => (name, Some(FAIRSHARE_HALF_LIFE_S)),
        None => (point, None),
    };
    let policy: PolicyKind = name
        .parse()
        .map_err(|e| anyhow::anyhow!("--point policy: {e}"))?;
    let scratch = ScratchDir::new(&fast_base(), "daemon-scale")?;
    let mut out = serde_json::Map::new();
    let mut put = |key: &str, value: Value| {
        out.insert(key.to_string(), value);
    };
    let started = Instant::now();
    let (daemon, fake, clock) = daemon_fairshare(&scratch.0, policy, nodes(NODES), fairshare)?;
    put("daemon_start_ms", json!(ms(started.elapsed())));
    let admin_token = arbiter_daemon::security::auth::new_token();
    let mut tenant_tokens = Vec::new();
    for t in 0..TENANTS {
        let token = arbiter_daemon::security::auth::new_token();
        daemon.put_tenant(Tenant {
            name: tenant_name(t),
            weight: 1.0,
            gpu_quota: None,
            token_sha256: arbiter_daemon::security::auth::sha256_hex(&token),
        })?;
        tenant_tokens.push(token);
        if webhooks {
            // Room for every event: each one is recorded (the worst case for a round).
            daemon.configure_webhooks(
                arbiter_daemon::config::WebhookConfig {
                    queue_per_tenant: 1_000_000,
                    ..Default::default()
                },
                Default::default(),
            );
            let target = arbiter_daemon::records::outbox::WebhookTarget {
                url: "http://192.0.2.1/hook".into(),
                secret: arbiter_daemon::security::webhook::Secret::generate(),
                generation: 1,
            };
            daemon.set_webhook(&tenant_name(t), Some(target))?;
        }
    }
    if quotas {
        set_quota_tree(&daemon)?;
    }
    // 1. Submissions, through the API's own call; the time of each tenth is kept.
    let mut tenths = Vec::new();
    let all = Instant::now();
    let mut tenth = Instant::now();
    for i in 0..JOBS {
        let submitted = daemon.submit(&tenant_name(i % TENANTS), request(i)?)?;
        fake.set_work(submitted.id, work_s(i), 0);
        if (i + 1) % (JOBS / 10) == 0 {
            tenths.push(tenth.elapsed().as_secs_f64());
            tenth = Instant::now();
        }
    }
    let submit_s = all.elapsed().as_secs_f64();
    put("submit_s", json!(submit_s));
    put("submissions_per_s", json!(f64::from(JOBS) / submit_s));
    put(
        "submissions_per_s_first_tenth",
        json!(f64::from(JOBS / 10) / tenths.first().copied().unwrap_or(f64::NAN)),
    );
    put(
        "submissions_per_s_last_tenth",
        json!(f64::from(JOBS / 10) / tenths.last().copied().unwrap_or(f64::NAN)),
    );
    put(
        "rss_after_submit_mib",
        json!(status_mib(None, "VmRSS").unwrap_or(0.0)),
    );
    // 2. The first round: jobs placed onto every free GPU.
    let t = Instant::now();
    daemon.tick()?;
    put("first_round_ms", json!(ms(t.elapsed())));
    let running = daemon.with_state(|s| s.jobs.iter().filter(|j| j.state.gpus().is_some()).count());
    put("running_after_first_round", json!(running));
    put(
        "free_gpus_after_first_round",
        json!(daemon.free_gpus().len()),
    );
    // 3. Steady rounds: the clock moves on, the runs whose work is done end, a round decides.
    let mut steady = Vec::new();
    let mut ended_total = 0;
    let mut now = T0_MS;
    for _ in 0..STEADY_ROUNDS {
        now += STEP_S * 1000;
        clock.set(now);
        let live_before = fake.live().len();
        fake.advance();
        ended_total += live_before - fake.live().len();
        let t = Instant::now();
        daemon.tick()?;
        steady.push(ms(t.elapsed()));
    }
    put("steady_round_ms", json!(median(steady.clone())));
    put(
        "steady_round_max_ms",
        json!(steady.iter().copied().fold(0.0, f64::max)),
    );
    put(
        "runs_ended_per_steady_round",
        json!(ended_total as f64 / STEADY_ROUNDS as f64),
    );
    // A round in which nothing changed (the loop's timer).
    let mut idle = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        daemon.tick()?;
        idle.push(ms(t.elapsed()));
    }
    put("idle_round_ms", json!(median(idle)));
    if quotas {
        // `GET /v1/quotas` works out what the running jobs hold and who borrows when asked:
        // what that costs at this scale (the admin's whole tree).
        let mut asked = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            std::hint::black_box(daemon.quota_view(None));
            asked.push(ms(t.elapsed()));
        }
        put("quota_view_ms", json!(median(asked)));
    }
    // A 10,000-task array on top: one submission (one store write), then the round that first
    // sees it (issue 29's goals: accepted in < 100 ms, no round above the first round's).
    let t = Instant::now();
    let array = daemon.submit(&tenant_name(0), serde_json::from_value(json!({ "command": "python sweep.py", "gpus": 1, "expected_run_time_s": 600, "array": format!("0-{}", ARRAY_TASKS - 1) }))?)?;
    put("array_submit_ms", json!(ms(t.elapsed())));
    for id in array.id..array.id + ARRAY_TASKS {
        fake.set_work(id, 600.0, 0);
    }
    let t = Instant::now();
    daemon.tick()?;
    put("round_after_array_ms", json!(ms(t.elapsed())));
    if webhooks {
        let (waiting, dropped) = (0..TENANTS)
            .filter_map(|t| daemon.webhook(&tenant_name(t)))
            .fold((0, 0), |(w, d), (_, health, pending)| {
                (w + pending, d + health.dropped)
            });
        put("webhook_events_waiting", json!(waiting));
        put("webhook_events_dropped", json!(dropped));
    }
    let (queued, counters) = daemon.with_state(|s| {
        (
            s.jobs.iter().filter(|j| j.state.name() == "queued").count(),
            s.counters.clone(),
        )
    });
    put("queued_at_end", json!(queued));
    put("runs_started", json!(counters.runs_started));
    put("preemptions", json!(counters.preemptions));
    // 4. A restart on the same store (as after `kill -9`): every job read back, the runs
    //    re-adopted through the executor.
    let settings = (*daemon.settings).clone();
    drop(daemon);
    let t = Instant::now();
    let executor = fake.clone();
    let daemon = Daemon::start_with(settings, move |_| executor)?;
    put("restart_ms", json!(ms(t.elapsed())));
    // 5. The API over HTTP, with the real router and auth.
    let url = serve_api(&daemon, &admin_token)?;
    let admin = Client::new(&url, &admin_token);
    let tenant = Client::new(&url, &tenant_tokens[3]);
    let mid = JOBS / 2;
    let requests: [(&str, &Client, String); 9] = [
        ("list_first_page", &admin, "/v1/jobs?limit=1000".to_string()),
        (
            "list_middle_page",
            &admin,
            format!("/v1/jobs?limit=1000&after={mid}"),
        ),
        (
            "list_queued_middle_page",
            &admin,
            format!("/v1/jobs?state=queued&limit=1000&after={mid}"),
        ),
        (
            "list_tenant_first_page",
            &tenant,
            "/v1/jobs?limit=1000".to_string(),
        ),
        (
            "list_tenant_middle_page",
            &tenant,
            format!("/v1/jobs?limit=1000&after={mid}"),
        ),
        ("show_job", &admin, format!("/v1/jobs/{mid}")),
        ("cluster", &admin, "/v1/cluster".to_string()),
        ("dashboard", &admin, "/v1/dashboard".to_string()),
        ("metrics", &admin, "/metrics".to_string()),
    ];
    // One of each first (connections opened, pages faulted in).
    for (_, client, path) in &requests {
        client
            .get_text(path)
            .with_context(|| format!("GET {path}"))?;
    }
    for (key, client, path) in &requests {
        let (time, kib) = time_get(client, path)?;
        put(&format!("{key}_ms"), json!(time));
        put(&format!("{key}_kib"), json!(kib));
    }
    put("peak_rss_mib", json!(peak_rss_mib().unwrap_or(0.0)));
    outln!("{}", Value::Object(out));
    Ok(())
}

/// Submissions per second to a daemon whose store is on disk (each one committed, fsync'd).
fn disk_submissions_per_s() -> Result<(f64, PathBuf)> {
    let base = std::env::temp_dir();
    let scratch = ScratchDir::new(&base, "daemon-disk")?;
    let (daemon, _fake, _clock) = daemon(&scratch.0, PolicyKind::Fifo, nodes(1))?;
    daemon.put_tenant(Tenant {
        name: tenant_name(0),
        weight: 1.0,
        gpu_quota: None,
        token_sha256: arbiter_daemon::security::auth::sha256_hex("x"),
    })?;
    let t = Instant::now();
    for i in 0..DISK_JOBS {
        daemon.submit(&tenant_name(0), request(i)?)?;
    }
    Ok((f64::from(DISK_JOBS) / t.elapsed().as_secs_f64(), base))
}

/// `arbiter usage` over a million recorded runs: a store filled with `USAGE_ROWS` rows (10
/// tenants, 40 users, 2 GPU types, over 90 days), then the report as `GET /v1/usage` makes it
/// (`Daemon::usage_report`), median of 3, by tenant over all time, by day over 30 days, by
/// tenant and user over 7 days; and a daemon start on that store (it sums the rows for the
/// metrics and the fair share).
fn usage_report_times() -> Result<Vec<(String, f64)>> {
    use arbiter_daemon::records::usage::{GroupBy, RunUsage, row_key};
    let scratch = ScratchDir::new(&fast_base(), "usage")?;
    let (daemon, _fake, _clock) = daemon(&scratch.0, PolicyKind::Fifo, nodes(1))?;
    let now_s = (T0_MS / 1000) as i64;
    let span_s = 90 * 86_400;
    let batch = 100_000;
    let mut rows = Vec::with_capacity(batch as usize);
    for start in (0..USAGE_ROWS).step_by(batch as usize) {
        rows.clear();
        for i in start..(start + batch).min(USAGE_ROWS) {
            let begins = now_s - span_s + i64::from(i) * span_s / i64::from(USAGE_ROWS);
            let run = RunUsage {
                job: i,
                tenant: tenant_name(i % TENANTS),
                user: format!("user{:02}", i % 40),
                gpu_type: if i % 3 == 0 { "h100" } else { "a100" }.into(),
                gpus: [1, 1, 2, 4, 8][(i % 5) as usize],
                cpus: 16.0,
                memory_gib: 128.0,
                started_unix_s: begins,
                ended_unix_s: begins + 600 + i64::from(i % 7200),
            };
            rows.push((row_key(i, 1), run));
        }
        daemon.store_for_bench().put_usage_rows(&rows)?;
    }
    let settings = (*daemon.settings).clone();
    drop(daemon);
    let t = Instant::now();
    let daemon = Daemon::start_with(settings, |_| {
        Arc::new(FakeExecutor::new(Arc::new(VirtualClock::at(T0_MS))))
    })?;
    let mut out = vec![(
        "daemon start on 1,000,000 usage rows".to_string(),
        ms(t.elapsed()),
    )];
    let cases: [(&str, Vec<GroupBy>, i64); 3] = [
        ("by tenant, all time", vec![GroupBy::Tenant], i64::MIN),
        (
            "by day, last 30 days",
            vec![GroupBy::Day],
            now_s - 30 * 86_400,
        ),
        (
            "by tenant and user, last 7 days",
            vec![GroupBy::Tenant, GroupBy::User],
            now_s - 7 * 86_400,
        ),
    ];
    for (label, by, since) in cases {
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let rows = daemon.usage_report(None, by.clone(), since)?;
            times.push(ms(t.elapsed()));
            if rows.is_empty() {
                bail!("usage report {label}: no rows");
            }
        }
        out.push((
            format!("arbiter usage over 1,000,000 runs, {label}"),
            median(times),
        ));
    }
    Ok(out)
}

/// The rows printed: (key, label, unit, decimals).
const ROWS: [(&str, &str, &str, usize); 33] = [
    ("daemon_start_ms", "daemon start (empty store)", "ms", 1),
    (
        "submit_s",
        "submit 100,000 jobs (Daemon::submit, one after another)",
        "s",
        1,
    ),
    ("submissions_per_s", "  submissions/s, all", "/s", 0),
    (
        "submissions_per_s_first_tenth",
        "  submissions/s, first 10,000",
        "/s",
        0,
    ),
    (
        "submissions_per_s_last_tenth",
        "  submissions/s, last 10,000",
        "/s",
        0,
    ),
    ("rss_after_submit_mib", "RSS with 100,000 queued", "MiB", 0),
    (
        "first_round_ms",
        "first round: 100,000 queued, 8,000 free GPUs (once)",
        "ms",
        1,
    ),
    ("running_after_first_round", "  runs started by it", "", 0),
    ("free_gpus_after_first_round", "  GPUs left free", "", 0),
    (
        "steady_round_ms",
        "steady round (10 s apart, some runs end), median of 15",
        "ms",
        1,
    ),
    ("steady_round_max_ms", "  max of 15", "ms", 1),
    (
        "runs_ended_per_steady_round",
        "  runs ended per round, mean",
        "",
        1,
    ),
    (
        "idle_round_ms",
        "round with nothing new, median of 5",
        "ms",
        1,
    ),
    (
        "quota_view_ms",
        "GET /v1/quotas (+quotas: held GPUs, borrowers worked out then), median of 5",
        "ms",
        1,
    ),
    (
        "array_submit_ms",
        "a 10,000-task array accepted (one submission)",
        "ms",
        1,
    ),
    (
        "round_after_array_ms",
        "  the round that first sees it",
        "ms",
        1,
    ),
    (
        "webhook_events_waiting",
        "webhook events recorded, waiting (+webhooks)",
        "",
        0,
    ),
    ("webhook_events_dropped", "  dropped (outbox full)", "", 0),
    ("preemptions", "preemptions over all rounds", "", 0),
    (
        "restart_ms",
        "restart on that store (jobs read back, runs re-adopted)",
        "ms",
        0,
    ),
    (
        "list_first_page_ms",
        "GET /v1/jobs?limit=1000 (admin), median of 15",
        "ms",
        1,
    ),
    (
        "list_middle_page_ms",
        "GET /v1/jobs?limit=1000&after=50000 (admin)",
        "ms",
        1,
    ),
    (
        "list_queued_middle_page_ms",
        "GET /v1/jobs?state=queued&limit=1000&after=50000",
        "ms",
        1,
    ),
    (
        "list_tenant_first_page_ms",
        "GET /v1/jobs?limit=1000 (a tenant, 1 in 10 jobs)",
        "ms",
        1,
    ),
    (
        "list_tenant_middle_page_ms",
        "GET /v1/jobs?limit=1000&after=50000 (a tenant)",
        "ms",
        1,
    ),
    ("list_first_page_kib", "  a page of 1,000 jobs", "KiB", 0),
    ("show_job_ms", "GET /v1/jobs/50000", "ms", 2),
    ("cluster_ms", "GET /v1/cluster (admin)", "ms", 1),
    ("cluster_kib", "  its size", "KiB", 0),
    ("dashboard_ms", "GET /v1/dashboard (admin)", "ms", 1),
    ("dashboard_kib", "  its size", "KiB", 0),
    ("metrics_ms", "GET /metrics", "ms", 1),
    ("peak_rss_mib", "peak RSS (VmHWM) of the process", "MiB", 0),
];

/// The parent: each policy in a child process, then the disk's submission rate.
pub fn run(json_out: bool) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut results: Vec<(&str, Value)> = Vec::new();
    for policy in POLICIES {
        if !json_out {
            eprintln!(
                "daemon-scale: {policy}: {JOBS} jobs on {NODES} nodes × {GPUS_PER_NODE} GPUs ..."
            );
        }
        let output = std::process::Command::new(&exe)
            .args(["bench", "--suite", "daemon-scale", "--point", policy])
            .stderr(std::process::Stdio::inherit())
            .output()
            .context("running the benchmark's child")?;
        if !output.status.success() {
            bail!("daemon-scale under {policy} failed ({})", output.status);
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let measured: Value = serde_json::from_str(text.trim()).context("the child's output")?;
        results.push((policy, measured));
    }
    let (disk_rate, disk_dir) = disk_submissions_per_s()?;
    if !json_out {
        eprintln!("daemon-scale: arbiter usage over {USAGE_ROWS} recorded runs ...");
    }
    let usage = usage_report_times()?;
    let data_dir = fast_base();
    if json_out {
        let by_policy: serde_json::Map<String, Value> = results
            .iter()
            .map(|(p, v)| (p.to_string(), v.clone()))
            .collect();
        let doc = json!({
            "daemon-scale": {
                "nodes": NODES, "gpus": NODES * GPUS_PER_NODE, "jobs": JOBS, "tenants": TENANTS,
                "data_dir": data_dir, "policies": by_policy,
                "disk": { "dir": disk_dir, "jobs": DISK_JOBS, "submissions_per_s": disk_rate },
                "usage_ms": usage.iter().map(|(label, v)| (label.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            }
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    outln!(
        "daemon at scale: {JOBS} jobs of {TENANTS} tenants on {NODES} nodes × {GPUS_PER_NODE} GPUs (fake executor, virtual clock; store in {})",
        data_dir.display()
    );
    let width = ROWS
        .iter()
        .map(|(_, label, _, _)| label.chars().count())
        .max()
        .unwrap_or(0);
    let header: Vec<String> = results.iter().map(|(p, _)| format!("{p:>14}")).collect();
    outln!("{:<width$} {}", "", header.join(" "));
    for (key, label, unit, decimals) in ROWS {
        let cells: Vec<String> = results
            .iter()
            .map(|(_, v)| match v[key].as_f64() {
                Some(x) => format!("{x:>14.decimals$}"),
                None => format!("{:>14}", "-"),
            })
            .collect();
        outln!("{label:<width$} {} {unit}", cells.join(" "));
    }
    outln!(
        "submissions/s with the store on disk ({}, {DISK_JOBS} jobs, one fsync'd transaction each): {disk_rate:.0}",
        disk_dir.display()
    );
    for (label, v) in usage {
        outln!("{label}: {v:.0} ms");
    }
    Ok(())
}
