//! Tells the tests which optional data sets from `../shared/traces` (next to the repository) are
//! present, so that tests needing an absent one are reported as ignored rather than passing
//! without checking anything: `cfg(shared_gavel_traces)`. (Pollux's data is bundled in `data/pollux`.)

use std::path::PathBuf;

/// (cfg name, files the tests read, relative to `../shared/traces`).
const DATA: [(&str, &[&str]); 1] = [(
    "shared_gavel_traces",
    &[
        "gavel/scheduler/traces/msr/seed=0/6214e9.trace",
        "gavel/scheduler/traces/physical_cluster/small_test.trace",
    ],
)];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shared = manifest.join("../../../shared/traces");
    for (cfg, files) in DATA {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
        if files.iter().all(|f| shared.join(f).is_file()) {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    // Re-run when the data changes; when it is absent, only when this script changes (watching
    // the nearest folder that exists — `/tmp`, `~` — would rebuild three crates at every build as
    // that folder changes). After adding `../shared`, `cargo clean -p arbiter-trace` picks it up.
    if shared.exists() {
        println!("cargo:rerun-if-changed={}", shared.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
