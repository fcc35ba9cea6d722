//! Alibaba PAI's pod lists (`cluster-trace-gpu-v2023`, Weng et al., ATC'23 "Beware of
//! Fragmentation"): `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//! creation_time,deletion_time,scheduled_time`, times in seconds. A pod asks for `num_gpu`
//! GPUs, each at `gpu_milli` thousandths (below 1,000: a share of one GPU); it carries no work
//! amount, so these lists are characterized (`arbiter trace analyze --format pai-pods`), not
//! simulated.

use crate::TraceError;
use crate::analysis::{CDF_POINTS, thinned_cdf};
use crate::rows::read_csv;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pod {
    /// Its name.
    pub name: String,
    /// CPU, thousandths of a core.
    pub cpu_milli: u32,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// GPUs asked for (0: a CPU pod).
    pub num_gpu: u32,
    /// Thousandths of each GPU (1,000: whole GPUs; below: a share of one GPU).
    pub gpu_milli: u32,
    /// A GPU-type constraint (`V100M16|V100M32`), if any.
    pub gpu_spec: Option<String>,
    /// Quality-of-service class (`LS`, `BE`, `Burstable`, `Guaranteed`).
    pub qos: String,
    /// Phase at the end of the trace (`Running`, `Succeeded`, `Failed`, `Pending`).
    pub phase: String,
    /// Created, seconds.
    pub creation_s: f64,
    /// Deleted, seconds (the end of the trace for pods still there).
    pub deletion_s: f64,
}

impl Pod {
    /// Whether it asks for a share of one GPU rather than whole GPUs.
    pub fn fractional(&self) -> bool {
        self.num_gpu > 0 && self.gpu_milli < 1000
    }

    /// GPUs asked for, counting a share as its fraction.
    pub fn gpu_demand(&self) -> f64 {
        self.num_gpu as f64 * self.gpu_milli as f64 / 1000.0
    }
}

/// Reads a pod list.
pub fn read(path: &Path) -> Result<Vec<Pod>, TraceError> {
    let mut pods = Vec::new();
    let columns = [
        "name",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "qos",
        "pod_phase",
        "creation_time",
        "deletion_time",
    ];
    read_csv(
        path,
        b',',
        |file| file.require(&columns),
        |row| {
            let num_gpu: u32 = row.parse("num_gpu")?;
            let gpu_milli: u32 = row.parse("gpu_milli")?;
            if num_gpu > 0 && !(1..=1000).contains(&gpu_milli) {
                return Err(row.error(
                    "gpu_milli",
                    format!("{gpu_milli} is not in 1..=1000 for a pod with GPUs"),
                ));
            }
            if num_gpu > 1 && gpu_milli < 1000 {
                return Err(row.error(
                    "gpu_milli",
                    format!("{gpu_milli}: a share of a GPU needs num_gpu = 1, not {num_gpu}"),
                ));
            }
            let creation_s = row.non_negative("creation_time")?;
            let deletion_s = row.non_negative("deletion_time")?;
            if deletion_s < creation_s {
                return Err(row.error(
                    "deletion_time",
                    format!("{deletion_s} is before creation_time {creation_s}"),
                ));
            }
            // `gpu_spec` is optional: not every variant of the list has it.
            let spec = row.get("gpu_spec").ok().filter(|s| !s.is_empty());
            pods.push(Pod {
                name: row.get("name")?.to_string(),
                cpu_milli: row.parse("cpu_milli")?,
                memory_mib: row.parse("memory_mib")?,
                num_gpu,
                gpu_milli: if num_gpu == 0 { 0 } else { gpu_milli },
                gpu_spec: spec.map(str::to_string),
                qos: row.get("qos")?.to_string(),
                phase: row.get("pod_phase")?.to_string(),
                creation_s,
                deletion_s,
            });
            Ok(())
        },
    )?;
    if pods.is_empty() {
        return Err(TraceError::File {
            path: path.to_path_buf(),
            reason: "no pods".into(),
        });
    }
    Ok(pods)
}

/// The request classes pods are counted in: CPU only, a share of one GPU, then whole GPUs as
/// the Philly study's size classes.
pub const POD_CLASSES: [&str; 6] = ["CPU only", "<1 GPU", "1", "2-4", "5-8", ">8"];

fn class_of(pod: &Pod) -> usize {
    match (pod.num_gpu, pod.fractional()) {
        (0, _) => 0,
        (_, true) => 1,
        (1, false) => 2,
        (2..=4, _) => 3,
        (5..=8, _) => 4,
        _ => 5,
    }
}

/// One request class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodClass {
    /// Its name (one of [`POD_CLASSES`]).
    pub class: String,
    /// Pods in it.
    pub pods: usize,
    /// Share of all pods.
    pub pod_share: f64,
    /// Share of all GPUs asked for (shares counted as their fraction).
    pub gpu_demand_share: f64,
    /// Pods by final phase (`Failed`, `Running`, ...), as shares of the class.
    pub phases: BTreeMap<String, f64>,
    /// Median lifetime (deletion − creation), seconds.
    pub p50_lifetime_s: f64,
}

/// A pod list characterized: what the FGD paper (ATC'23) shows about PAI's GPU sharing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodAnalysis {
    /// Pods.
    pub pods: usize,
    /// GPUs asked for in all, shares counted as their fraction.
    pub gpu_demand: f64,
    /// By request class, in [`POD_CLASSES`] order (empty classes included).
    pub classes: Vec<PodClass>,
    /// Share of the GPU pods that ask for a share of one GPU.
    pub fractional_share_of_gpu_pods: f64,
    /// The GPU share asked for by the fractional pods: (thousandths, fraction of them at most
    /// that), at most [`CDF_POINTS`] points.
    pub fractional_milli_cdf: Vec<(f64, f64)>,
    /// Pods by final phase, as shares of all.
    pub phases: BTreeMap<String, f64>,
    /// Pods by QoS class, as shares of all.
    pub qos: BTreeMap<String, f64>,
    /// Share of the GPU pods constrained to GPU types.
    pub gpu_type_constrained_share: f64,
}

fn shares<'a>(names: impl Iterator<Item = &'a str>) -> BTreeMap<String, f64> {
    let mut counts: BTreeMap<String, f64> = BTreeMap::new();
    let mut n = 0.0;
    for name in names {
        *counts.entry(name.to_string()).or_default() += 1.0;
        n += 1.0;
    }
    counts.values_mut().for_each(|c| *c /= n);
    counts
}

/// Characterizes `pods`.
pub fn analyze(pods: &[Pod]) -> PodAnalysis {
    let n = pods.len().max(1) as f64;
    let demand: f64 = pods.iter().map(Pod::gpu_demand).sum();
    let classes = POD_CLASSES
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let members: Vec<&Pod> = pods.iter().filter(|p| class_of(p) == i).collect();
            let mut lifetimes: Vec<f64> = members
                .iter()
                .map(|p| p.deletion_s - p.creation_s)
                .collect();
            lifetimes.sort_by(f64::total_cmp);
            PodClass {
                class: name.to_string(),
                pods: members.len(),
                pod_share: members.len() as f64 / n,
                gpu_demand_share: if demand > 0.0 {
                    members
                        .iter()
                        .map(|p| p.gpu_demand())
                        .fold(0.0, |a, b| a + b)
                        / demand
                } else {
                    0.0
                },
                phases: shares(members.iter().map(|p| p.phase.as_str())),
                p50_lifetime_s: lifetimes
                    .get(lifetimes.len().saturating_sub(1) / 2)
                    .copied()
                    .unwrap_or(0.0),
            }
        })
        .collect();
    let gpu_pods: Vec<&Pod> = pods.iter().filter(|p| p.num_gpu > 0).collect();
    let mut milli: Vec<f64> = gpu_pods
        .iter()
        .filter(|p| p.fractional())
        .map(|p| p.gpu_milli as f64)
        .collect();
    milli.sort_by(f64::total_cmp);
    let per_gpu_pod = |count: usize| {
        if gpu_pods.is_empty() {
            0.0
        } else {
            count as f64 / gpu_pods.len() as f64
        }
    };
    PodAnalysis {
        pods: pods.len(),
        gpu_demand: demand,
        classes,
        fractional_share_of_gpu_pods: per_gpu_pod(milli.len()),
        fractional_milli_cdf: thinned_cdf(&milli, CDF_POINTS),
        phases: shares(pods.iter().map(|p| p.phase.as_str())),
        qos: shares(pods.iter().map(|p| p.qos.as_str())),
        gpu_type_constrained_share: per_gpu_pod(
            gpu_pods.iter().filter(|p| p.gpu_spec.is_some()).count(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,12000,16384,1,1000,,LS,Running,0,100,0
p1,6000,12288,1,500,,LS,Failed,10,30,10
p2,6000,12288,1,250,V100M16|V100M32,BE,Succeeded,20,60,20
p3,4000,4096,0,0,,BE,Running,0,10,0
p4,32000,65536,8,1000,,LS,Failed,5,1005,5
";

    fn tiny() -> Vec<Pod> {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pods.csv");
        std::fs::write(&path, TINY).expect("written");
        read(&path).expect("reads")
    }

    #[test]
    fn a_hand_made_pod_list_by_hand() {
        let a = analyze(&tiny());
        assert_eq!(a.pods, 5);
        // GPUs asked: 1 + 0.5 + 0.25 + 0 + 8 = 9.75.
        assert!((a.gpu_demand - 9.75).abs() < 1e-12);
        let class = |name: &str| a.classes.iter().find(|c| c.class == name).expect("class");
        assert_eq!(class("CPU only").pods, 1);
        assert_eq!(class("<1 GPU").pods, 2);
        assert!((class("<1 GPU").gpu_demand_share - 0.75 / 9.75).abs() < 1e-12);
        assert_eq!(
            class("<1 GPU").phases,
            BTreeMap::from([("Failed".to_string(), 0.5), ("Succeeded".to_string(), 0.5)])
        );
        assert_eq!(
            class("5-8").phases,
            BTreeMap::from([("Failed".to_string(), 1.0)])
        );
        assert_eq!(class("<1 GPU").p50_lifetime_s, 20.0);
        assert_eq!(class(">8").pods, 0);
        // 2 of the 4 GPU pods share a GPU; 1 of 4 is constrained to types.
        assert_eq!(a.fractional_share_of_gpu_pods, 0.5);
        assert_eq!(a.gpu_type_constrained_share, 0.25);
        assert_eq!(a.fractional_milli_cdf, vec![(250.0, 0.5), (500.0, 1.0)]);
        assert_eq!(a.phases["Failed"], 0.4);
        assert_eq!(a.qos["BE"], 0.4);
    }

    #[test]
    fn bad_rows_name_their_line_and_field() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("bad.csv");
        std::fs::write(
            &path,
            TINY.replace("p1,6000,12288,1,500", "p1,6000,12288,2,500"),
        )
        .expect("written");
        let e = read(&path).expect_err("refused").to_string();
        assert!(
            e.ends_with("bad.csv:3: gpu_milli: 500: a share of a GPU needs num_gpu = 1, not 2"),
            "{e}"
        );
        std::fs::write(
            &path,
            TINY.replace(
                "p2,6000,12288,1,250,V100M16|V100M32,BE,Succeeded,20,60",
                "p2,6000,12288,1,250,,BE,Succeeded,20,6",
            ),
        )
        .expect("written");
        assert!(
            read(&path)
                .expect_err("refused")
                .to_string()
                .contains(":4: deletion_time: 6 is before creation_time 20")
        );
    }
}
