//! A scenario under a quota tree (issue 30): it runs, reclaims a borrower's jobs when the owner
//! of the quota they borrowed submits, counts the reclaims per row and per tenant, records when
//! each happened and the tree's leaves for reports, and refuses a tree that does not add up with
//! the numbers and the trace.

use arbiter_sim::scenario::{ResultRow, Scenario};
use std::path::Path;

/// Tenant `b` fills the 8 GPUs at t=0 with eight 1-GPU jobs of 1,000 s (four of them on `a`'s
/// idle guaranteed quota); at t=100 `a` submits four 1-GPU jobs of 100 s.
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

/// The same jobs without quotas (`open`) and under a tree guaranteeing each tenant 4 GPUs
/// (`split`), plus `extra` TOML.
fn scenario(dir: &Path, extra: &str) -> Scenario {
    let mut scenario = load(dir, extra).expect("scenario loads");
    // As `arbiter run --report` asks: the timeline behind the report's figures.
    scenario.simulation.record_timeline = true;
    scenario
}

/// [`scenario`] as loading it answers.
fn load(dir: &Path, extra: &str) -> Result<Scenario, arbiter_sim::scenario::ScenarioError> {
    std::fs::write(dir.join("jobs.csv"), JOBS).expect("trace written");
    let text = format!(
        r#"name = "quota-test"
policies = ["fifo"]
seeds = [0]
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

[[trace]]
name = "split"
format = "native"
path = "jobs.csv"
quotas = "split"

[[quota_trees.split]]
name = "a"
gpus.all = {{ guaranteed = 4 }}

[[quota_trees.split]]
name = "b"
gpus.all = {{ guaranteed = 4 }}
{extra}"#
    );
    let path = dir.join("quota-test.toml");
    std::fs::write(&path, &text).expect("scenario written");
    Scenario::load(&path, &[])
}

/// A leaf as the test reads it: path, guaranteed, limit, tenants.
type Leaf<'a> = (&'a str, &'a [u32], &'a [Option<u32>], &'a [String]);

fn row<'r>(rows: &'r [ResultRow], trace: &str, tenant: &str) -> &'r ResultRow {
    rows.iter()
        .find(|r| r.trace == trace && r.tenant == tenant)
        .unwrap_or_else(|| panic!("no row {trace}/{tenant}"))
}

#[test]
fn a_quota_scenario_reclaims_the_borrower_for_the_owner_and_reports_it() {
    let dir = tempfile::tempdir().expect("dir");
    let rows = scenario(dir.path(), "")
        .run(&|_, _| {}, &|| 0.0)
        .expect("runs");

    // Without quotas, FIFO keeps a's jobs behind b's until b's first jobs end at 1,000 s.
    let open = row(&rows, "open", "all");
    assert_eq!(open.quota_reclaims, None);
    assert!(open.reclaimed.is_empty() && open.quota_tree.is_none());
    assert_eq!(row(&rows, "open", "a").summary.avg_queue_s, 900.0);
    assert_eq!(row(&rows, "open", "a").quota_reclaims, None);

    // Under the tree, b's four borrowed GPUs are reclaimed at 100 s and a's jobs start at once.
    let split = row(&rows, "split", "all");
    assert_eq!(split.quota_reclaims, Some(4));
    assert_eq!(split.reclaimed.len(), 4);
    for r in &split.reclaimed {
        assert_eq!(r.at_s, 100.0, "{r:?}");
        assert_eq!(split.records[r.job as usize].tenant, "b", "{r:?}");
    }
    assert_eq!(row(&rows, "split", "a").summary.avg_queue_s, 0.0);
    assert_eq!(row(&rows, "split", "a").quota_reclaims, Some(0));
    assert_eq!(row(&rows, "split", "b").quota_reclaims, Some(4));
    assert_eq!(row(&rows, "split", "b").reclaimed, split.reclaimed);
    // Every job finishes; the reclaimed ones lost their 100 s and ran again.
    assert_eq!(split.summary.unfinished, 0);
    assert_eq!(split.summary.jobs, 12);

    // The tree's leaves as a report draws them: each tenant with its quota and no limit.
    let layout = split.quota_tree.as_deref().expect("a quota tree");
    assert_eq!(layout.dims, vec!["all"]);
    assert_eq!(layout.dim_of_node, vec![0]);
    let leaves: Vec<Leaf<'_>> = layout
        .leaves
        .iter()
        .map(|l| {
            (
                l.path.as_str(),
                l.guaranteed.as_slice(),
                l.limit.as_slice(),
                l.tenants.as_slice(),
            )
        })
        .collect();
    assert_eq!(
        leaves,
        vec![
            ("a", &[4][..], &[None][..], &["a".to_string()][..]),
            ("b", &[4][..], &[None][..], &["b".to_string()][..]),
        ]
    );
    // Per-tenant rows carry no layout (they have no timeline of their own).
    assert!(row(&rows, "split", "b").quota_tree.is_none());

    // The JSON has the count on every row under the tree, and none elsewhere.
    let json = serde_json::to_value(split).expect("json");
    assert_eq!(json["quota_reclaims"], 4);
    let json = serde_json::to_value(open).expect("json");
    assert!(json.get("quota_reclaims").is_none(), "{json}");
}

#[test]
fn a_hard_cap_reclaims_nothing_and_keeps_the_borrower_at_its_quota() {
    let dir = tempfile::tempdir().expect("dir");
    let extra = r#"
[[trace]]
name = "hard"
format = "native"
path = "jobs.csv"
quotas = "hard"

[[quota_trees.hard]]
name = "a"
gpus.all = { guaranteed = 4, borrowing_limit = 0 }

[[quota_trees.hard]]
name = "b"
gpus.all = { guaranteed = 4, borrowing_limit = 0 }
"#;
    let rows = scenario(dir.path(), extra)
        .run(&|_, _| {}, &|| 0.0)
        .expect("runs");
    let hard = row(&rows, "hard", "all");
    assert_eq!(hard.quota_reclaims, Some(0));
    // b runs four at a time: its second four start when the first end, at 1,000 s.
    assert_eq!(row(&rows, "hard", "b").summary.avg_queue_s, 500.0);
    assert_eq!(row(&rows, "hard", "a").summary.avg_queue_s, 0.0);
    let held_by_b = hard
        .timeline
        .iter()
        .filter(|s| hard.records[s.job as usize].tenant == "b")
        .filter(|s| s.start_s < 500.0 && s.end_s > 500.0)
        .map(|s| s.gpus())
        .sum::<u32>();
    assert_eq!(held_by_b, 4, "b never above its cap");
}

#[test]
fn a_tree_whose_children_exceed_their_parent_is_refused_with_the_numbers_and_the_trace() {
    let dir = tempfile::tempdir().expect("dir");
    // Children above their parent: refused as the file is read, naming it and the table.
    let extra = r#"
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
"#;
    let e = load(dir.path(), extra)
        .expect_err("6 guaranteed under a parent of 4")
        .to_string();
    assert!(
        e.contains("quota-test.toml: [[quota_trees.bad]]: quota tree does not add up"),
        "names the file and the table: {e}"
    );
    assert!(
        e.contains("the guaranteed all GPUs of a 3 + b 3 add up to 6, above its parent `org`'s 4"),
        "{e}"
    );
    // More than the cluster has: known once the trace's cluster is built, naming the trace.
    let extra = r#"
[[trace]]
name = "overdrawn"
format = "native"
path = "jobs.csv"
quotas = "big"

[[quota_trees.big]]
name = "a"
gpus.all = { guaranteed = 9 }
"#;
    let e = scenario(dir.path(), extra)
        .run(&|_, _| {}, &|| 0.0)
        .expect_err("9 guaranteed on 8 GPUs")
        .to_string();
    assert!(e.starts_with("overdrawn/"), "names the trace: {e}");
    assert!(
        e.contains("the guaranteed all GPUs of a 9 add up to 9, above the cluster's 8"),
        "{e}"
    );
}
