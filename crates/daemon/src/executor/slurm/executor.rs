//! The Slurm executor: each run of a job is one Slurm batch job, pinned to the nodes the policy
//! chose (`--nodelist`, exact GPUs, CPUs and memory), so Slurm only runs what Arbiter decided.
//!
//! A run is named `arbiter-<job>.<run>`; its handle is the Slurm
//! job id. Preemption is the job's checkpoint signal to every process of the run
//! (`scancel --signal=SIG --full`), then — after the grace period — `scancel`; the daemon starts
//! the next run wherever the policy places it (a migration or a change of GPU type is a new
//! batch job). A poller thread reads `squeue --json --states=all` and reports runs that ended,
//! with their exit codes (kept by Slurm for `MinJobAge` seconds; `sacct` after that, where
//! accounting exists). After a daemon restart, runs are found again by id (or, for a run whose
//! id was not recorded, by name).

use super::cli::{BatchJob, SlurmCli, SlurmJob};
use super::shared::SharedRuns;
use crate::executor::{Adoption, Capabilities, Ended, ExecError, Executor, RunSpec};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    /// Live runs: Slurm job id → Arbiter job.
    live: BTreeMap<u32, u32>,
    ended: Vec<Ended>,
    /// The last `squeue` failure, said once.
    last_error: Option<String>,
    /// Nodes of the partition that take no new jobs (down, drained, gone), from `sinfo`.
    unavailable: BTreeSet<String>,
    /// Every node `sinfo` listed since the start.
    seen: BTreeSet<String>,
}

/// How often the poller reads the partition's nodes (`sinfo`), at most.
const NODES_EVERY: Duration = Duration::from_secs(5);

/// Runs jobs as Slurm batch jobs, or, sharing GPUs, as steps of GPU-holding allocations
/// ([`SharedRuns`]).
pub struct SlurmExecutor {
    cli: Arc<SlurmCli>,
    inner: Arc<Mutex<Inner>>,
    /// Runs as steps: always there, so that a restarted daemon finds the runs of either kind;
    /// new runs are steps when `share_gpus`.
    shared: Arc<SharedRuns>,
    share_gpus: bool,
}

/// Where the runs that share GPUs keep their files and what starts their srun.
#[derive(Clone, Debug)]
pub struct StepFiles {
    /// The daemon's private run-file directory.
    pub runs_dir: std::path::PathBuf,
    /// The run wrapper (`arbiter job-wrapper`).
    pub wrapper_exe: std::path::PathBuf,
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl SlurmExecutor {
    /// An executor submitting through `cli`, polling Slurm every `poll` for runs that ended and
    /// calling `wake` when one has; new runs are steps sharing GPUs when `share_gpus`.
    pub fn new(
        cli: SlurmCli,
        poll: Duration,
        wake: Arc<Notify>,
        files: StepFiles,
        share_gpus: bool,
    ) -> Self {
        let cli = Arc::new(cli);
        let inner = Arc::new(Mutex::new(Inner::default()));
        let shared = Arc::new(SharedRuns::new(
            cli.clone(),
            files.runs_dir,
            files.wrapper_exe,
            wake.clone(),
        ));
        let (poll_cli, poll_inner, poll_shared) =
            (cli.clone(), Arc::downgrade(&inner), Arc::downgrade(&shared));
        std::thread::Builder::new()
            .name("slurm-poll".into())
            .spawn(move || {
                // Ends with the executor (the weak reference dies with it).
                let mut nodes_read: Option<std::time::Instant> = None;
                while let Some(inner) = poll_inner.upgrade() {
                    if !lock(&inner).live.is_empty() && poll_once(&poll_cli, &inner) {
                        wake.notify_one();
                    }
                    if nodes_read.is_none_or(|t| t.elapsed() >= NODES_EVERY) {
                        nodes_read = Some(std::time::Instant::now());
                        if read_nodes(&poll_cli, &inner) {
                            wake.notify_one();
                        }
                        if let Some(shared) = poll_shared.upgrade()
                            && let Ok(jobs) = poll_cli.jobs()
                        {
                            shared.sweep_orphans(&jobs);
                        }
                    }
                    drop(inner);
                    std::thread::sleep(poll);
                }
            })
            .map_err(|e| tracing::error!("cannot start the Slurm poller: {e}"))
            .ok();
        SlurmExecutor {
            cli,
            inner,
            shared,
            share_gpus,
        }
    }

    fn job_name(job: u32, run: u32) -> String {
        format!("arbiter-{job}.{run}")
    }
}

/// Reads which nodes take no new jobs; returns whether that changed (said in the log).
fn read_nodes(cli: &SlurmCli, inner: &Mutex<Inner>) -> bool {
    let nodes = match cli.nodes() {
        Ok(nodes) => nodes,
        // Not knowing is not a change: the last answer stands (squeue's failure is said already).
        Err(e) => {
            tracing::debug!("cannot read the partition's nodes: {e}");
            return false;
        }
    };
    let mut inner = lock(inner);
    // A node that left the partition takes nothing new either.
    inner.seen.extend(nodes.iter().map(|n| n.name.clone()));
    let listed: BTreeSet<&String> = nodes.iter().map(|n| &n.name).collect();
    let gone = inner.seen.iter().filter(|n| !listed.contains(n)).cloned();
    let unavailable: BTreeSet<String> = nodes
        .iter()
        .filter(|n| !n.takes_new_jobs())
        .map(|n| n.name.clone())
        .chain(gone)
        .collect();
    if inner.unavailable == unavailable {
        return false;
    }
    for name in unavailable.symmetric_difference(&inner.unavailable) {
        match nodes.iter().find(|n| &n.name == name) {
            _ if !unavailable.contains(name) => {
                tracing::info!(node = %name, "node takes new runs again")
            }
            Some(n) => {
                tracing::warn!(node = %name, state = %n.state, flags = ?n.state_flags, "node takes no new runs")
            }
            None => tracing::warn!(node = %name, "node left the partition; it takes no new runs"),
        }
    }
    inner.unavailable = unavailable;
    true
}

/// Reads Slurm's queue once and moves the live runs that ended to `ended`; returns whether any
/// did.
fn poll_once(cli: &SlurmCli, inner: &Mutex<Inner>) -> bool {
    // The runs to judge are those submitted before `squeue` is asked: a run submitted while it
    // answers may be missing from its answer without having ended.
    let live: Vec<(u32, u32)> = lock(inner).live.iter().map(|(h, j)| (*h, *j)).collect();
    let jobs = match cli.jobs() {
        Ok(jobs) => jobs,
        Err(e) => {
            let mut inner = lock(inner);
            let said = e.to_string();
            if inner.last_error.as_deref() != Some(&said) {
                tracing::warn!(
                    "cannot read Slurm's queue (runs' ends are learned once it works again): {said}"
                );
                inner.last_error = Some(said);
            }
            return false;
        }
    };
    let by_id: BTreeMap<u64, &SlurmJob> = jobs.iter().map(|j| (j.id, j)).collect();
    let mut ended = Vec::new();
    for (handle, job) in live {
        match by_id.get(&u64::from(handle)) {
            Some(j) if j.state.is_finished() => ended.push(Ended {
                job,
                handle,
                code: j.exit_code,
            }),
            Some(_) => {}
            // Gone from the queue (older than MinJobAge): accounting, if any, knows its code.
            None => ended.push(Ended {
                job,
                handle,
                code: cli
                    .accounting_exit(u64::from(handle))
                    .ok()
                    .flatten()
                    .map(|(_, code)| code),
            }),
        }
    }
    let mut inner = lock(inner);
    inner.last_error = None;
    for e in &ended {
        inner.live.remove(&e.handle);
    }
    let any = !ended.is_empty();
    inner.ended.extend(ended);
    any
}

/// Makes the run's log writable by the job's identity, which is who opens it under Slurm
/// (slurmstepd, as the job's uid): the logs directory becomes traversable (0711, still not
/// listable or writable by tenants) and the log is created by the daemon — never through a
/// link — owned by the identity with mode 0600, so no other tenant can read it.
fn prepare_log(
    log: &std::path::Path,
    identity: Option<crate::security::identity::UnixIdentity>,
) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = log.parent() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(log)?;
    if let Some(id) = identity {
        std::os::unix::fs::fchown(&file, Some(id.uid), Some(id.gid))?;
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

impl Executor for SlurmExecutor {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn capabilities(&self) -> Capabilities {
        super::capabilities(self.share_gpus)
    }

    fn launch(&self, run: &RunSpec) -> Result<u32, ExecError> {
        let gpus_per_node = run
            .nodes
            .iter()
            .map(|n| n.devices.len() as u32)
            .max()
            .unwrap_or(0);
        if run
            .nodes
            .iter()
            .any(|n| n.devices.len() as u32 != gpus_per_node)
        {
            // sbatch asks the same GPUs of every node of a job.
            return Err(ExecError::Refused(format!(
                "job {} was placed unevenly over {} nodes; Slurm gives every node of a job the same GPUs",
                run.job,
                run.nodes.len()
            )));
        }
        // The checkpoint directory is created by the job itself, as its identity (as the run
        // wrapper does on the local executor).
        let command = format!(
            "mkdir -p -- \"$ARBITER_CHECKPOINT_DIR\" || exit 1\n{}",
            run.command
        );
        // A step's log is written by the run wrapper here (srun relays the tasks' output), a
        // batch job's by slurmstepd as the tenant's user.
        let log_owner = if self.share_gpus { None } else { run.identity };
        prepare_log(&run.log_path, log_owner)
            .map_err(|e| ExecError::Io(format!("{}: {e}", run.log_path.display())))?;
        let batch = BatchJob {
            name: Self::job_name(run.job, run.run),
            nodes: run.nodes.iter().map(|n| n.node.clone()).collect(),
            gpu_type: Some(run.gpu_type.clone()),
            gpus_per_node,
            // Slurm takes whole CPUs and MiB: rounded down, so that what the policy fitted on a
            // node still fits.
            cpus_per_node: (run.cpus_per_node.floor() as u32).max(1),
            memory_mb_per_node: (run.memory_bytes_per_node >> 20).max(1),
            output: run.log_path.clone(),
            working_dir: run.working_dir.clone(),
            env: run.env.clone(),
            command,
            identity: run.identity.map(|i| (i.uid, i.gid)),
        };
        if self.share_gpus {
            return self.shared.launch(run, batch);
        }
        let id = self
            .cli
            .submit(&batch)
            .map_err(|e| ExecError::Io(e.to_string()))?;
        let handle = u32::try_from(id)
            .map_err(|_| ExecError::Refused(format!("Slurm job id {id} does not fit 32 bits")))?;
        lock(&self.inner).live.insert(handle, run.job);
        Ok(handle)
    }

    fn signal(&self, job: u32, handle: u32, signal: Signal) {
        if self.shared.has(job) {
            return self.shared.signal(job, handle, signal);
        }
        let name = signal.as_str().trim_start_matches("SIG");
        if let Err(e) = self.cli.signal_all(u64::from(handle), name) {
            tracing::warn!(job, slurm_job = handle, "could not signal the run: {e}");
        }
    }

    fn kill(&self, job: u32, handle: u32) {
        if self.shared.has(job) {
            return self.shared.kill(job, handle);
        }
        if let Err(e) = self.cli.kill(u64::from(handle)) {
            tracing::warn!(job, slurm_job = handle, "could not cancel the run: {e}");
        }
    }

    fn reshare(
        &self,
        job: u32,
        _handle: u32,
        _cpus: f64,
        _memory_bytes: u64,
    ) -> Result<(), ExecError> {
        Err(ExecError::Refused(format!(
            "job {job}: Slurm cannot change a running job's CPUs or memory"
        )))
    }

    fn unavailable_nodes(&self) -> BTreeSet<String> {
        lock(&self.inner).unavailable.clone()
    }

    fn take_ended(&self) -> Vec<Ended> {
        let mut ended = std::mem::take(&mut lock(&self.inner).ended);
        ended.extend(self.shared.take_ended());
        ended
    }

    fn adopt(&self, job: u32, recorded: u32) -> Adoption {
        // A step's srun left its pid file (which names the very process): that kind first.
        if let Some(adoption) = self.shared.adopt(job, recorded) {
            return adoption;
        }
        let jobs = match self.cli.jobs() {
            Ok(jobs) => jobs,
            Err(e) => {
                // Not knowing is not ending: keep watching the recorded run; the poller learns
                // its fate once Slurm answers.
                tracing::warn!(job, "cannot ask Slurm about the run: {e}");
                if recorded != 0 {
                    lock(&self.inner).live.insert(recorded, job);
                    return Adoption::Alive { handle: recorded };
                }
                return Adoption::NeverStarted;
            }
        };
        let prefix = format!("arbiter-{job}.");
        let found = if recorded != 0 {
            jobs.iter().find(|j| j.id == u64::from(recorded))
        } else {
            // The daemon died between persisting the start and recording sbatch's answer.
            jobs.iter()
                .filter(|j| j.name.starts_with(&prefix) && !j.state.is_finished())
                .max_by_key(|j| j.id)
        };
        match found {
            Some(j) if !j.state.is_finished() => {
                let handle = j.id as u32;
                lock(&self.inner).live.insert(handle, job);
                Adoption::Alive { handle }
            }
            Some(j) => Adoption::Ended { code: j.exit_code },
            None if recorded == 0 => Adoption::NeverStarted,
            None => Adoption::Ended {
                code: self
                    .cli
                    .accounting_exit(u64::from(recorded))
                    .ok()
                    .flatten()
                    .map(|(_, code)| code),
            },
        }
    }
}
