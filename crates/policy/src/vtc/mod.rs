//! VTC, the Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language Models",
//! OSDI'24), with GPU-seconds for tokens: fairness between tenants counted over time.
//!
//! Each tenant has a counter of the service it received, GPU-seconds ÷ its weight, advanced by
//! what its jobs actually ran (attained service, measured at each scheduling point and at each
//! job's end). At a scheduling point the GPUs are handed out job by job: the *backlogged* tenant
//! (one with a job not yet given GPUs at this point) with the lowest counter — plus what it was
//! handed at this point already — gets its next job, in its own job order (`[policy.vtc] inner`:
//! FIFO by default; SRTF, SJF or LAS inside a tenant make VTC the tenant layer above that
//! order). Handing a job out charges its tenant `GPUs × policy.vtc.quantum_s ÷ weight`
//! provisionally (the service it will receive before the next decision; VTC's dispatch charge),
//! so one decision spreads the GPUs the way the counters would after a round. Running jobs
//! compete like the others (preemptive, at every scheduling point), keeping their GPUs when they
//! stay; while a job waits the policy decides again every quantum (its rounds).
//!
//! No banked credit: a tenant with no job in the system that submits one has its counter lifted
//! to the lowest counter of the tenants with jobs (VTC's `max(c, min backlogged)`), or, when no
//! tenant has any, to the counter of the last tenant that left — so an idle tenant cannot come
//! back and take the cluster for as long as it was away. Deterministic: tenants in name order
//! break ties, maps are ordered.
//!
//! With decayed fair share (`[policy.fairshare] half_life_s`, the daemon's `fairshare = true`)
//! the counters are the caller's decayed usage ÷ weight ([`crate::fairshare`]) instead of VTC's
//! own sums, and there is no lift: an idle tenant's usage decays, so the credit it banks is
//! bounded by the half-life — Slurm's rule, where VTC's is none at all.

use std::collections::{BTreeMap, BTreeSet};

use crate::TenantWeights;
use crate::descriptor::{Descriptor, Family};
use crate::fairshare::{FairShareConfig, TenantUsage};
use crate::mechanisms::greedy::{GreedyOptions, schedule_in_order};
use crate::mechanisms::placement::Placing;
use crate::{Policy, PolicyError, SchedulerView, order_key};
use arbiter_model::{ActiveJob, Decision, JobSpec, SimTime};

/// `vtc`.
pub const DESCRIPTOR: Descriptor = Descriptor::new("vtc", Family::Events, "VTC: the backlogged tenant with the least weighted service received over time first, no banked credit; FIFO (or policy.vtc.inner) inside a tenant (OSDI'24)")
    .paper("VTC (OSDI'24, Sheng et al.)")
    .detail("Virtual Token Counter with GPU-seconds for tokens: a counter per tenant of the service its jobs received (GPU-seconds ÷ `policy.tenant_weights`); at each decision GPUs go job by job to the backlogged tenant with the lowest counter (each job handed out charges its tenant GPUs × `policy.vtc.quantum_s` ÷ weight for this decision), its jobs in FIFO order (or `policy.vtc.inner`: srtf, sjf, las — VTC as the tenant layer above that order); a tenant arriving from idle is lifted to the lowest counter of the tenants with jobs (or that of the last one to leave): no banked credit; preemptive, decides again every quantum while jobs wait; with `policy.fairshare.half_life_s`, the counters are the tenants' decayed GPU-seconds ÷ weight (no lift: the half-life bounds banked credit)");

/// Builds `vtc` with its knobs, the tenants' weights and its fair share (all checked).
pub fn build(
    vtc: &VtcConfig,
    tenant_weights: &TenantWeights,
    fairshare: &FairShareConfig,
    placing: Placing,
) -> Result<Vtc, PolicyError> {
    let mut policy = Vtc::new(
        *vtc,
        tenant_weights.clone(),
        GreedyOptions::fit_first(placing),
    )?;
    policy.half_life_s = fairshare.half_life_s()?;
    Ok(policy)
}

/// The order of a tenant's own jobs under VTC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VtcInner {
    /// Submission order.
    #[default]
    Fifo,
    /// Shortest remaining time (oracle).
    Srtf,
    /// Shortest job (oracle run time).
    Sjf,
    /// Least attained service (GPU-seconds).
    Las,
}

/// VTC's settings (scenario table `[policy.vtc]`; tenant weights: `policy.tenant_weights`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VtcConfig {
    /// Service charged when a job is handed GPUs, as seconds of its GPUs (the time until the
    /// next decision it is expected to run; a round).
    pub quantum_s: f64,
    /// The order inside a tenant.
    pub inner: VtcInner,
}

impl Default for VtcConfig {
    fn default() -> Self {
        VtcConfig {
            quantum_s: 300.0,
            inner: VtcInner::Fifo,
        }
    }
}

/// The VTC policy (see the module docs).
#[derive(Clone, Debug)]
pub struct Vtc {
    config: VtcConfig,
    weights: TenantWeights,
    options: GreedyOptions,
    /// Per tenant: service received ÷ weight, GPU-seconds.
    counters: BTreeMap<String, f64>,
    /// Per job id: the GPU-seconds already counted.
    counted: Vec<f64>,
    /// Tenants with jobs in the system at the previous point.
    present: BTreeSet<String>,
    /// The counter of the last tenant that left the system (its last job ended).
    last_left: f64,
    /// With decayed fair share (`[policy.fairshare]`): its half-life, and the tenants' decayed
    /// usage the caller gave for the coming decision, which then stands for the counters.
    half_life_s: Option<f64>,
    usage: TenantUsage,
}

impl Vtc {
    /// A VTC policy with tenant `weights` (unlisted tenants weigh 1), placing as `options` say
    /// (preemption is always on).
    pub fn new(
        config: VtcConfig,
        weights: TenantWeights,
        options: GreedyOptions,
    ) -> Result<Self, PolicyError> {
        if !(config.quantum_s.is_finite() && config.quantum_s > 0.0) {
            return Err(PolicyError::Config(format!(
                "vtc.quantum_s (the VTC quantum) must be a positive number of seconds, got {}",
                config.quantum_s
            )));
        }
        check_weights(&weights)?;
        let options = GreedyOptions {
            preemptive: true,
            head_of_line_blocking: false,
            ..options
        };
        Ok(Vtc {
            config,
            weights,
            options,
            counters: BTreeMap::new(),
            counted: Vec::new(),
            present: BTreeSet::new(),
            last_left: 0.0,
            half_life_s: None,
            usage: TenantUsage::new(),
        })
    }

    /// Takes new tenant weights, keeping the counters: service received so far stays charged
    /// at the weight it was received under (VTC's counters are per-tenant sums).
    fn reweigh(&mut self, weights: &TenantWeights) -> Result<(), PolicyError> {
        check_weights(weights)?;
        self.weights = weights.clone();
        Ok(())
    }

    fn weight(&self, tenant: &str) -> f64 {
        self.weights.get(tenant).copied().unwrap_or(1.0)
    }

    /// Counts the service `job` received since it was last counted.
    fn count(&mut self, tenant: &str, job: &ActiveJob, now: SimTime) {
        let i = job.id.index();
        if self.counted.len() <= i {
            self.counted.resize(i + 1, 0.0);
        }
        let attained = job.attained_gpu_s_at(now);
        let delta = attained - self.counted[i];
        if delta > 0.0 {
            self.counted[i] = attained;
            let add = delta / self.weight(tenant);
            match self.counters.get_mut(tenant) {
                Some(c) => *c += add,
                None => {
                    self.counters.insert(tenant.to_string(), add);
                }
            }
        }
    }

    /// The tenants' counters (GPU-seconds ÷ weight), for reports and tests.
    pub fn counters(&self) -> &BTreeMap<String, f64> {
        &self.counters
    }

    /// The inner order's key of `job` (smaller first).
    fn inner_key(&self, job: &ActiveJob, spec: &JobSpec, now: SimTime) -> (u64, SimTime, u32) {
        let primary = match self.config.inner {
            VtcInner::Fifo => 0,
            VtcInner::Srtf => order_key(job.remaining_s_at(now)),
            VtcInner::Sjf => order_key(spec.run_time_s),
            VtcInner::Las => order_key(job.attained_gpu_s_at(now)),
        };
        (primary, job.submit, job.id.0)
    }
}

impl Policy for Vtc {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }

    fn set_tenant_weights(&mut self, weights: &TenantWeights) -> Result<(), PolicyError> {
        self.reweigh(weights)
    }

    fn fairshare_half_life_s(&self) -> Option<f64> {
        self.half_life_s
    }

    fn set_tenant_usage(&mut self, usage: &TenantUsage) {
        self.usage.clone_from(usage);
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        if self.half_life_s.is_none() {
            self.advance_counters(view, now);
        }
        self.hand_out(view, now)
    }

    fn job_finished(&mut self, spec: &JobSpec, job: &ActiveJob, now: SimTime) {
        let tenant = spec.tenant.clone();
        self.count(&tenant, job, now);
    }
}

impl Vtc {
    /// VTC's own counters: the service received since the last point, and arrivals from idle
    /// lifted (no banked credit).
    fn advance_counters(&mut self, view: &SchedulerView<'_>, now: SimTime) {
        // 1. Service received since the last point.
        for job in view.jobs {
            self.count(&view.spec(job).tenant, job, now);
        }
        // 2. Arrivals from idle: no banked credit.
        let present: BTreeSet<&str> = view
            .jobs
            .iter()
            .map(|j| view.spec(j).tenant.as_str())
            .collect();
        let was = |t: &str| self.present.contains(t);
        if present.len() != self.present.len() || present.iter().any(|t| !was(t)) {
            let staying: Vec<f64> = present
                .iter()
                .filter(|t| was(t))
                .filter_map(|t| self.counters.get(*t).copied())
                .collect();
            let floor = if staying.is_empty() {
                self.last_left
            } else {
                staying.iter().copied().fold(f64::INFINITY, f64::min)
            };
            let arrived: Vec<&str> = present.iter().copied().filter(|t| !was(t)).collect();
            for tenant in arrived {
                let c = self.counters.entry(tenant.to_string()).or_insert(0.0);
                *c = c.max(floor);
            }
            for tenant in self
                .present
                .iter()
                .filter(|t| !present.contains(t.as_str()))
            {
                self.last_left = self.counters.get(tenant).copied().unwrap_or(self.last_left);
            }
            self.present = present.iter().map(|t| t.to_string()).collect();
        }
    }

    /// A tenant's counter at this point: VTC's own, or with fair share its decayed usage ÷
    /// its weight (no lift: the half-life is what bounds an idle tenant's credit).
    fn counter(&self, tenant: &str) -> f64 {
        match self.half_life_s {
            Some(_) => self.usage.get(tenant).copied().unwrap_or(0.0) / self.weight(tenant),
            None => self.counters.get(tenant).copied().unwrap_or(0.0),
        }
    }

    /// Hands the GPUs out job by job, the lowest counter first, and places in that order.
    fn hand_out(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        // 3. Hand out jobs: the lowest counter (with this point's charges) first.
        let mut queues: BTreeMap<&str, Vec<(u64, SimTime, u32, usize)>> = BTreeMap::new();
        for (i, job) in view.jobs.iter().enumerate() {
            let spec = view.spec(job);
            let (k, submit, id) = self.inner_key(job, spec, now);
            queues
                .entry(spec.tenant.as_str())
                .or_default()
                .push((k, submit, id, i));
        }
        for q in queues.values_mut() {
            // Last element first out.
            q.sort_unstable_by(|a, b| b.cmp(a));
        }
        let mut charged: BTreeMap<&str, f64> =
            queues.keys().map(|t| (*t, self.counter(t))).collect();
        let mut rank = vec![usize::MAX; view.jobs.len()];
        let mut next = 0;
        // Only a job that can get GPUs is charged (fragmentation aside: the placement below
        // may still skip one).
        let mut free = u64::from(view.cluster.total_gpus());
        while let Some((&tenant, _)) = charged
            .iter()
            .filter(|(t, _)| queues.get(**t).is_some_and(|q| !q.is_empty()))
            .min_by(|a, b| a.1.total_cmp(b.1).then_with(|| a.0.cmp(b.0)))
        {
            let Some((_, _, _, i)) = queues.get_mut(tenant).and_then(Vec::pop) else {
                break;
            };
            rank[i] = next;
            next += 1;
            let gpus = u64::from(view.jobs[i].gpus);
            if gpus <= free {
                free -= gpus;
                let w = self.weight(tenant);
                if let Some(c) = charged.get_mut(tenant) {
                    *c += gpus as f64 * self.config.quantum_s / w;
                }
            }
        }
        let index: BTreeMap<arbiter_model::JobId, usize> = view
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.id, i))
            .collect();
        let mut decision = schedule_in_order(view, now, self.options, |j| {
            index.get(&j.id).map_or(usize::MAX, |i| rank[*i])
        });
        // Counters move while jobs run: decide again after a quantum while a job that could
        // run waits. With nothing running nothing moves (and a job too large for the cluster
        // must not keep a simulation awake for ever).
        let placed: BTreeSet<arbiter_model::JobId> = decision.run.iter().map(|a| a.job).collect();
        let total = view.cluster.total_gpus();
        let waits = view
            .jobs
            .iter()
            .any(|j| !placed.contains(&j.id) && j.gpus <= total);
        if waits && !decision.run.is_empty() {
            decision.wake_at =
                Some(now + arbiter_model::SimDuration::from_secs_f64(self.config.quantum_s));
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests;

/// Every weight positive and finite (a counter divides by it).
fn check_weights(weights: &TenantWeights) -> Result<(), PolicyError> {
    match weights.iter().find(|(_, w)| !(w.is_finite() && **w > 0.0)) {
        Some((tenant, w)) => Err(PolicyError::Config(format!(
            "tenant {tenant}'s weight must be positive, got {w}"
        ))),
        None => Ok(()),
    }
}
