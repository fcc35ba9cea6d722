//! Arbiter's production mode: the `arbiter serve` daemon and its client.
//!
//! ```text
//!   HTTP /v1 (axum) ──► Daemon (state, one mutex) ──► Store (redb: every transition persisted first)
//!                           │
//!                           └── scheduling loop: snapshot ──► arbiter_policy (the simulator's
//!                               policies, unchanged) ──► diff ──► local executor (process groups)
//! ```
//!
//! Its modules in layers, each importing only those above it (no cycle at any level:
//! `crates/cli/tests/module_cycles.rs`):
//!
//! ```text
//!   config, clock        leaves: the settings, the clock
//!   security             tokens, unix identities, confinement, containment, the data directory, text rules, webhook signatures and addresses
//!   records              jobs and histories, the store, retention, progress, co-location speeds, nodes, the policy's view, the webhook outbox
//!   executor             the seam: local runs (the run wrapper), Slurm, a recording fake
//!   daemon               the state and the scheduling round; runs, recovery, tenants, policy support, webhook delivery
//!   api                  HTTP routes, limits, the dashboard; the client
//!   start                from the configuration to a serving daemon
//! ```
//!
//! Out of the box it schedules one machine: GPUs found by `nvidia-smi` or declared
//! (`gpus = "4xa100"`), jobs run as local process groups with `CUDA_VISIBLE_DEVICES` set.
#![deny(missing_docs)]

pub mod api;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod executor;
pub mod records;
pub mod security;
pub mod start;
