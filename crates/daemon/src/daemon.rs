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
//! process group lives, else concluded from its exit file (`recovery.rs`). Runs are started and
//! stopped in `runs.rs`; the policy's view of the jobs is built in `view.rs`; tenants and their
//! unix identities are managed in `tenants.rs`.

use crate::cgroup::Cgroups;
use crate::config::GpuInventory;
use crate::confine::CheckpointRoots;
use crate::datadir::{DataDir, Reconciled};
use crate::executor;
use crate::identity::{Isolation, UnixIdentity};
use crate::job::{FieldError, JobRecord, JobState, Limits, StopReason, SubmitRequest};
use crate::store::{Store, StoreError, Tenant};
use crate::view;
use arbiter_model::{Cluster, GpuTypeId, HostShare, JobSpec, Node, NodeId, RackId, SimTime};
use arbiter_policy::{Policy, PolicyKind, SchedulerView};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// Unix time now, milliseconds.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Unix time now, seconds.
pub(crate) fn unix_s() -> i64 {
    (unix_ms() / 1000) as i64
}

/// What the daemon was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Data directory.
    pub data_dir: PathBuf,
    /// Policy.
    pub policy: PolicyKind,
    /// Seconds between rounds.
    pub round_s: f64,
    /// Seconds a started run is protected from preemption, unless the job says otherwise.
    pub min_run_s: f64,
    /// GPUs by type, in index order.
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
    /// Most jobs one tenant may have queued or running.
    pub max_queued_per_tenant: usize,
    /// Most bytes one run may add to its job's log (None: no limit).
    pub max_log_bytes: Option<u64>,
}

/// A run the daemon watches.
#[derive(Clone, Debug)]
pub(crate) struct Watched {
    pub(crate) pgid: u32,
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
    /// Milliseconds from submission to first start, summed, and how many.
    pub start_latency_ms_sum: u64,
    /// Jobs counted in the sum.
    pub start_latency_count: u64,
}

/// Everything mutable.
pub struct State {
    /// Jobs by id (dense: job `i` is at index `i`).
    pub jobs: Vec<JobRecord>,
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Counters.
    pub counters: Counters,
    pub(crate) specs: Vec<JobSpec>,
    pub(crate) cluster: Cluster,
    pub(crate) policy: Box<dyn Policy>,
    pub(crate) free_gpus: BTreeSet<u32>,
    pub(crate) watched: BTreeMap<u32, Watched>,
    /// When the policy asked to be called again.
    pub(crate) wake_at_ms: Option<u64>,
    /// GPU index → GPU type index.
    pub(crate) gpu_type_of: Vec<u8>,
    /// Tenants whose checkpoint area is ready, with the identity their runs execute as.
    pub(crate) identities: BTreeMap<String, Option<UnixIdentity>>,
    /// Every automatic uid ever handed out (never reused, even after a tenant is removed).
    pub(crate) allocated_uids: BTreeMap<String, u32>,
    /// Idempotency keys: (tenant, client_request_id) → job.
    pub(crate) requests: BTreeMap<(String, String), u32>,
    /// Jobs whose last change the store refused; written again at the next round.
    pub(crate) dirty: BTreeSet<u32>,
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
}

/// The daemon: state, store, settings and the wake-up for the loop.
#[derive(Clone)]
pub struct Daemon {
    pub(crate) state: Arc<Mutex<State>>,
    pub(crate) store: Arc<Store>,
    /// Settings.
    pub settings: Arc<Settings>,
    pub(crate) wake: Arc<Notify>,
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
    DataDir(#[from] crate::datadir::DataDirError),
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
    /// The job's id.
    pub id: u32,
    /// True when the submission repeated an earlier one with the same `client_request_id`
    /// (idempotency key): nothing new was created and `id` is the earlier job's.
    pub duplicate: bool,
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
    /// Locks the data directory, opens the store (refusing one that does not match the
    /// directory), rebuilds the state, re-adopts or concludes runs left from a previous daemon,
    /// and returns the daemon (call [`Daemon::run_loop`] to schedule).
    pub fn start(settings: Settings) -> Result<Self, DaemonError> {
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
        crate::datadir::set_mode(&store_path, 0o600)?;
        let jobs = store.jobs()?;
        if let Reconciled::New(id) = data_dir.reconcile(&before, store_existed, store.store_id()?, !jobs.is_empty())? {
            store.set_store_id(id)?;
        }
        if let Some((i, job)) = jobs.iter().enumerate().find(|(i, j)| j.id != *i as u32) {
            return Err(StoreError::Corrupt(format!("job ids are not dense: record {i} holds job {}", job.id)).into());
        }
        let next = store.next_job_id()? as usize;
        if next != jobs.len() {
            return Err(StoreError::Corrupt(format!("the store's next job id is {next} but it holds {} jobs", jobs.len())).into());
        }
        settings.checkpoint_roots.prepare(settings.isolation.is_isolated()).map_err(DaemonError::Config)?;
        let tenants: BTreeMap<String, Tenant> = store.tenants()?.into_iter().map(|t| (t.name.clone(), t)).collect();
        if tenants.len() > 1 && !settings.isolation.allows_many_tenants() {
            return Err(DaemonError::Config(format!(
                "{} tenants are configured but {}. Run the daemon as root (each tenant then runs as its own uid), or set allow_shared_identity = true to accept that",
                tenants.len(),
                settings.isolation.describe()
            )));
        }
        let allocated_uids = store.identities()?;
        let cluster = machine_cluster(&settings)?;
        let gpu_type_of: Vec<u8> = settings.gpus.iter().enumerate().flat_map(|(i, (_, count))| std::iter::repeat_n(i as u8, *count as usize)).collect();
        let config = crate::policy_support::policy_config(&tenants, settings.round_s, &settings.gittins_prior);
        let mut policy = arbiter_policy::build(settings.policy, &config).map_err(|e| DaemonError::Config(format!("policy {}: {e}", settings.policy)))?;
        let specs: Vec<JobSpec> = jobs.iter().map(|j| view::spec_of(j, &cluster)).collect();
        // Policies that learn from finished jobs (QSSF) learn the history again.
        let restart = SimTime::from_ms(unix_ms());
        for (job, spec) in jobs.iter().zip(&specs).filter(|(j, _)| j.state.is_terminal() && j.runs > 0) {
            policy.job_finished(spec, &view::finished_of(job, spec), restart);
        }
        let requests = jobs.iter().filter_map(|j| j.request.client_request_id.clone().map(|k| ((j.tenant.clone(), k), j.id))).collect();
        let total_gpus = gpu_type_of.len() as u32;
        let state = State {
            jobs,
            tenants,
            counters: Counters::default(),
            specs,
            cluster,
            policy,
            free_gpus: (0..total_gpus).collect(),
            watched: BTreeMap::new(),
            wake_at_ms: None,
            gpu_type_of,
            identities: BTreeMap::new(),
            allocated_uids,
            requests,
            dirty: BTreeSet::new(),
            round_started_ms: 0,
            strays_checked_ms: 0,
            run_ended_since_check: true,
            ended_tenants: BTreeSet::new(),
            planner: arbiter_model::Planner::default(),
        };
        let daemon = Daemon {
            state: Arc::new(Mutex::new(state)),
            store: Arc::new(store),
            settings: Arc::new(settings),
            wake: Arc::new(Notify::new()),
            _data_dir: Arc::new(data_dir),
        };
        daemon.recover()?;
        Ok(daemon)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug; the state is still consistent at every
        // await-free step, so carry on with it.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Why the store refuses writes at the moment (`None`: it takes them).
    pub fn store_degraded(&self) -> Option<String> {
        self.store.degraded()
    }

    /// What submissions are checked against.
    pub fn limits(&self) -> Limits {
        Limits { gpus: self.settings.gpus.clone(), cpus: self.settings.cpus, memory_gib: self.settings.memory_gib }
    }

    /// Submits a job for `tenant`. Persisted before it is acknowledged. A repeated
    /// `client_request_id` returns the earlier job (or a conflict if the request differs).
    pub fn submit(&self, tenant: &str, request: SubmitRequest) -> Result<Submitted, RequestError> {
        request.validate(&self.limits())?;
        let submitted = {
            let mut state = self.lock();
            if let Some(key) = &request.client_request_id
                && let Some(&id) = state.requests.get(&(tenant.to_string(), key.clone())) {
                    if state.jobs[id as usize].request != request {
                        return Err(RequestError::Conflict(format!("client_request_id `{key}` was used for job {id} with a different request")));
                    }
                    return Ok(Submitted { id, duplicate: true });
                }
            let queued = state.jobs.iter().filter(|j| j.tenant == tenant && !j.state.is_terminal()).count();
            if queued >= self.settings.max_queued_per_tenant {
                return Err(RequestError::TooMany(format!(
                    "tenant {tenant} has {queued} jobs queued or running, the most this daemon takes (max_queued_per_tenant); wait for some to end"
                )));
            }
            if let Some(dir) = &request.working_dir {
                // Checked as the job's user would see it (and with the same answer whether the
                // directory is missing or merely out of its reach).
                let identity = self.identity_for(&mut state, tenant).map_err(RequestError::Unavailable)?;
                crate::confine::CheckpointRoots::usable_dir(dir, identity).map_err(|reason| FieldError { field: "working_dir", reason })?;
            }
            let id = state.jobs.len() as u32;
            let checkpoint_dir = match &request.checkpoint_dir {
                Some(dir) => self.settings.checkpoint_roots.check(tenant, dir).map_err(|reason| FieldError { field: "checkpoint_dir", reason })?,
                None => self.settings.checkpoint_roots.default_dir(tenant, id),
            };
            let token = crate::auth::new_token();
            let mut record = JobRecord::submitted(id, tenant, request, unix_ms(), crate::auth::sha256_hex(&token));
            record.checkpoint_dir = Some(checkpoint_dir.display().to_string());
            self.store.put_jobs(&[&record])?;
            tracing::info!(job = id, tenant, gpus = record.request.gpus, "submitted");
            if let Some(key) = &record.request.client_request_id {
                state.requests.insert((tenant.to_string(), key.clone()), id);
            }
            let spec = view::spec_of(&record, &state.cluster);
            state.specs.push(spec);
            state.jobs.push(record);
            state.counters.submitted += 1;
            Submitted { id, duplicate: false }
        };
        self.wake.notify_one();
        Ok(submitted)
    }

    /// Cancels a job (its run gets the checkpoint signal, then SIGKILL after the grace period).
    pub fn cancel(&self, id: u32, tenant: Option<&str>) -> Result<(), RequestError> {
        {
            let mut state = self.lock();
            let job = state.jobs.get(id as usize).ok_or(RequestError::NotFound(id))?;
            if tenant.is_some_and(|t| t != job.tenant) {
                return Err(RequestError::Forbidden(id));
            }
            if job.state.is_terminal() {
                return Err(RequestError::Ended(id));
            }
            match job.state {
                JobState::Queued => {
                    let mut cancelled = job.clone();
                    cancelled.transition(JobState::Cancelled, "cancelled while queued", unix_s());
                    if let Err(e) = self.store.put_jobs(&[&cancelled]) {
                        // A cancel is honoured even while the store is read-only (a full disk):
                        // written once it works again.
                        tracing::warn!(job = id, "cancelled although the store refused the change (written later): {e}");
                        state.dirty.insert(id);
                    }
                    tracing::info!(job = id, "cancelled while queued");
                    state.jobs[id as usize] = cancelled;
                }
                JobState::Running { .. } => self.stop(&mut state, id, StopReason::Cancelled, true)?,
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
    /// A measured throughput is remembered per GPU type (smoothed: ¾ old, ¼ new) and, with
    /// `total_steps`, gives the job's remaining time; both feed the policy's view of the job
    /// (speeds per GPU type for heterogeneity-aware policies, remaining time for SRTF-like ones).
    pub fn report_progress(&self, id: u32, token: &str, steps: u64, throughput: Option<f64>, total_steps: Option<u64>) -> Result<(), RequestError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let job = state.jobs.get(id as usize).ok_or(RequestError::NotFound(id))?;
        if crate::auth::sha256_hex(token) != job.token_sha256 {
            return Err(RequestError::WrongJobToken(id));
        }
        if job.state.gpus().is_none() {
            // The token belongs to a run that is over.
            return Err(RequestError::Ended(id));
        }
        let mut updated = job.clone();
        updated.progress = Some(crate::job::Progress { steps, throughput, at_unix_s: unix_s() });
        if total_steps.is_some() {
            updated.total_steps = total_steps;
        }
        let running_type = updated.state.gpus().and_then(|g| g.first()).and_then(|g| state.gpu_type_of.get(*g as usize)).and_then(|t| state.cluster.gpu_type_names.get(*t as usize));
        if let (Some(t), Some(measured)) = (running_type, throughput.filter(|t| *t > 0.0)) {
            let entry = updated.throughput_by_gpu_type.entry(t.clone()).or_insert(measured);
            *entry = 0.75 * *entry + 0.25 * measured;
        }
        self.store.put_jobs(&[&updated])?;
        state.specs[id as usize] = view::spec_of(&updated, &state.cluster);
        state.jobs[id as usize] = updated;
        Ok(())
    }

    /// A copy of a job's record, if the caller may see it.
    pub fn job(&self, id: u32, tenant: Option<&str>) -> Result<JobRecord, RequestError> {
        let state = self.lock();
        let job = state.jobs.get(id as usize).ok_or(RequestError::NotFound(id))?;
        if tenant.is_some_and(|t| t != job.tenant) {
            return Err(RequestError::Forbidden(id));
        }
        Ok(job.clone())
    }

    /// A page of the jobs the caller may see (optionally only in one state), in id order: at
    /// most `limit` with ids above `after`, and whether more follow.
    pub fn jobs_page(&self, tenant: Option<&str>, state_filter: Option<&str>, after: Option<u32>, limit: usize) -> (Vec<JobRecord>, bool) {
        let state = self.lock();
        let start = after.map_or(0, |a| a as usize + 1).min(state.jobs.len());
        let mut matching = state.jobs[start..].iter().filter(|j| tenant.is_none_or(|t| t == j.tenant)).filter(|j| state_filter.is_none_or(|s| s == j.state.name()));
        let page: Vec<JobRecord> = matching.by_ref().take(limit).cloned().collect();
        let more = matching.next().is_some();
        (page, more)
    }

    /// Path of a job's log file.
    pub fn log_path(&self, id: u32) -> PathBuf {
        self.settings.data_dir.join("logs").join(format!("{id}.log"))
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
            match self.tick() {
                Err(e) if last_error.as_deref() != Some(&e.to_string()) => {
                    tracing::warn!("scheduling round failed: {e}");
                    last_error = Some(e.to_string());
                }
                Err(_) => {}
                Ok(()) if last_error.take().is_some() => tracing::info!("scheduling rounds work again"),
                Ok(()) => {}
            }
            // Runs being stopped are checked often (their SIGKILL deadlines), else once a round.
            let (soon, wake_at_ms, dirty) = {
                let state = self.lock();
                (state.watched.values().any(|w| w.kill_at_ms.is_some()), state.wake_at_ms, !state.dirty.is_empty())
            };
            let mut wait = if soon || dirty || self.store.degraded().is_some() { round.min(Duration::from_millis(200)) } else { round };
            // The policy may ask to be called again earlier (a queue demotion, a Gavel round).
            if let Some(at) = wake_at_ms {
                wait = wait.min(Duration::from_millis(at.saturating_sub(unix_ms()).max(10)));
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One scheduling round: write what the store refused before, enforce grace periods and
    /// time limits, ask the policy, apply the difference.
    pub fn tick(&self) -> Result<(), DaemonError> {
        let now_ms = unix_ms();
        let mut guard = self.lock();
        let state = &mut *guard;
        state.counters.rounds += 1;
        self.flush_dirty(state);
        // The process table is read when a run has ended, else every few seconds (not at every
        // submission: a burst of them would read /proc hundreds of times a second).
        if state.run_ended_since_check || now_ms >= state.strays_checked_ms + 5_000 {
            self.kill_strays(state);
            state.strays_checked_ms = now_ms;
            state.run_ended_since_check = false;
            state.ended_tenants.clear();
        }
        // SIGKILL runs past their grace period.
        // (Sent again at every round until the session is empty: a job forking faster than one
        // scan of the process table must not outlive its run.)
        for (id, w) in state.watched.iter_mut() {
            if w.kill_at_ms.is_some_and(|at| now_ms >= at) {
                if !w.sigkilled {
                    tracing::warn!(job = id, pgid = w.pgid, "grace period over: SIGKILL");
                    w.sigkilled = true;
                }
                let _ = executor::signal_run(w.pgid, Signal::SIGKILL);
                w.kill_at_ms = Some(now_ms + 200);
            }
        }
        // Runs over their time limit.
        let now_s = unix_s();
        let over: Vec<u32> = state
            .jobs
            .iter()
            .filter_map(|j| match (&j.state, j.request.max_run_time_s) {
                (JobState::Running { started_unix_s, .. }, Some(limit)) if i64::try_from(limit).is_ok_and(|l| now_s.saturating_sub(*started_unix_s) >= l) => Some(j.id),
                _ => None,
            })
            .collect();
        for id in over {
            self.stop(state, id, StopReason::TimedOut, false)?;
        }

        // The snapshot: queued and running jobs, as the simulator's engine would show them.
        let now = SimTime::from_ms(now_ms);
        // Jobs backing off after a failed run are not offered to the policy until their time.
        let backing_off = |j: &JobRecord| matches!(j.state, JobState::Queued) && j.retry_after_unix_s.is_some_and(|t| t > now_s);
        let active: Vec<_> = state.jobs.iter().filter(|j| !backing_off(j)).filter_map(|j| view::active_of(j, &state.specs[j.id as usize], &state.gpu_type_of, now)).collect();
        let mut retry_wake: Option<u64> = None;
        for job in state.jobs.iter_mut().filter(|j| backing_off(j)) {
            let at = job.retry_after_unix_s.unwrap_or(now_s);
            job.pending_reason = Some(format!("backing off after failed run {} (retry in {} s)", job.failures, at - now_s));
            let at_ms = at.max(0) as u64 * 1000;
            retry_wake = Some(retry_wake.map_or(at_ms, |w| w.min(at_ms)));
        }
        let decision = {
            let view = SchedulerView { cluster: &state.cluster, jobs: &active, specs: &state.specs };
            state.policy.schedule(&view, now).map_err(|e| DaemonError::Config(format!("policy {}: {e}", state.policy.name())))?
        };
        // The simulator's own check of a decision (gang sizes, GPU types, capacity, co-location,
        // CPU/memory): a decision that fails it is refused whole, loudly, and nothing is applied.
        let offered: BTreeSet<u32> = active.iter().map(|a| a.id.0).collect();
        if let Err(e) = state.planner.check(&state.cluster, &state.specs, |id| offered.contains(&id.0), &decision) {
            return Err(DaemonError::Config(format!("policy {} decided what cannot be carried out; nothing applied: {e}", state.policy.name())));
        }
        state.wake_at_ms = match (decision.wake_at.map(|t| t.as_ms()), retry_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wanted: BTreeMap<u32, &arbiter_model::Assignment> = decision.run.iter().map(|a| (a.job.0, a)).collect();
        let reasons: BTreeMap<u32, String> = decision.pending.iter().map(|(id, r)| (id.0, r.to_string())).collect();

        // Preempt running jobs the policy no longer wants — unless they are still within their
        // minimum run time, or the policy decides by rounds (Gavel's and Synergy's families) and
        // the round is not over: such a policy called at every event between rounds would
        // otherwise re-rank and swap jobs each time (eight 3-second jobs on 4 GPUs: 1,483
        // preemptions under ftf+proportional). Between rounds it may still start jobs on free GPUs.
        let round_ms = (self.settings.round_s * 1000.0) as u64;
        if now_ms >= state.round_started_ms.saturating_add(round_ms) {
            state.round_started_ms = now_ms;
        }
        let round_ends_ms = state.round_started_ms.saturating_add(round_ms);
        let by_rounds = self.settings.policy.is_gavel() || self.settings.policy.is_synergy();
        let running: Vec<(u32, i64)> = state
            .jobs
            .iter()
            .filter_map(|j| match j.state {
                JobState::Running { started_unix_s, .. } => Some((j.id, started_unix_s)),
                _ => None,
            })
            .collect();
        // Until when (Unix ms) a run that started at `started` may not be stopped, and why.
        let protection = |state: &State, id: u32, started: i64| -> Option<(u64, &'static str)> {
            let min_run_s = state.jobs[id as usize].request.min_run_time_s.map_or(self.settings.min_run_s, |s| s as f64);
            let min_run_ends_ms = (started.max(0) as f64 * 1000.0 + min_run_s * 1000.0) as u64;
            if now_ms < min_run_ends_ms {
                Some((min_run_ends_ms, "minimum run time"))
            } else if by_rounds && now_ms < round_ends_ms {
                Some((round_ends_ms, "round"))
            } else {
                None
            }
        };
        // Protected runs: until when (Unix ms), and why.
        let mut protected: BTreeMap<u32, (u64, &'static str)> = BTreeMap::new();
        for (id, started) in running.iter().copied().filter(|(id, _)| !wanted.contains_key(id)) {
            if let Some(until) = protection(state, id, started) {
                protected.insert(id, until);
                continue;
            }
            self.stop(state, id, StopReason::Preempted, false)?;
            state.counters.preemptions += 1;
        }
        // A running job the policy moves to another GPU type (a migration) is checkpointed and
        // requeued; the policy places it on the new type once its GPUs are free.
        // (Within its minimum run time, or mid-round for a round-based policy, it stays put.)
        let moving: Vec<(u32, u8)> = running
            .iter()
            .filter_map(|&(id, started)| {
                let wanted_on = wanted.get(&id)?.placement.slots.first().map(|(node, _)| node.0 as u8)?;
                let now_on = state.jobs[id as usize].state.gpus()?.first().and_then(|g| state.gpu_type_of.get(*g as usize)).copied()?;
                (now_on != wanted_on && protection(state, id, started).is_none()).then_some((id, wanted_on))
            })
            .collect();
        for (id, to) in moving {
            let to = state.cluster.gpu_type_names.get(to as usize).cloned().unwrap_or_default();
            tracing::info!(job = id, "the policy moves it to {to} GPUs: checkpoint and requeue");
            self.stop(state, id, StopReason::Preempted, false)?;
            state.counters.preemptions += 1;
        }
        if let Some(&(until, _)) = protected.values().min_by_key(|(until, _)| *until) {
            // Come back when the first protection ends.
            state.wake_at_ms = Some(state.wake_at_ms.map_or(until, |w| w.min(until)));
        }
        // Start queued jobs the policy placed, on free GPUs of the placed type, within their
        // tenant's GPU quota.
        let mut held_by_tenant: BTreeMap<String, u32> = BTreeMap::new();
        for job in &state.jobs {
            if let Some(gpus) = job.state.gpus() {
                *held_by_tenant.entry(job.tenant.clone()).or_insert(0) += gpus.len() as u32;
            }
        }
        let mut available = state.free_gpus.clone();
        let mut starts: Vec<(u32, Vec<u32>, Option<HostShare>)> = Vec::new();
        for (&id, assignment) in &wanted {
            if !matches!(state.jobs[id as usize].state, JobState::Queued) {
                continue;
            }
            let tenant = state.jobs[id as usize].tenant.clone();
            let quota = state.tenants.get(&tenant).and_then(|t| t.gpu_quota);
            let held = held_by_tenant.get(&tenant).copied().unwrap_or(0);
            if let Some(quota) = quota.filter(|q| held + state.specs[id as usize].gpus > *q) {
                state.jobs[id as usize].pending_reason = Some(format!("tenant {tenant} is at its GPU quota ({quota})"));
                continue;
            }
            let gpu_type = assignment.placement.slots.first().map_or(0, |(node, _)| node.0 as u8);
            let free_of_type: Vec<u32> = available.iter().copied().filter(|g| state.gpu_type_of.get(*g as usize) == Some(&gpu_type)).collect();
            let need = state.specs[id as usize].gpus as usize;
            if free_of_type.len() < need {
                let holder = protected.iter().find(|(p, _)| state.jobs[**p as usize].state.gpus().is_some_and(|g| g.iter().any(|g| state.gpu_type_of.get(*g as usize) == Some(&gpu_type))));
                state.jobs[id as usize].pending_reason = Some(match holder {
                    Some((p, (until, "round"))) => format!("waiting for the round to end ({:.0} s) before job {p} may be preempted", until.saturating_sub(now_ms) as f64 / 1000.0),
                    Some((p, (until, _))) => format!("waiting for job {p}'s minimum run time ({:.0} s left) before it may be preempted", until.saturating_sub(now_ms) as f64 / 1000.0),
                    None => "waiting for a preempted job to release its GPUs".into(),
                });
                continue;
            }
            let gpus: Vec<u32> = free_of_type[..need].to_vec();
            for g in &gpus {
                available.remove(g);
            }
            *held_by_tenant.entry(tenant).or_insert(0) += need as u32;
            starts.push((id, gpus, assignment.host));
        }
        let started: BTreeSet<u32> = starts.iter().map(|(id, _, _)| *id).collect();
        for job in state.jobs.iter_mut().filter(|j| matches!(j.state, JobState::Queued) && !started.contains(&j.id)) {
            if wanted.contains_key(&job.id) || job.retry_after_unix_s.is_some_and(|t| t > now_s) {
                continue; // placed but held back above (quota, GPUs still being released)
            }
            job.pending_reason = Some(reasons.get(&job.id).cloned().unwrap_or_else(|| "lower priority than the running jobs".into()));
        }
        for (id, gpus, host) in starts {
            self.start_run(state, id, gpus, host)?;
        }
        Ok(())
    }

    /// Free GPU indices.
    pub fn free_gpus(&self) -> Vec<u32> {
        self.lock().free_gpus.iter().copied().collect()
    }
}

/// The machine as the policy sees it: one node per GPU type (a machine with mixed GPUs is several
/// typed pools to a policy), CPUs and memory split by GPUs.
fn machine_cluster(settings: &Settings) -> Result<Cluster, DaemonError> {
    let total: u32 = settings.gpus.iter().map(|(_, n)| n).sum();
    let type_names: Vec<String> = if settings.gpus.is_empty() { vec!["none".into()] } else { settings.gpus.iter().map(|(t, _)| t.clone()).collect() };
    let mut nodes: Vec<Node> = settings
        .gpus
        .iter()
        .enumerate()
        .map(|(i, (_, count))| Node {
            id: NodeId(i as u32),
            name: format!("local-{i}"),
            rack: RackId(0),
            gpu_type: GpuTypeId(i as u8),
            gpus: *count,
            cpus: settings.cpus.max(1) * count / total.max(1),
            memory_gib: settings.memory_gib * count / total.max(1),
        })
        .collect();
    if nodes.is_empty() {
        nodes.push(Node { id: NodeId(0), name: "local-0".into(), rack: RackId(0), gpu_type: GpuTypeId(0), gpus: 0, cpus: settings.cpus, memory_gib: settings.memory_gib });
    }
    Cluster::new(type_names, nodes).map_err(|e| DaemonError::Config(e.to_string()))
}

impl State {
    /// The cluster the policy sees.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Name of the policy.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }
}
