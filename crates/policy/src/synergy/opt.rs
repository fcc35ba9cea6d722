//! `opt`: the best CPU/memory split of each server among the jobs placed on it.
//!
//! Given the round's GPU placement, each single-server job j with g_j GPUs picks one point
//! (c, m) of its profile grid (CPU cores and memory per GPU):
//!
//! ```text
//!   maximise   Σ_j g_j · T_j(c_j, m_j) / T_j(proportional)        (total throughput)
//!   subject to Σ_j g_j · c_j <= CPUs of the server,  Σ_j g_j · m_j <= memory of the server,
//!              T_j(c_j, m_j) >= T_j(proportional)                  (no job slower than proportional)
//! ```
//!
//! an integer program (Synergy's OPT, per server). Its constraints are two knapsack capacities,
//! and grid levels are multiples of small units (1 core; 20.83 GB = 62.5 / 3), so it is solved
//! exactly by dynamic programming over (CPU units, memory units) — at most 25 × 25 states on
//! Synergy's servers — which, unlike an LP relaxation, gives a split the cluster can actually
//! run. Jobs spanning servers keep the vector they were placed with. A server's split is reused
//! while its jobs and capacity do not change.

use super::hosts::Hosts;
use super::single_server_jobs;
use crate::SchedulerView;
use arbiter_model::{HostShare, JobId, NodeId};
use std::collections::BTreeMap;

/// Identifies one server's problem: its jobs with their GPUs, and the CPU and memory they share.
type ServerKey = (Vec<(JobId, u32)>, u64, u64);

/// Splits already computed, per server.
#[derive(Clone, Debug, Default)]
pub struct SplitCache {
    by_server: BTreeMap<NodeId, (ServerKey, Vec<HostShare>)>,
    /// Servers solved (not reused from the cache), for reporting.
    pub solves: u64,
}

impl SplitCache {
    /// Re-splits every server's CPU and memory among its single-server jobs.
    pub fn split(
        &mut self,
        view: &SchedulerView<'_>,
        hosts: &mut Hosts<'_>,
        proportional: HostShare,
    ) {
        for (server, jobs) in single_server_jobs(hosts) {
            let (free_cpus, free_memory) = hosts.free_host_on(server);
            let held = |f: &dyn Fn(&HostShare) -> f64| -> f64 {
                jobs.iter()
                    .filter_map(|(id, g)| hosts.placed.get(id).map(|p| f(&p.share) * *g as f64))
                    .sum()
            };
            let cpus = free_cpus + held(&|s| s.cpus_per_gpu);
            let memory = free_memory + held(&|s| s.memory_per_gpu);
            let key: ServerKey = (jobs.clone(), cpus.to_bits(), memory.to_bits());
            let shares = match self.by_server.get(&server) {
                Some((cached, shares)) if *cached == key => shares.clone(),
                _ => {
                    self.solves += 1;
                    let placed: Vec<HostShare> = jobs
                        .iter()
                        .map(|(id, _)| hosts.placed.get(id).map_or(proportional, |p| p.share))
                        .collect();
                    let shares = best_split(view, &jobs, cpus, memory, proportional, placed);
                    self.by_server.insert(server, (key, shares.clone()));
                    shares
                }
            };
            for ((id, _), share) in jobs.iter().zip(shares) {
                hosts.reshare(*id, share);
            }
        }
        // Forget servers that no longer hold any single-server job.
        let live: Vec<NodeId> = hosts
            .placed
            .values()
            .flat_map(|p| p.placement.slots.iter().map(|(n, _)| *n))
            .collect();
        self.by_server.retain(|server, _| live.contains(server));
    }
}

/// One choice for a job: units used (for all its GPUs), the vector, and its value.
#[derive(Clone, Copy, Debug)]
struct Choice {
    cpu_units: usize,
    memory_units: usize,
    share: HostShare,
    value: f64,
}

/// The best split of `cpus` and `memory` among `jobs` (id, GPUs), in the same order; the vectors
/// they were `placed` with if no split is found (those fit: the placement checked them — the
/// proportional vector need not, when a job was placed with less).
pub fn best_split(
    view: &SchedulerView<'_>,
    jobs: &[(JobId, u32)],
    cpus: f64,
    memory: f64,
    proportional: HostShare,
    placed: Vec<HostShare>,
) -> Vec<HostShare> {
    let fallback = placed;
    // Units: one core; the smallest memory level of the profiles involved (Synergy: 20.83 GB).
    let memory_unit = jobs
        .iter()
        .filter_map(|(id, _)| {
            view.specs[id.index()]
                .sensitivity
                .as_ref()
                .and_then(|s| s.memory_levels().first().copied())
        })
        .fold(proportional.memory_per_gpu.max(1e-9), f64::min)
        // A server left with almost no memory per GPU (a priority class's share of one) must
        // not make the unit tiny: the table below has (memory ÷ unit) columns.
        .max(memory / 1024.0);
    let cpu_unit = 1.0;
    // Levels are stored rounded (20.83 for 62.5 / 3): a tolerance of a thousandth of a unit.
    let units = |x: f64, unit: f64| (x / unit - 1e-3).ceil().max(0.0) as usize;
    let cpu_capacity = (cpus / cpu_unit + 1e-3).floor().max(0.0) as usize;
    let memory_capacity = (memory / memory_unit + 1e-3).floor().max(0.0) as usize;

    let choices: Vec<Vec<Choice>> = jobs
        .iter()
        .map(|&(id, gpus)| {
            let g = gpus as f64;
            let spec = &view.specs[id.index()];
            let mut options = Vec::new();
            let mut push = |share: HostShare, value: f64| {
                let c = units(share.cpus_per_gpu * g, cpu_unit);
                let m = units(share.memory_per_gpu * g, memory_unit);
                if c <= cpu_capacity && m <= memory_capacity {
                    options.push(Choice {
                        cpu_units: c,
                        memory_units: m,
                        share,
                        value: value * g,
                    });
                }
            };
            push(proportional, 1.0);
            if let Some(s) = spec.sensitivity.as_ref() {
                let base = s.throughput(proportional);
                for (i, &c) in s.cpu_levels().iter().enumerate() {
                    for (k, &m) in s.memory_levels().iter().enumerate() {
                        let t = s.at_grid(i, k);
                        let speedup = if base > 0.0 { t / base } else { 1.0 };
                        if speedup >= 1.0 - 1e-12 {
                            push(
                                HostShare {
                                    cpus_per_gpu: c,
                                    memory_per_gpu: m,
                                },
                                speedup,
                            );
                        }
                    }
                }
            }
            // Keep the Pareto front: fewer units or more value.
            let all = options.clone();
            options.retain(|a| {
                !all.iter().any(|b| {
                    b.cpu_units <= a.cpu_units
                        && b.memory_units <= a.memory_units
                        && b.value >= a.value
                        && (b.cpu_units < a.cpu_units
                            || b.memory_units < a.memory_units
                            || b.value > a.value)
                })
            });
            options.sort_by_key(|a| (a.cpu_units, a.memory_units));
            options.dedup_by(|a, b| a.cpu_units == b.cpu_units && a.memory_units == b.memory_units);
            options
        })
        .collect();

    // Group knapsack over (CPU units, memory units): best[c][m] = most value with at most c and m.
    let width = memory_capacity + 1;
    let states = (cpu_capacity + 1) * width;
    let mut best = vec![0.0f64; states];
    let mut picks: Vec<Vec<u16>> = Vec::with_capacity(jobs.len());
    for options in &choices {
        if options.is_empty() {
            return fallback;
        }
        let mut next = vec![f64::NEG_INFINITY; states];
        let mut pick = vec![u16::MAX; states];
        for c in 0..=cpu_capacity {
            for m in 0..=memory_capacity {
                for (o, choice) in options.iter().enumerate() {
                    if choice.cpu_units > c || choice.memory_units > m {
                        continue;
                    }
                    let before = best[(c - choice.cpu_units) * width + (m - choice.memory_units)];
                    let value = before + choice.value;
                    if before.is_finite() && value > next[c * width + m] {
                        next[c * width + m] = value;
                        pick[c * width + m] = o as u16;
                    }
                }
            }
        }
        best = next;
        picks.push(pick);
    }
    if !best[states - 1].is_finite() {
        return fallback;
    }
    // Walk the picks back from the full capacity.
    let mut shares = vec![proportional; jobs.len()];
    let (mut c, mut m) = (cpu_capacity, memory_capacity);
    for j in (0..jobs.len()).rev() {
        let o = picks[j][c * width + m];
        let Some(choice) = choices[j].get(o as usize) else {
            return fallback;
        };
        shares[j] = choice.share;
        c -= choice.cpu_units;
        m -= choice.memory_units;
    }
    // Units are rounded: check the real amounts.
    let used = |f: &dyn Fn(&HostShare) -> f64| -> f64 {
        jobs.iter()
            .zip(&shares)
            .map(|((_, g), s)| f(s) * *g as f64)
            .sum()
    };
    if used(&|s| s.cpus_per_gpu) > cpus + 1e-9 || used(&|s| s.memory_per_gpu) > memory + 1e-9 {
        return fallback;
    }
    shares
}
