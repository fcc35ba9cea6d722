//! A run's tables for DataFrames: the result rows and the published numbers exactly as
//! `arbiter run --json` prints them (a list of rows), the per-job records as the CSV
//! `arbiter run --jobs-dir` writes, with the simulation each job ran in.

use crate::Error;
use crate::scenario::Run;
use arbiter_sim::metrics::{RECORD_CSV_COLUMNS, record_csv_fields};

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

/// Every job of every simulation as one CSV: `trace`, `policy` and `seed`, then the per-job
/// CSV's columns and values (`arbiter run --jobs-dir`). Rows derived from a simulation (a
/// tenant's row of a shared cluster) are left out: their jobs are in it. CSV rather than JSON:
/// pandas reads it several times faster, which counts at hundreds of thousands of jobs.
pub fn jobs_csv(run: &Run) -> Result<String, Error> {
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(KEY_COLUMNS.iter().chain(&RECORD_CSV_COLUMNS))?;
    for row in run.rows.iter().filter(|r| is_simulation(run, r)) {
        let seed = row.seed.to_string();
        for record in &row.records {
            let key = [row.trace.as_str(), row.policy.name(), seed.as_str()];
            let fields = record_csv_fields(record);
            out.write_record(key.iter().copied().chain(fields.iter().map(String::as_str)))?;
        }
    }
    let bytes = out
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    String::from_utf8(bytes)
        .map_err(|e| Error::Csv(std::io::Error::new(std::io::ErrorKind::InvalidData, e).into()))
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
        scenario::run(
            scenario::load(&path, &overrides).expect("loads"),
            false,
            &StopFlag::default(),
        )
        .expect("runs")
    }

    #[test]
    fn results_and_published_are_the_command_lines_rows() {
        let run = muri(&["policies=[\"srtf\"]"]);
        let results: Vec<serde_json::Value> =
            serde_json::from_str(&results_json(&run).expect("JSON")).expect("rows");
        assert_eq!(results.len(), run.rows.len());
        assert_eq!(results[0], serde_json::to_value(&run.rows[0]).expect("row"));
        let published: Vec<serde_json::Value> =
            serde_json::from_str(&published_json(&run).expect("JSON")).expect("rows");
        assert_eq!(published.len(), run.comparisons.len());
    }

    /// The per-job CSV's header and rows.
    fn jobs(run: &Run) -> (Vec<String>, Vec<csv::StringRecord>) {
        let text = jobs_csv(run).expect("CSV");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let header = reader
            .headers()
            .expect("header")
            .iter()
            .map(str::to_string)
            .collect();
        (
            header,
            reader.records().collect::<Result<_, _>>().expect("rows"),
        )
    }

    #[test]
    fn jobs_are_every_simulations_records_after_their_key() {
        let run = muri(&["policies=[\"srtf\", \"fifo\"]"]);
        let (header, rows) = jobs(&run);
        assert_eq!(&header[..5], ["trace", "policy", "seed", "job", "trace_id"]);
        assert_eq!(header[3..], RECORD_CSV_COLUMNS);
        assert_eq!(
            rows.len(),
            run.rows.iter().map(|r| r.records.len()).sum::<usize>()
        );
        let first = &run.rows[0];
        assert_eq!(
            (&rows[0][0], &rows[0][1], &rows[0][2]),
            (first.trace.as_str(), first.policy.name(), "0")
        );
        assert_eq!(
            rows[0].iter().skip(3).collect::<Vec<_>>(),
            record_csv_fields(&first.records[0])
        );
    }

    #[test]
    fn a_tenants_row_adds_no_jobs_of_its_own() {
        let run = muri(&["policies=[\"srtf\"]", "tenant_rows=true"]);
        assert!(
            run.rows.iter().any(|r| r.tenant != "all"),
            "tenant rows were added"
        );
        let all: usize = run
            .rows
            .iter()
            .filter(|r| r.tenant == "all")
            .map(|r| r.records.len())
            .sum();
        assert_eq!(jobs(&run).1.len(), all);
    }
}
