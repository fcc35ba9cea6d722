//! End-to-end tests of the `arbiter` binary, in one test binary (one link instead of five):
//!
//! - `cli`: the simulator commands on bundled data (scenarios on subsets, conversions, errors);
//! - `daemon`: production mode's life cycle with real processes (preemption and resume, kill -9
//!   and re-adoption, crash recovery, deleted stores, full disks as root, policy timing);
//! - `daemon_api`: the HTTP API and the client commands (logs, connections, shutdown, tenants,
//!   output, `--export`);
//! - `adversarial`: a hostile tenant attacking another through the API and from inside its jobs.
//! - `containment`: what confines a run on the host — the derived per-tenant process limit, each
//!   run's own PID namespace and /proc, memory limits without cgroup v2 (RLIMIT_DATA).
//! - `colocation`: jobs a policy co-locates (`muri-s`) share a GPU, and say so — naming another
//!   tenant's job to no one but the admin.
//!
//! - `dashboard`: the daemon's dashboard page and its snapshot endpoint.
//! - `shares`: one tenant exhausting its share of the API (connections, requests, records) hurts
//!   only itself.
//! - `queue`: priority classes, dependencies and job arrays through the CLI and the API.
//! - `quotas`: scenarios under a quota tree: the reclaims in the table, the JSON and the report;
//!   a tree that does not add up refused.
//! - `report`: the HTML reports of `run`, `sweep` and `trace analyze`.
//! - `webhooks`: tenants' webhooks against a receiver on loopback, hostile URLs, kill -9 mid-delivery.
//! - `slurm`: `serve --executor slurm` against the lab Slurm cluster of `scripts/slurm-up.sh`.
//!
//! Tests named `root_*` need root and are `#[ignore]`d; `.ci/run` runs them when it is root.
//! Tests named `slurm_*` need root and the lab cluster; `.ci/run` starts it and runs them.

mod adversarial;
mod cli;
mod colocation;
mod common;
mod containment;
mod daemon;
mod daemon_api;
mod dashboard;
mod queue;
mod quota_scenarios;
mod quotas;
mod report;
mod shares;
mod slurm;
mod usage;
mod webhooks;
