//! Decayed fair share, as Slurm's multifactor priority computes it: a tenant's past GPU use,
//! decayed with a half-life, lowers its priority relative to its weight (its share).
//!
//! ```text
//!   runs (tenant, GPUs, start, end) ──► UsageLedger (the caller's: engine or daemon)
//!        ──► decayed GPU-seconds per tenant at `now` ──► Policy::set_tenant_usage ──► policy
//! ```
//!
//! The policy stays pure: it never sees a run or a clock, only the decayed usage its caller hands
//! it before a decision — the simulator's engine and the daemon keep the same [`UsageLedger`], so
//! both worlds give a policy the same numbers for the same history.
//!
//! Usage decays continuously: a GPU held over `[s, e]` is worth, at time `t ≥ e`,
//! `∫_s^e 2^(-(t-τ)/h) dτ = h/ln 2 · (2^(-(t-e)/h) − 2^(-(t-s)/h))` GPU-seconds (Slurm decays
//! in steps of `PriorityCalcPeriod`; this is its limit). With `U_t` a tenant's decayed usage and
//! `w_t` its weight, over the tenants that compete, Slurm's classic fair-share factor is
//! `F_t = 2^(-(U_t/ΣU) / (w_t/Σw))`: 1 with no usage, ½ for a tenant that used exactly its share,
//! ¼ at twice its share. `hierarchical` weighs tenants by `w_t · F_t`; `vtc` ranks them by
//! `U_t / w_t` (its counters, decayed: the half-life bounds the credit an idle tenant banks).

use arbiter_model::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Decayed GPU-seconds per tenant (tenants absent used nothing).
pub type TenantUsage = BTreeMap<String, f64>;

/// `[policy.fairshare]`: decayed fair share for the tenant-level policies (`hierarchical`, `vtc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FairShareConfig {
    /// Half-life of past usage, seconds (Slurm's `PriorityDecayHalfLife`); 0: off — the policy
    /// as published, without fair share. The daemon's `fairshare_half_life` sets it.
    pub half_life_s: f64,
}

impl FairShareConfig {
    /// The half-life when fair share is on; an error names a value that cannot be one.
    pub fn half_life_s(&self) -> Result<Option<f64>, crate::PolicyError> {
        match self.half_life_s {
            0.0 => Ok(None),
            h if h.is_finite() && h > 0.0 => Ok(Some(h)),
            h => Err(crate::PolicyError::Config(format!(
                "fairshare.half_life_s must be a positive number of seconds (0: off), got {h}"
            ))),
        }
    }
}

/// GPU-seconds of `gpus` GPUs held over `[start, end]`, decayed to `at` with half-life
/// `half_life_s` (see the module docs). `at` before `end` counts as `end`.
pub fn decayed_gpu_s(
    gpus: f64,
    start: SimTime,
    end: SimTime,
    at: SimTime,
    half_life_s: f64,
) -> f64 {
    if end <= start {
        return 0.0;
    }
    let at = at.max(end);
    let age = |t: SimTime| at.saturating_since(t).as_secs_f64() / half_life_s;
    gpus * half_life_s / std::f64::consts::LN_2 * ((-age(end)).exp2() - (-age(start)).exp2())
}

/// Slurm's classic fair-share factor `2^(-(usage/total_usage) / (weight/total_weight))`, in
/// (0, 1]: 1 when nothing was used.
pub fn fairshare_factor(usage: f64, weight: f64, total_usage: f64, total_weight: f64) -> f64 {
    if !(total_usage > 0.0 && weight > 0.0 && total_weight > 0.0) {
        return 1.0;
    }
    let used = (usage / total_usage).max(0.0);
    let share = weight / total_weight;
    (-(used / share)).exp2()
}

/// Every run's decayed GPU-seconds per tenant: the ended runs settled, the running ones added
/// at each query. Kept by the caller of a policy (the simulator's engine, the daemon).
#[derive(Clone, Debug)]
pub struct UsageLedger {
    half_life_s: f64,
    /// Per tenant: its ended runs' usage, decayed to the time beside it.
    settled: BTreeMap<String, (f64, SimTime)>,
}

impl UsageLedger {
    /// An empty ledger decaying with `half_life_s` (> 0).
    pub fn new(half_life_s: f64) -> Self {
        UsageLedger {
            half_life_s,
            settled: BTreeMap::new(),
        }
    }

    /// The half-life, seconds.
    pub fn half_life_s(&self) -> f64 {
        self.half_life_s
    }

    /// Adds an ended run of `tenant`: `gpus` GPUs held over `[start, end]` (in any order of
    /// ends: each tenant's sum is kept as of its latest end).
    pub fn add_run(&mut self, tenant: &str, gpus: f64, start: SimTime, end: SimTime) {
        let h = self.half_life_s;
        let decay =
            |from: SimTime, to: SimTime| (-(to.saturating_since(from).as_secs_f64() / h)).exp2();
        match self.settled.get_mut(tenant) {
            Some((value, as_of)) => {
                let to = (*as_of).max(end);
                *value = *value * decay(*as_of, to) + decayed_gpu_s(gpus, start, end, to, h);
                *as_of = to;
            }
            None => {
                self.settled.insert(
                    tenant.to_string(),
                    (decayed_gpu_s(gpus, start, end, end, h), end),
                );
            }
        }
    }

    /// Each tenant's usage at `now`: its ended runs, and `running` — `(tenant, GPUs, since)` of
    /// the runs going on, counted up to `now`. Tenants that used nothing are absent.
    pub fn usage_at<'a>(
        &self,
        now: SimTime,
        running: impl IntoIterator<Item = (&'a str, f64, SimTime)>,
    ) -> TenantUsage {
        let h = self.half_life_s;
        let mut usage: TenantUsage = self
            .settled
            .iter()
            .map(|(tenant, (value, as_of))| {
                (
                    tenant.clone(),
                    value * (-(now.saturating_since(*as_of).as_secs_f64() / h)).exp2(),
                )
            })
            .collect();
        for (tenant, gpus, since) in running {
            let add = decayed_gpu_s(gpus, since, now, now, h);
            if add > 0.0 {
                match usage.get_mut(tenant) {
                    Some(u) => *u += add,
                    None => {
                        usage.insert(tenant.to_string(), add);
                    }
                }
            }
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SimTime {
        SimTime::from_ms(s * 1000)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn usage_halves_every_half_life() {
        let h = 3600.0;
        // One GPU for one half-life, seen at its end: h/ln2 · (1 − ½).
        let fresh = decayed_gpu_s(1.0, at(0), at(3600), at(3600), h);
        assert!(
            close(fresh, 3600.0 / std::f64::consts::LN_2 / 2.0),
            "{fresh}"
        );
        // Two half-lives later it is worth a quarter; four GPUs are worth four times one.
        assert!(close(
            decayed_gpu_s(1.0, at(0), at(3600), at(3 * 3600), h),
            fresh / 4.0
        ));
        assert!(close(
            decayed_gpu_s(4.0, at(0), at(3600), at(3600), h),
            4.0 * fresh
        ));
        // A short run is worth about its GPU-seconds at once (one second: barely decayed).
        let second = decayed_gpu_s(1.0, at(0), at(1), at(1), h);
        assert!((second - 1.0).abs() < 1e-3 && second < 1.0, "{second}");
        assert_eq!(
            decayed_gpu_s(1.0, at(5), at(5), at(9), h),
            0.0,
            "an empty run counts nothing"
        );
    }

    #[test]
    fn the_ledger_sums_settled_and_running_runs_and_decays_them_together() {
        let h = 100.0;
        let mut ledger = UsageLedger::new(h);
        ledger.add_run("a", 2.0, at(0), at(100));
        // Ended out of order: a run that ended before the tenant's latest end still counts, decayed.
        ledger.add_run("a", 1.0, at(0), at(50));
        let expected_a = decayed_gpu_s(2.0, at(0), at(100), at(300), h)
            + decayed_gpu_s(1.0, at(0), at(50), at(300), h);
        let usage = ledger.usage_at(at(300), [("b", 1.0, at(200))]);
        assert!(
            close(usage["a"], expected_a),
            "{} vs {expected_a}",
            usage["a"]
        );
        assert!(close(
            usage["b"],
            decayed_gpu_s(1.0, at(200), at(300), at(300), h)
        ));
        // The same history added in the other order gives the same numbers.
        let mut other = UsageLedger::new(h);
        other.add_run("a", 1.0, at(0), at(50));
        other.add_run("a", 2.0, at(0), at(100));
        assert!(close(other.usage_at(at(300), [])["a"], expected_a));
        assert!(
            !other.usage_at(at(300), []).contains_key("b"),
            "a tenant that used nothing is absent"
        );
    }

    #[test]
    fn the_factor_is_slurms_classic_one() {
        // No usage: 1. Exactly its share: ½. Twice its share: ¼. Half of it: 2^-½.
        assert_eq!(fairshare_factor(0.0, 1.0, 0.0, 2.0), 1.0);
        assert!(close(fairshare_factor(50.0, 1.0, 100.0, 2.0), 0.5));
        assert!(close(fairshare_factor(100.0, 1.0, 100.0, 2.0), 0.25));
        assert!(close(
            fairshare_factor(25.0, 1.0, 100.0, 2.0),
            0.5f64.sqrt()
        ));
        // A heavier weight is a larger share: the same usage costs it less.
        assert!(close(fairshare_factor(75.0, 3.0, 100.0, 4.0), 0.5));
    }

    #[test]
    fn a_half_life_is_positive_or_zero_for_off() {
        assert_eq!(
            FairShareConfig { half_life_s: 0.0 }
                .half_life_s()
                .expect("off"),
            None
        );
        assert_eq!(
            FairShareConfig { half_life_s: 60.0 }
                .half_life_s()
                .expect("on"),
            Some(60.0)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(
                FairShareConfig { half_life_s: bad }
                    .half_life_s()
                    .expect_err("bad")
                    .to_string()
                    .contains("fairshare.half_life_s")
            );
        }
    }
}
