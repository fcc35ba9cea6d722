//! Synergy's model profiles and workload generator (Mohan et al., OSDI'22; `simulator/` of
//! github `msr-fiddle/synergy`, transcribed in `data/synergy/models.json`).
//!
//! Profiles: per model and CPU:GPU ratio, a throughput matrix over CPU cores per GPU
//! (1, 2, 3, 4, 5, 6, 9, 12, 24) × memory per GPU (20.83, 62.5, 125, 187.5, 250 GB), normalized to
//! 1 at 3 cores and 62.5 GB; the ideal vector (`cpus`, `mem`); the iteration time at the
//! cluster's GPU-proportional share. The matrices are the same at every ratio (the upstream
//! files say so); the ratio changes the ideal vector, iteration time and speedup.
//!
//! Workload (Synergy's `jobs/workload.py`, re-implemented with a seeded ChaCha stream):
//! - arrivals: Poisson at `jobs_per_hour`, gaps rounded up to whole seconds, first job at t = 0;
//! - duration D at the GPU-proportional share ("Gavel-like"): `60 · 10^U(1.5, 3)` s with
//!   probability 0.8, else `60 · 10^U(3, 4)` s;
//! - model: the class (image, language, speech) furthest below its target share so far (ties in
//!   that order), then round-robin over the class's models in zoo order — Synergy's deficit
//!   round-robin, which keeps the split exact;
//! - iterations = ⌊D / iteration time⌋; the job's work is iterations × iteration time;
//! - GPUs: 1, or with `multi_gpu` 1/2/4/8 with probability 0.70/0.10/0.15/0.05 (Synergy's
//!   synthetic mode), or taken from a trace's jobs ([`philly_gpu_demands`]; job k gets the demand
//!   of trace job k mod N, as Synergy's Philly mode does).

use crate::{Trace, TraceError};
use arbiter_model::{HostShare, JobId, JobSpec, ResourceSensitivity, SimTime};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// The three model classes of Synergy's zoo.
pub const CLASSES: [&str; 3] = ["image", "language", "speech"];

/// One model's profile at one CPU:GPU ratio.
#[derive(Clone, Debug, PartialEq)]
pub struct SynergyModel {
    /// Model name (`alexnet`, `res18`, ...).
    pub name: String,
    /// Index into [`CLASSES`].
    pub class: usize,
    /// Seconds per iteration at the GPU-proportional share of the ratio's cluster.
    pub iter_time_s: f64,
    /// Throughput at the ideal vector over throughput at the proportional share (as profiled).
    pub speedup: f64,
    /// Throughput matrix and ideal vector.
    pub sensitivity: Arc<ResourceSensitivity>,
}

/// The zoo's models at one CPU:GPU ratio, in zoo order.
#[derive(Clone, Debug, PartialEq)]
pub struct SynergyProfiles {
    /// CPU cores per GPU of the cluster the profiles are for (3, 4, 5 or 6).
    pub cpu_gpu_ratio: u32,
    /// Models, grouped by class in zoo order.
    pub models: Vec<SynergyModel>,
}

impl SynergyProfiles {
    /// Reads `models.json` and keeps the zoo models profiled at `cpu_gpu_ratio`.
    pub fn read(path: &Path, cpu_gpu_ratio: u32) -> Result<Self, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let file_error = |reason: String| TraceError::File {
            path: path.to_path_buf(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| file_error(format!("invalid JSON: {e}")))?;
        let levels = |key: &str| -> Result<Vec<f64>, TraceError> {
            value["levels"][key]
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(serde_json::Value::as_f64)
                        .collect::<Option<Vec<f64>>>()
                })
                .ok_or_else(|| file_error(format!("levels.{key}: expected a list of numbers")))
        };
        let cpu_levels = levels("cpu_per_gpu")?;
        let memory_levels = levels("mem_gb_per_gpu")?;
        let zoo = value["model_zoo"]["classes"]
            .as_object()
            .ok_or_else(|| file_error("model_zoo.classes: expected an object".into()))?;
        let profiles = value["profiles"]
            .as_array()
            .ok_or_else(|| file_error("profiles: expected a list".into()))?;
        let mut models = Vec::new();
        for (class, class_name) in CLASSES.iter().enumerate() {
            let names = zoo
                .get(*class_name)
                .and_then(|v| v.as_array())
                .ok_or_else(|| {
                    file_error(format!("model_zoo.classes.{class_name}: expected a list"))
                })?;
            for name in names.iter().filter_map(|n| n.as_str()) {
                let profile = profiles
                    .iter()
                    .find(|p| {
                        p["model"] == name
                            && p["cpu_gpu_ratio"].as_u64() == Some(cpu_gpu_ratio as u64)
                            && p["gpus"].as_u64() == Some(1)
                    })
                    .ok_or_else(|| {
                        file_error(format!(
                            "no profile for {name} at CPU:GPU ratio {cpu_gpu_ratio}"
                        ))
                    })?;
                let field = |key: &str| {
                    profile[key].as_f64().ok_or_else(|| {
                        file_error(format!(
                            "profile {name} (ratio {cpu_gpu_ratio}): `{key}` is not a number"
                        ))
                    })
                };
                let throughput: Vec<Vec<f64>> = profile["tput"]
                    .as_array()
                    .and_then(|rows| {
                        rows.iter()
                            .map(|r| {
                                r.as_array()?
                                    .iter()
                                    .map(serde_json::Value::as_f64)
                                    .collect()
                            })
                            .collect()
                    })
                    .ok_or_else(|| {
                        file_error(format!("profile {name}: `tput` is not a matrix of numbers"))
                    })?;
                let ideal = HostShare {
                    cpus_per_gpu: field("cpus")?,
                    memory_per_gpu: field("mem")?,
                };
                let sensitivity = ResourceSensitivity::new(
                    cpu_levels.clone(),
                    memory_levels.clone(),
                    throughput,
                    ideal,
                )
                .map_err(|e| file_error(format!("profile {name}: {e}")))?;
                models.push(SynergyModel {
                    name: name.to_string(),
                    class,
                    iter_time_s: field("iter_time")?,
                    speedup: field("speedup")?,
                    sensitivity: Arc::new(sensitivity),
                });
            }
        }
        Ok(SynergyProfiles {
            cpu_gpu_ratio,
            models,
        })
    }

    /// The model called `name`.
    pub fn model(&self, name: &str) -> Option<&SynergyModel> {
        self.models.iter().find(|m| m.name == name)
    }
}

/// Parameters of a Synergy workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynergyWorkload {
    /// Arrival rate (jobs per hour); `None` or 0: every job at t = 0.
    pub jobs_per_hour: Option<f64>,
    /// Number of jobs.
    pub jobs: usize,
    /// Multi-GPU sizes (1/2/4/8 with probability 0.70/0.10/0.15/0.05).
    pub multi_gpu: bool,
    /// Target share of image, language and speech models, in percent (Synergy: 20/70/10).
    pub class_split: [f64; 3],
}

impl Default for SynergyWorkload {
    fn default() -> Self {
        SynergyWorkload {
            jobs_per_hour: Some(9.0),
            jobs: 1000,
            multi_gpu: false,
            class_split: [20.0, 70.0, 10.0],
        }
    }
}

impl SynergyWorkload {
    /// Generates the workload with `seed` from the profiles.
    pub fn generate(&self, profiles: &SynergyProfiles, seed: u64) -> Result<Trace, String> {
        self.generate_with_demands(profiles, seed, None)
    }

    /// Like [`Self::generate`], with GPU demands taken in turn from `demands` (job k gets
    /// `demands[k mod N]`) instead of drawn.
    pub fn generate_with_demands(
        &self,
        profiles: &SynergyProfiles,
        seed: u64,
        demands: Option<&[u32]>,
    ) -> Result<Trace, String> {
        if demands.is_some_and(|d| d.is_empty() || d.contains(&0)) {
            return Err("the GPU demands taken from a trace are empty or contain 0".into());
        }
        let split_sum: f64 = self.class_split.iter().sum();
        if self.class_split.iter().any(|s| !s.is_finite() || *s < 0.0) || split_sum <= 0.0 {
            return Err(format!(
                "class_split must be three non-negative percentages, got {:?}",
                self.class_split
            ));
        }
        let by_class: Vec<Vec<&SynergyModel>> = (0..CLASSES.len())
            .map(|c| profiles.models.iter().filter(|m| m.class == c).collect())
            .collect();
        if let Some(c) =
            (0..CLASSES.len()).find(|&c| self.class_split[c] > 0.0 && by_class[c].is_empty())
        {
            return Err(format!("class {} has a share but no models", CLASSES[c]));
        }
        let rate = self.jobs_per_hour.filter(|r| *r > 0.0);
        if rate.is_some_and(|r| !r.is_finite()) {
            return Err("jobs_per_hour must be finite".into());
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut per_class = [0usize; 3];
        let mut next_model = [0usize; 3];
        let mut arrival_s = 0u64;
        let mut jobs = Vec::with_capacity(self.jobs);
        for i in 0..self.jobs {
            if let (Some(r), true) = (rate, i > 0) {
                let u: f64 = rng.random();
                arrival_s += (3600.0 * (-(1.0 - u).ln() / r)).ceil() as u64;
            }
            // Deficit round-robin toward the split: the class furthest below its target share.
            let class = (0..CLASSES.len())
                .filter(|&c| self.class_split[c] > 0.0)
                // Synergy's priorities start at 0 for every class (so the first job is an image
                // job) and are updated after each arrival.
                .map(|c| {
                    (
                        c,
                        if i == 0 {
                            0.0
                        } else {
                            self.class_split[c] / split_sum - per_class[c] as f64 / i as f64
                        },
                    )
                })
                .fold(None, |best: Option<(usize, f64)>, (c, p)| match best {
                    Some((_, bp)) if bp >= p => best,
                    _ => Some((c, p)),
                })
                .map_or(0, |(c, _)| c);
            per_class[class] += 1;
            let model = by_class[class][next_model[class] % by_class[class].len()];
            next_model[class] += 1;
            let (lo, hi) = if rng.random::<f64>() < 0.8 {
                (1.5, 3.0)
            } else {
                (3.0, 4.0)
            };
            let duration_s = 60.0 * 10f64.powf(lo + (hi - lo) * rng.random::<f64>());
            let gpus = if let Some(d) = demands {
                d[i % d.len()]
            } else if self.multi_gpu {
                crate::generator::draw_gpu_count(&mut rng)
            } else {
                1
            };
            let iterations = (duration_s / model.iter_time_s).floor().max(1.0);
            let mut job = JobSpec::new(
                JobId(i as u32),
                SimTime::from_ms(arrival_s * 1000),
                gpus,
                iterations * model.iter_time_s,
            );
            job.trace_id = i.to_string();
            job.model = Some(model.name.clone());
            job.iterations = Some(iterations as u64);
            job.sensitivity = Some(Arc::clone(&model.sensitivity));
            jobs.push(job);
        }
        Ok(Trace::from_jobs(jobs, None))
    }
}

/// GPU demands of a Philly trace's jobs in submission order, filtered as Synergy's Philly mode
/// does: jobs lasting between 60·10^1.5 s and 60·10^4 s, more than 16 GPUs dropped, counts other
/// than 1, 2, 4, 8, 16 taken as 1.
pub fn philly_gpu_demands(trace: &Trace) -> Vec<u32> {
    let (lo, hi) = (60.0 * 10f64.powf(1.5), 60.0 * 1e4);
    trace
        .jobs
        .iter()
        .filter(|j| j.run_time_s > lo && j.run_time_s < hi && j.gpus <= 16)
        .map(|j| {
            if matches!(j.gpus, 1 | 2 | 4 | 8 | 16) {
                j.gpus
            } else {
                1
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiles(ratio: u32) -> SynergyProfiles {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/synergy/models.json");
        SynergyProfiles::read(&path, ratio).expect("bundled profiles read")
    }

    #[test]
    fn zoo_models_are_read_with_their_matrices() {
        let p = profiles(3);
        assert_eq!(p.models.len(), 10);
        let alexnet = p.model("alexnet").expect("alexnet");
        assert_eq!(alexnet.class, 0);
        assert_eq!(
            (
                alexnet.sensitivity.ideal.cpus_per_gpu,
                alexnet.sensitivity.ideal.memory_per_gpu
            ),
            (12.0, 125.0)
        );
        let proportional = HostShare {
            cpus_per_gpu: 3.0,
            memory_per_gpu: 62.5,
        };
        // At ratio 3 the profiled speedup is the matrix at the ideal vector.
        for m in &p.models {
            let s = m.sensitivity.speedup(m.sensitivity.ideal, proportional);
            assert!(
                (s - m.speedup).abs() < 1e-9,
                "{}: matrix {s} vs profiled {}",
                m.name,
                m.speedup
            );
        }
        // Ratio 4: relative to the 4-core share, alexnet's ideal is 2.94 / 1.25 = 2.352 (profiled).
        let p4 = profiles(4);
        let a4 = p4.model("alexnet").expect("alexnet");
        let s = a4.sensitivity.speedup(
            a4.sensitivity.ideal,
            HostShare {
                cpus_per_gpu: 4.0,
                memory_per_gpu: 62.5,
            },
        );
        assert!((s - a4.speedup).abs() < 1e-9, "{s}");
    }

    #[test]
    fn the_class_split_is_kept_exactly_and_generation_is_deterministic() {
        let p = profiles(3);
        let w = SynergyWorkload {
            jobs: 1000,
            ..SynergyWorkload::default()
        };
        let trace = w.generate(&p, 7).expect("generates");
        let class_of = |j: &JobSpec| {
            p.model(j.model.as_deref().expect("model"))
                .expect("known")
                .class
        };
        let counts = (0..3)
            .map(|c| trace.jobs.iter().filter(|j| class_of(j) == c).count())
            .collect::<Vec<_>>();
        assert_eq!(counts, vec![200, 700, 100]);
        assert_eq!(trace, w.generate(&p, 7).expect("generates"));
        assert_ne!(trace, w.generate(&p, 8).expect("generates"));
        // Arrivals at ~9 per hour, in whole seconds.
        let last = trace.jobs.last().expect("jobs").submit.as_secs_f64();
        assert!((last / 3600.0 - 1000.0 / 9.0).abs() < 15.0, "{last}");
        assert!(trace.jobs.iter().all(|j| j.submit.as_ms() % 1000 == 0));
    }

    #[test]
    fn gpu_demands_come_from_a_trace_in_turn() {
        let p = profiles(3);
        let w = SynergyWorkload {
            jobs: 7,
            ..SynergyWorkload::default()
        };
        let trace = w
            .generate_with_demands(&p, 1, Some(&[1, 4, 8]))
            .expect("generates");
        let gpus: Vec<u32> = trace.jobs.iter().map(|j| j.gpus).collect();
        assert_eq!(gpus, vec![1, 4, 8, 1, 4, 8, 1]);
        assert!(w.generate_with_demands(&p, 1, Some(&[])).is_err());
        // Synergy's Philly filter: too short, too long and > 16 GPUs dropped; 3 GPUs become 1.
        let job = |gpus: u32, run_s: f64| JobSpec::new(JobId(0), SimTime::ZERO, gpus, run_s);
        let philly = Trace::from_jobs(
            vec![
                job(2, 5000.0),
                job(3, 5000.0),
                job(32, 5000.0),
                job(8, 100.0),
                job(16, 700_000.0),
            ],
            None,
        );
        assert_eq!(philly_gpu_demands(&philly), vec![2, 1]);
    }
}
