//! The Slurm executor: the daemon decides, Slurm runs.

pub mod cli;
pub mod error;
pub mod parse;

use crate::executor::Capabilities;

/// What the Slurm executor can do: multi-node gangs; GPU sharing only with `share_gpus` (Slurm
/// gives a GPU to one job: runs that share are steps of one allocation, [`shared`]); no live
/// change of a job's CPU/memory (the daemon restarts the run from its checkpoint with the new
/// share).
pub const fn capabilities(share_gpus: bool) -> Capabilities {
    Capabilities {
        colocation: share_gpus,
        live_reshare: false,
        multi_node: true,
        automatic_uids: false,
        colocation_hint: Some("`[slurm] share_gpus = true` lets it"),
    }
}

mod executor;
pub mod shared;
pub use executor::{SlurmExecutor, StepFiles};

/// The nodes of the Slurm partition that have GPUs, as the daemon's cluster: GPU type from the
/// gres (`gpu:a100:4`; `gpu` when untyped), rack from a node feature starting with `rack`
/// (else `default`), memory in whole GiB.
pub fn nodes_of(cli: &cli::SlurmCli) -> Result<Vec<crate::records::topology::NodeSpec>, String> {
    let nodes = cli.nodes().map_err(|e| {
        format!(
            "reading the nodes of Slurm partition `{}`: {e}",
            cli.partition
        )
    })?;
    Ok(nodes
        .into_iter()
        .filter(|n| n.gpus > 0)
        .map(|n| crate::records::topology::NodeSpec {
            rack: n
                .features
                .iter()
                .find(|f| f.starts_with("rack"))
                .cloned()
                .unwrap_or_else(|| "default".into()),
            gpu_type: n.gpu_type.clone().unwrap_or_else(|| "gpu".into()),
            devices: (0..n.gpus).collect(),
            cpus: n.cpus,
            memory_gib: (n.memory_mb / 1024) as u32,
            name: n.name,
        })
        .collect())
}

/// Under Slurm each run's log is opened on the node by slurmstepd as the tenant's user, so every
/// directory above `logs` must let others pass (`o+x`); the logs themselves stay private (the
/// directory is 0711 and each log 0600, owned by its tenant). Says which directory is not.
pub fn check_traversable(logs: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for dir in logs.ancestors().skip(1) {
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if meta.permissions().mode() & 0o001 == 0 {
            return Err(format!(
                "{} (mode {:o}) must be traversable by others (chmod o+x) for the Slurm executor: each job opens its log in {} as its tenant's user; or choose a data_dir whose parents are",
                dir.display(),
                meta.permissions().mode() & 0o7777,
                logs.display()
            ));
        }
    }
    Ok(())
}
