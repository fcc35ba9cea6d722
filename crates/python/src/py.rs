//! The PyO3 module `arbiter._native`: thin wrappers that release the GIL, run the work on all
//! cores, stop it on Ctrl-C, and turn errors into the documented exception classes. The Python
//! package (`python/arbiter/`) builds its API and DataFrames on these.

use crate::scenario::{self, Run};
use crate::{tables, traces, Error, ErrorClass};
use arbiter_sim::StopFlag;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pyo3::create_exception!(arbiter, ArbiterError, PyException, "Anything Arbiter refused or could not do; the message is the command line's.");
pyo3::create_exception!(arbiter, ScenarioError, ArbiterError, "A scenario key, a `set` override or an argument is wrong (the message names the key, the override or the file).");
pyo3::create_exception!(arbiter, TraceError, ArbiterError, "A trace could not be read: the file, its format, a column or a row (file:line: column: reason).");
pyo3::create_exception!(arbiter, PolicyError, ArbiterError, "An unknown policy, a policy parameter refused, or a policy that failed during a simulation.");

/// How often a waiting call looks for Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// The exception an error raises, with the command line's message.
fn raise(error: Error) -> PyErr {
    let message = error.message();
    match error.class() {
        ErrorClass::Arbiter => ArbiterError::new_err(message),
        ErrorClass::Scenario => ScenarioError::new_err(message),
        ErrorClass::Trace => TraceError::new_err(message),
        ErrorClass::Policy => PolicyError::new_err(message),
        ErrorClass::Stopped => PyKeyboardInterrupt::new_err(message),
    }
}

/// Runs `work` on a thread of its own without the GIL (its simulations fan out over every core),
/// looking for signals every [`POLL`] meanwhile. On Ctrl-C the stop flag is raised — no
/// simulation starts, running ones stop at their next step — and once the work has wound down
/// the `KeyboardInterrupt` is raised. A panic in the work is an `ArbiterError`, never a crash.
fn interruptible<T: Send>(py: Python<'_>, work: impl FnOnce(&StopFlag) -> Result<T, Error> + Send) -> PyResult<T> {
    let stop = StopFlag::new();
    let done = AtomicBool::new(false);
    let waiter = std::thread::current();
    std::thread::scope(|scope| {
        let (stop, done) = (&stop, &done);
        let worker = scope.spawn(move || {
            let result = work(stop);
            done.store(true, Ordering::Release);
            waiter.unpark();
            result
        });
        let mut interrupt = None;
        while !done.load(Ordering::Acquire) {
            py.detach(|| std::thread::park_timeout(POLL));
            if interrupt.is_none()
                && let Err(signal) = py.check_signals()
            {
                stop.raise();
                interrupt = Some(signal);
            }
        }
        match (interrupt, worker.join()) {
            (Some(signal), _) => Err(signal),
            (None, Ok(result)) => result.map_err(raise),
            (None, Err(panic)) => Err(ArbiterError::new_err(format!("internal error (please report it): {}", panic_text(&panic)))),
        }
    })
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}

/// A finished scenario run: its tables as JSON, its warnings, its report.
#[pyclass(frozen, module = "arbiter._native", name = "Run")]
struct PyRun(Run);

#[pymethods]
impl PyRun {
    /// The scenario's name.
    #[getter]
    fn name(&self) -> String {
        self.0.scenario.name.clone()
    }

    /// The result rows as `arbiter run --json` prints them.
    fn results_json(&self) -> PyResult<String> {
        tables::results_json(&self.0).map_err(raise)
    }

    /// The published numbers with ours beside them, as `arbiter run --json` prints them.
    fn published_json(&self) -> PyResult<String> {
        tables::published_json(&self.0).map_err(raise)
    }

    /// Every job of every simulation, as the per-job CSV with the simulation's key.
    fn jobs_csv(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| tables::jobs_csv(&self.0)).map_err(raise)
    }

    /// Each distinct warning (jobs that can never run, ...).
    fn warnings(&self) -> Vec<String> {
        self.0.warnings()
    }

    /// Writes the HTML report `arbiter run --report DIR` writes; returns its page.
    fn write_report(&self, py: Python<'_>, dir: PathBuf) -> PyResult<PathBuf> {
        py.detach(|| self.0.write_report(&dir)).map_err(raise)
    }
}

/// Runs the scenario file `path` with `--set` assignments.
#[pyfunction]
fn run_scenario(py: Python<'_>, path: PathBuf, overrides: Vec<String>, timeline: bool) -> PyResult<PyRun> {
    interruptible(py, |stop| scenario::run(scenario::load(&path, &overrides)?, timeline, stop)).map(PyRun)
}

/// Runs one ad-hoc simulation (see `scenario::ad_hoc`).
#[pyfunction]
#[pyo3(signature = (trace, format, policy, cluster, seed, tables, overrides, timeline))]
#[allow(clippy::too_many_arguments)]
fn simulate(py: Python<'_>, trace: PathBuf, format: &str, policy: &str, cluster: Option<&str>, seed: u64, tables: &str, overrides: Vec<String>, timeline: bool) -> PyResult<PyRun> {
    interruptible(py, |stop| {
        let scenario = scenario::ad_hoc(&trace, format, policy, cluster, seed, tables, &overrides)?;
        scenario::run(scenario, timeline, stop)
    })
    .map(PyRun)
}

/// `KEY=VALUE` for a `--set` from a key and a JSON value.
#[pyfunction]
fn assignment(key: &str, json: &str) -> PyResult<String> {
    crate::assign::assignment(key, json).map_err(raise)
}

/// A trace as the native CSV.
#[pyfunction]
fn read_trace(py: Python<'_>, path: PathBuf, format: &str, options: &str) -> PyResult<String> {
    interruptible(py, |_| traces::read_csv(&path, format, &traces::read_options(options)?))
}

/// A trace characterised, as `arbiter trace analyze --json` prints it.
#[pyfunction]
#[pyo3(signature = (path, format, report=None))]
fn analyze_trace(py: Python<'_>, path: PathBuf, format: &str, report: Option<PathBuf>) -> PyResult<String> {
    interruptible(py, |_| traces::analyze_json(&path, format, report.as_deref()))
}

/// Every policy's descriptor, as JSON.
#[pyfunction]
fn policies() -> PyResult<String> {
    crate::policies::descriptors_json().map_err(raise)
}

/// Arbiter's simulator from Python (the `arbiter` package wraps this module).
#[pymodule(name = "_native")]
mod native {
    #[pymodule_export]
    use super::{analyze_trace, assignment, policies, read_trace, run_scenario, simulate, ArbiterError, PolicyError, PyRun, ScenarioError, TraceError};
}
