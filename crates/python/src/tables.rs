//! A run's tables as JSON for DataFrames: the result rows and the published numbers exactly as
//! `arbiter run --json` prints them (a list of rows), the per-job records as columns (one list
//! per column: the cheapest shape for pandas to take in, for hundreds of thousands of jobs).

use crate::scenario::Run;
use crate::Error;
use arbiter_sim::JobRecord;
use serde_json::{Map, Value};

/// The result rows, as `"results"` of `arbiter run --json`.
pub fn results_json(run: &Run) -> Result<String, Error> {
    Ok(serde_json::to_string(&run.rows)?)
}

/// The published numbers with ours beside them, as `"published"` of `arbiter run --json`.
pub fn published_json(run: &Run) -> Result<String, Error> {
    Ok(serde_json::to_string(&run.comparisons)?)
}

/// The columns of the per-job table before the record's own: which simulation the job ran in.
const KEY_COLUMNS: [&str; 3] = ["trace", "policy", "seed"];

/// The record's columns in the order of the per-job CSV (`arbiter run --jobs-dir`); fields a
/// record has beyond these follow in name order.
const RECORD_COLUMNS: [&str; 23] = [
    "job", "trace_id", "tenant", "gpus", "submit_s", "first_start_s", "finish_s", "jct_s", "queue_s", "run_time_s",
    "executed_s", "gpu_s_allocated", "colocated_s", "cost_usd", "preemptions", "migrations", "failures", "outcome",
    "last_wait_reason", "deadline_s", "busy_gpu_s", "shared_gpu_s", "guest_gpu_s",
];

/// Every job of every simulation as columns (`{"trace": [...], "job": [...], ...}`): the
/// per-job CSV's columns, exact (not rounded), after `trace`, `policy` and `seed`. Rows derived
/// from a simulation (a tenant's row of a shared cluster) are left out: their jobs are in it.
pub fn jobs_json(run: &Run) -> Result<String, Error> {
    let mut columns = Columns(Vec::new());
    for row in run.rows.iter().filter(|r| is_simulation(run, r)) {
        for record in &row.records {
            let mut fields = record_fields(record)?;
            fields.insert("trace".into(), row.trace.clone().into());
            fields.insert("policy".into(), row.policy.name().into());
            fields.insert("seed".into(), row.seed.into());
            if columns.0.is_empty() {
                columns.0 = column_names(&fields).into_iter().map(|name| (name, Vec::new())).collect();
            }
            for (name, column) in &mut columns.0 {
                column.push(fields.remove(name.as_str()).unwrap_or(Value::Null));
            }
        }
    }
    if columns.0.is_empty() {
        columns.0 = KEY_COLUMNS.iter().chain(&RECORD_COLUMNS).map(|name| (name.to_string(), Vec::new())).collect();
    }
    Ok(serde_json::to_string(&columns)?)
}

/// The key and CSV columns first, then a record's other fields in name order.
fn column_names(fields: &Map<String, Value>) -> Vec<String> {
    let first = KEY_COLUMNS.iter().chain(&RECORD_COLUMNS);
    let mut names: Vec<String> = first.clone().filter(|name| fields.contains_key(**name)).map(|name| name.to_string()).collect();
    names.extend(fields.keys().filter(|name| !first.clone().any(|f| f == name)).cloned());
    names
}

/// A record's fields by name (serde's), with `jct_s` and `queue_s` as the CSV computes them.
fn record_fields(record: &JobRecord) -> Result<Map<String, Value>, Error> {
    let Value::Object(mut fields) = serde_json::to_value(record)? else {
        return Err(Error::Json(serde::ser::Error::custom("a job record is not a JSON object")));
    };
    fields.insert("jct_s".into(), record.jct_s().into());
    fields.insert("queue_s".into(), record.queue_s().into());
    Ok(fields)
}

/// Whether `row` is a simulation's own row, not one derived from others (a tenant's row of a
/// shared cluster under `tenant_rows`, or the `all` row over per-tenant clusters), as the scenario
/// runner adds them.
fn is_simulation(run: &Run, row: &arbiter_sim::scenario::ResultRow) -> bool {
    let per_tenant_clusters = run.scenario.cluster.per_tenant_nodes.is_some();
    if per_tenant_clusters {
        row.tenant != "all"
    } else {
        !run.scenario.tenant_rows || row.tenant == "all"
    }
}

/// A table as named columns, serialized as a JSON object in their order.
struct Columns(Vec<(String, Vec<Value>)>);

impl serde::Serialize for Columns {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, column) in &self.0 {
            map.serialize_entry(name, column)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;
    use arbiter_sim::StopFlag;
    use std::path::Path;

    /// Muri's scenario with its eight traces cut to 20 jobs each (a debug build is slow).
    fn muri(overrides: &[&str]) -> Run {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/muri-traces.toml");
        let mut overrides: Vec<String> = overrides.iter().map(|o| o.to_string()).collect();
        overrides.extend((0..8).map(|i| format!("trace.{i}.max_jobs=20")));
        scenario::run(scenario::load(&path, &overrides).expect("loads"), false, &StopFlag::default()).expect("runs")
    }

    #[test]
    fn results_and_published_are_the_command_lines_rows() {
        let run = muri(&["policies=[\"srtf\"]"]);
        let results: Vec<serde_json::Value> = serde_json::from_str(&results_json(&run).expect("JSON")).expect("rows");
        assert_eq!(results.len(), run.rows.len());
        assert_eq!(results[0], serde_json::to_value(&run.rows[0]).expect("row"));
        let published: Vec<serde_json::Value> = serde_json::from_str(&published_json(&run).expect("JSON")).expect("rows");
        assert_eq!(published.len(), run.comparisons.len());
    }

    #[test]
    fn jobs_are_columns_of_every_simulations_records() {
        let run = muri(&["policies=[\"srtf\", \"fifo\"]"]);
        let text = jobs_json(&run).expect("JSON");
        let at: Vec<Option<usize>> = ["trace", "policy", "seed", "job", "trace_id"].iter().map(|c| text.find(&format!("\"{c}\":["))).collect();
        assert!(at[0] == Some(1) && at.windows(2).all(|w| w[0] < w[1]), "the key columns first, in order: {at:?}");
        let table: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("columns");
        let jobs: usize = run.rows.iter().map(|r| r.records.len()).sum();
        assert!(table.values().all(|c| c.as_array().is_some_and(|c| c.len() == jobs)));
        assert_eq!(table["outcome"][0], "completed");
    }

    #[test]
    fn a_tenants_row_adds_no_jobs_of_its_own() {
        let run = muri(&["policies=[\"srtf\"]", "tenant_rows=true"]);
        assert!(run.rows.iter().any(|r| r.tenant != "all"), "tenant rows were added");
        let table: serde_json::Map<String, Value> = serde_json::from_str(&jobs_json(&run).expect("JSON")).expect("columns");
        let all: usize = run.rows.iter().filter(|r| r.tenant == "all").map(|r| r.records.len()).sum();
        assert_eq!(table["job"].as_array().map(Vec::len), Some(all));
    }
}
