//! A recording fake executor for tests: it starts nothing, records every call, and ends runs on
//! a virtual clock — each job has an amount of work; a run ends when its work is done, or at
//! once when it gets its checkpoint signal (keeping its progress, like a job that checkpoints).
//! Tests step the daemon's loop by hand with it (Nomad's plan harness, YuniKorn's step tests).

use super::{Adoption, Capabilities, Ended, ExecError, Executor, RunSpec};
use crate::clock::{Clock, VirtualClock};
use crate::records::topology::NodeGpus;
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A call the daemon made.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// A run was launched.
    Launch {
        /// The job.
        job: u32,
        /// Where.
        nodes: Vec<NodeGpus>,
        /// CPU cores per node.
        cpus_per_node: f64,
        /// When (virtual Unix ms).
        at_ms: u64,
    },
    /// A run got a signal.
    Signal {
        /// The job.
        job: u32,
        /// The signal.
        signal: Signal,
        /// When.
        at_ms: u64,
    },
    /// A run was killed.
    Kill {
        /// The job.
        job: u32,
    },
    /// A run's CPU/memory limits changed.
    Reshare {
        /// The job.
        job: u32,
        /// CPU cores.
        cpus: f64,
    },
}

#[derive(Debug, Default)]
struct Inner {
    calls: Vec<Call>,
    /// Per job: seconds of work left (absent: the job runs until stopped).
    work_left_s: BTreeMap<u32, f64>,
    /// Per job: the exit code its runs end with when their work is done.
    exit_code: BTreeMap<u32, i32>,
    /// Live runs: job → (handle, started at ms).
    live: BTreeMap<u32, (u32, u64)>,
    ended: Vec<Ended>,
    next_handle: u32,
    capabilities: Option<Capabilities>,
    unavailable: std::collections::BTreeSet<String>,
    /// Each job's latest run token (`ARBITER_JOB_TOKEN`), as its run would see it.
    tokens: std::collections::BTreeMap<u32, String>,
    /// Each job's last run's environment.
    envs: std::collections::BTreeMap<u32, std::collections::BTreeMap<String, String>>,
    /// Runs go on after their checkpoint signal until the test ends them ([`FakeExecutor::exit`]),
    /// as real runs take a while to checkpoint.
    slow_stops: bool,
}

/// The fake (see the module docs).
#[derive(Debug)]
pub struct FakeExecutor {
    clock: Arc<VirtualClock>,
    inner: Mutex<Inner>,
}

impl FakeExecutor {
    /// A fake on `clock`.
    pub fn new(clock: Arc<VirtualClock>) -> Self {
        FakeExecutor {
            clock,
            inner: Mutex::new(Inner {
                next_handle: 1000,
                ..Default::default()
            }),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Job `job` has `seconds` of work; its runs exit with `code` once it is done.
    pub fn set_work(&self, job: u32, seconds: f64, code: i32) {
        let mut inner = self.inner();
        inner.work_left_s.insert(job, seconds);
        inner.exit_code.insert(job, code);
    }

    /// Says these nodes take no new runs (as Slurm says of drained or down nodes).
    pub fn set_unavailable(&self, nodes: &[&str]) {
        self.inner().unavailable = nodes.iter().map(|n| n.to_string()).collect();
    }

    /// Runs no longer end at their checkpoint signal; the test ends them with [`Self::exit`].
    pub fn set_slow_stops(&self) {
        self.inner().slow_stops = true;
    }

    /// Pretends the executor can do only `capabilities`.
    pub fn set_capabilities(&self, capabilities: Capabilities) {
        self.inner().capabilities = Some(capabilities);
    }

    /// The token job `job`'s latest run got for its progress reports (`ARBITER_JOB_TOKEN`).
    pub fn token(&self, job: u32) -> Option<String> {
        self.inner().tokens.get(&job).cloned()
    }

    /// The environment job `job`'s last run was launched with.
    pub fn env(&self, job: u32) -> Option<std::collections::BTreeMap<String, String>> {
        self.inner().envs.get(&job).cloned()
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.inner().calls.clone()
    }

    /// Jobs with a live run.
    pub fn live(&self) -> Vec<u32> {
        self.inner().live.keys().copied().collect()
    }

    /// When the first live run finishes its work (virtual Unix ms), if any will.
    pub fn next_end_ms(&self) -> Option<u64> {
        let inner = self.inner();
        inner
            .live
            .iter()
            .filter_map(|(job, (_, started))| {
                inner
                    .work_left_s
                    .get(job)
                    .map(|w| started + (w * 1000.0).ceil() as u64)
            })
            .min()
    }

    /// Ends the runs whose work is done by the clock's time.
    pub fn advance(&self) {
        let now = self.clock.now_ms();
        let mut inner = self.inner();
        let done: Vec<u32> = inner
            .live
            .iter()
            .filter(|(job, (_, started))| {
                inner
                    .work_left_s
                    .get(job)
                    .is_some_and(|w| started + (w * 1000.0).ceil() as u64 <= now)
            })
            .map(|(job, _)| *job)
            .collect();
        for job in done {
            let code = inner.exit_code.get(&job).copied().unwrap_or(0);
            end(&mut inner, job, now, Some(code));
        }
    }

    /// Ends a job's live run now with `code`, as if it exited by itself.
    pub fn exit(&self, job: u32, code: Option<i32>) {
        let now = self.clock.now_ms();
        end(&mut self.inner(), job, now, code);
    }
}

/// Ends `job`'s live run at `now_ms`, keeping the work it did.
fn end(inner: &mut Inner, job: u32, now_ms: u64, code: Option<i32>) {
    let Some((handle, started)) = inner.live.remove(&job) else {
        return;
    };
    if let Some(w) = inner.work_left_s.get_mut(&job) {
        *w = (*w - now_ms.saturating_sub(started) as f64 / 1000.0).max(0.0);
    }
    inner.ended.push(Ended { job, handle, code });
}

impl Executor for FakeExecutor {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn unavailable_nodes(&self) -> std::collections::BTreeSet<String> {
        self.inner().unavailable.clone()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities.unwrap_or(Capabilities {
            colocation: true,
            live_reshare: true,
            multi_node: true,
            automatic_uids: true,
            colocation_hint: None,
        })
    }

    fn launch(&self, run: &RunSpec) -> Result<u32, ExecError> {
        let at_ms = self.clock.now_ms();
        let mut inner = self.inner();
        if inner.live.contains_key(&run.job) {
            return Err(ExecError::Refused(format!(
                "job {} already has a live run",
                run.job
            )));
        }
        inner.calls.push(Call::Launch {
            job: run.job,
            nodes: run.nodes.clone(),
            cpus_per_node: run.cpus_per_node,
            at_ms,
        });
        if let Some(token) = run.env.get("ARBITER_JOB_TOKEN") {
            inner.tokens.insert(run.job, token.clone());
        }
        inner.envs.insert(run.job, run.env.clone());
        inner.next_handle += 1;
        let handle = inner.next_handle;
        inner.live.insert(run.job, (handle, at_ms));
        Ok(handle)
    }

    fn signal(&self, job: u32, _handle: u32, signal: Signal) {
        let at_ms = self.clock.now_ms();
        let mut inner = self.inner();
        inner.calls.push(Call::Signal { job, signal, at_ms });
        // The job checkpoints and exits at once (unless the test ends it later).
        if !inner.slow_stops {
            end(&mut inner, job, at_ms, Some(0));
        }
    }

    fn kill(&self, job: u32, _handle: u32) {
        let now = self.clock.now_ms();
        let mut inner = self.inner();
        inner.calls.push(Call::Kill { job });
        end(&mut inner, job, now, None);
    }

    fn reshare(
        &self,
        job: u32,
        _handle: u32,
        cpus: f64,
        _memory_bytes: u64,
    ) -> Result<(), ExecError> {
        self.inner().calls.push(Call::Reshare { job, cpus });
        Ok(())
    }

    fn take_ended(&self) -> Vec<Ended> {
        std::mem::take(&mut self.inner().ended)
    }

    fn adopt(&self, job: u32, _recorded: u32) -> Adoption {
        match self.inner().live.get(&job) {
            Some((handle, _)) => Adoption::Alive { handle: *handle },
            None => Adoption::Ended { code: None },
        }
    }
}
