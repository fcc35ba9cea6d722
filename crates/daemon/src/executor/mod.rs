//! The executor seam: how the daemon's decisions become runs on machines.
//!
//! The daemon decides (which job, which nodes and GPUs, how much CPU and memory); an [`Executor`]
//! carries a run out and reports how it ended. Three implementations:
//! - [`local::LocalExecutor`]: each run is a process session on this machine, through the run
//!   wrapper (`arbiter job-wrapper`), with cgroup limits and the tenant's unix identity;
//! - [`slurm::SlurmExecutor`]: each run is a Slurm batch job pinned to the chosen nodes;
//! - [`fake::FakeExecutor`]: records every call and ends runs when a test says so, on a virtual
//!   clock — the daemon's loop stepped by hand, without processes.
//!
//! Run handles are the executor's own (a process id, a Slurm job id); the daemon stores them and
//! gives them back, and never looks inside.

pub mod access;
pub mod fake;
pub mod local;
pub mod process;
pub mod slurm;
pub mod wrapper;

pub use process::Launch;

use crate::config::{ExecutorKind, ServeConfig};
use crate::records::job::parse_signal;
use crate::records::topology::NodeGpus;
use crate::security::identity::UnixIdentity;
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Everything one run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    /// The job.
    pub job: u32,
    /// Which run of the job this is (1 for the first).
    pub run: u32,
    /// The job's tenant.
    pub tenant: String,
    /// The job's shell command.
    pub command: String,
    /// Working directory.
    pub working_dir: PathBuf,
    /// The job's environment: its own variables and `ARBITER_*` (GPU visibility is the
    /// executor's to set).
    pub env: BTreeMap<String, String>,
    /// The job's log (output appended).
    pub log_path: PathBuf,
    /// The checkpoint directory, created by the job as its identity before the command runs.
    pub checkpoint_dir: PathBuf,
    /// Run as this identity (`None`: the daemon's own).
    pub identity: Option<UnixIdentity>,
    /// The nodes and GPUs (several nodes for a multi-node gang).
    pub nodes: Vec<NodeGpus>,
    /// The GPU type.
    pub gpu_type: String,
    /// CPU cores per node.
    pub cpus_per_node: f64,
    /// Memory per node, bytes.
    pub memory_bytes_per_node: u64,
    /// Most processes the tenant's uid may have (when it runs as its own uid).
    pub max_processes: Option<u64>,
    /// Most bytes of output the run may add to its log.
    pub max_log_bytes: Option<u64>,
}

/// A run that ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The job.
    pub job: u32,
    /// The run's handle.
    pub handle: u32,
    /// Its exit code (`None`: killed, or unknown).
    pub code: Option<i32>,
}

/// What became of a run a previous daemon started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adoption {
    /// Still running; the executor watches it again (its end comes through
    /// [`Executor::take_ended`]).
    Alive {
        /// The run's handle (known even when the previous daemon died before recording it).
        handle: u32,
    },
    /// It ended while no daemon watched.
    Ended {
        /// Its exit code, if known.
        code: Option<i32>,
    },
    /// It never started (the daemon died between persisting the start and launching).
    NeverStarted,
}

/// What an executor can carry out; the daemon refuses, at start-up, a policy that needs more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Two runs may share GPUs (co-location).
    pub colocation: bool,
    /// A running run's CPU/memory limits can change without restarting it (otherwise the daemon
    /// checkpoints and restarts it with the new share).
    pub live_reshare: bool,
    /// A run may span several nodes.
    pub multi_node: bool,
    /// Runs may execute as uids without an account (the daemon's automatic tenant uids).
    pub automatic_uids: bool,
    /// Where it cannot share GPUs but can be told to: how (said to a job that waits for it).
    pub colocation_hint: Option<&'static str>,
}

/// Why an executor could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The daemon's side failed (a file, a process, a command): not the job's fault.
    #[error("{0}")]
    Io(String),
    /// The backend refused the request (it names why).
    #[error("{0}")]
    Refused(String),
}

/// Carries runs out (see the module docs).
pub trait Executor: Send + Sync {
    /// Its name, as in the config (`local`, `slurm`).
    fn name(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// Starts a run; returns its handle.
    fn launch(&self, run: &RunSpec) -> Result<u32, ExecError>;
    /// Sends a run its checkpoint signal (the job's processes only, once).
    fn signal(&self, job: u32, handle: u32, signal: Signal);
    /// Ends a run at once, everything in it.
    fn kill(&self, job: u32, handle: u32);
    /// Changes a running run's CPU/memory limits (only if [`Capabilities::live_reshare`]).
    fn reshare(&self, job: u32, handle: u32, cpus: f64, memory_bytes: u64)
    -> Result<(), ExecError>;
    /// Runs that ended since the last call, in the order they ended.
    fn take_ended(&self) -> Vec<Ended>;
    /// Looks for the run of `job` a previous daemon started (`recorded`: the handle it
    /// recorded, 0 if none).
    fn adopt(&self, job: u32, recorded: u32) -> Adoption;
    /// Housekeeping at each round (the local executor kills processes that escaped their run).
    fn sweep(&self, _live: &SweepInput<'_>) {}
    /// Nodes that take no new runs now (Slurm: down, drained, failing, not responding): the
    /// daemon places nothing new there; runs already there go on until they end.
    fn unavailable_nodes(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
}

/// What the periodic sweep needs to know of the daemon.
#[derive(Clone, Copy, Debug)]
pub struct SweepInput<'a> {
    /// Automatic tenant uids, with their tenant.
    pub automatic_uids: &'a BTreeMap<u32, String>,
    /// Handles of live runs, with their tenant's uid when it has an automatic one.
    pub live: &'a [(u32, Option<u32>)],
    /// Automatic uids of tenants a run of which ended since the last sweep.
    pub ended_uids: &'a [u32],
}

/// The default checkpoint signal when a job names none that parses.
pub fn checkpoint_signal(name: &str) -> Signal {
    parse_signal(name).unwrap_or(Signal::SIGTERM)
}
/// (The executors' capabilities are stated here, beside the executors: `config` names them and
/// stays a leaf.)
impl ServeConfig {
    /// What the configured executor can carry out.
    pub fn capabilities(&self) -> Capabilities {
        match self.executor {
            ExecutorKind::Slurm => slurm::capabilities(self.slurm.share_gpus),
            kind => kind.capabilities(),
        }
    }
}

impl ExecutorKind {
    /// What the executor can carry out (Slurm: without `share_gpus`).
    pub fn capabilities(self) -> Capabilities {
        match self {
            ExecutorKind::Local => local::CAPABILITIES,
            ExecutorKind::Slurm => slurm::capabilities(false),
        }
    }
}
