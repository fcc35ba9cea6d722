//! Usage accounting in the daemon (`records/usage.rs` has the records and the report): what a
//! run used is accounted when it ends, in memory and — with the job's record — in the store; the
//! decayed fair share and the per-tenant metrics read the in-memory sums, the usage report reads
//! the store.
//!
//! ```text
//!   run ends (run_ended, recovery) ──► account_ended_run: row on the job record,
//!        ledger (decayed, for the policy) and totals (for /metrics) in memory
//!   start ──► every stored row into the ledger and the totals
//!   round ──► ledger + runs going on ──► policy.set_tenant_usage
//! ```

use crate::daemon::{Daemon, State};
use crate::records::job::JobRecord;
use crate::records::store::{Store, StoreError};
use crate::records::usage::{GroupBy, Report, RunUsage, UsageRow};
use arbiter_model::SimTime;
use std::collections::BTreeMap;

/// What the daemon keeps in memory of every run ever accounted.
#[derive(Debug, Default)]
pub struct UsageTotals {
    /// GPU-seconds of ended runs by (tenant, GPU type), since the store began.
    pub gpu_s: BTreeMap<(String, String), f64>,
    /// Ended runs' decayed usage, when the policy weighs tenants by it.
    pub(crate) ledger: Option<arbiter_policy::UsageLedger>,
}

impl UsageTotals {
    /// Empty totals; a ledger decaying with `half_life_s` when fair share is on.
    pub(crate) fn new(half_life_s: Option<f64>) -> Self {
        UsageTotals {
            gpu_s: BTreeMap::new(),
            ledger: half_life_s.map(arbiter_policy::UsageLedger::new),
        }
    }

    /// Counts an ended run.
    pub(crate) fn add(&mut self, run: &RunUsage) {
        *self
            .gpu_s
            .entry((run.tenant.clone(), run.gpu_type.clone()))
            .or_insert(0.0) += run.seconds() as f64 * f64::from(run.gpus);
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.add_run(
                &run.tenant,
                f64::from(run.gpus),
                unix_s(run.started_unix_s),
                unix_s(run.ended_unix_s),
            );
        }
    }

    /// Totals of every row in `store`.
    pub(crate) fn load(store: &Store, half_life_s: Option<f64>) -> Result<Self, StoreError> {
        let mut totals = UsageTotals::new(half_life_s);
        store.for_each_usage(|run| totals.add(&run))?;
        Ok(totals)
    }
}

/// Unix seconds as the policies' time (ms).
fn unix_s(s: i64) -> SimTime {
    SimTime::from_ms(u64::try_from(s).unwrap_or(0).saturating_mul(1000))
}

impl Daemon {
    /// What job `id`'s current run used up to `now_unix_s`: its GPUs (of one type), the CPU cores
    /// and memory reserved for it over its nodes, from its start. `None` when it holds no GPUs.
    pub(crate) fn run_usage(
        &self,
        state: &State,
        job: &JobRecord,
        now_unix_s: i64,
    ) -> Option<RunUsage> {
        let gpus = job.state.gpus()?;
        let started = job.current_run_started_unix_s().unwrap_or(now_unix_s);
        let nodes = state.topology.devices(gpus);
        let gpus_per_node = nodes
            .iter()
            .map(|n| n.devices.len() as u32)
            .max()
            .unwrap_or(0);
        let (cpus, memory_bytes) = self.limits_for(state, job.id, gpus_per_node, job.host_share);
        let node_count = nodes.len().max(1) as f64;
        Some(RunUsage {
            job: job.id,
            tenant: job.tenant.clone(),
            user: job.request.user.clone().unwrap_or_default(),
            gpu_type: gpus
                .first()
                .and_then(|g| state.topology.gpu_type_name(*g))
                .unwrap_or_default()
                .to_string(),
            gpus: gpus.len() as u32,
            cpus: cpus * node_count,
            memory_gib: memory_bytes as f64 / f64::from(1u32 << 30) * node_count,
            started_unix_s: started,
            ended_unix_s: now_unix_s.max(started),
        })
    }

    /// Accounts job `id`'s run, which ended at `now_unix_s` (call before concluding it): the row
    /// goes on the job's record (and so into the store with it) under the next key, and into
    /// the in-memory totals.
    pub(crate) fn account_ended_run(&self, state: &mut State, id: u32, now_unix_s: i64) {
        let Some(run) = self.run_usage(state, &state.jobs[id as usize], now_unix_s) else {
            return;
        };
        state.usage.add(&run);
        let job = &mut state.jobs[id as usize];
        job.runs_accounted += 1;
        job.last_run_usage = Some(run);
    }

    /// The runs going on, as usage up to `now_unix_s`.
    pub(crate) fn running_usage(&self, state: &State, now_unix_s: i64) -> Vec<RunUsage> {
        state
            .jobs
            .iter()
            .filter(|j| j.state.gpus().is_some())
            .filter_map(|j| self.run_usage(state, j, now_unix_s))
            .collect()
    }

    /// Gives the policy the tenants' decayed usage as of now, when it weighs tenants by it.
    pub(crate) fn hand_usage_to_policy(&self, state: &mut State) {
        let Some(ledger) = state.usage.ledger.as_ref() else {
            return;
        };
        let now_unix_s = self.now_s();
        // The watched runs are the ones going on (no scan of every job on record).
        let running: Vec<(String, f64, SimTime)> = state
            .watched
            .keys()
            .filter_map(|&id| state.jobs.get(id as usize))
            .filter_map(|j| {
                Some((
                    j.tenant.clone(),
                    j.state.gpus()?.len() as f64,
                    unix_s(j.current_run_started_unix_s().unwrap_or(now_unix_s)),
                ))
            })
            .collect();
        let usage = ledger.usage_at(
            SimTime::from_ms(self.now_ms()),
            running.iter().map(|(t, g, s)| (t.as_str(), *g, *s)),
        );
        if let Some(policy) = state.policy.as_mut() {
            policy.set_tenant_usage(&usage);
        }
        state.fallback.set_tenant_usage(&usage);
    }

    /// The usage report: runs with time in `[since_unix_s, now]`, the ones going on included up
    /// to now, summed by `by`; only `tenant`'s when given (a tenant sees its own only).
    pub fn usage_report(
        &self,
        tenant: Option<&str>,
        by: Vec<GroupBy>,
        since_unix_s: i64,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let now = self.now_s();
        let mut report = Report::new(by, since_unix_s, now);
        // Ended runs of the store first, then the ones going on (not in the store yet).
        self.store.for_each_usage(|run| {
            if tenant.is_none_or(|t| t == run.tenant) && run.ended_unix_s >= since_unix_s {
                report.add(&run, false);
            }
        })?;
        let running = self.with_state(|state| self.running_usage(state, now));
        for run in running
            .iter()
            .filter(|r| tenant.is_none_or(|t| t == r.tenant))
        {
            report.add(run, true);
        }
        Ok(report.rows())
    }

    /// GPU-seconds by (tenant, GPU type) since the store began, runs going on included up to
    /// now (for `/metrics`: admin or scrape token only).
    pub fn gpu_seconds_by_tenant(&self) -> BTreeMap<(String, String), f64> {
        let now = self.now_s();
        self.with_state(|state| {
            let mut totals = state.usage.gpu_s.clone();
            for run in self.running_usage(state, now) {
                *totals.entry((run.tenant, run.gpu_type)).or_insert(0.0) +=
                    run.seconds() as f64 * f64::from(run.gpus);
            }
            totals
        })
    }
}
