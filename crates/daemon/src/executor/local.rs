//! The local executor: each run is a process session on this machine, through the run wrapper
//! (see [`super::process`]). The run files (the wrapper's pid and exit files, the launch spec)
//! live in the daemon's private `runs/` directory and are this executor's business alone.

use super::process::{self, Launch};
use super::{Adoption, Capabilities, Ended, ExecError, Executor, RunSpec, SweepInput};
use crate::security::cgroup::Cgroups;
use crate::security::containment::RunConfinement;
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// What the local executor can do: co-located runs simply see the same GPUs; cgroup limits
/// change in place; one machine only.
pub const CAPABILITIES: Capabilities = Capabilities {
    colocation: true,
    live_reshare: true,
    multi_node: false,
    automatic_uids: true,
    colocation_hint: None,
};

/// Runs jobs as process sessions on this machine.
pub struct LocalExecutor {
    runs_dir: PathBuf,
    wrapper_exe: PathBuf,
    cgroups: Option<Cgroups>,
    confinement: RunConfinement,
    ended: Arc<Mutex<Vec<Ended>>>,
    wake: Arc<Notify>,
}

impl LocalExecutor {
    /// An executor keeping its run files in `runs_dir` (private to the daemon), starting runs
    /// through `wrapper_exe` (`arbiter job-wrapper`), limiting them with `cgroups` where
    /// available, and calling `wake` when a run ends.
    pub fn new(
        runs_dir: PathBuf,
        wrapper_exe: PathBuf,
        cgroups: Option<Cgroups>,
        wake: Arc<Notify>,
    ) -> Self {
        LocalExecutor {
            runs_dir,
            wrapper_exe,
            cgroups,
            confinement: RunConfinement::default(),
            ended: Arc::new(Mutex::new(Vec::new())),
            wake,
        }
    }

    /// The same executor, confining its runs with `confinement` (their own PID namespace, the
    /// RLIMIT_DATA fallback); without it, runs are started as the Slurm executor's steps are.
    pub fn confined(self, confinement: RunConfinement) -> Self {
        LocalExecutor {
            confinement,
            ..self
        }
    }

    fn run_file(&self, job: u32, ext: &str) -> PathBuf {
        self.runs_dir.join(format!("{job}.{ext}"))
    }

    /// Waits (as a task) for the run whose session is `sid` to be empty, then reports its end.
    fn watch(&self, job: u32, sid: u32, child: Option<tokio::process::Child>) {
        let ended = self.ended.clone();
        let wake = self.wake.clone();
        let exit_file = self.run_file(job, "exit");
        let cgroups = self.cgroups.clone();
        tokio::spawn(async move {
            let status = match child {
                Some(mut child) => child.wait().await.ok(),
                None => None,
            };
            let mut delay = Duration::from_millis(5);
            while process::run_alive(sid) {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(250));
            }
            let code = process::read_exit_code(&exit_file).or(status.and_then(|s| s.code()));
            if let Some(cg) = &cgroups {
                cg.remove(job);
            }
            ended.lock().unwrap_or_else(|p| p.into_inner()).push(Ended {
                job,
                handle: sid,
                code,
            });
            wake.notify_one();
        });
    }
}

impl Executor for LocalExecutor {
    fn name(&self) -> &'static str {
        "local"
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn launch(&self, run: &RunSpec) -> Result<u32, ExecError> {
        let [node] = run.nodes.as_slice() else {
            return Err(ExecError::Refused(format!(
                "the local executor runs on one machine; job {} was placed on {} nodes",
                run.job,
                run.nodes.len()
            )));
        };
        let mut env = run.env.clone();
        let visible: Vec<String> = node.devices.iter().map(u32::to_string).collect();
        env.insert("CUDA_VISIBLE_DEVICES".into(), visible.join(","));
        // GPU indices come from nvidia-smi, which numbers GPUs in PCI bus order; CUDA's default
        // order (fastest first) differs on machines with mixed GPUs.
        env.insert("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into());
        let cgroup = self.cgroups.as_ref().and_then(|cg| {
            match cg.prepare(run.job, run.cpus_per_node, run.memory_bytes_per_node) {
                Ok(dir) => Some(dir),
                Err(e) => {
                    tracing::warn!(job = run.job, "cgroup limits not applied: {e}");
                    None
                }
            }
        });
        let launch = Launch {
            command: run.command.clone(),
            working_dir: run.working_dir.clone(),
            env,
            log_path: run.log_path.clone(),
            exit_file: self.run_file(run.job, "exit"),
            pid_file: self.run_file(run.job, "pid"),
            checkpoint_dir: run.checkpoint_dir.clone(),
            identity: run.identity,
            tenant: Some(run.tenant.clone()),
            max_processes: run.max_processes,
            max_log_bytes: run.max_log_bytes,
            pid_namespace: self.confinement.pid_namespace,
            // A run without a cgroup (none here, or its group could not be prepared) is held by
            // RLIMIT_DATA instead.
            memory_rlimit_bytes: (self.confinement.memory_rlimit && cgroup.is_none())
                .then_some(run.memory_bytes_per_node),
            cgroup,
        };
        let child =
            process::spawn(&launch, &self.wrapper_exe).map_err(|e| ExecError::Io(e.to_string()))?;
        let pid = child.id().unwrap_or(0);
        self.watch(run.job, pid, Some(child));
        Ok(pid)
    }

    fn signal(&self, _job: u32, handle: u32, signal: Signal) {
        let _ = process::signal_run(handle, signal);
    }

    fn kill(&self, _job: u32, handle: u32) {
        let _ = process::signal_run(handle, Signal::SIGKILL);
    }

    fn reshare(
        &self,
        job: u32,
        _handle: u32,
        cpus: f64,
        memory_bytes: u64,
    ) -> Result<(), ExecError> {
        match &self.cgroups {
            Some(cg) => cg
                .prepare(job, cpus, memory_bytes)
                .map(|_| ())
                .map_err(|e| ExecError::Io(format!("cgroup limits of job {job}: {e}"))),
            None => Ok(()), // limits are not enforced on this machine (said at start)
        }
    }

    fn take_ended(&self) -> Vec<Ended> {
        std::mem::take(&mut *self.ended.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn adopt(&self, job: u32, recorded: u32) -> Adoption {
        // The wrapper's pid file says who it was (pid, start time, boot): only that very process
        // is re-adopted, never an unrelated one that got the same pid after a reboot or a pid
        // wrap. It also has the pid of a run whose id the daemon had not recorded.
        let identity = process::read_run_identity(&self.run_file(job, "pid"))
            .filter(|i| recorded == 0 || i.pid == recorded);
        match identity {
            Some(i) if i.is_alive() => {
                self.watch(job, i.pid, None);
                Adoption::Alive { handle: i.pid }
            }
            Some(_) => Adoption::Ended {
                code: process::read_exit_code(&self.run_file(job, "exit")),
            },
            // Persisted as starting, but the wrapper never recorded itself: the run never began.
            None => Adoption::NeverStarted,
        }
    }

    /// Kills the processes that escaped their run: a process of a tenant's *automatic* uid (one
    /// the daemon allocated, so nothing else runs as it) outside the sessions of that tenant's
    /// live runs was started by a job and left its session (`setsid`, a double fork) to outlive
    /// the run and its GPUs. Existing users named in `tenant_users` are left alone (their logins
    /// run as them too).
    fn sweep(&self, input: &SweepInput<'_>) {
        if input.automatic_uids.is_empty() {
            return;
        }
        let live: BTreeSet<u32> = input.live.iter().map(|(sid, _)| *sid).collect();
        let busy: BTreeSet<u32> = input.live.iter().filter_map(|(_, uid)| *uid).collect();
        // A scan of /proc is not atomic: a process that forks and exits faster than the scan
        // reads the table is never seen. So: where a tenant has no live run, everything of its
        // uid is killed at once with kill(-1) issued *as that uid* (the kernel signals all of a
        // uid's processes under one lock, so no fork escapes); where it has live runs, the scan
        // is repeated while it still finds strays.
        // Tenants whose run just ended and that have none left: killed whether or not the scan
        // below sees anything (a chain of short-lived processes may be invisible to it).
        let mut idle_with_processes: BTreeSet<u32> = input
            .ended_uids
            .iter()
            .copied()
            .filter(|uid| !busy.contains(uid))
            .collect();
        for pass in 0..5 {
            let mut found = false;
            for p in crate::security::procs::processes() {
                if p.dead || live.contains(&p.session) {
                    continue;
                }
                let Some(tenant) = input.automatic_uids.get(&p.uid) else {
                    continue;
                };
                if !busy.contains(&p.uid) {
                    idle_with_processes.insert(p.uid);
                    continue;
                }
                if pass == 0 {
                    tracing::warn!(
                        tenant,
                        pid = p.pid,
                        session = p.session,
                        "killing a process that left its run's session"
                    );
                }
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p.pid as i32),
                    Signal::SIGKILL,
                );
                found = true;
            }
            if !found {
                break;
            }
        }
        for uid in idle_with_processes {
            let tenant = input.automatic_uids.get(&uid).map_or("", String::as_str);
            tracing::warn!(
                tenant,
                uid,
                "killing every process of a tenant with no live run"
            );
            kill_everything_of(uid);
        }
    }
}

/// Sends SIGKILL to every process of `uid` at once: `kill -9 -1` run as that uid (the kernel
/// signals all processes the caller may signal, atomically with respect to fork).
fn kill_everything_of(uid: u32) {
    use std::os::unix::process::CommandExt;
    let status = std::process::Command::new("/bin/kill")
        .args(["-9", "-1"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .uid(uid)
        .gid(uid)
        .status();
    if let Err(e) = status {
        tracing::warn!(uid, "could not run /bin/kill as uid {uid}: {e}");
    }
}

/// Tenants by automatic uid (for [`SweepInput`]).
pub fn automatic_uids(allocated: &BTreeMap<String, u32>) -> BTreeMap<u32, String> {
    allocated
        .iter()
        .map(|(tenant, uid)| (*uid, tenant.clone()))
        .collect()
}
