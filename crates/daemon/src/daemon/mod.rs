//! The daemon's state and scheduling loop.
//!
//! ```text
//!   submit / job end / cancel / round timer ──► tick: snapshot ──► policy.schedule (the
//!   simulator's code) ──► diff against what runs ──► persist ──► act (spawn, signal)
//! ```
//!
//! One mutex guards the state; nothing awaits while holding it. Every change of a job's state is
//! written to the store before the daemon acts on it and before memory shows it, so after a crash
//! the store never claims less than happened: a run the store calls running is re-adopted if its
//! process group lives, else concluded from its exit file (`daemon/recovery.rs`). Runs are started and
//! stopped in `daemon/runs.rs`; the policy's view of the jobs is built in `records/view.rs`; tenants and their
//! unix identities are managed in `daemon/tenants.rs`.

pub(crate) mod arrays;
pub(crate) mod dependencies;
pub(crate) mod history;
pub(crate) mod opportunistic;
pub mod policy_support;
pub(crate) mod quotas;
pub(crate) mod recovery;
pub(crate) mod reservations;
pub(crate) mod round;
pub(crate) mod runs;
pub(crate) mod tenants;
pub mod usage;
pub mod webhooks;

use crate::clock::Clock;
use crate::config::GpuInventory;
use crate::executor::Executor;
use crate::executor::local::LocalExecutor;
use crate::records::array::{ArraySpec, ArrayTask};
use crate::records::job::{FieldError, JobRecord, JobState, Limits, StopReason, SubmitRequest};
use crate::records::store::{Store, StoreError, Tenant};
use crate::records::topology::{NodeSpec, Topology};
use crate::records::view;
use crate::security::cgroup::Cgroups;
use crate::security::confine::CheckpointRoots;
use crate::security::datadir::{DataDir, Reconciled};
use crate::security::identity::{Isolation, UnixIdentity};
use arbiter_model::{Cluster, JobSpec, SimTime};
use arbiter_policy::{Policy, PolicyKind};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// What the daemon was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Data directory.
    pub data_dir: PathBuf,
    /// With the `external` policy: its agent.
    pub external: Option<arbiter_policy::external::ExternalConfig>,
    /// Policy.
    pub policy: PolicyKind,
    /// The built-in policy that decides a round `policy` could not (`policy_fallback`).
    pub fallback: PolicyKind,
    /// Seconds between rounds.
    pub round_s: f64,
    /// Seconds a started run is protected from preemption, unless the job says otherwise.
    pub min_run_s: f64,
    /// GPUs by type, in type order (over all nodes).
    pub gpus: GpuInventory,
    /// CPU cores.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// URL jobs reach the API at.
    pub public_url: String,
    /// The cgroup v2 subtree limits are enforced with, where the machine allows it.
    pub cgroups: Option<Cgroups>,
    /// How tenants' runs are isolated from each other.
    pub isolation: Isolation,
    /// Where checkpoint directories may be.
    pub checkpoint_roots: CheckpointRoots,
    /// The run wrapper: this binary (`arbiter job-wrapper`), by absolute path.
    pub wrapper_exe: PathBuf,
    /// The Gittins prior (GPU-seconds).
    pub gittins_prior: Arc<Vec<f64>>,
    /// RLIMIT_NPROC for a tenant's uid (None: no limit).
    pub max_processes_per_tenant: Option<u64>,
    /// What confines runs beyond their identity (process limit, PID namespaces, memory), as
    /// stated at start and in `/v1/cluster`.
    pub containment: crate::security::containment::Containment,
    /// Most jobs one tenant may have queued or running.
    pub max_queued_per_tenant: usize,
    /// Most tasks one job array may have (`max_array_size`).
    pub max_array_size: usize,
    /// The time limit of a job without `max_run_time_s`, for reservations: such a job is
    /// placed on a reserved node only if it would end before the start (`None`: unbounded).
    pub default_max_run_time_s: Option<u64>,
    /// The priority classes jobs may be submitted in (empty: every job in one class).
    pub priority_classes: crate::config::PriorityClasses,
    /// What a tenant keeps of its ended jobs, and how fast it may submit.
    pub retention: crate::records::retention::Retention,
    /// Most bytes one run may add to its job's log (None: no limit).
    pub max_log_bytes: Option<u64>,
    /// The cluster's nodes (one machine, declared nodes, or a Slurm partition's).
    pub nodes: Vec<NodeSpec>,
    /// The daemon's clock (the system's; a virtual one in tests).
    pub clock: Arc<dyn Clock>,
    /// Half-life of the decayed fair share, seconds, when the policy weighs tenants by their
    /// past usage (`fairshare = true`; only `hierarchical` and `vtc` do).
    pub fairshare_half_life_s: Option<f64>,
}

/// A run the daemon watches.
#[derive(Clone, Debug)]
pub(crate) struct Watched {
    /// The run's handle (the executor's: a process id, a Slurm job id).
    pub(crate) handle: u32,
    /// When SIGKILL follows the checkpoint signal (then again every 200 ms until the run's
    /// session is empty).
    pub(crate) kill_at_ms: Option<u64>,
    /// Whether SIGKILL was sent (it is said once in the log).
    pub(crate) sigkilled: bool,
}

/// Counters for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Submissions accepted.
    pub submitted: u64,
    /// Runs started.
    pub runs_started: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Scheduling rounds.
    pub rounds: u64,
    /// Wall time spent in scheduling rounds of the loop, microseconds (a measurement only).
    pub round_us_sum: u64,
    /// Milliseconds from submission to first start, summed, and how many.
    pub start_latency_ms_sum: u64,
    /// Jobs counted in the sum.
    pub start_latency_count: u64,
    /// Rounds the policy (or its agent) could not decide, decided by `policy_fallback`.
    pub fallback_rounds: u64,
    /// Rounds whose decision was one by changes: the policy, offered the present, listed only
    /// what starts.
    pub rounds_by_changes: u64,
}

/// Everything mutable.
pub struct State {
    /// Jobs by id (dense: job `i` is at slot `i`; a pruned job's slot is empty).
    pub jobs: crate::records::jobs::Jobs,
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Counters.
    pub counters: Counters,
    pub(crate) specs: Vec<JobSpec>,
    pub(crate) topology: Topology,
    /// The configured policy, when it is built in (`None` with `external`: the agent is asked
    /// outside the state lock, see [`Daemon::agent`]).
    pub(crate) policy: Option<Box<dyn Policy>>,
    /// Decides a round the policy (or the agent) could not.
    pub(crate) fallback: Box<dyn Policy>,
    /// With `external`: jobs that ended since the agent was last asked, told to it before the
    /// next observation (its reward counts them).
    pub(crate) agent_finished: Vec<(JobSpec, arbiter_model::ActiveJob, SimTime)>,
    pub(crate) watched: BTreeMap<u32, Watched>,
    /// When the policy asked to be called again.
    pub(crate) wake_at_ms: Option<u64>,
    /// Tenants whose checkpoint area is ready, with the identity their runs execute as.
    pub(crate) identities: BTreeMap<String, Option<UnixIdentity>>,
    /// Every automatic uid ever handed out (never reused, even after a tenant is removed).
    pub(crate) allocated_uids: BTreeMap<String, u32>,
    /// Idempotency keys: (tenant, client_request_id) → job.
    pub(crate) requests: BTreeMap<(String, String), u32>,
    /// Jobs whose last change the store refused; written again at the next round.
    pub(crate) dirty: BTreeSet<u32>,
    /// Per tenant: its jobs queued, running or stopping (a submission checks
    /// `max_queued_per_tenant` against it). Counted at start; one more at each submission, one
    /// less when a job ends for good (`run_ended`, a cancel while queued) — an ended job never
    /// comes back.
    pub(crate) live_by_tenant: BTreeMap<String, usize>,
    /// When the current scheduling round began (Unix ms).
    pub(crate) round_started_ms: u64,
    /// When the process table was last searched for escaped processes (Unix ms), and whether a
    /// run has ended since (then it is searched at the next round).
    pub(crate) strays_checked_ms: u64,
    pub(crate) run_ended_since_check: bool,
    /// Tenants with a run that ended since the last search.
    pub(crate) ended_tenants: BTreeSet<String>,
    /// Checks the policy's decisions by the simulator's rules.
    pub(crate) planner: arbiter_model::Planner,
    /// The learned co-location table (`records/pairs.rs`), and whether it changed since the policy was
    /// last given it.
    pub(crate) pairs: crate::records::pairs::PairTable,
    pub(crate) pairs_changed: bool,
    /// Whether the last round's decision was the policy's and was carried out whole: the
    /// running jobs have since changed only by it and by runs that ended. Only then is the
    /// policy offered the present (`SchedulerView::current`): a policy may keep what it learned
    /// of the present between such rounds (the quota tree keeps its tenants' running GPUs).
    pub(crate) present_exact: bool,
    /// Jobs the last round offered the policy: the next round's list is made that size at
    /// once (grown by doubling, a list of 100,000 was copied over and over).
    pub(crate) offered_last_round: usize,
    /// The quota tree the holds kept as waiting reasons (`Jobs::set_quota_reason`) were worded
    /// under: when the policy's tree is another, they are forgotten.
    pub(crate) worded_quota_tree: Option<arbiter_policy::quotas::QuotaTree>,
    /// Per job holding GPUs: the other jobs on its GPUs and since when (Unix ms) — its reports
    /// count for the co-location table once that has lasted `pairs::SETTLE_S`.
    pub(crate) sharing_since: BTreeMap<u32, (Vec<u32>, u64)>,
    /// Per tenant, its ended jobs on record, oldest end first (`records/retention.rs`).
    pub(crate) ended: BTreeMap<String, crate::records::retention::Ended>,
    /// When a progress report was last written durably (Unix ms; see `report_progress`).
    pub(crate) progress_synced_ms: u64,
    /// Per tenant, its submission budget (`records/retention.rs`).
    pub(crate) submission_budget: BTreeMap<String, crate::records::retention::Budget>,
    /// Queued jobs whose dependencies have not all held yet, with them (`dependencies.rs`):
    /// not offered to the policy.
    pub(crate) dependent: BTreeMap<u32, arbiter_model::Dependencies>,
    /// Job arrays by id (`records/array.rs`): their tasks' ids and running limit.
    pub(crate) arrays: BTreeMap<u32, crate::records::array::ArrayIds>,
    /// Reservations and maintenance windows (`reservations.rs`), over ones included until
    /// deleted.
    pub(crate) reservations: Vec<crate::records::reservation::Reservation>,
    /// The quota tree's groups as stored (`quotas.rs`), and why they are not enforced when they
    /// do not fit the cluster (nodes taken out of the configuration since).
    pub(crate) quota_groups: Vec<arbiter_policy::quotas::QuotaGroup>,
    pub(crate) quota_error: Option<String>,
    /// Whether some job's spec carries nodes to avoid (cleared when none does).
    pub(crate) avoiding: bool,
    /// What every accounted run used, summed (`daemon/usage.rs`).
    pub usage: usage::UsageTotals,
}

/// The external agent, or `None` when it failed and is to be started again.
pub(crate) type AgentSlot = Mutex<Option<Box<dyn arbiter_policy::Policy>>>;

/// The daemon: state, store, settings and the wake-up for the loop.
#[derive(Clone)]
pub struct Daemon {
    pub(crate) state: Arc<Mutex<State>>,
    pub(crate) store: Arc<Store>,
    /// Settings.
    pub settings: Arc<Settings>,
    pub(crate) wake: Arc<Notify>,
    /// Carries runs out.
    pub(crate) executor: Arc<dyn Executor>,
    /// With `policy = "external"`: the agent, asked with the state unlocked (it may take up to
    /// its timeout; the API must not wait for it). `None` inside: to be started again.
    pub(crate) agent: Option<Arc<AgentSlot>>,
    /// Held for a whole scheduling round: rounds never overlap, also while the state is unlocked
    /// for the agent.
    pub(crate) round: Arc<Mutex<()>>,
    /// Delivers tenants' webhook events (`webhooks.rs`).
    pub(crate) webhooks: Arc<webhooks::Webhooks>,
    /// Held for the daemon's life: no second daemon on the same data directory.
    _data_dir: Arc<DataDir>,
}

/// A daemon failure.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data directory cannot be used.
    #[error(transparent)]
    DataDir(#[from] crate::security::datadir::DataDirError),
    /// Bad settings.
    #[error("{0}")]
    Config(String),
}

/// Why an API call cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No such job.
    #[error("no job {0}")]
    NotFound(u32),
    /// Not the caller's job.
    #[error("job {0} belongs to another tenant")]
    Forbidden(u32),
    /// Bad input.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The job has ended.
    #[error("job {0} has already ended")]
    Ended(u32),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// The daemon cannot take writes now (the store is read-only after an I/O error such as a
    /// full disk); nothing was changed. Maps to 503.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The request conflicts with what exists (an idempotency key reused with a different
    /// request, a tenant that already exists). Maps to 409.
    #[error("{0}")]
    Conflict(String),
    /// A progress report with a token that is not the one of the job's current run. Maps to 403.
    #[error("not the token of job {0}'s current run")]
    WrongJobToken(u32),
    /// Over a limit (queued jobs per tenant). Maps to 429.
    #[error("{0}")]
    TooMany(String),
}

impl From<StoreError> for RequestError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(reason) => RequestError::Unavailable(reason),
            other => RequestError::Store(other),
        }
    }
}

/// What a submission created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The job's id (an array's: its first task's).
    pub id: u32,
    /// True when the submission repeated an earlier one with the same `client_request_id`
    /// (idempotency key): nothing new was created and `id` is the earlier job's.
    pub duplicate: bool,
    /// With an array: how many tasks it has.
    pub tasks: Option<u32>,
}

impl From<DaemonError> for RequestError {
    fn from(e: DaemonError) -> Self {
        match e {
            DaemonError::Store(s) => s.into(),
            other => RequestError::Store(StoreError::Database(other.to_string())),
        }
    }
}

impl Daemon {
    /// Starts the daemon with the local executor (runs are process sessions on this machine).
    pub fn start(settings: Settings) -> Result<Self, DaemonError> {
        let runs_dir = settings.data_dir.join("runs");
        let (wrapper, cgroups) = (settings.wrapper_exe.clone(), settings.cgroups.clone());
        let confinement = settings.containment.run_confinement();
        Self::start_with(settings, move |wake| {
            Arc::new(LocalExecutor::new(runs_dir, wrapper, cgroups, wake).confined(confinement))
        })
    }

    /// Locks the data directory, opens the store (refusing one that does not match the
    /// directory), rebuilds the state, re-adopts or concludes runs left from a previous daemon
    /// through the executor `make_executor` builds (it gets the loop's wake-up, to call when a
    /// run ends), and returns the daemon (call [`Daemon::run_loop`] to schedule).
    pub fn start_with(
        settings: Settings,
        make_executor: impl FnOnce(Arc<Notify>) -> Arc<dyn Executor>,
    ) -> Result<Self, DaemonError> {
        let wake = Arc::new(Notify::new());
        let executor = make_executor(wake.clone());
        if let Some(reason) =
            crate::daemon::policy_support::unsupported(settings.policy, executor.capabilities())
        {
            return Err(DaemonError::Config(format!(
                "policy {} cannot run on the {} executor: {reason}",
                settings.policy,
                executor.name()
            )));
        }
        if let Some(reason) =
            crate::daemon::policy_support::unsupported(settings.fallback, executor.capabilities())
        {
            return Err(DaemonError::Config(format!(
                "policy_fallback {} cannot run on the {} executor: {reason}",
                settings.fallback,
                executor.name()
            )));
        }
        let data_dir = DataDir::open(&settings.data_dir, settings.isolation.is_isolated())?;
        let before = data_dir.leftovers();
        let store_path = data_dir.store_path();
        let store_existed = std::fs::metadata(&store_path).is_ok_and(|m| m.len() > 0);
        let store = Store::open(&store_path).map_err(|e| {
            DaemonError::Config(format!(
                "{}: {e}. If the store is damaged, restore it from a backup, or move the data directory aside (`mv {dir} {dir}.old`) to start afresh",
                store_path.display(),
                dir = data_dir.path.display()
            ))
        })?;
        crate::security::datadir::set_mode(&store_path, 0o600)?;
        let jobs = store.jobs()?;
        if let Reconciled::New(id) =
            data_dir.reconcile(&before, store_existed, store.store_id()?, !jobs.is_empty())?
        {
            store.set_store_id(id)?;
        }
        // Ids are given out in order and never again; a pruned job's id has no record.
        if let Some(pair) = jobs.windows(2).find(|w| w[0].id >= w[1].id) {
            return Err(StoreError::Corrupt(format!(
                "job records out of order: job {} before job {}",
                pair[0].id, pair[1].id
            ))
            .into());
        }
        let next = store.next_job_id()?;
        if let Some(last) = jobs.last().filter(|j| j.id >= next) {
            return Err(StoreError::Corrupt(format!(
                "the store's next job id is {next} but it holds job {}",
                last.id
            ))
            .into());
        }
        let mut jobs = crate::records::jobs::Jobs::from_records(jobs);
        jobs.extend_to(next as usize);
        settings
            .checkpoint_roots
            .prepare(settings.isolation.is_isolated())
            .map_err(DaemonError::Config)?;
        let tenants: BTreeMap<String, Tenant> = store
            .tenants()?
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        if tenants.len() > 1 && !settings.isolation.allows_many_tenants() {
            return Err(DaemonError::Config(format!(
                "{} tenants are configured but {}. Run the daemon as root (each tenant then runs as its own uid), or set allow_shared_identity = true to accept that",
                tenants.len(),
                settings.isolation.describe()
            )));
        }
        let allocated_uids = store.identities()?;
        let topology = Topology::new(settings.nodes.clone()).map_err(DaemonError::Config)?;
        let cluster = topology.cluster();
        let pairs = crate::records::pairs::PairTable::from_entries(store.pairs()?);
        let mut config = crate::daemon::policy_support::policy_config(
            &tenants,
            settings.round_s,
            &settings.gittins_prior,
        );
        config.pair_speeds = crate::daemon::policy_support::pair_speeds(
            settings.policy,
            &pairs,
            &cluster.gpu_type_names,
        );
        config.external = settings.external.clone();
        config.fairshare.half_life_s = settings.fairshare_half_life_s.unwrap_or(0.0);
        let usage = usage::UsageTotals::load(&store, settings.fairshare_half_life_s)?;
        let quota_groups = store.quota_groups()?;
        let (quota_tree, quota_error) = crate::daemon::quotas::bind(&quota_groups, cluster);
        let build = |kind| {
            crate::daemon::policy_support::build_policy(
                kind,
                &config,
                &settings.priority_classes,
                quota_tree.clone(),
            )
        };
        let built = build(settings.policy)
            .map_err(|e| DaemonError::Config(format!("policy {}: {e}", settings.policy)))?;
        let fallback = build(settings.fallback).map_err(|e| {
            DaemonError::Config(format!("policy_fallback {}: {e}", settings.fallback))
        })?;
        let (mut policy, agent) = match settings.policy {
            PolicyKind::External => (None, Some(Arc::new(Mutex::new(Some(built))))),
            _ => (Some(built), None),
        };
        let specs: Vec<JobSpec> = (0..jobs.len())
            .map(|id| {
                jobs.get(id).map_or_else(
                    || view::pruned_spec(id as u32),
                    |j| view::spec_of(j, cluster, &settings.priority_classes),
                )
            })
            .collect();
        // Policies that learn from finished jobs (QSSF) learn the history again.
        let restart = SimTime::from_ms(settings.clock.now_ms());
        if let Some(policy) = policy.as_mut() {
            for job in jobs.iter().filter(|j| j.state.is_terminal() && j.runs > 0) {
                let spec = &specs[job.id as usize];
                policy.job_finished(spec, &view::finished_of(job, spec), restart);
            }
        }
        let requests = jobs
            .iter()
            .filter_map(|j| {
                j.request
                    .client_request_id
                    .clone()
                    .map(|k| ((j.tenant.clone(), k), j.id))
            })
            .collect();
        let dependent = crate::daemon::dependencies::waiting(&jobs);
        let arrays = crate::records::array::arrays_of(jobs.iter().filter_map(|j| j.array));
        let reservations = store.reservations()?;
        let state = State {
            jobs,
            tenants,
            counters: Counters::default(),
            specs,
            topology,
            policy,
            fallback,
            agent_finished: Vec::new(),
            watched: BTreeMap::new(),
            wake_at_ms: None,
            identities: BTreeMap::new(),
            allocated_uids,
            requests,
            dirty: BTreeSet::new(),
            live_by_tenant: BTreeMap::new(),
            dependent,
            arrays,
            reservations,
            quota_groups,
            quota_error,
            avoiding: false,
            round_started_ms: 0,
            strays_checked_ms: 0,
            run_ended_since_check: true,
            ended_tenants: BTreeSet::new(),
            planner: arbiter_model::Planner::default(),
            pairs,
            pairs_changed: false,
            present_exact: false,
            offered_last_round: 0,
            worded_quota_tree: None,
            sharing_since: BTreeMap::new(),
            ended: BTreeMap::new(),
            submission_budget: BTreeMap::new(),
            progress_synced_ms: 0,
            usage,
        };
        let daemon = Daemon {
            state: Arc::new(Mutex::new(state)),
            store: Arc::new(store),
            settings: Arc::new(settings),
            wake,
            executor,
            agent,
            round: Arc::default(),
            webhooks: Arc::default(),
            _data_dir: Arc::new(data_dir),
        };
        daemon.recover()?;
        {
            let mut state = daemon.lock();
            let live = live_by_tenant(&state.jobs);
            state.live_by_tenant = live;
            state.ended = crate::records::retention::ended_by_tenant(&state.jobs);
        }
        Ok(daemon)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug; the state is still consistent at every
        // await-free step, so carry on with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The store, for benchmarks that fill it directly (`arbiter bench --suite daemon-scale`).
    pub fn store_for_bench(&self) -> &Store {
        &self.store
    }

    /// Why the store refuses writes at the moment (`None`: it takes them).
    pub fn store_degraded(&self) -> Option<String> {
        self.store.degraded()
    }

    /// What submissions are checked against.
    pub fn limits(&self) -> Limits {
        Limits {
            gpus: self.settings.gpus.clone(),
            cpus: self.settings.cpus,
            memory_gib: self.settings.memory_gib,
        }
    }

    /// Submits a job for `tenant` (or, with `array`, one job per task: one request, however
    /// many tasks). Persisted before it is acknowledged. A repeated `client_request_id` returns
    /// the earlier job (or a conflict if the request differs).
    pub fn submit(
        &self,
        tenant: &str,
        mut request: SubmitRequest,
    ) -> Result<Submitted, RequestError> {
        request.validate(&self.limits())?;
        let array = match request.array.as_deref() {
            Some(text) => Some(
                ArraySpec::parse(text, self.settings.max_array_size).map_err(|reason| {
                    FieldError {
                        field: "array",
                        reason,
                    }
                })?,
            ),
            None => None,
        };
        // The class is settled now (the default filled in), so that a retry of the same
        // request finds the same job and a later change of the default moves no job.
        request.priority_class = self
            .settings
            .priority_classes
            .resolve(
                tenant,
                request.priority_class.as_deref(),
                tenant == crate::records::store::ADMIN_TENANT,
            )
            .map_err(|reason| FieldError {
                field: "priority_class",
                reason,
            })?;
        let submitted = {
            let mut state = self.lock();
            if let Some(key) = &request.client_request_id
                && let Some(&id) = state.requests.get(&(tenant.to_string(), key.clone()))
            {
                if state.jobs[id as usize].request != request {
                    return Err(RequestError::Conflict(format!(
                        "client_request_id `{key}` was used for job {id} with a different request"
                    )));
                }
                let tasks = state.jobs[id as usize].array.map(|a| a.tasks);
                return Ok(Submitted {
                    id,
                    duplicate: true,
                    tasks,
                });
            }
            let tasks = array.as_ref().map_or(1, |a| a.indices.len());
            let dependencies = self.admit_submission(&mut state, tenant, &request, tasks)?;
            self.store_submission(&mut state, tenant, request, array, dependencies)?
        };
        self.wake.notify_one();
        Ok(submitted)
    }

    /// What refuses a submission of `tasks` jobs before anything is stored: the tenant's quota,
    /// its submission rate, its queue, its identity, the directories and dependencies named.
    /// Returns the submission's dependencies, checked.
    fn admit_submission(
        &self,
        state: &mut State,
        tenant: &str,
        request: &SubmitRequest,
        tasks: usize,
    ) -> Result<Option<arbiter_model::Dependencies>, RequestError> {
        // What the tenant's quota can never allow is refused now, as a job larger than the
        // cluster is (a quota lowered later holds such a job instead: see `decide`).
        if let Some(quota) = state
            .tenants
            .get(tenant)
            .and_then(|t| t.gpu_quota)
            .filter(|q| request.gpus > *q && !request.opportunistic)
        {
            let reason = format!(
                "asks for {} GPUs; tenant {tenant}'s GPU quota is {quota} (an admin can raise it: arbiter tenants update {tenant} --gpu-quota N)",
                request.gpus
            );
            return Err(FieldError {
                field: "gpus",
                reason,
            }
            .into());
        }
        // The admin's own jobs are not rate-limited (the admin is trusted, and its scripts
        // may submit in bulk); a tenant's, whoever submits them, are. An array is one request.
        if tenant != crate::records::store::ADMIN_TENANT
            && let Err(wait_s) =
                state.take_submission(tenant, &self.settings.retention, self.now_ms())
        {
            return Err(RequestError::TooMany(format!(
                "tenant {tenant} submits faster than this daemon takes ({} a second, bursts of {}: submissions_per_s_per_tenant, submission_burst_per_tenant); retry in {:.1} s",
                self.settings.retention.submissions_per_s,
                self.settings.retention.submission_burst,
                wait_s
            )));
        }
        let queued = state.live_by_tenant.get(tenant).copied().unwrap_or(0);
        debug_assert_eq!(
            Some(&queued).filter(|q| **q > 0),
            live_by_tenant(&state.jobs).get(tenant),
            "live jobs of {tenant}"
        );
        if queued + tasks > self.settings.max_queued_per_tenant {
            let what = if tasks > 1 {
                format!("; this array would add {tasks}")
            } else {
                String::new()
            };
            return Err(RequestError::TooMany(format!(
                "tenant {tenant} has {queued} jobs queued or running, the most this daemon takes is {} (max_queued_per_tenant){what}; wait for some to end",
                self.settings.max_queued_per_tenant
            )));
        }
        // The tenant is checked under the lock that removing it takes, in the same step that
        // stores the job: a tenant removed while its submission was on the way gets nothing.
        // Its identity is settled now too, so that a job that could never run as it (Slurm
        // without a `tenant_users` entry) is refused here rather than queued forever.
        let identity = self.identity_for(state, tenant)?;
        if let Some(dir) = &request.working_dir {
            // Checked as the job's user would see it (and with the same answer whether the
            // directory is missing or merely out of its reach).
            crate::security::confine::CheckpointRoots::usable_dir(dir, identity).map_err(
                |reason| FieldError {
                    field: "working_dir",
                    reason,
                },
            )?;
        }
        let dependencies = request
            .dependency
            .as_deref()
            .map(|text| {
                crate::daemon::dependencies::check(state, tenant, request.name.as_deref(), text)
            })
            .transpose()?;
        Ok(dependencies)
    }

    /// Stores the jobs of an admitted submission (one per task of `array`) in one write, then
    /// takes them into the state.
    fn store_submission(
        &self,
        state: &mut State,
        tenant: &str,
        request: SubmitRequest,
        array: Option<ArraySpec>,
        dependencies: Option<arbiter_model::Dependencies>,
    ) -> Result<Submitted, RequestError> {
        let first = state.jobs.len() as u32;
        let given_dir = request
            .checkpoint_dir
            .as_ref()
            .map(|dir| self.settings.checkpoint_roots.check(tenant, dir))
            .transpose()
            .map_err(|reason| FieldError {
                field: "checkpoint_dir",
                reason,
            })?;
        let indices = array.as_ref().map_or_else(
            || vec![None],
            |a| a.indices.iter().map(|&i| Some(i)).collect(),
        );
        let tasks = array.as_ref().map(|a| a.indices.len() as u32);
        let tokens = crate::security::auth::new_tokens(indices.len());
        let now_ms = self.now_ms();
        let records: Vec<JobRecord> = indices
            .iter()
            .zip(tokens)
            .enumerate()
            .map(|(k, (index, token))| {
                let id = first + k as u32;
                let mut record = JobRecord::submitted(
                    id,
                    tenant,
                    request.clone(),
                    now_ms,
                    crate::security::auth::sha256_hex(&token),
                );
                // Each task of an array has a folder of its own, under the one given.
                let dir = match (&given_dir, index) {
                    (Some(dir), Some(index)) => dir.join(format!("task-{index}")),
                    (Some(dir), None) => dir.clone(),
                    (None, _) => self.settings.checkpoint_roots.default_dir(tenant, id),
                };
                record.checkpoint_dir = Some(dir.display().to_string());
                record.array = index.map(|index| ArrayTask {
                    array_id: first,
                    index,
                    tasks: tasks.unwrap_or(1),
                    max_running: array.as_ref().and_then(|a| a.max_running),
                });
                record
            })
            .collect();
        self.store.put_jobs(&records.iter().collect::<Vec<_>>())?;
        tracing::info!(
            job = first,
            tenant,
            gpus = request.gpus,
            tasks = records.len(),
            "submitted"
        );
        if let Some(key) = &request.client_request_id {
            state
                .requests
                .insert((tenant.to_string(), key.clone()), first);
        }
        if let Some(a) = &array {
            state.arrays.insert(
                first,
                crate::records::array::ArrayIds {
                    first,
                    count: a.indices.len() as u32,
                    max_running: a.max_running,
                },
            );
        }
        for record in records {
            let id = record.id;
            state.specs.push(view::spec_of(
                &record,
                state.topology.cluster(),
                &self.settings.priority_classes,
            ));
            state.jobs.push(record);
            if let Some(deps) = &dependencies {
                state.dependent.insert(id, deps.clone());
            }
            *state.live_by_tenant.entry(tenant.to_string()).or_insert(0) += 1;
            state.counters.submitted += 1;
        }
        Ok(Submitted {
            id: first,
            duplicate: false,
            tasks,
        })
    }

    /// Cancels a job (its run gets the checkpoint signal, then SIGKILL after the grace period).
    pub fn cancel(&self, id: u32, tenant: Option<&str>) -> Result<(), RequestError> {
        {
            let mut state = self.lock();
            let job = state
                .jobs
                .get(id as usize)
                .ok_or(RequestError::NotFound(id))?;
            if tenant.is_some_and(|t| t != job.tenant) {
                return Err(RequestError::Forbidden(id));
            }
            if job.state.is_terminal() {
                return Err(RequestError::Ended(id));
            }
            match job.state {
                JobState::Queued => {
                    let mut cancelled = job.clone();
                    cancelled.transition(
                        JobState::Cancelled,
                        "cancelled while queued",
                        self.now_s(),
                    );
                    if let Err(e) = self.store.put_jobs(&[&cancelled]) {
                        // A cancel is honoured even while the store is read-only (a full disk):
                        // written once it works again.
                        tracing::warn!(
                            job = id,
                            "cancelled although the store refused the change (written later): {e}"
                        );
                        state.dirty.insert(id);
                    }
                    tracing::info!(job = id, "cancelled while queued");
                    state.jobs[id as usize] = cancelled;
                    state.job_ended_for_good(id);
                }
                JobState::Running { .. } => {
                    self.stop(&mut state, id, StopReason::Cancelled, true)?
                }
                _ => {
                    // Already stopping: make it end as cancelled.
                    let mut cancelled = job.clone();
                    if let JobState::Stopping { reason, .. } = &mut cancelled.state {
                        *reason = StopReason::Cancelled;
                    }
                    state.jobs[id as usize] = cancelled;
                    self.record(&mut state, id);
                }
            }
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Records a progress report from the job itself (authenticated by its run's token; refused
    /// once the run is over).
    ///
    /// A measured throughput reported while the job holds its GPUs alone is remembered per GPU
    /// type (smoothed: ¾ old, ¼ new) and, with `total_steps`, gives the job's remaining time;
    /// both feed the policy's view of the job (speeds per GPU type for heterogeneity-aware
    /// policies, remaining time for SRTF-like ones). Reports made once the job's situation has
    /// settled also teach the co-location table (`records/pairs.rs`): alone, its solo speed; sharing its
    /// GPUs with one other job of a known type, its normalized speed next to that type. The job
    /// and the table's changes are written in one transaction.
    pub fn report_progress(
        &self,
        id: u32,
        token: &str,
        report: crate::records::progress::ProgressReport,
    ) -> Result<(), RequestError> {
        // Checked here too (not only by the API): nothing out of bounds reaches the record.
        report.validate()?;
        let crate::records::progress::ProgressReport {
            steps,
            throughput,
            total_steps,
        } = report;
        let now_ms = self.now_ms();
        let mut guard = self.lock();
        let state = &mut *guard;
        let job = state
            .jobs
            .get(id as usize)
            .ok_or(RequestError::NotFound(id))?;
        if crate::security::auth::sha256_hex(token) != job.token_sha256 {
            return Err(RequestError::WrongJobToken(id));
        }
        if job.state.gpus().is_none() {
            // The token belongs to a run that is over.
            return Err(RequestError::Ended(id));
        }
        let mut updated = job.clone();
        updated.progress = Some(crate::records::job::Progress {
            steps,
            throughput,
            at_unix_s: self.now_s(),
        });
        if total_steps.is_some() {
            updated.total_steps = total_steps;
        }
        let running_type = updated
            .state
            .gpus()
            .and_then(|g| g.first())
            .and_then(|g| state.topology.gpu_type_name(*g))
            .map(str::to_string);
        let (sharing, others) = match updated.state.gpus() {
            Some(mine) => crate::records::pairs::sharing_of(
                id,
                mine,
                state
                    .jobs
                    .iter()
                    .filter_map(|j| Some((j.id, j.state.gpus()?))),
            ),
            None => (crate::records::pairs::Sharing::Other, Vec::new()),
        };
        let settled = settled(state, &updated, others, now_ms);
        let mut writes = Vec::new();
        let mut undo = Vec::new();
        if let (Some(t), Some(measured)) = (
            running_type,
            throughput.filter(|t| *t > 0.0 && t.is_finite()),
        ) {
            if sharing == crate::records::pairs::Sharing::Alone {
                // A speed measured while sharing is not the job's speed on that type.
                let entry = updated
                    .throughput_by_gpu_type
                    .entry(t.clone())
                    .or_insert(measured);
                *entry = 0.75 * *entry + 0.25 * measured;
                if updated.request.max_gpus.is_some() {
                    let count = updated.state.gpus().map_or(0, |g| g.len() as u32);
                    let entry = updated
                        .throughput_by_gpu_count
                        .entry(count)
                        .or_insert(measured);
                    *entry = 0.75 * *entry + 0.25 * measured;
                }
            }
            let partner = match sharing {
                crate::records::pairs::Sharing::Pair(other) => {
                    let o = &state.jobs[other as usize];
                    Some(o.request.job_type.as_ref().map(|job_type| {
                        crate::records::pairs::TypeOf {
                            tenant: o.tenant.clone(),
                            job_type: job_type.clone(),
                        }
                    }))
                }
                _ => None,
            };
            let beside = match (&sharing, &partner) {
                (crate::records::pairs::Sharing::Alone, _) => {
                    Some(crate::records::pairs::Beside::Alone)
                }
                (crate::records::pairs::Sharing::Pair(_), Some(Some(p))) => {
                    Some(crate::records::pairs::Beside::Typed(p))
                }
                (crate::records::pairs::Sharing::Pair(_), _) => {
                    Some(crate::records::pairs::Beside::Untyped)
                }
                (crate::records::pairs::Sharing::Other, _) => None,
            };
            if let Some(beside) = beside.filter(|_| settled) {
                let me = updated.request.job_type.as_ref().map(|job_type| {
                    crate::records::pairs::TypeOf {
                        tenant: updated.tenant.clone(),
                        job_type: job_type.clone(),
                    }
                });
                let (measurements, samples) = crate::records::pairs::learn(
                    &updated.measurements,
                    me.as_ref(),
                    updated
                        .state
                        .gpus()
                        .map_or(updated.request.gpus, |g| g.len() as u32),
                    &t,
                    beside,
                    measured,
                );
                updated.measurements = measurements;
                for (key, sample) in samples {
                    writes.extend(state.pairs.record(key, sample, self.now_s(), &mut undo));
                }
            }
        }
        // At most one report a second waits for the disk (a job reporting in a tight loop must
        // not turn every report into an fsync that slows every other tenant's submissions);
        // the others are on disk with the next durable write, at most a second later.
        let durable = now_ms >= state.progress_synced_ms.saturating_add(1_000);
        if durable {
            state.progress_synced_ms = now_ms;
        }
        if let Err(e) = self
            .store
            .put_jobs_and_pairs_with(durable, &[&updated], &writes)
        {
            state.pairs.undo(undo);
            return Err(e.into());
        }
        if !writes.is_empty() {
            state.pairs_changed = true;
            tracing::debug!(
                job = id,
                entries = writes.len(),
                "co-location table updated"
            );
        }
        state.specs[id as usize] = view::spec_of(
            &updated,
            state.topology.cluster(),
            &self.settings.priority_classes,
        );
        state.jobs[id as usize] = updated;
        Ok(())
    }

    /// The tenant of job `id` when `token_sha256` is its current run's token (a run holding GPUs).
    pub fn tenant_of_run_token(&self, id: u32, token_sha256: &str) -> Option<String> {
        let state = self.lock();
        let job = state.jobs.get(id as usize)?;
        (job.token_sha256 == token_sha256 && job.state.gpus().is_some()).then(|| job.tenant.clone())
    }

    /// The learned co-location table as `viewer` may see it (`None`: the admin, every entry; a
    /// tenant: its own job types' entries, another tenant's partner type not named).
    pub fn pair_rows(&self, viewer: Option<&str>) -> Vec<serde_json::Value> {
        self.lock().pairs.rows(viewer)
    }

    /// A copy of a job's record, if the caller may see it.
    pub fn job(&self, id: u32, tenant: Option<&str>) -> Result<JobRecord, RequestError> {
        let state = self.lock();
        let job = state
            .jobs
            .get(id as usize)
            .ok_or(RequestError::NotFound(id))?;
        if tenant.is_some_and(|t| t != job.tenant) {
            return Err(RequestError::Forbidden(id));
        }
        Ok(job.clone())
    }

    /// A page of the jobs the caller may see (optionally only in one state), in id order: at
    /// most `limit` with ids above `after` and, roughly, `max_bytes` of JSON (at least one job),
    /// and whether more follow. Bounded in bytes too: a tenant's records may be large (64 KiB
    /// bodies), and a page of 10,000 of them once held 91.6 MB in memory.
    pub fn jobs_page(
        &self,
        tenant: Option<&str>,
        state_filter: Option<&str>,
        after: Option<u32>,
        limit: usize,
        max_bytes: u64,
    ) -> (Vec<JobRecord>, bool) {
        let state = self.lock();
        let start = after.map_or(0, |a| a as usize + 1);
        let mut matching = state
            .jobs
            .iter_from(start)
            .filter(|j| tenant.is_none_or(|t| t == j.tenant))
            .filter(|j| state_filter.is_none_or(|s| s == j.state.name()))
            .peekable();
        let mut page: Vec<JobRecord> = Vec::new();
        let mut bytes = 0;
        while let Some(job) = matching.next_if(|j| {
            page.is_empty()
                || (page.len() < limit
                    && bytes + crate::records::retention::approx_record_bytes(j) <= max_bytes)
        }) {
            bytes += crate::records::retention::approx_record_bytes(job);
            page.push(job.clone());
        }
        let more = matching.peek().is_some();
        (page, more)
    }

    /// Path of a job's log file.
    pub fn log_path(&self, id: u32) -> PathBuf {
        self.settings
            .data_dir
            .join("logs")
            .join(format!("{id}.log"))
    }

    /// Runs `f` with the state locked (read-only uses: cluster view, metrics).
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.lock())
    }

    /// Schedules forever: a round at every wake-up (submit, job end, cancel) and every `round_s`.
    pub async fn run_loop(self) {
        let round = Duration::from_secs_f64(self.settings.round_s);
        let mut last_error: Option<String> = None;
        loop {
            // Said once per distinct failure, not at every retry.
            let started = std::time::Instant::now();
            // On a blocking thread: a round waits for the executor and, under `external`, for
            // the agent (up to its timeout); the runtime's workers keep serving the API.
            let daemon = self.clone();
            let ticked = match tokio::task::spawn_blocking(move || daemon.tick()).await {
                Ok(ticked) => ticked,
                Err(e) => Err(DaemonError::Config(format!(
                    "the scheduling round panicked: {e}"
                ))),
            };
            self.lock().counters.round_us_sum += started.elapsed().as_micros() as u64;
            match ticked {
                Err(e) if last_error.as_deref() != Some(&e.to_string()) => {
                    tracing::warn!("scheduling round failed: {e}");
                    last_error = Some(e.to_string());
                }
                Err(_) => {}
                Ok(()) if last_error.take().is_some() => {
                    tracing::info!("scheduling rounds work again")
                }
                Ok(()) => {}
            }
            // Runs being stopped are checked often (their SIGKILL deadlines), else once a round.
            let (soon, wake_at_ms, dirty) = {
                let state = self.lock();
                (
                    state.watched.values().any(|w| w.kill_at_ms.is_some()),
                    state.wake_at_ms,
                    !state.dirty.is_empty(),
                )
            };
            let mut wait = if soon || dirty || self.store.degraded().is_some() {
                round.min(Duration::from_millis(200))
            } else {
                round
            };
            // The policy may ask to be called again earlier (a queue demotion, a Gavel round).
            if let Some(at) = wake_at_ms {
                wait = wait.min(Duration::from_millis(
                    at.saturating_sub(self.now_ms()).max(10),
                ));
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Free GPU ids (global, node by node).
    pub fn free_gpus(&self) -> Vec<u32> {
        let state = self.lock();
        let holders = state.jobs.gpu_holders();
        (0..state.topology.total_gpus())
            .filter(|g| !holders.is_held(*g))
            .collect()
    }

    /// Now, Unix milliseconds, by the daemon's clock.
    pub fn now_ms(&self) -> u64 {
        self.settings.clock.now_ms()
    }

    /// Now, Unix seconds, by the daemon's clock.
    pub(crate) fn now_s(&self) -> i64 {
        (self.now_ms() / 1000) as i64
    }

    /// When the policy (or a protection, or a retry) asked for the next round (Unix ms).
    pub fn next_wake_ms(&self) -> Option<u64> {
        self.lock().wake_at_ms
    }

    /// The executor's name (`local`, `slurm`).
    pub fn executor_name(&self) -> &'static str {
        self.executor.name()
    }

    /// Nodes that take no new runs now (down or drained in Slurm).
    pub fn unavailable_nodes(&self) -> std::collections::BTreeSet<String> {
        self.executor.unavailable_nodes()
    }
}

impl State {
    /// Job `id` has just ended for good (succeeded, failed, cancelled): one live job less for
    /// its tenant.
    pub(crate) fn job_ended_for_good(&mut self, id: u32) {
        let tenant = &self.jobs[id as usize].tenant;
        if let Some(live) = self.live_by_tenant.get_mut(tenant) {
            *live = live.saturating_sub(1);
            if *live == 0 {
                self.live_by_tenant.remove(tenant);
            }
        }
        self.remember_ended(id);
    }

    /// The cluster the policy sees.
    pub fn cluster(&self) -> &Cluster {
        self.topology.cluster()
    }

    /// The nodes and the GPU numbering.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Name of the policy.
    pub fn policy_name(&self) -> &'static str {
        self.policy
            .as_ref()
            .map_or(PolicyKind::External.name(), |p| p.name())
    }

    /// The learned co-location table (`records/pairs.rs`).
    pub fn pairs(&self) -> &crate::records::pairs::PairTable {
        &self.pairs
    }
}

/// Per tenant, its jobs queued, running or stopping (tenants with none are absent).
pub(crate) fn live_by_tenant(jobs: &crate::records::jobs::Jobs) -> BTreeMap<String, usize> {
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for job in jobs.iter().filter(|j| !j.state.is_terminal()) {
        *live.entry(job.tenant.clone()).or_insert(0) += 1;
    }
    live
}

/// Whether `job`'s run and the set of jobs on its GPUs (`others`) have lasted
/// [`crate::records::pairs::SETTLE_S`] by `now_ms` (a change starts the clock again).
pub(crate) fn settled(state: &mut State, job: &JobRecord, others: Vec<u32>, now_ms: u64) -> bool {
    let JobState::Running { started_unix_s, .. } = job.state else {
        return false;
    };
    let since = match state.sharing_since.get(&job.id) {
        Some((seen, since)) if *seen == others => *since,
        _ => {
            state.sharing_since.insert(job.id, (others, now_ms));
            now_ms
        }
    };
    let started_ms = started_unix_s.max(0) as u64 * 1000;
    now_ms
        >= started_ms
            .max(since)
            .saturating_add(crate::records::pairs::SETTLE_S * 1000)
}

impl State {
    /// Job `id` ended for good: it counts towards its tenant's retention.
    pub(crate) fn remember_ended(&mut self, id: u32) {
        if let Some(job) = self.jobs.get(id as usize) {
            self.ended.entry(job.tenant.clone()).or_default().push(job);
        }
    }

    /// Takes one submission from `tenant`'s budget at `now_ms`; how long to wait if there is none.
    pub(crate) fn take_submission(
        &mut self,
        tenant: &str,
        retention: &crate::records::retention::Retention,
        now_ms: u64,
    ) -> Result<(), f64> {
        self.submission_budget
            .entry(tenant.to_string())
            .or_insert_with(|| crate::records::retention::Budget::full(retention, now_ms))
            .take(retention, now_ms)
    }
}
