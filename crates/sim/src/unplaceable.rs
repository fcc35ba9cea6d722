//! Jobs that can never run on a cluster, counted and explained instead of vanishing.
//!
//! A job that asks for more GPUs than the cluster has of every GPU type it can use, or that can
//! use none of the cluster's types, waits forever. The engine still shows it to the policy (which
//! reports `NeverFits`), but its record ends as [`JobOutcome::Unplaceable`] rather than
//! `Unfinished`, so summaries count it in `unplaceable` and front ends can say why with
//! [`UnplaceableJobs::warning`]. The rule is the placer's (`Placer::could_ever_fit`): a gang may
//! span nodes, so the limit is the number of GPUs of one usable type in the whole cluster.

use crate::metrics::{JobOutcome, JobRecord};
use arbiter_model::{Cluster, GpuTypeId, JobSpec};
use serde::{Deserialize, Serialize};

/// Why a job can never run on a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unplaceable {
    /// It asks for more GPUs than the cluster has of any GPU type it can use.
    TooManyGpus,
    /// It can use none of the cluster's GPU types (it names a type the cluster lacks, or its
    /// speed is zero on every type the cluster has).
    NoUsableGpuType,
}

/// GPUs per GPU type of a cluster, computed once per run.
#[derive(Clone, Debug)]
pub struct GpuPools {
    per_type: Vec<u32>,
}

impl GpuPools {
    /// Sums the GPUs of each type.
    pub fn new(cluster: &Cluster) -> Self {
        let mut per_type = vec![0u32; cluster.gpu_type_names.len()];
        for node in &cluster.nodes {
            if let Some(total) = per_type.get_mut(node.gpu_type.index()) {
                *total += node.gpus;
            }
        }
        GpuPools { per_type }
    }

    /// The most GPUs `spec` could ever get: the largest pool among the types it can use (the
    /// placer's rule: an optional required type, and a positive speed).
    fn usable(&self, spec: &JobSpec) -> Option<u32> {
        self.per_type
            .iter()
            .enumerate()
            .filter(|&(t, &gpus)| {
                let t = GpuTypeId(t as u8);
                gpus > 0 && spec.gpu_type.is_none_or(|g| g == t) && spec.speed_on(t) > 0.0
            })
            .map(|(_, &gpus)| gpus)
            .max()
    }

    /// Why `spec` can never run here, or `None` if it can.
    pub fn check(&self, spec: &JobSpec) -> Option<Unplaceable> {
        match self.usable(spec) {
            None => Some(Unplaceable::NoUsableGpuType),
            Some(gpus) if spec.gpus > gpus => Some(Unplaceable::TooManyGpus),
            Some(_) => None,
        }
    }
}

/// Why `spec` can never run on `cluster`, or `None` if it can.
pub fn unplaceable(cluster: &Cluster, spec: &JobSpec) -> Option<Unplaceable> {
    GpuPools::new(cluster).check(spec)
}

/// Marks the records of jobs that never ran to the end and never could as
/// [`JobOutcome::Unplaceable`] (engines call this after a run).
pub(crate) fn mark(cluster: &Cluster, specs: &[JobSpec], records: &mut [JobRecord]) {
    let pools = GpuPools::new(cluster);
    for (spec, record) in specs.iter().zip(records.iter_mut()) {
        if record.outcome == JobOutcome::Unfinished && pools.check(spec).is_some() {
            record.outcome = JobOutcome::Unplaceable;
        }
    }
}

/// The jobs of a workload that can never run on a cluster, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnplaceableJobs {
    /// Jobs looked at.
    pub jobs: usize,
    /// Jobs asking for more GPUs than the cluster has of any type they can use.
    pub too_many_gpus: usize,
    /// The largest such request, GPUs.
    pub largest_request: u32,
    /// Jobs that can use none of the cluster's GPU types.
    pub no_usable_gpu_type: usize,
    /// GPUs in the cluster's largest pool of one type.
    pub largest_pool: u32,
    /// GPU types the cluster has.
    pub gpu_types: usize,
}

impl UnplaceableJobs {
    /// Counts the jobs of `specs` that can never run on `cluster`.
    pub fn count(cluster: &Cluster, specs: &[JobSpec]) -> Self {
        let pools = GpuPools::new(cluster);
        let mut out = UnplaceableJobs {
            jobs: specs.len(),
            largest_pool: pools.per_type.iter().copied().max().unwrap_or(0),
            gpu_types: pools.per_type.iter().filter(|&&g| g > 0).count(),
            ..UnplaceableJobs::default()
        };
        for spec in specs {
            match pools.check(spec) {
                Some(Unplaceable::TooManyGpus) => {
                    out.too_many_gpus += 1;
                    out.largest_request = out.largest_request.max(spec.gpus);
                }
                Some(Unplaceable::NoUsableGpuType) => out.no_usable_gpu_type += 1,
                None => {}
            }
        }
        out
    }

    /// Jobs that can never run.
    pub fn total(&self) -> usize {
        self.too_many_gpus + self.no_usable_gpu_type
    }

    /// A one-line warning naming how many jobs can never run and why (`context` names the
    /// trace or tenant), or `None` when every job can run.
    pub fn warning(&self, context: &str) -> Option<String> {
        if self.total() == 0 {
            return None;
        }
        let mut reasons = Vec::new();
        if self.too_many_gpus > 0 {
            let limit = if self.gpu_types > 1 {
                format!(
                    "the cluster has of any GPU type they can use (largest pool: {})",
                    self.largest_pool
                )
            } else {
                format!("the cluster has ({})", self.largest_pool)
            };
            let n = self.too_many_gpus;
            let (noun, verb) = if n == 1 {
                ("job", "asks")
            } else {
                ("jobs", "ask")
            };
            reasons.push(format!(
                "{n} {noun} {verb} for more GPUs (up to {}) than {limit}",
                self.largest_request
            ));
        }
        if self.no_usable_gpu_type > 0 {
            let n = self.no_usable_gpu_type;
            let (noun, verb) = if n == 1 {
                ("job", "needs")
            } else {
                ("jobs", "need")
            };
            reasons.push(format!(
                "{n} {noun} {verb} a GPU type the cluster does not have"
            ));
        }
        Some(format!(
            "{context}: {} of {} jobs can never run on this cluster and are counted as unplaceable, not in the metrics: {}",
            self.total(),
            self.jobs,
            reasons.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbiter_model::{JobId, SimTime};
    use arbiter_policy::mechanisms::placement::Placer;

    fn job(gpus: u32) -> JobSpec {
        JobSpec::new(JobId(0), SimTime::ZERO, gpus, 1.0)
    }

    #[test]
    fn unplaceable_jobs_are_those_the_placer_could_never_fit() {
        let names = vec!["k80".to_string(), "v100".to_string()];
        let node = |id: u32, t: u8, gpus: u32| arbiter_model::Node {
            id: arbiter_model::NodeId(id),
            name: format!("n{id}"),
            rack: arbiter_model::RackId(0),
            gpu_type: GpuTypeId(t),
            gpus,
            cpus: 8,
            memory_gib: 64,
        };
        let cluster =
            Cluster::new(names, vec![node(0, 0, 4), node(1, 1, 8), node(2, 1, 8)]).expect("valid");
        let mut cases = vec![
            (job(16), None),
            (job(17), Some(Unplaceable::TooManyGpus)),
            (
                JobSpec {
                    gpu_type: Some(GpuTypeId(0)),
                    ..job(4)
                },
                None,
            ),
            (
                JobSpec {
                    gpu_type: Some(GpuTypeId(0)),
                    ..job(5)
                },
                Some(Unplaceable::TooManyGpus),
            ),
            (
                JobSpec {
                    gpu_type: Some(GpuTypeId(7)),
                    ..job(1)
                },
                Some(Unplaceable::NoUsableGpuType),
            ),
            (
                JobSpec {
                    speed_by_gpu_type: vec![1.0, 0.0],
                    ..job(8)
                },
                Some(Unplaceable::TooManyGpus),
            ),
            (
                JobSpec {
                    speed_by_gpu_type: vec![0.0, 0.0],
                    ..job(1)
                },
                Some(Unplaceable::NoUsableGpuType),
            ),
        ];
        for (spec, expected) in cases.drain(..) {
            assert_eq!(unplaceable(&cluster, &spec), expected, "{spec:?}");
            assert_eq!(
                expected.is_none(),
                Placer::could_ever_fit(&cluster, &spec),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn unplaceable_warning_names_how_many_and_why() {
        let cluster = Cluster::homogeneous(1, 1, 4, 8, 64, "V100").expect("valid");
        let specs = vec![
            job(1),
            job(8),
            job(6),
            JobSpec {
                gpu_type: Some(GpuTypeId(3)),
                ..job(1)
            },
        ];
        let counts = UnplaceableJobs::count(&cluster, &specs);
        assert_eq!(
            (
                counts.total(),
                counts.too_many_gpus,
                counts.no_usable_gpu_type
            ),
            (3, 2, 1)
        );
        let text = counts.warning("t").expect("some never fit");
        assert_eq!(
            text,
            "t: 3 of 4 jobs can never run on this cluster and are counted as unplaceable, not in the metrics: \
             2 jobs ask for more GPUs (up to 8) than the cluster has (4); 1 job needs a GPU type the cluster does not have"
        );
        assert_eq!(
            UnplaceableJobs::count(&cluster, &specs[..1]).warning("t"),
            None
        );
    }
}
