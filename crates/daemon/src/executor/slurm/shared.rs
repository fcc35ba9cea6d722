//! GPU sharing under Slurm (`[slurm] share_gpus = true`): Slurm gives a GPU to one job, so
//! runs that share GPUs (Muri's groups, Gandiva's pairs, Horus, the packed max-min program)
//! cannot each be a batch job. Instead the GPUs of each placement are held by one allocation,
//! a *holder* (a batch job named `arbiter-share-<job>.<run>` that only sleeps, owned by the
//! daemon's user), and every run is a step in it (`srun --jobid=<holder> --overlap`): the runs
//! of one placement see the same `CUDA_VISIBLE_DEVICES`.
//!
//! The `srun` of each run is started where the daemon runs, through the run wrapper, exactly as
//! the local executor starts a job ([`LocalExecutor`]): its pid and exit files make the run
//! survive a daemon restart and give its exit code (srun's is the step's); its output is the
//! tasks'. The checkpoint signal goes to the step's tasks (`scancel --signal=SIG <step>`: srun
//! itself would end the step on SIGTERM). A holder is cancelled when its last run ends; after a
//! restart, holders whose runs are all gone are cancelled by [`SharedRuns::sweep_orphans`].

use super::cli::{BatchJob, SlurmCli, SlurmJob};
use crate::executor::local::LocalExecutor;
use crate::executor::{Adoption, Ended, ExecError, Executor, RunSpec};
use crate::records::topology::NodeGpus;
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Name prefix of holder allocations.
pub const HOLDER_PREFIX: &str = "arbiter-share-";

/// One holder: its Slurm job id, its CPUs and memory (MB) per node (`None` when adopted: not
/// known) and the jobs whose runs are steps in it.
#[derive(Debug)]
struct Holder {
    id: u64,
    size: Option<(u32, u64)>,
    members: BTreeSet<u32>,
}

/// Where a run is: the placement it shares (the holder's key) and its step name.
#[derive(Debug, Clone)]
struct Member {
    key: String,
    holder: u64,
    step_name: String,
}

#[derive(Debug, Default)]
struct Holders {
    by_key: BTreeMap<String, Holder>,
    members: BTreeMap<u32, Member>,
}

/// Runs as steps of holder allocations (see the module docs).
pub struct SharedRuns {
    cli: Arc<SlurmCli>,
    local: LocalExecutor,
    runs_dir: PathBuf,
    holders: Mutex<Holders>,
    /// Set once the daemon has adopted the runs of a previous daemon (its first launch or end
    /// collection comes after): holders nobody claimed by then are orphans.
    recovered: AtomicBool,
    /// Unclaimed holders seen by the last sweep: cancelled when still unclaimed at the next
    /// (a holder is recorded only once sbatch has answered).
    suspects: Mutex<BTreeSet<u64>>,
}

fn lock(m: &Mutex<Holders>) -> std::sync::MutexGuard<'_, Holders> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The placement a holder holds: GPU type, then each node with the daemon's device indices.
fn key_of(gpu_type: &str, nodes: &[NodeGpus]) -> String {
    let nodes: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "{}:{}",
                n.node,
                n.devices
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect();
    format!("{gpu_type}/{}", nodes.join(";"))
}

impl SharedRuns {
    /// Runs whose srun is started through `wrapper_exe`, with run files in `runs_dir`; `wake`
    /// is called when one ends.
    pub fn new(
        cli: Arc<SlurmCli>,
        runs_dir: PathBuf,
        wrapper_exe: PathBuf,
        wake: Arc<Notify>,
    ) -> Self {
        let local = LocalExecutor::new(runs_dir.clone(), wrapper_exe, None, wake);
        SharedRuns {
            cli,
            local,
            runs_dir,
            holders: Mutex::new(Holders::default()),
            recovered: AtomicBool::new(false),
            suspects: Mutex::new(BTreeSet::new()),
        }
    }

    fn holder_file(&self, job: u32) -> PathBuf {
        self.runs_dir.join(format!("{job}.holder"))
    }

    /// Whether job `job`'s live run is one of these.
    pub fn has(&self, job: u32) -> bool {
        lock(&self.holders).members.contains_key(&job)
    }

    /// The holder for `run`'s placement and its size: the live one, or a new allocation sized to
    /// the GPUs' share of each node (at least the run's own CPUs and memory).
    fn holder_for(
        &self,
        run: &RunSpec,
        key: &str,
        gpus_per_node: u32,
        cpus: u32,
        memory_mb: u64,
    ) -> Result<(u64, Option<(u32, u64)>), ExecError> {
        if let Some(h) = lock(&self.holders).by_key.get(key) {
            return Ok((h.id, h.size));
        }
        let nodes = self
            .cli
            .nodes()
            .map_err(|e| ExecError::Io(format!("reading the partition's nodes: {e}")))?;
        let share = |f: &dyn Fn(&super::cli::SlurmNode) -> u64| -> u64 {
            run.nodes
                .iter()
                .filter_map(|n| nodes.iter().find(|s| s.name == n.node))
                .map(|s| f(s) * u64::from(gpus_per_node) / u64::from(s.gpus.max(1)))
                .min()
                .unwrap_or(0)
        };
        let size = (
            (share(&|s| u64::from(s.cpus)) as u32).max(cpus),
            share(&|s| s.memory_mb).max(memory_mb),
        );
        let holder = BatchJob {
            name: format!("{HOLDER_PREFIX}{}.{}", run.job, run.run),
            nodes: run.nodes.iter().map(|n| n.node.clone()).collect(),
            gpu_type: Some(run.gpu_type.clone()),
            gpus_per_node,
            cpus_per_node: size.0,
            memory_mb_per_node: size.1,
            output: PathBuf::from("/dev/null"),
            working_dir: PathBuf::from("/"),
            env: BTreeMap::new(),
            command: "exec sleep 2147483647".into(),
            identity: None,
        };
        let id = self
            .cli
            .submit(&holder)
            .map_err(|e| ExecError::Io(e.to_string()))?;
        lock(&self.holders).by_key.insert(
            key.to_string(),
            Holder {
                id,
                size: Some(size),
                members: BTreeSet::new(),
            },
        );
        tracing::info!(
            slurm_job = id,
            placement = key,
            "holding GPUs for shared runs"
        );
        Ok((id, Some(size)))
    }

    /// Starts `run` as a step of its placement's holder; `batch` is the run as a batch job
    /// (what the step runs on the nodes). Returns the handle (the srun session's pid).
    pub fn launch(&self, run: &RunSpec, mut batch: BatchJob) -> Result<u32, ExecError> {
        self.recovered.store(true, Ordering::SeqCst);
        // A previous run's pid and exit files must not speak for this one if the daemon dies
        // before its srun starts (it would be concluded with the old exit code).
        for ext in ["pid", "exit"] {
            let _ = std::fs::remove_file(self.runs_dir.join(format!("{}.{ext}", run.job)));
        }
        let key = key_of(&run.gpu_type, &run.nodes);
        let (holder, size) = self.holder_for(
            run,
            &key,
            batch.gpus_per_node,
            batch.cpus_per_node,
            batch.memory_mb_per_node,
        )?;
        // Co-located steps overlap on the allocation's CPUs and memory; one never asks more
        // than the allocation has (Slurm would refuse to create it).
        if let Some((cpus, memory_mb)) = size {
            batch.cpus_per_node = batch.cpus_per_node.min(cpus);
            batch.memory_mb_per_node = batch.memory_mb_per_node.min(memory_mb);
        }
        let undo = |e: ExecError| {
            let _ = std::fs::remove_file(self.holder_file(run.job));
            self.release_if_empty(&key);
            e
        };
        let step = super::cli::step_command(
            self.cli.bin_dir.as_deref(),
            holder,
            &batch,
            run.max_processes,
        )
        .map_err(|e| undo(ExecError::Refused(e.to_string())))?;
        let step_name = batch.name.clone();
        std::fs::write(
            self.holder_file(run.job),
            format!("{holder}\n{key}\n{step_name}\n"),
        )
        .map_err(|e| {
            undo(ExecError::Io(format!(
                "{}: {e}",
                self.holder_file(run.job).display()
            )))
        })?;
        // srun runs as the daemon with a bare environment: the job's variables are in the
        // task's script, handed over in the environment (readable by root alone until the task
        // has become the job's user), never on a command line, which anyone may read. The job
        // creates its checkpoint directory on the nodes; the wrapper's is a private one here.
        let private = self.runs_dir.join("srun");
        std::fs::create_dir_all(&private)
            .map_err(|e| undo(ExecError::Io(format!("{}: {e}", private.display()))))?;
        let env = BTreeMap::from([
            (
                "PATH".to_string(),
                "/usr/local/bin:/usr/bin:/bin".to_string(),
            ),
            (
                "ARBITER_CHECKPOINT_DIR".to_string(),
                private.display().to_string(),
            ),
            (super::cli::STEP_SCRIPT_VAR.to_string(), step.script),
        ]);
        let srun = RunSpec {
            command: step.command,
            working_dir: PathBuf::from("/"),
            env,
            checkpoint_dir: private,
            identity: None,
            nodes: vec![NodeGpus {
                node: "localhost".into(),
                devices: Vec::new(),
            }],
            max_processes: None,
            ..run.clone()
        };
        let handle = self.local.launch(&srun).map_err(undo)?;
        let mut holders = lock(&self.holders);
        if let Some(h) = holders.by_key.get_mut(&key) {
            h.members.insert(run.job);
        }
        holders.members.insert(
            run.job,
            Member {
                key,
                holder,
                step_name,
            },
        );
        Ok(handle)
    }

    /// The step of job `job`'s run, once srun has created it.
    fn step_of(&self, job: u32) -> Option<String> {
        let member = lock(&self.holders).members.get(&job).cloned()?;
        let steps = self
            .cli
            .steps(member.holder)
            .map_err(|e| {
                tracing::warn!(
                    job,
                    "cannot list the steps of allocation {}: {e}",
                    member.holder
                )
            })
            .ok()?;
        steps
            .into_iter()
            .find(|(_, name)| *name == member.step_name)
            .map(|(step, _)| step)
    }

    /// Sends the run its checkpoint signal: to the step's tasks; while srun still waits for the
    /// holder to start, to srun's session (which ends the run before it began).
    pub fn signal(&self, job: u32, handle: u32, signal: Signal) {
        match self.step_of(job) {
            Some(step) => {
                if let Err(e) = self
                    .cli
                    .signal_step(&step, signal.as_str().trim_start_matches("SIG"))
                {
                    tracing::warn!(job, step, "could not signal the run: {e}");
                }
            }
            None => self.local.signal(job, handle, signal),
        }
    }

    /// Ends the run at once: srun is killed (Slurm then ends its step) and the step too.
    pub fn kill(&self, job: u32, handle: u32) {
        let step = self.step_of(job);
        self.local.kill(job, handle);
        if let Some(step) = step
            && let Err(e) = self.cli.signal_step(&step, "KILL")
        {
            tracing::debug!(job, step, "step already gone: {e}");
        }
    }

    /// Forgets job `job`'s run; its holder is released when it was the last run there.
    fn forget(&self, job: u32) {
        let _ = std::fs::remove_file(self.holder_file(job));
        let key = {
            let mut holders = lock(&self.holders);
            let key = holders.members.remove(&job).map(|m| m.key);
            if let Some(h) = key.as_ref().and_then(|k| holders.by_key.get_mut(k)) {
                h.members.remove(&job);
            }
            key
        };
        if let Some(key) = key {
            self.release_if_empty(&key);
        }
    }

    /// Cancels the holder of `key` if no run is in it.
    fn release_if_empty(&self, key: &str) {
        let mut holders = lock(&self.holders);
        if holders
            .by_key
            .get(key)
            .is_none_or(|h| !h.members.is_empty())
        {
            return;
        }
        let Some(holder) = holders.by_key.remove(key) else {
            return;
        };
        drop(holders);
        if let Err(e) = self.cli.cancel(holder.id) {
            tracing::warn!(
                slurm_job = holder.id,
                "could not release the shared GPUs' allocation: {e}"
            );
        }
    }

    /// Runs that ended; their holders are released when empty.
    pub fn take_ended(&self) -> Vec<Ended> {
        self.recovered.store(true, Ordering::SeqCst);
        let ended = self.local.take_ended();
        for e in &ended {
            // srun is gone; a step it left (killed before Slurm could end it) goes too.
            if let Some(step) = self.step_of(e.job) {
                let _ = self.cli.signal_step(&step, "KILL");
            }
            self.forget(e.job);
        }
        ended
    }

    /// Finds job `job`'s run again after a restart (`None`: no run of this kind was recorded
    /// for that handle).
    pub fn adopt(&self, job: u32, recorded: u32) -> Option<Adoption> {
        let adoption = self.local.adopt(job, recorded);
        if adoption == Adoption::NeverStarted {
            return None;
        }
        if let Adoption::Alive { .. } = adoption
            && let Ok(text) = std::fs::read_to_string(self.holder_file(job))
        {
            let mut lines = text.lines();
            if let (Some(Ok(holder)), Some(key), Some(step_name)) = (
                lines.next().map(str::parse::<u64>),
                lines.next(),
                lines.next(),
            ) {
                let mut holders = lock(&self.holders);
                holders
                    .by_key
                    .entry(key.to_string())
                    .or_insert(Holder {
                        id: holder,
                        size: None,
                        members: BTreeSet::new(),
                    })
                    .members
                    .insert(job);
                holders.members.insert(
                    job,
                    Member {
                        key: key.to_string(),
                        holder,
                        step_name: step_name.to_string(),
                    },
                );
            }
        }
        Some(adoption)
    }

    /// Cancels holders (in Slurm's list `jobs`) that no live run claims: left by a daemon that
    /// stopped after their runs ended. Only once the runs were adopted again, and only a holder
    /// unclaimed at two sweeps in a row (one being created is recorded when sbatch answers).
    pub fn sweep_orphans(&self, jobs: &[SlurmJob]) {
        if !self.recovered.load(Ordering::SeqCst) {
            return;
        }
        let known: BTreeSet<u64> = lock(&self.holders).by_key.values().map(|h| h.id).collect();
        let me = nix::unistd::geteuid().as_raw();
        let unclaimed: BTreeSet<u64> = jobs
            .iter()
            .filter(|j| {
                j.name.starts_with(HOLDER_PREFIX)
                    && j.user_id == Some(me)
                    && !j.state.is_finished()
                    && !known.contains(&j.id)
            })
            .map(|j| j.id)
            .collect();
        let mut suspects = self.suspects.lock().unwrap_or_else(|p| p.into_inner());
        for id in unclaimed.intersection(&suspects) {
            tracing::warn!(
                slurm_job = id,
                "releasing an allocation of shared GPUs that no run uses"
            );
            if let Err(e) = self.cli.cancel(*id) {
                tracing::warn!(slurm_job = id, "could not cancel it: {e}");
            }
        }
        *suspects = unclaimed;
    }
}
