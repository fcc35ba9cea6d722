//! Quota trees in scenarios (issue 30): `arbiter run` prints the reclaims only when a quota tree
//! is used, `--json` counts them per row, `--report` draws each tenant against its quota, and a
//! tree that does not add up is refused with its numbers and the trace it belongs to.

use crate::cli::{arbiter, ok_stdout};
use std::path::Path;

/// Tenant `b` fills the 8 GPUs at t=0 (four of them on `a`'s idle guaranteed quota); at t=100
/// `a` submits four 1-GPU jobs.
const JOBS: &str = "trace_id,tenant,submit_s,gpus,run_time_s
b0,b,0,1,1000
b1,b,0,1,1000
b2,b,0,1,1000
b3,b,0,1,1000
b4,b,0,1,1000
b5,b,0,1,1000
b6,b,0,1,1000
b7,b,0,1,1000
a0,a,100,1,100
a1,a,100,1,100
a2,a,100,1,100
a3,a,100,1,100
";

const HEAD: &str = r#"name = "quota-e2e"
policies = ["fifo", "las"]
tenant_rows = true

[cluster]
racks = 1
nodes_per_rack = 1
gpus_per_node = 8

[simulation]
schedule_on_events = true
overhead = "none"

[[trace]]
name = "open"
format = "native"
path = "jobs.csv"
quotas = "none"
"#;

/// Writes the trace and a scenario of `HEAD` plus `rest` into `dir`; returns its path.
fn write(dir: &Path, file: &str, rest: &str) -> String {
    std::fs::write(dir.join("jobs.csv"), JOBS).expect("trace written");
    let path = dir.join(file);
    std::fs::write(&path, format!("{HEAD}{rest}")).expect("scenario written");
    path.to_str().expect("utf-8").to_string()
}

const SPLIT: &str = r#"
[[trace]]
name = "split"
format = "native"
path = "jobs.csv"
quotas = "split"

[[quota_trees.split]]
name = "a"
gpus.all = { guaranteed = 4 }

[[quota_trees.split]]
name = "b"
gpus.all = { guaranteed = 4 }
"#;

#[test]
fn a_quota_scenario_prints_its_reclaims_and_its_report_draws_each_tenant_against_its_quota() {
    let dir = tempfile::tempdir().expect("dir");
    // Without a quota tree anywhere, the table is as it always was: no `reclaims` column.
    let plain = write(dir.path(), "plain.toml", "");
    let table = ok_stdout(&["run", &plain]);
    assert!(!table.contains("reclaims"), "{table}");

    let file = write(dir.path(), "split.toml", SPLIT);
    let table = ok_stdout(&["run", &file]);
    let header = table.lines().nth(1).expect("header");
    assert!(header.ends_with(" util reclaims wall s"), "{table}");
    // The cell before `wall s`, the last.
    let reclaims = |trace: &str, policy: &str, tenant: &str| -> String {
        table
            .lines()
            .find(|l| l.split_whitespace().take(3).eq([trace, policy, tenant]))
            .and_then(|l| l.split_whitespace().rev().nth(1))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{trace} {policy} {tenant}: {table}"))
    };
    for policy in ["fifo", "las"] {
        assert_eq!(reclaims("open", policy, "all"), "-", "{table}");
        assert_eq!(reclaims("split", policy, "all"), "4", "{table}");
        assert_eq!(reclaims("split", policy, "a"), "0", "{table}");
        assert_eq!(reclaims("split", policy, "b"), "4", "{table}");
    }

    // --json: the count on every row under the tree, nothing on the others.
    let out = ok_stdout(&["run", &file, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rows = v["results"].as_array().expect("results");
    for r in rows {
        match r["trace"].as_str() {
            Some("split") => assert!(r["quota_reclaims"].is_u64(), "{r}"),
            _ => assert!(r.get("quota_reclaims").is_none(), "{r}"),
        }
    }

    // --report: per policy, a panel per tenant against its quota, and the table of quotas.
    let report = dir.path().join("report");
    let report = report.to_str().expect("utf-8");
    ok_stdout(&["run", &file, "--report", report]);
    let page = std::fs::read_to_string(Path::new(report).join("index.html")).expect("page");
    assert!(page.contains("Quota tree of split"), "its section");
    assert!(!page.contains("Quota tree of open"), "no tree, no section");
    for policy in ["fifo", "las"] {
        let id = format!("split-all-quota-{policy}");
        assert!(page.contains(&format!("<figure id=\"{id}\"")), "{id}");
        let svg = std::fs::read_to_string(Path::new(report).join(format!("figures/{id}.svg")))
            .expect("svg written");
        assert!(
            svg.contains("guaranteed (4)") && svg.contains("reclaimed (4)"),
            "{id}: b's panel names its quota and its reclaims"
        );
        assert!(Path::new(report).join(format!("figures/{id}.png")).exists());
    }
}

#[test]
fn a_quota_tree_over_its_parent_is_refused_naming_the_table_and_the_numbers() {
    let dir = tempfile::tempdir().expect("dir");
    let file = write(
        dir.path(),
        "bad.toml",
        r#"
[[trace]]
name = "overdrawn"
format = "native"
path = "jobs.csv"
quotas = "bad"

[[quota_trees.bad]]
name = "org"
gpus.all = { guaranteed = 4 }

[[quota_trees.bad]]
name = "a"
parent = "org"
gpus.all = { guaranteed = 3 }

[[quota_trees.bad]]
name = "b"
parent = "org"
gpus.all = { guaranteed = 3 }
"#,
    );
    let out = arbiter(&["run", &file]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {err}");
    assert!(
        err.contains("[[quota_trees.bad]]: quota tree does not add up")
            && err.contains("a 3 + b 3 add up to 6, above its parent `org`'s 4"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no table printed");
}
