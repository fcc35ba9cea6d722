//! Scenarios from Python: a scenario file with `set` overrides ([`load`]), or one ad-hoc
//! simulation written as a one-trace scenario ([`ad_hoc`]), run on every core until done or
//! stopped ([`run`]). Loading, checking and running are `arbiter-sim`'s, as `arbiter run` uses them.

use crate::Error;
use arbiter_policy::PolicyKind;
use arbiter_sim::StopFlag;
use arbiter_sim::scenario::{ClusterSpec, Comparison, PolicyFactory, ResultRow, Scenario};
use arbiter_trace::{TraceError, TraceFormat};
use std::path::{Path, PathBuf};

/// A scenario run: its rows (with per-job records, and timelines where recorded) and the
/// published numbers next to ours.
#[derive(Debug)]
pub struct Run {
    /// The scenario as run (overrides applied).
    pub scenario: Scenario,
    /// One row per trace × tenant × policy × seed, as `arbiter run --json` gives them.
    pub rows: Vec<ResultRow>,
    /// The scenario's published numbers with ours beside them.
    pub comparisons: Vec<Comparison>,
}

/// Reads a scenario file with `--set` assignments applied.
pub fn load(path: &Path, overrides: &[String]) -> Result<Scenario, Error> {
    Ok(Scenario::load(path, overrides)?)
}

/// The file name that stands for an ad-hoc simulation in messages (relative paths in it resolve
/// against the current directory).
pub const AD_HOC: &str = "<simulate>";

/// One simulation as a scenario: `trace` read as `format`, under `policy`, on `cluster`
/// (`NODESxGPUS` as `arbiter simulate --cluster` takes it; `None` leaves the `[cluster]` table to
/// `tables`), with `seed`. `tables` (a JSON object) gives whole top-level tables of a scenario
/// file — `policy`, `placement`, `simulation`, `cluster` — and `overrides` are `--set`
/// assignments applied after.
pub fn ad_hoc(
    trace: &Path,
    format: &str,
    policy: &str,
    cluster: Option<&str>,
    seed: u64,
    tables: &str,
    overrides: &[String],
) -> Result<Scenario, Error> {
    let format = TraceFormat::parse(format).map_err(Error::Format)?;
    let policy = PolicyKind::parse(policy).map_err(Error::Policy)?;
    std::fs::File::open(trace).map_err(|source| TraceError::Io {
        path: trace.to_path_buf(),
        source,
    })?;
    let mut doc = toml::Table::new();
    doc.insert("name".into(), "simulate".into());
    doc.insert(
        "policies".into(),
        toml::Value::Array(vec![policy.name().into()]),
    );
    doc.insert(
        "seeds".into(),
        toml::Value::Array(vec![toml_integer(seed)?]),
    );
    doc.insert(
        "trace".into(),
        toml::Value::Array(vec![trace_entry(trace, format)?]),
    );
    if let Some(text) = cluster {
        let spec =
            ClusterSpec::nodes_x_gpus(text).map_err(|m| Error::Argument(format!("cluster {m}")))?;
        doc.insert(
            "cluster".into(),
            toml::Value::try_from(&spec).map_err(|e| Error::Argument(format!("cluster: {e}")))?,
        );
    }
    for (key, value) in tables_of(tables)? {
        doc.insert(key, value);
    }
    let text = toml::to_string(&doc).map_err(|e| Error::Argument(e.to_string()))?;
    Ok(Scenario::parse(&text, Path::new(AD_HOC), overrides)?)
}

/// The `[[trace]]` entry of an ad-hoc simulation, named by the file's stem.
fn trace_entry(path: &Path, format: TraceFormat) -> Result<toml::Value, Error> {
    let name = path
        .file_stem()
        .map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned());
    let text = path
        .to_str()
        .ok_or_else(|| Error::Argument(format!("trace path {} is not UTF-8", path.display())))?;
    let mut entry = toml::Table::new();
    entry.insert("name".into(), name.into());
    entry.insert("format".into(), format.name().into());
    entry.insert("path".into(), text.into());
    Ok(toml::Value::Table(entry))
}

fn toml_integer(n: u64) -> Result<toml::Value, Error> {
    i64::try_from(n)
        .map(toml::Value::Integer)
        .map_err(|_| Error::Argument(format!("seed {n} is out of range")))
}

/// The top-level tables an ad-hoc simulation is given, from a JSON object.
fn tables_of(json: &str) -> Result<toml::Table, Error> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::Argument(e.to_string()))?;
    match crate::assign::to_toml(value).map_err(Error::Argument)? {
        toml::Value::Table(tables) => Ok(tables),
        _ => Err(Error::Argument("the tables must be a dict".into())),
    }
}

/// Runs every simulation of `scenario` on all cores (rows in the order `arbiter run` prints
/// them) until done or until `stop` is raised; `timeline` records what ran where, for reports.
pub fn run(scenario: Scenario, timeline: bool, stop: &StopFlag) -> Result<Run, Error> {
    run_with(scenario, timeline, stop, None)
}

/// [`run`] with each simulation's policy built by `factory` (a policy written in Python), the
/// simulations then one at a time ([`Scenario::run_with`]).
pub fn run_with(
    mut scenario: Scenario,
    timeline: bool,
    stop: &StopFlag,
    factory: Option<&PolicyFactory<'_>>,
) -> Result<Run, Error> {
    scenario.simulation.record_timeline = timeline;
    let origin = std::time::Instant::now();
    let rows = scenario.run_with(
        &|_, _| {},
        &|| origin.elapsed().as_secs_f64(),
        stop,
        factory,
    )?;
    if rows.is_empty() {
        return Err(Error::Argument(
            "the scenario produced no simulations (no tenant of the trace has a cluster?)".into(),
        ));
    }
    let comparisons = scenario.compare(&rows);
    Ok(Run {
        scenario,
        rows,
        comparisons,
    })
}

impl Run {
    /// Each distinct warning of the rows (jobs that can never run, ...), in order.
    pub fn warnings(&self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        self.rows
            .iter()
            .flat_map(|r| &r.warnings)
            .filter(|w| seen.insert(w.as_str()))
            .cloned()
            .collect()
    }

    /// Writes the HTML report `arbiter run --report DIR` writes; returns its page. A policy
    /// written in Python (run as the kind `external`) is named `python_policy` there, as in the
    /// DataFrames.
    pub fn write_report(&self, dir: &Path, python_policy: Option<&str>) -> Result<PathBuf, Error> {
        let input = arbiter_report::run::RunInput {
            scenario: &self.scenario,
            rows: &self.rows,
            comparisons: &self.comparisons,
        };
        let renamed: Vec<(arbiter_policy::PolicyKind, &str)> = python_policy
            .map(|name| (arbiter_policy::PolicyKind::External, name))
            .into_iter()
            .collect();
        Ok(arbiter_report::run::report_named(
            &input,
            arbiter_report::run::PolicyNames { renamed: &renamed },
        )
        .write(dir)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;

    fn sixty() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/tiresias/60_job.csv")
    }

    fn simulate(policy: &str, tables: &str) -> Result<Run, Error> {
        run(
            ad_hoc(&sixty(), "tiresias", policy, Some("2x4"), 0, tables, &[])?,
            false,
            &StopFlag::default(),
        )
    }

    #[test]
    fn an_ad_hoc_simulation_is_a_one_trace_scenario() {
        let run = simulate("srtf", "{}").expect("runs");
        assert_eq!(run.rows.len(), 1);
        let row = &run.rows[0];
        assert_eq!(
            (
                row.trace.as_str(),
                row.policy,
                row.summary.jobs,
                row.capacity_gpus
            ),
            ("60_job", PolicyKind::Srtf, 60, 8)
        );
        assert_eq!(run.scenario.name, "simulate");
    }

    #[test]
    fn ad_hoc_tables_reach_the_policy() {
        let plain = simulate("las", "{}").expect("runs").rows[0]
            .summary
            .avg_jct_s;
        let tuned = simulate(
            "las",
            r#"{"policy": {"las": {"queue_limits_gpu_s": [100], "queues": 2}}}"#,
        )
        .expect("runs");
        assert_ne!(tuned.rows[0].summary.avg_jct_s, plain);
        let e = simulate("las", r#"{"policy": {"las": {"queus": 2}}}"#).expect_err("unknown key");
        assert_eq!(e.class(), ErrorClass::Policy, "{e}");
        assert!(e.message().contains("unknown field `queus`"), "{e}");
    }

    #[test]
    fn ad_hoc_arguments_are_refused_with_their_class() {
        let class = |e: Error| (e.class(), e.message());
        let (c, m) =
            class(ad_hoc(&sixty(), "tiresias", "srft", None, 0, "{}", &[]).expect_err("policy"));
        assert_eq!(
            (c, m.as_str()),
            (
                ErrorClass::Policy,
                "unknown policy `srft`; did you mean `srtf`? (`arbiter policies` lists them)"
            )
        );
        let (c, m) =
            class(ad_hoc(&sixty(), "bogus", "srtf", None, 0, "{}", &[]).expect_err("format"));
        assert_eq!(c, ErrorClass::Trace);
        assert!(m.starts_with("unknown trace format `bogus`"), "{m}");
        let (c, m) = class(
            ad_hoc(
                Path::new("/nonexistent/x.csv"),
                "native",
                "srtf",
                None,
                0,
                "{}",
                &[],
            )
            .expect_err("file"),
        );
        assert_eq!(c, ErrorClass::Trace);
        assert!(m.starts_with("cannot read /nonexistent/x.csv: "), "{m}");
        let (c, m) = class(
            ad_hoc(&sixty(), "tiresias", "srtf", Some("8by8"), 0, "{}", &[]).expect_err("cluster"),
        );
        assert_eq!(
            (c, m.as_str()),
            (
                ErrorClass::Scenario,
                "cluster `8by8`: expected NODESxGPUS, e.g. 8x8"
            )
        );
    }

    #[test]
    fn a_raised_stop_flag_stops_the_run() {
        let stop = StopFlag::new();
        stop.raise();
        let scenario =
            ad_hoc(&sixty(), "tiresias", "fifo", Some("2x4"), 0, "{}", &[]).expect("loads");
        assert_eq!(
            run(scenario, false, &stop).expect_err("stopped").class(),
            ErrorClass::Stopped
        );
    }

    #[test]
    fn the_report_is_written() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let run = simulate("srtf", "{}").expect("runs");
        let page = run.write_report(dir.path(), None).expect("written");
        assert_eq!(page, dir.path().join("index.html"));
    }
}
