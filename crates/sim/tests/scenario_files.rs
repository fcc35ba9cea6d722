//! Every scenario file the repository ships loads: its keys parse and validate (a typo in a
//! rarely run file would otherwise surface only when someone runs it).

use arbiter_sim::scenario::Scenario;
use std::path::PathBuf;

#[test]
fn every_bundled_scenario_file_loads() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/ is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 19,
        "expected the bundled scenario files, found {}",
        files.len()
    );
    for file in &files {
        let scenario =
            Scenario::load(file, &[]).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            !scenario.policies.is_empty(),
            "{}: no policies",
            file.display()
        );
    }
}
