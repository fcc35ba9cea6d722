//! The daemon's state and scheduling loop.
//!
//! ```text
//!   submit / job end / cancel / round timer ──► tick: snapshot ──► policy.schedule (the
//!   simulator's code) ──► diff against what runs ──► persist ──► act (spawn, signal)
//! ```
//!
//! One mutex guards the state; nothing awaits while holding it. Every change of a job's state is
//! written to the store before the daemon acts on it, so after a crash the store never claims
//! less than happened: a run the store calls running is re-adopted if its process group lives,
//! else requeued (or finished, if its exit file says how it ended).

use crate::config::GpuInventory;
use crate::executor::{self, Launch};
use crate::job::{JobRecord, JobState, StopReason, SubmitRequest};
use crate::store::{Store, StoreError, Tenant};
use arbiter_model::{ActiveJob, Cluster, GpuTypeId, JobId, JobSpec, Node, NodeId, Placement, RackId, RunState, SimDuration, SimTime};
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

fn unix_s() -> i64 {
    (unix_ms() / 1000) as i64
}

/// Run time assumed for jobs that give no estimate (policies like SRTF need one).
const DEFAULT_EXPECTED_RUN_S: u64 = 3600;

/// What the daemon was started with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Data directory.
    pub data_dir: PathBuf,
    /// Policy.
    pub policy: PolicyKind,
    /// Seconds between rounds.
    pub round_s: f64,
    /// GPUs by type, in index order.
    pub gpus: GpuInventory,
    /// CPU cores.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// URL jobs reach the API at.
    pub public_url: String,
    /// The cgroup v2 subtree limits are enforced with, where the machine allows it.
    pub cgroups: Option<crate::cgroup::Cgroups>,
}

/// A run the daemon watches.
#[derive(Clone, Debug)]
struct Watched {
    pgid: u32,
    /// When SIGKILL follows the checkpoint signal.
    kill_at_ms: Option<u64>,
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
    /// Jobs by id (dense).
    pub jobs: Vec<JobRecord>,
    /// Tenants by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Counters.
    pub counters: Counters,
    specs: Vec<JobSpec>,
    cluster: Cluster,
    policy: Box<dyn Policy>,
    free_gpus: BTreeSet<u32>,
    watched: BTreeMap<u32, Watched>,
    /// When the policy asked to be called again.
    wake_at_ms: Option<u64>,
    /// GPU index → GPU type index.
    gpu_type_of: Vec<u8>,
}

/// The daemon: state, store, settings and the wake-up for the loop.
#[derive(Clone)]
pub struct Daemon {
    state: Arc<Mutex<State>>,
    store: Arc<Store>,
    /// Settings.
    pub settings: Arc<Settings>,
    wake: Arc<Notify>,
}

/// A daemon failure.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
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
    Invalid(#[from] crate::job::FieldError),
    /// The job has ended.
    #[error("job {0} has already ended")]
    Ended(u32),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<DaemonError> for RequestError {
    fn from(e: DaemonError) -> Self {
        match e {
            DaemonError::Store(s) => RequestError::Store(s),
            DaemonError::Config(m) => RequestError::Store(StoreError::Database(m)),
        }
    }
}

impl Daemon {
    /// Opens the store, rebuilds the state, re-adopts or requeues runs left from a previous
    /// daemon, and returns the daemon (call [`Daemon::run_loop`] to schedule).
    pub fn start(settings: Settings) -> Result<Self, DaemonError> {
        std::fs::create_dir_all(&settings.data_dir).map_err(|e| DaemonError::Config(format!("data_dir {}: {e}", settings.data_dir.display())))?;
        let store = Store::open(&settings.data_dir.join("arbiter.redb"))?;
        let jobs = store.jobs()?;
        let tenants: BTreeMap<String, Tenant> = store.tenants()?.into_iter().map(|t| (t.name.clone(), t)).collect();
        let mut nodes_gpus = 0;
        let mut gpu_type_of = Vec::new();
        let type_names: Vec<String> = if settings.gpus.is_empty() { vec!["none".into()] } else { settings.gpus.iter().map(|(t, _)| t.clone()).collect() };
        for (i, (_, count)) in settings.gpus.iter().enumerate() {
            nodes_gpus += count;
            gpu_type_of.extend(std::iter::repeat_n(i as u8, *count as usize));
        }
        // One node per GPU type (a machine with mixed GPUs is several typed pools to a policy).
        let mut nodes = Vec::new();
        for (i, (_, count)) in settings.gpus.iter().enumerate() {
            nodes.push(Node {
                id: NodeId(i as u32),
                name: format!("local-{i}"),
                rack: RackId(0),
                gpu_type: GpuTypeId(i as u8),
                gpus: *count,
                cpus: settings.cpus.max(1) * count / nodes_gpus.max(1),
                memory_gib: settings.memory_gib * count / nodes_gpus.max(1),
            });
        }
        if nodes.is_empty() {
            nodes.push(Node { id: NodeId(0), name: "local-0".into(), rack: RackId(0), gpu_type: GpuTypeId(0), gpus: 0, cpus: settings.cpus, memory_gib: settings.memory_gib });
        }
        let cluster = Cluster::new(type_names, nodes).map_err(|e| DaemonError::Config(e.to_string()))?;
        let policy = arbiter_policy::build(settings.policy, &policy_config(&tenants)).map_err(|e| DaemonError::Config(e.to_string()))?;
        let specs = jobs.iter().map(|j| spec_of(j, &cluster)).collect();
        let state = State {
            jobs,
            tenants,
            counters: Counters::default(),
            specs,
            cluster,
            policy,
            free_gpus: (0..nodes_gpus).collect(),
            watched: BTreeMap::new(),
            wake_at_ms: None,
            gpu_type_of,
        };
        let daemon = Daemon { state: Arc::new(Mutex::new(state)), store: Arc::new(store), settings: Arc::new(settings), wake: Arc::new(Notify::new()) };
        daemon.recover()?;
        Ok(daemon)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug; the state is still consistent at every
        // await-free step, so carry on with it.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Re-adopts runs whose process group lives; finishes or requeues the others.
    fn recover(&self) -> Result<(), DaemonError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let now = unix_s();
        let mut changed = Vec::new();
        for job in &mut state.jobs {
            let (Some(recorded), Some(gpus)) = (job.state.pid(), job.state.gpus().map(<[u32]>::to_vec)) else { continue };
            let runs = self.settings.data_dir.join("runs");
            // Started but its id not recorded (the daemon died in between): the pid file has it.
            let pid = if recorded == 0 { executor::read_pid(&runs.join(format!("{}.pid", job.id))).unwrap_or(0) } else { recorded };
            if let JobState::Running { pid: p, .. } | JobState::Stopping { pid: p, .. } = &mut job.state {
                *p = pid;
            }
            if pid != 0 && executor::group_alive(pid) {
                for g in &gpus {
                    state.free_gpus.remove(g);
                }
                // A run that was being stopped gets its grace period again, then SIGKILL.
                let kill_at_ms = matches!(job.state, JobState::Stopping { .. }).then(|| unix_ms() + job.request.grace_s * 1000);
                state.watched.insert(job.id, Watched { pgid: pid, kill_at_ms });
                job.history.push(crate::job::Transition { at_unix_s: now, to: job.state.name().into(), why: format!("re-adopted process group {pid} after a daemon restart") });
                changed.push(job.id);
                continue;
            }
            let code = executor::read_exit_code(&self.settings.data_dir.join("runs").join(format!("{}.exit", job.id)));
            match (&job.state, code) {
                (JobState::Running { .. }, Some(0)) => job.transition(JobState::Succeeded, "exit code 0 (ended while the daemon was down)", now),
                (JobState::Stopping { reason: StopReason::Cancelled, .. }, _) => job.transition(JobState::Cancelled, "cancelled", now),
                _ => job.transition(JobState::Queued, "its run ended while the daemon was down; requeued from its checkpoint", now),
            }
            changed.push(job.id);
        }
        let records: Vec<&JobRecord> = changed.iter().map(|&id| &state.jobs[id as usize]).collect();
        self.store.put_jobs(&records)?;
        let adopted: Vec<(u32, u32)> = state.watched.iter().map(|(id, w)| (*id, w.pgid)).collect();
        drop(guard);
        for (id, pgid) in adopted {
            self.watch_adopted(id, pgid);
        }
        Ok(())
    }

    /// Submits a job for `tenant`; returns its id. Persisted before it is acknowledged.
    pub fn submit(&self, tenant: &str, request: SubmitRequest) -> Result<(u32, String), RequestError> {
        let total_gpus: u32 = self.settings.gpus.iter().map(|(_, n)| n).sum();
        request.validate(total_gpus)?;
        let token = crate::auth::new_token();
        let id = {
            let mut state = self.lock();
            let id = state.jobs.len() as u32;
            let record = JobRecord::submitted(id, tenant, request, unix_ms(), crate::auth::sha256_hex(&token));
            self.store.put_jobs(&[&record])?;
            let spec = spec_of(&record, &state.cluster);
            state.specs.push(spec);
            state.jobs.push(record);
            state.counters.submitted += 1;
            id
        };
        self.wake.notify_one();
        Ok((id, token))
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
                    let job = &mut state.jobs[id as usize];
                    job.transition(JobState::Cancelled, "cancelled while queued", unix_s());
                    self.store.put_jobs(&[job])?;
                }
                JobState::Running { .. } => self.stop(&mut state, id, StopReason::Cancelled)?,
                _ => {
                    // Already stopping: make it end as cancelled.
                    if let JobState::Stopping { reason, .. } = &mut state.jobs[id as usize].state {
                        *reason = StopReason::Cancelled;
                    }
                    let job = &state.jobs[id as usize];
                    self.store.put_jobs(&[job])?;
                }
            }
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Records a progress report from the job itself (authenticated by its token).
    ///
    /// A measured throughput is remembered per GPU type (smoothed: ¾ old, ¼ new) and, with
    /// `total_steps`, gives the job's remaining time; both feed the policy's view of the job
    /// (speeds per GPU type for heterogeneity-aware policies, remaining time for SRTF-like ones).
    pub fn report_progress(&self, id: u32, token: &str, steps: u64, throughput: Option<f64>, total_steps: Option<u64>) -> Result<(), RequestError> {
        let mut guard = self.lock();
        let State { jobs, cluster, specs, gpu_type_of, .. } = &mut *guard;
        let gpu_type_names = &cluster.gpu_type_names;
        let job = jobs.get_mut(id as usize).ok_or(RequestError::NotFound(id))?;
        if crate::auth::sha256_hex(token) != job.token_sha256 {
            return Err(RequestError::Forbidden(id));
        }
        job.progress = Some(crate::job::Progress { steps, throughput, at_unix_s: unix_s() });
        if total_steps.is_some() {
            job.total_steps = total_steps;
        }
        let running_type = job.state.gpus().and_then(|g| g.first()).and_then(|g| gpu_type_of.get(*g as usize)).and_then(|t| gpu_type_names.get(*t as usize));
        if let (Some(t), Some(measured)) = (running_type, throughput.filter(|t| *t > 0.0)) {
            let entry = job.throughput_by_gpu_type.entry(t.clone()).or_insert(measured);
            *entry = 0.75 * *entry + 0.25 * measured;
        }
        self.store.put_jobs(&[job])?;
        specs[id as usize] = spec_of(job, cluster);
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

    /// Jobs the caller may see, optionally only in one state.
    pub fn jobs(&self, tenant: Option<&str>, state_filter: Option<&str>) -> Vec<JobRecord> {
        let state = self.lock();
        state
            .jobs
            .iter()
            .filter(|j| tenant.is_none_or(|t| t == j.tenant))
            .filter(|j| state_filter.is_none_or(|s| s == j.state.name()))
            .cloned()
            .collect()
    }

    /// Path of a job's log file.
    pub fn log_path(&self, id: u32) -> PathBuf {
        self.settings.data_dir.join("logs").join(format!("{id}.log"))
    }

    /// Runs `f` with the state locked (read-only uses: cluster view, metrics).
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.lock())
    }

    /// Adds or replaces a tenant.
    ///
    /// A `hierarchical` policy is rebuilt with the new weights (it keeps no state a rebuild
    /// would lose beyond its allocation, which the next round recomputes).
    pub fn put_tenant(&self, tenant: Tenant) -> Result<(), RequestError> {
        self.store.put_tenant(&tenant)?;
        let mut state = self.lock();
        state.tenants.insert(tenant.name.clone(), tenant);
        if self.settings.policy == PolicyKind::Hierarchical {
            let config = policy_config(&state.tenants);
            match arbiter_policy::build(self.settings.policy, &config) {
                Ok(policy) => state.policy = policy,
                Err(e) => eprintln!("arbiter: could not rebuild the policy with the new tenant weights: {e}"),
            }
        }
        Ok(())
    }

    /// The tenant whose token hashes to `hash`.
    pub fn tenant_by_token_hash(&self, hash: &str) -> Option<String> {
        self.lock().tenants.values().find(|t| t.token_sha256 == hash).map(|t| t.name.clone())
    }

    /// Schedules forever: a round at every wake-up (submit, job end, cancel) and every `round_s`.
    pub async fn run_loop(self) {
        let round = Duration::from_secs_f64(self.settings.round_s);
        loop {
            if let Err(e) = self.tick() {
                eprintln!("arbiter: scheduling round failed: {e}");
            }
            // Runs being stopped are checked often (their SIGKILL deadlines), else once a round.
            let (soon, wake_at_ms) = {
                let state = self.lock();
                (state.watched.values().any(|w| w.kill_at_ms.is_some()), state.wake_at_ms)
            };
            let mut wait = if soon { round.min(Duration::from_millis(200)) } else { round };
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

    /// One scheduling round: enforce deadlines, ask the policy, apply the difference.
    pub fn tick(&self) -> Result<(), DaemonError> {
        let now_ms = unix_ms();
        let mut state = self.lock();
        state.counters.rounds += 1;
        // SIGKILL runs past their grace period.
        for w in state.watched.values_mut() {
            if w.kill_at_ms.is_some_and(|at| now_ms >= at) {
                let _ = executor::signal_group(w.pgid, Signal::SIGKILL);
                w.kill_at_ms = None;
            }
        }
        // Runs over their time limit.
        let over: Vec<u32> = state
            .jobs
            .iter()
            .filter_map(|j| match (&j.state, j.request.max_run_time_s) {
                (JobState::Running { started_unix_s, .. }, Some(limit)) if unix_s() - started_unix_s >= limit as i64 => Some(j.id),
                _ => None,
            })
            .collect();
        for id in over {
            self.stop(&mut state, id, StopReason::TimedOut)?;
        }

        // The snapshot: queued and running jobs, as the simulator's engine would show them.
        let now = SimTime::from_ms(now_ms);
        let mut active = Vec::new();
        for job in &state.jobs {
            let spec = &state.specs[job.id as usize];
            let expected = spec.run_time_s;
            match &job.state {
                JobState::Queued => {
                    let mut a = ActiveJob::submitted(JobId(job.id), spec.gpus, spec.submit, expected);
                    a.executed_s = job.executed_s;
                    a.remaining_s = (expected - job.executed_s).max(1.0);
                    a.pending_since = job.history.last().map_or(now, |t| SimTime::from_ms(t.at_unix_s.max(0) as u64 * 1000));
                    a.accounted_at = now;
                    a.preemptions = job.preemptions;
                    active.push(a);
                }
                JobState::Running { gpus, started_unix_s, .. } => {
                    let since = SimTime::from_ms(started_unix_s.max(&0).unsigned_abs() * 1000);
                    let mut a = ActiveJob::submitted(JobId(job.id), spec.gpus, spec.submit, expected);
                    a.executed_s = job.executed_s;
                    a.remaining_s = (expected - job.executed_s).max(1.0);
                    a.accounted_at = since.min(now);
                    a.first_start = Some(since);
                    let node = state.gpu_type_of.get(gpus[0] as usize).copied().unwrap_or(0);
                    a.state = RunState::Running { placement: Placement::single(NodeId(node as u32), spec.gpus), since: since.min(now), speed: 1.0 };
                    active.push(a);
                }
                _ => {}
            }
        }
        let decision = {
            let State { cluster, specs, policy, .. } = &mut *state;
            let view = SchedulerView { cluster, jobs: &active, specs };
            policy.schedule(&view, now).map_err(|e| DaemonError::Config(format!("policy {}: {e}", policy.name())))?
        };
        state.wake_at_ms = decision.wake_at.map(|t| t.as_ms());
        let wanted: BTreeMap<u32, &arbiter_model::Assignment> = decision.run.iter().map(|a| (a.job.0, a)).collect();
        let reasons: BTreeMap<u32, String> = decision.pending.iter().map(|(id, r)| (id.0, r.to_string())).collect();

        // Preempt running jobs the policy no longer wants.
        let running: Vec<u32> = state.jobs.iter().filter(|j| matches!(j.state, JobState::Running { .. })).map(|j| j.id).collect();
        for id in running.iter().copied().filter(|id| !wanted.contains_key(id)) {
            self.stop(&mut state, id, StopReason::Preempted)?;
            state.counters.preemptions += 1;
        }
        // Start queued jobs the policy placed, on free GPUs of the placed type, within their
        // tenant's GPU quota.
        let mut held_by_tenant: BTreeMap<String, u32> = BTreeMap::new();
        for job in &state.jobs {
            if let Some(gpus) = job.state.gpus() {
                *held_by_tenant.entry(job.tenant.clone()).or_insert(0) += gpus.len() as u32;
            }
        }
        let mut starts = Vec::new();
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
            let free_of_type: Vec<u32> = state.free_gpus.iter().copied().filter(|g| state.gpu_type_of.get(*g as usize) == Some(&gpu_type)).collect();
            let need = state.specs[id as usize].gpus as usize;
            if free_of_type.len() < need {
                let job = &mut state.jobs[id as usize];
                job.pending_reason = Some("waiting for a preempted job to release its GPUs".into());
                continue;
            }
            let gpus: Vec<u32> = free_of_type[..need].to_vec();
            for g in &gpus {
                state.free_gpus.remove(g);
            }
            *held_by_tenant.entry(tenant).or_insert(0) += need as u32;
            starts.push((id, gpus));
        }
        let started: BTreeSet<u32> = starts.iter().map(|(id, _)| *id).collect();
        for job in state.jobs.iter_mut().filter(|j| matches!(j.state, JobState::Queued) && !started.contains(&j.id)) {
            if wanted.contains_key(&job.id) {
                continue; // placed but held back above (quota, GPUs still being released)
            }
            if let Some(reason) = reasons.get(&job.id) {
                job.pending_reason = Some(reason.clone());
            } else if !wanted.contains_key(&job.id) {
                job.pending_reason = Some("lower priority than the running jobs".into());
            }
        }
        for (id, gpus) in starts {
            self.start_run(&mut state, id, gpus)?;
        }
        Ok(())
    }

    /// Starts a run: persists `running` without a process id, spawns, persists the id; on a
    /// spawn failure the job fails this run.
    fn start_run(&self, state: &mut State, id: u32, gpus: Vec<u32>) -> Result<(), DaemonError> {
        let settings = &self.settings;
        let job = &state.jobs[id as usize];
        let checkpoint_dir = job.checkpoint_dir(&settings.data_dir);
        let _ = std::fs::create_dir_all(&checkpoint_dir);
        let working_dir = job.request.working_dir.as_ref().map(PathBuf::from).unwrap_or_else(|| settings.data_dir.clone());
        let mut env = job.request.env.clone();
        let visible: Vec<String> = gpus.iter().map(u32::to_string).collect();
        env.insert("CUDA_VISIBLE_DEVICES".into(), visible.join(","));
        env.insert("ARBITER_JOB_ID".into(), id.to_string());
        env.insert("ARBITER_URL".into(), settings.public_url.clone());
        env.insert("ARBITER_CHECKPOINT_DIR".into(), checkpoint_dir.display().to_string());
        env.insert("ARBITER_LEASE_S".into(), format!("{}", settings.round_s));
        env.insert("ARBITER_RUN".into(), (job.runs + 1).to_string());
        env.insert("ARBITER_CHECKPOINT_SIGNAL".into(), job.request.checkpoint_signal.clone());
        // The job's own token for progress reports; the daemon only keeps its hash, so a fresh
        // one is issued per run.
        let token = crate::auth::new_token();
        env.insert("ARBITER_JOB_TOKEN".into(), token.clone());
        // CPU and memory limits: what the job asked for, else its GPU-proportional share.
        let total_gpus: u32 = settings.gpus.iter().map(|(_, n)| n).sum::<u32>().max(1);
        let share = gpus.len() as f64 / total_gpus as f64;
        let cpus = if job.request.cpus > 0 { job.request.cpus as f64 } else { (settings.cpus as f64 * share).max(1.0) };
        let memory_gib = if job.request.memory_gib > 0 { job.request.memory_gib as f64 } else { (settings.memory_gib as f64 * share).max(1.0) };
        let cgroup = settings.cgroups.as_ref().and_then(|cg| match cg.prepare(id, cpus, (memory_gib * (1u64 << 30) as f64) as u64) {
            Ok(dir) => Some(dir),
            Err(e) => {
                eprintln!("arbiter: job {id}: cgroup limits not applied: {e}");
                None
            }
        });
        env.insert("ARBITER_CGROUP".into(), cgroup.map(|d| d.display().to_string()).unwrap_or_default());
        let launch = Launch {
            command: job.request.command.clone(),
            working_dir,
            env,
            log_path: self.log_path(id),
            exit_file: settings.data_dir.join("runs").join(format!("{id}.exit")),
            pid_file: settings.data_dir.join("runs").join(format!("{id}.pid")),
        };
        let _ = std::fs::create_dir_all(settings.data_dir.join("runs"));
        let now = unix_s();
        let first_start = job.runs == 0;
        let submitted_ms = job.submitted_unix_ms;
        // Persist the start before acting: `running` with no process id yet. If the daemon dies
        // before the id is recorded, recovery finds the run through its pid file.
        {
            let job = &mut state.jobs[id as usize];
            job.state = JobState::Running { gpus: gpus.clone(), pid: 0, started_unix_s: now };
            self.store.put_jobs(&[job])?;
        }
        match executor::spawn(&launch) {
            Ok(child) => {
                let pid = child.id().unwrap_or(0);
                let job = &mut state.jobs[id as usize];
                job.runs += 1;
                job.pending_reason = None;
                job.token_sha256 = crate::auth::sha256_hex(&token);
                let shown: Vec<String> = gpus.iter().map(u32::to_string).collect();
                job.transition(JobState::Running { gpus: gpus.clone(), pid, started_unix_s: now }, format!("started on GPUs {}", shown.join(",")), now);
                self.store.put_jobs(&[job])?;
                state.counters.runs_started += 1;
                if first_start {
                    state.counters.start_latency_ms_sum += unix_ms().saturating_sub(submitted_ms);
                    state.counters.start_latency_count += 1;
                }
                state.watched.insert(id, Watched { pgid: pid, kill_at_ms: None });
                self.watch_child(id, pid, child);
            }
            Err(e) => {
                for g in &gpus {
                    state.free_gpus.insert(*g);
                }
                let job = &mut state.jobs[id as usize];
                job.failures += 1;
                let to = if job.failures > job.request.max_retries { JobState::Failed } else { JobState::Queued };
                job.transition(to, format!("could not start: {e}"), now);
                self.store.put_jobs(&[job])?;
            }
        }
        Ok(())
    }

    /// Sends a running job its checkpoint signal and marks it stopping (persisted first).
    fn stop(&self, state: &mut State, id: u32, reason: StopReason) -> Result<(), DaemonError> {
        let job = &mut state.jobs[id as usize];
        let JobState::Running { gpus, pid, .. } = job.state.clone() else { return Ok(()) };
        let now = unix_s();
        job.transition(JobState::Stopping { gpus, pid, reason, since_unix_s: now }, format!("{reason:?}").to_lowercase(), now);
        self.store.put_jobs(&[job])?;
        let signal = executor::parse_signal(&job.request.checkpoint_signal).unwrap_or(Signal::SIGTERM);
        let grace_ms = job.request.grace_s * 1000;
        let _ = executor::signal_group(pid, signal);
        if let Some(w) = state.watched.get_mut(&id) {
            w.kill_at_ms = Some(unix_ms() + grace_ms);
        }
        Ok(())
    }

    /// Waits for a spawned run to end (its group empty), then records how.
    fn watch_child(&self, id: u32, pgid: u32, mut child: tokio::process::Child) {
        let daemon = self.clone();
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            wait_group_empty(pgid).await;
            let code = executor::read_exit_code(&daemon.settings.data_dir.join("runs").join(format!("{id}.exit"))).or(status.and_then(|s| s.code()));
            daemon.run_ended(id, code);
        });
    }

    /// Waits for a re-adopted run (not our child) to end.
    fn watch_adopted(&self, id: u32, pgid: u32) {
        let daemon = self.clone();
        tokio::spawn(async move {
            wait_group_empty(pgid).await;
            let code = executor::read_exit_code(&daemon.settings.data_dir.join("runs").join(format!("{id}.exit")));
            daemon.run_ended(id, code);
        });
    }

    /// A run ended with `code` (None: killed, or unknown).
    fn run_ended(&self, id: u32, code: Option<i32>) {
        {
            let mut state = self.lock();
            state.watched.remove(&id);
            let now = unix_s();
            let job = &mut state.jobs[id as usize];
            let (gpus, started) = match &job.state {
                JobState::Running { gpus, started_unix_s, .. } => (gpus.clone(), Some(*started_unix_s)),
                JobState::Stopping { gpus, .. } => (gpus.clone(), job.history.iter().rev().find(|t| t.to == "running").map(|t| t.at_unix_s)),
                _ => return,
            };
            job.executed_s += started.map_or(0.0, |s| (now - s).max(0) as f64);
            job.exit_code = code;
            let next = match (&job.state, code) {
                (JobState::Stopping { reason: StopReason::Preempted, .. }, _) => {
                    job.preemptions += 1;
                    (JobState::Queued, "preempted; requeued to resume from its checkpoint".to_string())
                }
                (JobState::Stopping { reason: StopReason::Cancelled, .. }, _) => (JobState::Cancelled, "cancelled".into()),
                (JobState::Stopping { reason: StopReason::TimedOut, .. }, _) => (JobState::Failed, "over its max_run_time_s".into()),
                (_, Some(0)) => (JobState::Succeeded, "exit code 0".into()),
                (_, code) => {
                    job.failures += 1;
                    let what = code.map_or("killed".to_string(), |c| format!("exit code {c}"));
                    if job.failures > job.request.max_retries {
                        (JobState::Failed, format!("{what}; retries used up"))
                    } else {
                        (JobState::Queued, format!("{what}; retry {} of {}", job.failures, job.request.max_retries))
                    }
                }
            };
            job.transition(next.0, next.1, now);
            if let Err(e) = self.store.put_jobs(&[job]) {
                eprintln!("arbiter: could not persist job {id}: {e}");
            }
            if let Some(spec) = state.specs.get(id as usize).cloned() {
                let record = state.jobs[id as usize].clone();
                if record.state.is_terminal() {
                    let active = ActiveJob::submitted(JobId(id), spec.gpus, spec.submit, spec.run_time_s);
                    state.policy.job_finished(&spec, &active, SimTime::from_ms(unix_ms()));
                }
            }
            for g in gpus {
                state.free_gpus.insert(g);
            }
        }
        if let Some(cg) = &self.settings.cgroups {
            cg.remove(id);
        }
        self.wake.notify_one();
    }

    /// Free GPU indices.
    pub fn free_gpus(&self) -> Vec<u32> {
        self.lock().free_gpus.iter().copied().collect()
    }
}

/// The policy configuration: defaults, with the tenants' weights and the daemon's round length
/// for round-based policies.
fn policy_config(tenants: &BTreeMap<String, Tenant>) -> arbiter_policy::PolicyConfig {
    arbiter_policy::PolicyConfig { tenant_weights: tenants.values().map(|t| (t.name.clone(), t.weight)).collect(), ..Default::default() }
}

/// Polls until no live process is left in group `pgid`.
async fn wait_group_empty(pgid: u32) {
    let mut delay = Duration::from_millis(5);
    while executor::group_alive(pgid) {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

/// The policy's view of a job.
fn spec_of(job: &JobRecord, cluster: &Cluster) -> JobSpec {
    let r = &job.request;
    let expected = r.expected_run_time_s.or(r.max_run_time_s).unwrap_or(DEFAULT_EXPECTED_RUN_S) as f64;
    let mut spec = JobSpec::new(JobId(job.id), SimTime::from_ms(job.submitted_unix_s.max(0) as u64 * 1000), r.gpus, expected);
    spec.tenant = job.tenant.clone();
    spec.name = r.name.clone();
    spec.priority = r.priority;
    spec.deadline = r.deadline_unix_s.map(|d| SimTime::from_ms(d.max(0) as u64 * 1000));
    spec.restart_overhead = Some(SimDuration::from_ms(0));
    // Speed per GPU type: 0 where the job may not run; measured throughput relative to its best
    // measured type where it has run; 1 (optimistic, so it gets tried) elsewhere.
    let allowed = |t: &str| r.gpu_types.is_empty() || r.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(t));
    let best = job.throughput_by_gpu_type.values().copied().fold(0.0, f64::max);
    if !r.gpu_types.is_empty() || best > 0.0 {
        spec.speed_by_gpu_type = cluster
            .gpu_type_names
            .iter()
            .map(|t| match (allowed(t), job.throughput_by_gpu_type.get(t)) {
                (false, _) => 0.0,
                (true, Some(m)) if best > 0.0 => m / best,
                (true, _) => 1.0,
            })
            .collect();
    }
    // Remaining work from measured progress, when the job said how many steps it has.
    if let (Some(total), Some(p)) = (job.total_steps, job.progress.as_ref())
        && let Some(rate) = p.throughput.filter(|t| *t > 0.0) {
            spec.run_time_s = job.executed_s + (total.saturating_sub(p.steps) as f64 / rate).max(1.0);
        }
    spec
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_throughput_gives_speeds_per_type_and_remaining_time() {
        let nodes = vec![
            Node { id: NodeId(0), name: "a".into(), rack: RackId(0), gpu_type: GpuTypeId(0), gpus: 2, cpus: 8, memory_gib: 32 },
            Node { id: NodeId(1), name: "b".into(), rack: RackId(0), gpu_type: GpuTypeId(1), gpus: 2, cpus: 8, memory_gib: 32 },
            Node { id: NodeId(2), name: "c".into(), rack: RackId(0), gpu_type: GpuTypeId(2), gpus: 2, cpus: 8, memory_gib: 32 },
        ];
        let cluster = Cluster::new(vec!["v100".into(), "k80".into(), "t4".into()], nodes).expect("valid");
        let request: SubmitRequest = serde_json::from_str(r#"{"command": "x", "gpu_types": ["v100", "k80"]}"#).expect("valid");
        let mut job = JobRecord::submitted(0, "t", request, 0, String::new());
        job.executed_s = 100.0;
        job.runs = 1;
        // Not measured yet: allowed types 1, the others 0.
        assert_eq!(spec_of(&job, &cluster).speed_by_gpu_type, vec![1.0, 1.0, 0.0]);
        // Measured 40 steps/s on V100s and 10 on K80s: K80 runs at a quarter of the speed.
        job.throughput_by_gpu_type = BTreeMap::from([("v100".to_string(), 40.0), ("k80".to_string(), 10.0)]);
        assert_eq!(spec_of(&job, &cluster).speed_by_gpu_type, vec![1.0, 0.25, 0.0]);
        // 1,000 of 5,000 steps done at 40 steps/s: 100 s left after the 100 s already run.
        job.total_steps = Some(5000);
        job.progress = Some(crate::job::Progress { steps: 1000, throughput: Some(40.0), at_unix_s: 0 });
        assert_eq!(spec_of(&job, &cluster).run_time_s, 200.0);
    }
}
