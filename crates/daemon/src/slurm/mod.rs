//! The Slurm executor: the daemon decides, Slurm runs.

pub mod cli;
pub mod parse;

use crate::executor::Capabilities;

/// What the Slurm executor can do: multi-node gangs; no GPU sharing (Slurm gives a GPU to one
/// job); no live change of a job's CPU/memory (the daemon restarts the run from its checkpoint
/// with the new share).
pub const CAPABILITIES: Capabilities = Capabilities { colocation: false, live_reshare: false, multi_node: true, automatic_uids: false };

mod executor;
pub use executor::SlurmExecutor;

/// The nodes of the Slurm partition that have GPUs, as the daemon's cluster: GPU type from the
/// gres (`gpu:a100:4`; `gpu` when untyped), rack from a node feature starting with `rack`
/// (else `default`), memory in whole GiB.
pub fn nodes_of(cli: &cli::SlurmCli) -> Result<Vec<crate::topology::NodeSpec>, String> {
    let nodes = cli.nodes().map_err(|e| format!("reading the nodes of Slurm partition `{}`: {e}", cli.partition))?;
    Ok(nodes
        .into_iter()
        .filter(|n| n.gpus > 0)
        .map(|n| crate::topology::NodeSpec {
            rack: n.features.iter().find(|f| f.starts_with("rack")).cloned().unwrap_or_else(|| "default".into()),
            gpu_type: n.gpu_type.clone().unwrap_or_else(|| "gpu".into()),
            devices: (0..n.gpus).collect(),
            cpus: n.cpus,
            memory_gib: (n.memory_mb / 1024) as u32,
            name: n.name,
        })
        .collect())
}
