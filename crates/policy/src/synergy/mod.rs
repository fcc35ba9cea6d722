//! Synergy (Mohan et al., OSDI'22): resource-sensitive scheduling. Jobs differ in how much
//! their throughput gains from CPU cores and memory given with their GPUs (image models with heavy
//! pre-processing up to ~3×, language models not at all); the scheduler hands out CPU and memory
//! by sensitivity instead of in proportion to GPUs.
//!
//! A policy is an *ordering* composed with an *allocation mechanism*, named `order+mechanism`
//! (e.g. `srtf+tune`). Every round (Synergy: 300 s), from an empty cluster:
//!
//! 1. Jobs are ordered: `fifo` (arrival), `srtf` (remaining work at the proportional share),
//!    `las` (attained GPU service: held time × GPUs), `ftf` (finish-time fairness: the largest
//!    (time since arrival + remaining) ÷ run time first). Jobs pending over 1,000 h come first.
//! 2. Admission: in that order, a job is admitted while its GPUs fit the free GPU count.
//! 3. Allocation, in the same order, per job and per GPU, with the vector (CPU cores, memory):
//!    - `proportional`: the server's GPU-proportional share (Synergy's baseline);
//!    - `greedy`: the job's ideal vector if it fits on free resources, else the job waits this
//!      round;
//!    - `tune` (Synergy-TUNE): the ideal vector if it fits; else the proportional vector; else
//!      servers with free GPUs (fewest free first) are searched for one where shrinking the jobs
//!      already placed there that hold more than their proportional share back to it (the latest
//!      placed first) makes the proportional vector fit; shrinking never makes a job slower than
//!      proportional would;
//!    - `opt`: jobs placed as `tune` places them, then on every server the CPU/memory split that
//!      maximizes total throughput over the profile grid with no job slower than proportional —
//!      an exact integer program per server, solved by dynamic programming over the grid
//!      ([`opt`]). Tune's split is one candidate, so every round's total throughput is at least
//!      tune's; it is the best any split of the same placement can give.
//!
//! A job keeps its servers from the last round when they still fit (no migration); else it is
//! placed on the fitting server with the fewest free GPUs, or spread over servers when it is
//! larger than what one can give. A job larger than a server needs its share on every server it
//! spans. Ideal vectors are capped at what one server can give per GPU.

pub mod hosts;
pub mod opt;

use crate::descriptor::{Descriptor, Family};
use crate::{Policy, PolicyError, SchedulerView};
use arbiter_model::{
    ActiveJob, Assignment, Decision, HostShare, JobId, NodeId, PendingReason, Placement, SimTime,
};
use hosts::Hosts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Job order of a Synergy policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SynergyOrder {
    /// Arrival order.
    Fifo,
    /// Shortest remaining work first (oracle).
    Srtf,
    /// Least attained GPU service first.
    Las,
    /// Largest finish-time-fairness ratio first.
    Ftf,
}

/// How CPU and memory are handed out with GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// GPU-proportional CPU and memory.
    Proportional,
    /// The ideal vector or nothing this round.
    Greedy,
    /// Synergy-TUNE.
    Tune,
    /// Best split per server over the profile grid.
    Opt,
}

impl SynergyOrder {
    /// All orders.
    pub const ALL: [SynergyOrder; 4] = [
        SynergyOrder::Fifo,
        SynergyOrder::Srtf,
        SynergyOrder::Las,
        SynergyOrder::Ftf,
    ];

    /// The identifier.
    pub fn name(self) -> &'static str {
        match self {
            SynergyOrder::Fifo => "fifo",
            SynergyOrder::Srtf => "srtf",
            SynergyOrder::Las => "las",
            SynergyOrder::Ftf => "ftf",
        }
    }
}

impl Mechanism {
    /// All mechanisms.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Proportional,
        Mechanism::Greedy,
        Mechanism::Tune,
        Mechanism::Opt,
    ];

    /// The identifier.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Proportional => "proportional",
            Mechanism::Greedy => "greedy",
            Mechanism::Tune => "tune",
            Mechanism::Opt => "opt",
        }
    }
}

/// `order+mechanism` names of the Synergy policies, indexed like [`SynergyOrder::ALL`] ×
/// [`Mechanism::ALL`].
const NAMES: [[&str; 4]; 4] = [
    ["fifo+proportional", "fifo+greedy", "fifo+tune", "fifo+opt"],
    ["srtf+proportional", "srtf+greedy", "srtf+tune", "srtf+opt"],
    ["las+proportional", "las+greedy", "las+tune", "las+opt"],
    ["ftf+proportional", "ftf+greedy", "ftf+tune", "ftf+opt"],
];

/// The descriptor of `order+mechanism`: the sixteen are one registry entry with fields, so their
/// descriptors are computed rather than sixteen constants.
pub fn descriptor(order: SynergyOrder, mechanism: Mechanism) -> Descriptor {
    let (describe, detail) = match mechanism {
        Mechanism::Proportional => (
            "Synergy baseline: GPU-proportional CPU and memory, in 300 s rounds (OSDI'22)",
            "each job gets, per GPU, the server's GPU-proportional CPU cores and memory (the usual baseline)",
        ),
        Mechanism::Greedy => (
            "Synergy-GREEDY: each job's ideal CPU/memory vector or nothing this round (OSDI'22)",
            "each job gets, per GPU, its ideal vector from its profile if that fits on free resources, else it waits this round",
        ),
        Mechanism::Tune => (
            "Synergy-TUNE: ideal vector, else proportional, else reclaim from over-provisioned jobs (OSDI'22)",
            "each job gets, per GPU, its ideal vector if it fits; else the proportional one; else jobs already placed on a server with room for its GPUs that hold more than proportional are shrunk back (never below their proportional speed) until it fits",
        ),
        Mechanism::Opt => (
            "Synergy-OPT: per-server optimal CPU/memory split over the profile grid (OSDI'22)",
            "placed as `tune`, then each server's CPU and memory split for the most total throughput over the profile grid, no job slower than proportional — an exact integer program per server (dynamic programming over CPU and memory units)",
        ),
    };
    Descriptor::new(
        NAMES[order as usize][mechanism as usize],
        Family::Synergy,
        describe,
    )
    .paper("Synergy (OSDI'22)")
    .detail(detail)
}

/// Builds `order+mechanism` (no parameters: Synergy's rounds and profiles are fixed).
pub fn build(order: SynergyOrder, mechanism: Mechanism) -> Synergy {
    Synergy::new(NAMES[order as usize][mechanism as usize], order, mechanism)
}

/// Jobs pending longer than this go first whatever the order (Synergy: 1,000 h).
const STARVATION_S: f64 = 1000.0 * 3600.0;

/// A Synergy policy: an order and an allocation mechanism.
#[derive(Clone, Debug)]
pub struct Synergy {
    name: &'static str,
    order: SynergyOrder,
    mechanism: Mechanism,
    /// `opt`: the last split per server, reused while the server's jobs do not change.
    opt_cache: opt::SplitCache,
}

impl Synergy {
    /// A Synergy policy named `name` (`order+mechanism`).
    pub fn new(name: &'static str, order: SynergyOrder, mechanism: Mechanism) -> Self {
        Synergy {
            name,
            order,
            mechanism,
            opt_cache: opt::SplitCache::default(),
        }
    }

    /// `opt`: per-server splits solved so far (not reused from the cache).
    pub fn opt_splits(&self) -> u64 {
        self.opt_cache.solves
    }

    /// Jobs in scheduling order.
    fn ordered<'v>(&self, view: &SchedulerView<'v>, now: SimTime) -> Vec<&'v ActiveJob> {
        let key = |job: &ActiveJob| -> f64 {
            let spec = view.spec(job);
            match self.order {
                SynergyOrder::Fifo => 0.0,
                SynergyOrder::Srtf => job.remaining_s_at(now),
                SynergyOrder::Las => job.executed_s_at(now) * job.gpus as f64,
                SynergyOrder::Ftf => {
                    let since = now.saturating_since(job.submit).as_secs_f64();
                    -(since + job.remaining_s_at(now)) / spec.run_time_s.max(1e-9)
                }
            }
        };
        let starving = |job: &ActiveJob| {
            !job.is_running()
                && now.saturating_since(job.pending_since).as_secs_f64() > STARVATION_S
        };
        let mut jobs: Vec<(bool, f64, &ActiveJob)> = view
            .jobs
            .iter()
            .map(|j| (!starving(j), key(j), j))
            .collect();
        jobs.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.submit.cmp(&b.2.submit))
                .then(a.2.id.cmp(&b.2.id))
        });
        jobs.into_iter().map(|(_, _, j)| j).collect()
    }
}

/// The GPU-proportional vector of the cluster: the smallest per-GPU CPU and memory of any
/// server, so that it fits every server (Synergy's clusters are uniform).
pub fn cluster_proportional(hosts: &Hosts<'_>) -> HostShare {
    let cluster = hosts.cluster();
    let mut share = HostShare {
        cpus_per_gpu: f64::INFINITY,
        memory_per_gpu: f64::INFINITY,
    };
    for node in cluster.nodes.iter().filter(|n| n.gpus > 0) {
        let p = hosts.proportional(node.id);
        share.cpus_per_gpu = share.cpus_per_gpu.min(p.cpus_per_gpu);
        share.memory_per_gpu = share.memory_per_gpu.min(p.memory_per_gpu);
    }
    if share.cpus_per_gpu.is_finite() {
        share
    } else {
        HostShare {
            cpus_per_gpu: 0.0,
            memory_per_gpu: 0.0,
        }
    }
}

/// The vector a job aims for: its profile's ideal, capped at what one server gives per GPU for a
/// job of its size; the proportional vector for a job without a profile.
fn ideal_share(view: &SchedulerView<'_>, job: &ActiveJob, proportional: HostShare) -> HostShare {
    let Some(sensitivity) = view.spec(job).sensitivity.as_ref() else {
        return proportional;
    };
    let biggest = view.cluster.nodes.iter().max_by_key(|n| (n.gpus, n.id.0));
    let Some(node) = biggest else {
        return proportional;
    };
    let per_server_gpus = job.gpus.min(node.gpus).max(1) as f64;
    HostShare {
        cpus_per_gpu: sensitivity
            .ideal
            .cpus_per_gpu
            .min(node.cpus as f64 / per_server_gpus),
        memory_per_gpu: sensitivity
            .ideal
            .memory_per_gpu
            .min(node.memory_gib as f64 / per_server_gpus),
    }
}

/// The smallest vector at or below `share` (per dimension) that keeps the job at least as fast
/// as with `proportional`: what tune shrinks a job to.
fn fair_share(
    view: &SchedulerView<'_>,
    id: JobId,
    share: HostShare,
    proportional: HostShare,
) -> HostShare {
    let shrunk = HostShare {
        cpus_per_gpu: share.cpus_per_gpu.min(proportional.cpus_per_gpu),
        memory_per_gpu: share.memory_per_gpu.min(proportional.memory_per_gpu),
    };
    let spec = &view.specs[id.index()];
    if spec.host_speedup(shrunk, proportional) >= 1.0 - 1e-12 {
        shrunk
    } else {
        proportional
    }
}

impl Synergy {
    /// Tune's third step: on servers with room for the job's GPUs (fewest free first), shrink
    /// jobs holding more than their fair share (latest placed first) until the proportional
    /// vector fits; returns the placement found.
    fn reclaim(
        &self,
        view: &SchedulerView<'_>,
        hosts: &mut Hosts<'_>,
        gpus: u32,
        proportional: HostShare,
        placed_order: &[JobId],
    ) -> Option<Placement> {
        let n = view.cluster.nodes.len();
        let mut servers: Vec<NodeId> = (0..n)
            .map(|i| NodeId(i as u32))
            .filter(|s| hosts.free_gpus_on(*s) > 0)
            .collect();
        servers.sort_by_key(|s| (hosts.free_gpus_on(*s), *s));
        let shrink_on =
            |hosts: &mut Hosts<'_>, server: NodeId, until: &dyn Fn(&Hosts<'_>) -> bool| {
                for id in placed_order.iter().rev() {
                    if until(hosts) {
                        return;
                    }
                    let Some(placed) = hosts.placed.get(id) else {
                        continue;
                    };
                    if !placed
                        .placement
                        .slots
                        .iter()
                        .any(|(node, _)| *node == server)
                    {
                        continue;
                    }
                    let fair = fair_share(view, *id, placed.share, proportional);
                    if fair != placed.share {
                        hosts.reshare(*id, fair);
                    }
                }
            };
        // One server that can take the whole job.
        let whole: Vec<NodeId> = servers
            .iter()
            .copied()
            .filter(|s| hosts.free_gpus_on(*s) >= gpus)
            .collect();
        for server in whole {
            let target = Placement::single(server, gpus);
            let fits = |h: &Hosts<'_>| h.fits(&target, proportional);
            shrink_on(hosts, server, &fits);
            if fits(hosts) {
                return Some(target);
            }
        }
        // Larger than any server's free GPUs: shrink on every server with free GPUs.
        for &server in &servers {
            shrink_on(hosts, server, &|h: &Hosts<'_>| {
                h.find(gpus, proportional, None).is_some()
            });
            if let Some(p) = hosts.find(gpus, proportional, None) {
                return Some(p);
            }
        }
        None
    }
}

impl Policy for Synergy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn schedule(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> Result<Decision, PolicyError> {
        let mut hosts = Hosts::new(view.cluster);
        let proportional = cluster_proportional(&hosts);
        let mut decision = Decision::default();
        let total_gpus: u32 = view.cluster.nodes.iter().map(|n| n.gpus).sum();

        // Admission by GPU count, in order.
        let mut free_gpus = hosts.free_gpus_total();
        let mut admitted: Vec<&ActiveJob> = Vec::new();
        for job in self.ordered(view, now) {
            if job.gpus > total_gpus {
                decision.pending.push((job.id, PendingReason::NeverFits));
            } else if job.gpus <= free_gpus {
                free_gpus -= job.gpus;
                admitted.push(job);
            } else {
                decision
                    .pending
                    .push((job.id, PendingReason::LowerPriority));
            }
        }

        // Allocation, in order.
        let mut placed_order: Vec<JobId> = Vec::new();
        for job in admitted {
            let ideal = ideal_share(view, job, proportional);
            let current = job.placement();
            let found = match self.mechanism {
                Mechanism::Proportional => hosts
                    .find(job.gpus, proportional, current)
                    .map(|p| (p, proportional)),
                Mechanism::Greedy => hosts.find(job.gpus, ideal, current).map(|p| (p, ideal)),
                // Opt places as tune does, then re-splits every server.
                Mechanism::Tune | Mechanism::Opt => hosts
                    .find(job.gpus, ideal, current)
                    .map(|p| (p, ideal))
                    .or_else(|| {
                        hosts
                            .find(job.gpus, proportional, current)
                            .map(|p| (p, proportional))
                    })
                    .or_else(|| {
                        self.reclaim(view, &mut hosts, job.gpus, proportional, &placed_order)
                            .map(|p| (p, proportional))
                    }),
            };
            match found {
                Some((placement, share)) => {
                    hosts.take(job.id, placement, share);
                    placed_order.push(job.id);
                }
                None => {
                    // Its GPUs were free at admission: CPU/memory or their spread stopped it.
                    let reason = if hosts
                        .find(
                            job.gpus,
                            HostShare {
                                cpus_per_gpu: 0.0,
                                memory_per_gpu: 0.0,
                            },
                            None,
                        )
                        .is_some()
                    {
                        PendingReason::HostResources
                    } else {
                        PendingReason::Fragmented
                    };
                    decision.pending.push((job.id, reason));
                }
            }
        }

        if self.mechanism == Mechanism::Opt {
            self.opt_cache.split(view, &mut hosts, proportional);
        }

        let mut placed: Vec<(JobId, hosts::Placed)> = hosts.placed.into_iter().collect();
        placed.sort_by_key(|(id, _)| *id);
        for (id, p) in placed {
            decision.run.push(Assignment {
                job: id,
                placement: p.placement,
                colocation: None,
                host: Some(p.share),
                guest: None,
            });
        }
        Ok(decision)
    }
}

/// Per-server view used by the `opt` split: jobs placed on one server only, with their GPUs.
pub(crate) fn single_server_jobs(hosts: &Hosts<'_>) -> BTreeMap<NodeId, Vec<(JobId, u32)>> {
    let mut by_server: BTreeMap<NodeId, Vec<(JobId, u32)>> = BTreeMap::new();
    for (id, p) in &hosts.placed {
        if let [(node, gpus)] = p.placement.slots.as_slice() {
            by_server.entry(*node).or_default().push((*id, *gpus));
        }
    }
    by_server
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{Cluster, JobSpec, ResourceSensitivity};
    use proptest::prelude::*;
    use std::sync::Arc;

    /// Synergy's grid with an alexnet-like matrix (×2.94 at 12 cores and 125 GB per GPU).
    fn image_profile() -> Arc<ResourceSensitivity> {
        let cpu = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 12.0, 24.0];
        let mem = vec![20.83, 62.5, 125.0, 187.5, 250.0];
        let rows: Vec<Vec<f64>> = [0.3, 0.66, 1.0, 1.25, 1.53, 1.75, 2.0, 2.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let mut row = vec![0.1, t, t, t, t];
                if i >= 7 {
                    row[2..].iter_mut().for_each(|x| *x = 2.94);
                }
                row
            })
            .collect();
        Arc::new(
            ResourceSensitivity::new(
                cpu,
                mem,
                rows,
                HostShare {
                    cpus_per_gpu: 12.0,
                    memory_per_gpu: 125.0,
                },
            )
            .expect("valid"),
        )
    }

    /// A language-model-like profile: flat, ideal 1 core and 20 GB per GPU.
    fn language_profile() -> Arc<ResourceSensitivity> {
        Arc::new(ResourceSensitivity::insensitive(HostShare {
            cpus_per_gpu: 1.0,
            memory_per_gpu: 20.0,
        }))
    }

    fn job(id: u32, gpus: u32, profile: Arc<ResourceSensitivity>) -> (JobSpec, ActiveJob) {
        let mut spec = JobSpec::new(JobId(id), SimTime::ZERO, gpus, 3600.0);
        spec.sensitivity = Some(profile);
        let active = ActiveJob::submitted(spec.id, gpus, spec.submit, spec.run_time_s);
        (spec, active)
    }

    fn decide(policy: &str, cluster: &Cluster, jobs: &[(JobSpec, ActiveJob)]) -> Decision {
        let kind = crate::PolicyKind::from_name(policy).expect("known");
        let mut p = crate::build(kind, &crate::PolicyConfig::default()).expect("builds");
        let specs: Vec<JobSpec> = jobs.iter().map(|(s, _)| s.clone()).collect();
        let active: Vec<ActiveJob> = jobs.iter().map(|(_, a)| a.clone()).collect();
        p.schedule(
            &SchedulerView {
                cluster,
                jobs: &active,
                specs: &specs,
                current: None,
            },
            SimTime::ZERO,
        )
        .expect("decides")
    }

    fn share_of(d: &Decision, id: u32) -> HostShare {
        d.run
            .iter()
            .find(|a| a.job == JobId(id))
            .and_then(|a| a.host)
            .expect("placed with a share")
    }

    #[test]
    fn tune_gives_the_sensitive_job_more_and_the_insensitive_one_less() {
        // One server: 2 GPUs, 16 CPUs, 250 GB (proportional: 8 CPUs and 125 GB per GPU). The
        // language job takes its ideal 1 CPU and 20 GB; the image job its ideal 12 CPUs, 125 GB.
        let c = Cluster::homogeneous(1, 1, 2, 16, 250, "V100").expect("valid");
        let proportional = HostShare {
            cpus_per_gpu: 8.0,
            memory_per_gpu: 125.0,
        };
        let jobs = [job(0, 1, language_profile()), job(1, 1, image_profile())];
        let d = decide("fifo+tune", &c, &jobs);
        let (language, image) = (share_of(&d, 0), share_of(&d, 1));
        assert_eq!(
            language,
            HostShare {
                cpus_per_gpu: 1.0,
                memory_per_gpu: 20.0
            }
        );
        assert_eq!(
            image,
            HostShare {
                cpus_per_gpu: 12.0,
                memory_per_gpu: 125.0
            }
        );
        for (spec, _) in &jobs {
            let share = share_of(&d, spec.id.0);
            assert!(
                spec.host_speedup(share, proportional) >= 1.0,
                "{}: {share}",
                spec.id
            );
        }
        // 2.94 at 12 CPUs against 1.9167 at 8 (two thirds of the way from 1.75 at 6 to 2.0 at 9).
        let speedup = jobs[1].0.host_speedup(image, proportional);
        assert!(
            (speedup - 2.94 / (1.75 + (2.0 - 1.75) * 2.0 / 3.0)).abs() < 1e-9,
            "{speedup}"
        );
        // Proportional gives both the same.
        let d = decide("fifo+proportional", &c, &jobs);
        assert_eq!(
            (share_of(&d, 0), share_of(&d, 1)),
            (proportional, proportional)
        );
    }

    #[test]
    fn greedy_skips_a_job_whose_ideal_vector_does_not_fit() {
        // One server: 2 GPUs, 6 CPUs, 125 GB. The image job's ideal is capped at 6 CPUs, 125 GB;
        // after the language job's 1 CPU and 20 GB only 5 CPUs are left: greedy skips it (tune
        // would give it the proportional 3 CPUs).
        let c = Cluster::homogeneous(1, 1, 2, 6, 125, "V100").expect("valid");
        let jobs = [job(0, 1, language_profile()), job(1, 1, image_profile())];
        let d = decide("fifo+greedy", &c, &jobs);
        assert_eq!(d.run.len(), 1);
        assert_eq!(d.pending, vec![(JobId(1), PendingReason::HostResources)]);
        let d = decide("fifo+tune", &c, &jobs);
        assert_eq!(
            share_of(&d, 1),
            HostShare {
                cpus_per_gpu: 3.0,
                memory_per_gpu: 62.5
            }
        );
    }

    #[test]
    fn tune_reclaims_from_over_provisioned_jobs_without_slowing_them_below_proportional() {
        // One server: 2 GPUs, 6 CPUs, 125 GB. Two image jobs: the first takes its ideal (capped:
        // 6 CPUs, 125 GB); the second does not fit even at proportional until tune shrinks the
        // first back to proportional.
        let c = Cluster::homogeneous(1, 1, 2, 6, 125, "V100").expect("valid");
        let proportional = HostShare {
            cpus_per_gpu: 3.0,
            memory_per_gpu: 62.5,
        };
        let jobs = [job(0, 1, image_profile()), job(1, 1, image_profile())];
        let d = decide("fifo+tune", &c, &jobs);
        assert_eq!(d.run.len(), 2, "{d:?}");
        assert_eq!(
            (share_of(&d, 0), share_of(&d, 1)),
            (proportional, proportional)
        );
    }

    #[test]
    fn opt_splits_a_server_for_the_most_throughput() {
        // One server: 3 GPUs, 18 CPUs, 375 GB (proportional: 6 CPUs, 125 GB per GPU); two image
        // jobs then a language job, in FIFO order. Tune: the first image job takes 12 CPUs, the
        // second 6, and the language job fits only after the first is shrunk back: 6 + 6 + 6, all
        // at proportional speed. Opt: the language job needs 1 CPU, the image jobs share 17 —
        // 9 and 6 (6 + 5 would slow one below proportional), one at 2.0 / 1.75 = 1.14×.
        let c = Cluster::homogeneous(1, 1, 3, 18, 375, "V100").expect("valid");
        let proportional = HostShare {
            cpus_per_gpu: 6.0,
            memory_per_gpu: 125.0,
        };
        let jobs = [
            job(0, 1, image_profile()),
            job(1, 1, image_profile()),
            job(2, 1, language_profile()),
        ];
        let total = |d: &Decision| -> f64 {
            jobs.iter()
                .map(|(s, _)| s.host_speedup(share_of(d, s.id.0), proportional))
                .sum()
        };
        let tune = decide("fifo+tune", &c, &jobs);
        assert!((total(&tune) - 3.0).abs() < 1e-9, "{tune:?}");
        let opt = decide("fifo+opt", &c, &jobs);
        let mut cpus = vec![
            share_of(&opt, 0).cpus_per_gpu,
            share_of(&opt, 1).cpus_per_gpu,
        ];
        cpus.sort_by(f64::total_cmp);
        assert_eq!(cpus, vec![6.0, 9.0]);
        assert_eq!(share_of(&opt, 2).cpus_per_gpu, 1.0);
        assert!(
            (total(&opt) - (2.0 / 1.75 + 1.0 + 1.0)).abs() < 1e-9,
            "{opt:?}"
        );
    }

    proptest! {
        /// On random servers and jobs, tune places feasibly and never gives a job less speed than
        /// the proportional vector would.
        #[test]
        fn tune_is_never_slower_than_proportional(
            servers in 1u32..4,
            gpus in 1u32..9,
            cpus_per_gpu in 2u32..7,
            kinds in proptest::collection::vec((any::<bool>(), 1u32..5), 1..20),
        ) {
            let c = Cluster::homogeneous(1, servers, gpus, cpus_per_gpu * gpus, 62 * gpus, "V100").expect("valid");
            let proportional = HostShare { cpus_per_gpu: cpus_per_gpu as f64, memory_per_gpu: 62.0 };
            let jobs: Vec<(JobSpec, ActiveJob)> = kinds
                .iter()
                .enumerate()
                .map(|(i, (image, g))| job(i as u32, *g, if *image { image_profile() } else { language_profile() }))
                .collect();
            let d = decide("fifo+tune", &c, &jobs);
            let mut occupancy = arbiter_model::Occupancy::new(&c);
            let mut host = vec![(0.0f64, 0.0f64); c.nodes.len()];
            for a in &d.run {
                let spec = &jobs[a.job.index()].0;
                let share = a.host.expect("share");
                prop_assert!(spec.host_speedup(share, proportional) >= 1.0 - 1e-9, "{} slower than proportional with {share}", a.job);
                prop_assert!(occupancy.allocate(&a.placement).is_ok());
                for (node, g) in &a.placement.slots {
                    host[node.index()].0 += share.cpus_per_gpu * *g as f64;
                    host[node.index()].1 += share.memory_per_gpu * *g as f64;
                }
            }
            for (i, node) in c.nodes.iter().enumerate() {
                prop_assert!(host[i].0 <= node.cpus as f64 + 1e-6 && host[i].1 <= node.memory_gib as f64 + 1e-6);
            }
            // Every job whose GPUs fit at admission was placed (tune always falls back).
            let free: u32 = c.total_gpus();
            let mut left = free;
            for (spec, _) in &jobs {
                if spec.gpus <= left {
                    left -= spec.gpus;
                    prop_assert!(d.run.iter().any(|a| a.job == spec.id), "{} admitted but not placed: {d:?}", spec.id);
                }
            }
        }
    }
}
