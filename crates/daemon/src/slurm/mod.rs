//! The Slurm executor: the daemon decides, Slurm runs.


use crate::executor::Capabilities;

/// What the Slurm executor can do: multi-node gangs; no GPU sharing (Slurm gives a GPU to one
/// job); no live change of a job's CPU/memory (the daemon restarts the run from its checkpoint
/// with the new share).
pub const CAPABILITIES: Capabilities = Capabilities { colocation: false, live_reshare: false, multi_node: true };
