//! The PyO3 module `arbiter._native`: thin wrappers that release the GIL, run the work on all
//! cores, stop it on Ctrl-C, and turn errors into the documented exception classes. The Python
//! package (`python/arbiter/`) builds its API and DataFrames on these.

use crate::episode::{Answer, Episode, Point};
use crate::inprocess::{self, TenantCodes};
use crate::scenario::{self, Run};
use crate::{tables, traces, Error, ErrorClass};
use arbiter_model::{Decision, SimTime};
use arbiter_policy::external::Observation;
use arbiter_policy::mechanisms::greedy::GreedyOptions;
use arbiter_policy::{Placing, Policy, PolicyConfig, PolicyKind, SchedulerView};
use arbiter_policy::PolicyError as Refusal;
use arbiter_sim::StopFlag;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::sync::{Arc, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pyo3::create_exception!(arbiter, ArbiterError, PyException, "Anything Arbiter refused or could not do; the message is the command line's.");
pyo3::create_exception!(arbiter, ScenarioError, ArbiterError, "A scenario key, a `set` override or an argument is wrong (the message names the key, the override or the file).");
pyo3::create_exception!(arbiter, TraceError, ArbiterError, "A trace could not be read: the file, its format, a column or a row (file:line: column: reason).");
pyo3::create_exception!(arbiter, PolicyError, ArbiterError, "An unknown policy, a policy parameter refused, or a policy that failed during a simulation.");
pyo3::create_exception!(arbiter, DecisionError, PolicyError, "A policy written in Python answered what cannot be carried out (a job not waiting or running, a job twice, not an order of job ids) or raised an exception (its `__cause__`).");

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

/// A policy written in Python (an `arbiter.Policy`): at each scheduling point the simulation's
/// thread takes the GIL, hands `arbiter._policy._decide` the packed features, and places the
/// order it answers as the external protocol does. What goes wrong is kept in `failure` as the
/// exception to raise (a `DecisionError`), and the simulation fails.
struct PyPolicy {
    object: Py<PyAny>,
    decide: Py<PyAny>,
    name: String,
    options: GreedyOptions,
    tenants: TenantCodes,
    tenant_list: Py<PyList>,
    failure: Arc<Mutex<Option<PyErr>>>,
}

impl PyPolicy {
    fn new(py: Python<'_>, object: &Py<PyAny>, config: &PolicyConfig, failure: &Arc<Mutex<Option<PyErr>>>) -> PyResult<Self> {
        let object = object.clone_ref(py);
        object.call_method0(py, "reset")?;
        let name: String = object.call_method0(py, "policy_name")?.extract(py)?;
        let decide = py.import("arbiter._policy")?.getattr("_decide")?.unbind();
        let placing = Placing { strategy: config.placement, keep_placements: config.keep_placements };
        Ok(PyPolicy { object, decide, name, options: GreedyOptions::fit_first(placing), tenants: TenantCodes::default(), tenant_list: PyList::empty(py).unbind(), failure: Arc::clone(failure) })
    }

    /// Keeps `error` to raise, and fails the simulation.
    fn fail(&self, error: PyErr) -> Refusal {
        let message = error.to_string();
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(error);
        }
        Refusal::Config(message)
    }
}

impl Policy for PyPolicy {
    fn name(&self) -> &'static str {
        arbiter_policy::external::DESCRIPTOR.name
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, Refusal> {
        let observation = Observation::of(view, now);
        let time_s = observation.time_s;
        let answer = Python::attach(|py| -> PyResult<(Vec<u8>, bool)> {
            let columns = PyBytes::new_with(py, inprocess::columns_len(observation.jobs.len()), |out| {
                inprocess::pack_columns(&observation, &mut self.tenants, out);
                Ok(())
            })?;
            let tenants = self.tenant_list.bind(py);
            for tenant in self.tenants.take_new() {
                tenants.append(tenant)?;
            }
            let args = (self.object.bind(py), time_s, columns, PyBytes::new(py, &inprocess::pack_free(&observation)), tenants);
            let (order, preempt): (Bound<'_, PyBytes>, bool) = self.decide.bind(py).call1(args)?.extract()?;
            Ok((order.as_bytes().to_vec(), preempt))
        });
        let (order, preempt) = answer.map_err(|e| self.fail(e))?;
        let at = format!("policy `{}` at t={time_s:?}s", self.name);
        let order = inprocess::unpack_order(&order).map_err(|id| self.fail(DecisionError::new_err(format!("{at}: its order names job {id}, which is not waiting or running"))))?;
        arbiter_policy::external::decide_in_order(view, now, self.options, &order, preempt).map_err(|e| self.fail(DecisionError::new_err(format!("{at}: {e}"))))
    }
}

/// Runs `scenario`, under the Python policy `policy` where one is given (every simulation one at
/// a time, under the kind `external`): the exception a Python policy failed with, if it did.
fn run_scenario_with(py: Python<'_>, scenario: impl FnOnce() -> Result<arbiter_sim::scenario::Scenario, Error> + Send, timeline: bool, policy: Option<Py<PyAny>>) -> PyResult<PyRun> {
    let failure: Arc<Mutex<Option<PyErr>>> = Arc::default();
    let result = match &policy {
        None => interruptible(py, |stop| scenario::run(scenario()?, timeline, stop)),
        Some(object) => {
            let factory = |_: PolicyKind, config: &PolicyConfig| -> Result<Box<dyn Policy>, Refusal> {
                Python::attach(|py| PyPolicy::new(py, object, config, &failure)).map(|p| Box::new(p) as Box<dyn Policy>).map_err(|e| {
                    let message = e.to_string();
                    if let Ok(mut slot) = failure.lock() {
                        slot.get_or_insert(e);
                    }
                    Refusal::Config(message)
                })
            };
            interruptible(py, |stop| scenario::run_with(scenario()?, timeline, stop, Some(&factory)))
        }
    };
    let failed = failure.lock().ok().and_then(|mut slot| slot.take());
    match (result, failed) {
        (Err(_), Some(error)) => Err(error),
        (result, _) => result.map(PyRun),
    }
}

/// Runs the scenario file `path` with `--set` assignments (under a Python policy, if given).
#[pyfunction]
#[pyo3(signature = (path, overrides, timeline, policy=None))]
fn run_scenario(py: Python<'_>, path: PathBuf, overrides: Vec<String>, timeline: bool, policy: Option<Py<PyAny>>) -> PyResult<PyRun> {
    run_scenario_with(py, || scenario::load(&path, &overrides), timeline, policy)
}

/// Runs one ad-hoc simulation (see `scenario::ad_hoc`), under a Python policy if given.
#[pyfunction]
#[pyo3(signature = (trace, format, policy, cluster, seed, tables, overrides, timeline, python_policy=None))]
#[allow(clippy::too_many_arguments)]
fn simulate(py: Python<'_>, trace: PathBuf, format: &str, policy: &str, cluster: Option<&str>, seed: u64, tables: &str, overrides: Vec<String>, timeline: bool, python_policy: Option<Py<PyAny>>) -> PyResult<PyRun> {
    run_scenario_with(py, || scenario::ad_hoc(&trace, format, policy, cluster, seed, tables, &overrides), timeline, python_policy)
}

/// An episode of the Gymnasium environment: one simulation on its own thread, answered by the
/// agent (see `episode`). Dropping or closing it abandons the simulation.
#[pyclass(module = "arbiter._native", name = "Episode")]
struct PyEpisode(Mutex<Option<Episode>>);

/// A message of the simulation as a tuple: `("view", time_s, reward, columns, free, new
/// tenants)`, `("free", free)`, `("refused", message)`, `("end", reward)`.
fn point_tuple<'py>(py: Python<'py>, point: Option<Point>) -> PyResult<Bound<'py, PyTuple>> {
    match point {
        Some(Point::View { time_s, reward, columns, free, tenants }) => ("view", time_s, reward, PyBytes::new(py, &columns), free, tenants).into_pyobject(py),
        Some(Point::Free(free)) => ("free", free).into_pyobject(py),
        Some(Point::Refused(message)) => ("refused", message).into_pyobject(py),
        Some(Point::End { reward }) => ("end", reward).into_pyobject(py),
        None => Err(ArbiterError::new_err("the episode's simulation is gone")),
    }
}

impl PyEpisode {
    fn with<T>(&self, work: impl FnOnce(&mut Option<Episode>) -> PyResult<T>) -> PyResult<T> {
        let mut episode = self.0.lock().map_err(|_| ArbiterError::new_err("the episode failed"))?;
        work(&mut episode)
    }
}

#[pymethods]
impl PyEpisode {
    /// Starts an ad-hoc simulation (as `simulate`) under the agent.
    #[new]
    #[pyo3(signature = (trace, format, cluster, seed, tables, overrides))]
    fn new(trace: PathBuf, format: &str, cluster: Option<&str>, seed: u64, tables: &str, overrides: Vec<String>) -> PyResult<Self> {
        let scenario = scenario::ad_hoc(&trace, format, "external", cluster, seed, tables, &overrides).map_err(raise)?;
        Ok(PyEpisode(Mutex::new(Some(Episode::start(scenario)))))
    }

    /// The first message (a scheduling point, or the end).
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let point = self.with(|e| Ok(py.detach(|| e.as_ref().and_then(Episode::next))))?;
        point_tuple(py, point)
    }

    /// Tries (`decide=False`: the free GPUs after starting them) or decides (the next
    /// scheduling point, or the end) an order of job ids.
    fn answer<'py>(&self, py: Python<'py>, order: Vec<u32>, decide: bool) -> PyResult<Bound<'py, PyTuple>> {
        let answer = if decide { Answer::Decide(order) } else { Answer::Try(order) };
        let point = self.with(|e| Ok(py.detach(|| e.as_ref().filter(|e| e.answer(answer)).and_then(Episode::next))))?;
        point_tuple(py, point)
    }

    /// After the end: the episode's run (results and per-job records).
    fn finish(&self, py: Python<'_>) -> PyResult<PyRun> {
        let episode = self.with(|e| e.take().ok_or_else(|| ArbiterError::new_err("the episode is closed")))?;
        py.detach(|| episode.finish()).map(PyRun).map_err(raise)
    }

    /// Abandons the simulation.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let episode = self.with(|e| Ok(e.take()))?;
        py.detach(|| drop(episode));
        Ok(())
    }
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
    use super::{analyze_trace, assignment, policies, read_trace, run_scenario, simulate, ArbiterError, DecisionError, PolicyError, PyEpisode, PyRun, ScenarioError, TraceError};
}
