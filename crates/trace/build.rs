//! Tells the tests which optional data sets from `../shared/traces` (next to the repository) are
//! present, so that tests needing an absent one are reported as ignored rather than passing
//! without checking anything: `cfg(shared_gavel_traces)`, `cfg(shared_pollux_traces)`.

use std::path::{Path, PathBuf};

/// (cfg name, files the tests read, relative to `../shared/traces`).
const DATA: [(&str, &[&str]); 2] = [
    (
        "shared_gavel_traces",
        &["gavel/scheduler/traces/msr/seed=0/6214e9.trace", "gavel/scheduler/traces/physical_cluster/small_test.trace"],
    ),
    ("shared_pollux_traces", &["pollux/simulator/workloads/workload-1.csv"]),
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shared = manifest.join("../../../shared/traces");
    for (cfg, files) in DATA {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
        if files.iter().all(|f| shared.join(f).is_file()) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    // Re-run when the data appears: watch the nearest folder that exists (a folder's time stamp
    // changes when an entry is added to it). Watching a missing path would re-run every build.
    let mut watch: &Path = &shared;
    while !watch.exists() {
        match watch.parent() {
            Some(parent) => watch = parent,
            None => break,
        }
    }
    println!("cargo:rerun-if-changed={}", watch.display());
    println!("cargo:rerun-if-changed=build.rs");
}
