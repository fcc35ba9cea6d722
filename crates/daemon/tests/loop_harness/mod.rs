//! A daemon stepped by hand: the recording fake executor, a virtual clock, a data directory in
//! a temporary folder. Shared by the daemon's loop tests.
#![allow(dead_code)] // each test binary uses part of it

use arbiter_daemon::clock::VirtualClock;
use arbiter_daemon::daemon::{Daemon, Settings};
use arbiter_daemon::executor::fake::FakeExecutor;
use arbiter_daemon::records::job::{JobRecord, SubmitRequest};
use arbiter_daemon::records::topology::{NodeSpec, Topology};
use arbiter_daemon::security::confine::CheckpointRoots;
use arbiter_daemon::security::identity::Isolation;
use arbiter_policy::PolicyKind;
use std::sync::Arc;

/// Tenants every harness has.
pub const TENANTS: [&str; 5] = ["a", "b", "c", "t", "u"];

/// Virtual Unix time of the harness's start (ms).
pub const T0_MS: u64 = 1_700_000_000_000;

/// A daemon, its fake executor and its clock.
pub struct Harness {
    pub daemon: Daemon,
    pub fake: Arc<FakeExecutor>,
    pub clock: Arc<VirtualClock>,
    _dir: tempfile::TempDir,
}

/// `count` nodes of `gpus` GPUs of `gpu_type` each, 8 CPUs and 32 GiB per GPU.
pub fn nodes(prefix: &str, gpu_type: &str, count: u32, gpus: u32) -> Vec<NodeSpec> {
    (0..count)
        .map(|i| NodeSpec {
            name: format!("{prefix}{i}"),
            gpu_type: gpu_type.into(),
            devices: (0..gpus).collect(),
            cpus: 8 * gpus,
            memory_gib: 32 * gpus,
            rack: "r0".into(),
        })
        .collect()
}

impl Harness {
    /// A daemon on `nodes` under `policy`, with no minimum run time and rounds of `round_s`.
    pub fn new(policy: PolicyKind, nodes: Vec<NodeSpec>, round_s: f64) -> Self {
        Self::with_settings(policy, nodes, round_s, |_| {})
    }

    /// [`Harness::new`] with settings `change` makes.
    pub fn with_settings(
        policy: PolicyKind,
        nodes: Vec<NodeSpec>,
        round_s: f64,
        change: impl FnOnce(&mut Settings),
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(VirtualClock::at(T0_MS));
        let fake = Arc::new(FakeExecutor::new(clock.clone()));
        let topology = Topology::new(nodes.clone()).expect("valid nodes");
        let settings = Settings {
            data_dir: dir.path().to_path_buf(),
            // `external` decides through the example agent (SJF), as `arbiter serve --policy-cmd`.
            external: (policy == arbiter_policy::PolicyKind::External).then(|| {
                arbiter_policy::external::ExternalConfig {
                    command: format!(
                        "python3 {}/../../python/examples/sjf_agent.py",
                        env!("CARGO_MANIFEST_DIR")
                    ),
                    timeout: std::time::Duration::from_secs(10),
                }
            }),
            policy,
            fallback: PolicyKind::Fifo,
            round_s,
            min_run_s: 0.0,
            gpus: topology.inventory(),
            cpus: nodes.iter().map(|n| n.cpus).sum(),
            memory_gib: nodes.iter().map(|n| n.memory_gib).sum(),
            public_url: "http://127.0.0.1:1".into(),
            cgroups: None,
            isolation: Isolation::Shared {
                acknowledged: true,
                why: "test".into(),
            },
            checkpoint_roots: CheckpointRoots::new(&[], dir.path()),
            wrapper_exe: "/nonexistent".into(),
            gittins_prior: Arc::new(
                arbiter_daemon::daemon::policy_support::gittins_prior(None).expect("bundled prior"),
            ),
            max_processes_per_tenant: None,
            containment: arbiter_daemon::security::containment::Containment::none(),
            max_queued_per_tenant: 100_000,
            priority_classes: Default::default(),
            max_array_size: 10_000,
            default_max_run_time_s: None,
            // Tests submit as fast as they like (the budget's own tests say otherwise).
            retention: arbiter_daemon::records::retention::Retention {
                submission_burst: u32::MAX,
                ..Default::default()
            },
            max_log_bytes: None,
            nodes,
            clock: clock.clone(),
            fairshare_half_life_s: None,
        };
        let mut settings = settings;
        change(&mut settings);
        let executor = fake.clone();
        let daemon = Daemon::start_with(settings, move |_| executor).expect("daemon starts");
        // The tenants the tests submit for (a submission for a tenant that does not exist is
        // refused).
        for name in TENANTS {
            let tenant = arbiter_daemon::records::store::Tenant {
                name: name.into(),
                weight: 1.0,
                gpu_quota: None,
                token_sha256: format!("token of {name}"),
            };
            daemon.put_tenant(tenant).expect("tenant added");
        }
        Harness {
            daemon,
            fake,
            clock,
            _dir: dir,
        }
    }

    /// Stops this daemon and starts another on the same data directory, clock and fake executor
    /// (as after `kill -9` and a restart).
    pub fn restart(self) -> Self {
        let policy = self.daemon.settings.policy;
        self.restart_with(policy)
    }

    /// [`Harness::restart`] under another policy.
    pub fn restart_with(self, policy: PolicyKind) -> Self {
        self.restart_with_settings(|settings| settings.policy = policy)
    }

    /// [`Harness::restart`] with settings `change` makes.
    pub fn restart_with_settings(self, change: impl FnOnce(&mut Settings)) -> Self {
        let Harness {
            daemon,
            fake,
            clock,
            _dir,
        } = self;
        let mut settings = (*daemon.settings).clone();
        change(&mut settings);
        drop(daemon);
        let executor = fake.clone();
        let daemon = Daemon::start_with(settings, move |_| executor).expect("daemon restarts");
        Harness {
            daemon,
            fake,
            clock,
            _dir,
        }
    }

    /// Reports progress for job `id` with its run's token, as the job would.
    pub fn report(
        &self,
        id: u32,
        steps: u64,
        throughput: f64,
    ) -> Result<(), arbiter_daemon::daemon::RequestError> {
        let token = self.fake.token(id).expect("the job has run");
        self.daemon.report_progress(
            id,
            &token,
            arbiter_daemon::records::progress::ProgressReport {
                steps,
                throughput: Some(throughput),
                total_steps: None,
            },
        )
    }

    /// Submits a job for tenant `t` from a JSON request.
    pub fn submit(&self, request: &str) -> u32 {
        let request: SubmitRequest = serde_json::from_str(request).expect("valid request");
        self.daemon.submit("t", request).expect("accepted").id
    }

    /// Submits a job for `tenant` from a JSON request (refusals are returned).
    pub fn submit_as(
        &self,
        tenant: &str,
        request: &str,
    ) -> Result<u32, arbiter_daemon::daemon::RequestError> {
        let request: SubmitRequest = serde_json::from_str(request).expect("valid request");
        self.daemon.submit(tenant, request).map(|s| s.id)
    }

    /// Sets `tenant`'s GPU quota (`None`: none), as `arbiter tenants update` does.
    pub fn set_quota(&self, tenant: &str, gpu_quota: Option<u32>) {
        let mut record = self.daemon.tenant(tenant).expect("a tenant");
        record.gpu_quota = gpu_quota;
        self.daemon.put_tenant(record).expect("tenant updated");
    }

    /// Sets `tenant`'s weight, as `arbiter tenants update` does.
    pub fn set_weight(&self, tenant: &str, weight: f64) {
        let mut record = self.daemon.tenant(tenant).expect("a tenant");
        record.weight = weight;
        self.daemon.put_tenant(record).expect("tenant updated");
    }

    /// Moves the clock to `ms`, lets due runs end, and runs one round.
    pub fn step_to(&self, ms: u64) {
        self.clock.set(ms);
        self.fake.advance();
        self.daemon.tick().expect("round");
    }

    /// A job's record.
    pub fn job(&self, id: u32) -> JobRecord {
        self.daemon.job(id, None).expect("job")
    }
}

/// Seconds after the harness's start at which the job first started and at which it ended (the
/// first `running` transition and its last one).
pub fn start_end_s(job: &JobRecord) -> (Option<i64>, Option<i64>) {
    let t0 = (T0_MS / 1000) as i64;
    let start = job
        .history
        .iter()
        .find(|t| t.to == arbiter_daemon::records::job::StateKind::Running)
        .map(|t| t.at_unix_s - t0);
    let end = job
        .state
        .is_terminal()
        .then(|| job.history.last().map(|t| t.at_unix_s - t0))
        .flatten();
    (start, end)
}
