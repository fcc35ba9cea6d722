//! The PyO3 module `arbiter._native`: thin wrappers that release the GIL, run the work on all
//! cores, stop it on Ctrl-C, and turn errors into the documented exception classes. The Python
//! package (`python/arbiter/`) builds its API and DataFrames on these.

use crate::episode::{Answer, Episode, Point};
use crate::inprocess::{self, TenantCodes};
use crate::scenario::{self, Run};
use crate::{Error, ErrorClass, tables, traces};
use arbiter_model::JobId;
use arbiter_model::{Decision, SimTime};
use arbiter_model::{Planner, Standing};
use arbiter_policy::PolicyError as Refusal;
use arbiter_policy::external::{OrderScratch, decide_in_order_reusing};
use arbiter_policy::mechanisms::greedy::GreedyOptions;
use arbiter_policy::{Placing, Policy, PolicyConfig, PolicyKind, SchedulerView};
use arbiter_sim::StopFlag;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pyo3::create_exception!(
    arbiter,
    ArbiterError,
    PyException,
    "Anything Arbiter refused or could not do; the message is the command line's."
);
pyo3::create_exception!(
    arbiter,
    ScenarioError,
    ArbiterError,
    "A scenario key, a `set` override or an argument is wrong (the message names the key, the override or the file)."
);
pyo3::create_exception!(
    arbiter,
    TraceError,
    ArbiterError,
    "A trace could not be read: the file, its format, a column or a row (file:line: column: reason)."
);
pyo3::create_exception!(
    arbiter,
    PolicyError,
    ArbiterError,
    "An unknown policy, a policy parameter refused, or a policy that failed during a simulation."
);
pyo3::create_exception!(
    arbiter,
    DecisionError,
    PolicyError,
    "A policy written in Python answered what cannot be carried out (a job not waiting or running, a job twice, not an order of job ids) or raised an exception (its `__cause__`)."
);

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
fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&StopFlag) -> Result<T, Error> + Send,
) -> PyResult<T> {
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
            (None, Err(panic)) => Err(ArbiterError::new_err(format!(
                "internal error (please report it): {}",
                panic_text(&panic)
            ))),
        }
    })
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
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

    /// Writes the HTML report `arbiter run --report DIR` writes, naming the kind `external`
    /// `python_policy` where given; returns its page.
    #[pyo3(signature = (dir, python_policy=None))]
    fn write_report(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        python_policy: Option<String>,
    ) -> PyResult<PathBuf> {
        py.detach(|| self.0.write_report(&dir, python_policy.as_deref()))
            .map_err(raise)
    }
}

/// A scheduling point as a Python policy's view reads it, lent to the Python code on the
/// simulation's thread for the time of one `schedule(view)` call (see [`lend`]).
struct Lent<'a, 'v> {
    view: &'a SchedulerView<'v>,
    now: SimTime,
    tenants: &'a RefCell<TenantCodes>,
}

thread_local! {
    /// The [`Lent`] point on this thread and its serial, while [`lend`] runs; null otherwise.
    static LENT: Cell<(*const (), u64)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// Serials of lent points: a view kept from one scheduling point cannot read the next one's.
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// Lends `point` to the Python code that `work` calls on this thread, under a fresh serial that
/// `work` hands to the view (a [`PyPoint`]). The view computes each job column from the point
/// only when the policy reads it, instead of every feature of every job being copied out first.
fn lend<T>(point: &Lent<'_, '_>, work: impl FnOnce(u64) -> T) -> T {
    /// Puts back what was lent before (nothing, unless Python policies nest), on return and on
    /// unwinding alike: the pointer never outlives the borrow it was made from.
    struct Restore((*const (), u64));
    impl Drop for Restore {
        fn drop(&mut self) {
            LENT.with(|lent| lent.set(self.0));
        }
    }
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed) + 1;
    let pointer = (point as *const Lent<'_, '_>).cast::<()>();
    let _restore = Restore(LENT.with(|lent| lent.replace((pointer, serial))));
    work(serial)
}

/// Reads the point lent under `serial`, if it is still lent on this thread.
fn with_lent<T>(serial: u64, read: impl FnOnce(&Lent<'_, '_>) -> T) -> PyResult<T> {
    let (pointer, lent) = LENT.with(Cell::get);
    if pointer.is_null() || lent != serial {
        return Err(ArbiterError::new_err(
            "a View is readable only during the schedule(view) call that received it (what was read then stays readable)",
        ));
    }
    // SAFETY: `lend` stored this pointer, made from a `&Lent` that outlives its call, and puts
    // the previous value back before that call returns or unwinds; the serial is unique to that
    // call and the cell is this thread's. So a non-null pointer with this serial points to the
    // live `Lent` of the call in progress, which is only ever read through shared references.
    let point = unsafe { &*pointer.cast::<Lent<'_, '_>>() };
    Ok(read(point))
}

/// The view's access to the scheduling point it was made for (`arbiter.View` wraps it):
/// columns computed on demand, valid only while that `schedule(view)` call runs.
#[pyclass(frozen, module = "arbiter._native", name = "Point")]
struct PyPoint {
    serial: u64,
}

#[pymethods]
impl PyPoint {
    /// Job column `index` (in `COLUMNS` order) as bytes in its dtype: int64, float64, or one
    /// byte per job for `running`.
    fn column<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyBytes>> {
        let column = inprocess::Column::from_index(index)
            .ok_or_else(|| ArbiterError::new_err(format!("no job column {index}")))?;
        with_lent(self.serial, |point| {
            let mut tenants = point
                .tenants
                .try_borrow_mut()
                .map_err(|_| ArbiterError::new_err("the tenant codes are in use"))?;
            PyBytes::new_with(py, column.width() * point.view.jobs.len(), |out| {
                inprocess::write_column(point.view, point.now, column, &mut tenants, out);
                Ok(())
            })
        })?
    }

    /// Free GPUs per node, as int64 bytes.
    fn free_gpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        with_lent(self.serial, |point| {
            PyBytes::new(py, &inprocess::free_gpus(point.view))
        })
    }

    /// Tenants coded since the last call (the `tenant` column's codes index them in order).
    fn new_tenants(&self) -> PyResult<Vec<String>> {
        with_lent(self.serial, |point| {
            point
                .tenants
                .try_borrow_mut()
                .map(|mut t| t.take_new().to_vec())
                .map_err(|_| ArbiterError::new_err("the tenant codes are in use"))
        })?
    }

    /// Every running job's placement: `(job, [(node, GPUs), ...])`.
    fn placements(&self) -> PyResult<inprocess::HeldPlacements> {
        with_lent(self.serial, |point| inprocess::held_placements(point.view))
    }
}

/// What a Python policy answered, read while it held the GIL.
enum PyAnswer {
    /// An order (its ids in `PyPolicy::order`), with preemption or not.
    Order(bool),
    /// Placements, with preemption or not.
    Placements(Vec<arbiter_model::Assignment>, bool),
}

/// A policy written in Python (an `arbiter.Policy`): at each scheduling point the simulation's
/// thread takes the GIL and asks the policy's runner (`arbiter._policy._Runner`) to decide on a
/// view of the point ([`PyPoint`]). An order is placed as the external protocol places one;
/// placements are checked by the planner, as the engine checks every policy's decision, so a
/// bad one names its job. What goes wrong is kept in `failure` as the exception to raise (a
/// `DecisionError`), and the simulation fails.
struct PyPolicy {
    runner: Py<PyAny>,
    name: String,
    options: GreedyOptions,
    tenants: RefCell<TenantCodes>,
    /// The last order answered, its memory reused.
    order: Vec<u32>,
    scratch: OrderScratch,
    planner: Planner,
    failure: Arc<Mutex<Option<PyErr>>>,
}

impl PyPolicy {
    fn new(
        py: Python<'_>,
        object: &Py<PyAny>,
        config: &PolicyConfig,
        failure: &Arc<Mutex<Option<PyErr>>>,
    ) -> PyResult<Self> {
        let runner = py
            .import("arbiter._policy")?
            .getattr("_Runner")?
            .call1((object.bind(py),))?;
        let name: String = runner.getattr("name")?.extract()?;
        let placing = Placing {
            strategy: config.placement,
            keep_placements: config.keep_placements,
        };
        Ok(PyPolicy {
            runner: runner.unbind(),
            name,
            options: GreedyOptions::fit_first(placing),
            tenants: RefCell::default(),
            order: Vec::new(),
            scratch: OrderScratch::default(),
            planner: Planner::default(),
            failure: Arc::clone(failure),
        })
    }

    /// Keeps `error` to raise, and fails the simulation.
    fn fail(&self, error: PyErr) -> Refusal {
        let message = error.to_string();
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(error);
        }
        Refusal::Config(message)
    }

    /// Fails the simulation with a `DecisionError`: at `now`, `what`.
    fn refuse(&self, now: SimTime, what: impl std::fmt::Display) -> Refusal {
        self.fail(DecisionError::new_err(format!(
            "policy `{}` at t={:?}s: {what}",
            self.name,
            now.as_ms() as f64 / 1000.0
        )))
    }

    /// Asks the Python policy about `view`: its answer, or what is wrong with it (`Ok(Err)`), or
    /// the exception it raised (already a `DecisionError` naming the policy).
    fn ask(
        &mut self,
        view: &SchedulerView<'_>,
        now: SimTime,
    ) -> PyResult<Result<PyAnswer, String>> {
        let point = Lent {
            view,
            now,
            tenants: &self.tenants,
        };
        let (runner, order, nodes) = (&self.runner, &mut self.order, view.cluster.nodes.len());
        lend(&point, |serial| {
            Python::attach(|py| {
                let handle = Bound::new(py, PyPoint { serial })?;
                let reply = runner.bind(py).call_method1(
                    pyo3::intern!(py, "decide"),
                    (now.as_ms() as f64 / 1000.0, handle, view.jobs.len()),
                )?;
                let (placements, words, preempt): (bool, Bound<'_, PyBytes>, bool) =
                    reply.extract()?;
                Ok(if placements {
                    inprocess::unpack_placements(words.as_bytes(), nodes)
                        .map(|run| PyAnswer::Placements(run, preempt))
                        .map_err(|e| e.to_string())
                } else {
                    inprocess::unpack_order(words.as_bytes(), order)
                        .map(|()| PyAnswer::Order(preempt))
                        .map_err(|id| {
                            format!("its order names job {id}, which is not waiting or running")
                        })
                })
            })
        })
    }

    /// Checks placements with the planner, as the engine will (a Python policy never shares
    /// GPUs, so every running job holds its own).
    fn check(
        &mut self,
        view: &SchedulerView<'_>,
        decision: &Decision,
    ) -> Result<(), arbiter_model::PlanError> {
        let jobs: std::collections::HashMap<JobId, &arbiter_model::ActiveJob> =
            view.jobs.iter().map(|j| (j.id, j)).collect();
        let standing = |id: JobId| {
            jobs.get(&id).map(|j| match j.placement() {
                Some(placement) => Standing::Running {
                    placement,
                    partner: None,
                    host: None,
                },
                None => Standing::Queued,
            })
        };
        let running = view.jobs.iter().filter(|j| j.is_running()).map(|j| j.id);
        let plan = self.planner.plan(
            view.cluster,
            view.specs,
            standing,
            running,
            view.current.map(|c| c.free),
            decision,
        )?;
        self.planner
            .give_back(plan.occupancy.into_whole(), plan.actions, plan.preempt);
        Ok(())
    }
}

impl Policy for PyPolicy {
    fn name(&self) -> &'static str {
        arbiter_policy::external::DESCRIPTOR.name
    }

    fn schedule(&mut self, view: &SchedulerView<'_>, now: SimTime) -> Result<Decision, Refusal> {
        match self.ask(view, now).map_err(|error| self.fail(error))? {
            Err(what) => Err(self.refuse(now, what)),
            Ok(PyAnswer::Order(preempt)) => {
                let order = std::mem::take(&mut self.order);
                let decided = decide_in_order_reusing(
                    view,
                    now,
                    self.options,
                    &order,
                    preempt,
                    &mut self.scratch,
                );
                self.order = order;
                decided.map_err(|e| self.refuse(now, e))
            }
            Ok(PyAnswer::Placements(mut run, preempt)) => {
                inprocess::match_held(view, &mut run);
                let decision = inprocess::placements_decision(run, preempt);
                self.check(view, &decision)
                    .map_err(|e| self.refuse(now, e))?;
                Ok(decision)
            }
        }
    }
}

/// Runs `scenario`, under the Python policy `policy` where one is given (every simulation one at
/// a time, under the kind `external`): the exception a Python policy failed with, if it did.
fn run_scenario_with(
    py: Python<'_>,
    scenario: impl FnOnce() -> Result<arbiter_sim::scenario::Scenario, Error> + Send,
    timeline: bool,
    policy: Option<Py<PyAny>>,
) -> PyResult<PyRun> {
    let failure: Arc<Mutex<Option<PyErr>>> = Arc::default();
    let result = match &policy {
        None => interruptible(py, |stop| scenario::run(scenario()?, timeline, stop)),
        Some(object) => {
            let factory =
                |_: PolicyKind, config: &PolicyConfig| -> Result<Box<dyn Policy>, Refusal> {
                    Python::attach(|py| PyPolicy::new(py, object, config, &failure))
                        .map(|p| Box::new(p) as Box<dyn Policy>)
                        .map_err(|e| {
                            let message = e.to_string();
                            if let Ok(mut slot) = failure.lock() {
                                slot.get_or_insert(e);
                            }
                            Refusal::Config(message)
                        })
                };
            // The simulations run on the worker thread, attached to Python once and detached at
            // once: its thread state then lives for the whole run, and each scheduling point
            // only takes the GIL (attaching afresh would create and free a thread state, and its
            // frame memory, at every decision).
            interruptible(py, |stop| {
                Python::attach(|py| {
                    py.detach(|| scenario::run_with(scenario()?, timeline, stop, Some(&factory)))
                })
            })
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
fn run_scenario(
    py: Python<'_>,
    path: PathBuf,
    overrides: Vec<String>,
    timeline: bool,
    policy: Option<Py<PyAny>>,
) -> PyResult<PyRun> {
    run_scenario_with(py, || scenario::load(&path, &overrides), timeline, policy)
}

/// Runs one ad-hoc simulation (see `scenario::ad_hoc`), under a Python policy if given.
#[pyfunction]
#[pyo3(signature = (trace, format, policy, cluster, seed, tables, overrides, timeline, python_policy=None))]
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    trace: PathBuf,
    format: &str,
    policy: &str,
    cluster: Option<&str>,
    seed: u64,
    tables: &str,
    overrides: Vec<String>,
    timeline: bool,
    python_policy: Option<Py<PyAny>>,
) -> PyResult<PyRun> {
    run_scenario_with(
        py,
        || scenario::ad_hoc(&trace, format, policy, cluster, seed, tables, &overrides),
        timeline,
        python_policy,
    )
}

/// An episode of the Gymnasium environment: one simulation on its own thread, answered by the
/// agent (see `episode`). Dropping or closing it abandons the simulation.
#[pyclass(module = "arbiter._native", name = "Episode")]
struct PyEpisode(Mutex<Option<Episode>>);

/// A message of the simulation as a tuple: `("view", time_s, reward, columns, free, new
/// tenants)`, `("free", free)`, `("refused", message)`, `("end", reward)`.
fn point_tuple<'py>(py: Python<'py>, point: Option<Point>) -> PyResult<Bound<'py, PyTuple>> {
    match point {
        Some(Point::View {
            time_s,
            reward,
            columns,
            free,
            tenants,
        }) => (
            "view",
            time_s,
            reward,
            PyBytes::new(py, &columns),
            free,
            tenants,
        )
            .into_pyobject(py),
        Some(Point::Free(free)) => ("free", free).into_pyobject(py),
        Some(Point::Refused(message)) => ("refused", message).into_pyobject(py),
        Some(Point::End { reward }) => ("end", reward).into_pyobject(py),
        None => Err(ArbiterError::new_err("the episode's simulation is gone")),
    }
}

impl PyEpisode {
    fn with<T>(&self, work: impl FnOnce(&mut Option<Episode>) -> PyResult<T>) -> PyResult<T> {
        let mut episode = self
            .0
            .lock()
            .map_err(|_| ArbiterError::new_err("the episode failed"))?;
        work(&mut episode)
    }
}

#[pymethods]
impl PyEpisode {
    /// Starts an ad-hoc simulation (as `simulate`) under the agent.
    #[new]
    #[pyo3(signature = (trace, format, cluster, seed, tables, overrides))]
    fn new(
        trace: PathBuf,
        format: &str,
        cluster: Option<&str>,
        seed: u64,
        tables: &str,
        overrides: Vec<String>,
    ) -> PyResult<Self> {
        let scenario = scenario::ad_hoc(
            &trace, format, "external", cluster, seed, tables, &overrides,
        )
        .map_err(raise)?;
        Ok(PyEpisode(Mutex::new(Some(Episode::start(scenario)))))
    }

    /// The first message (a scheduling point, or the end).
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let point = self.with(|e| Ok(py.detach(|| e.as_ref().and_then(Episode::next))))?;
        point_tuple(py, point)
    }

    /// Tries (`decide=False`: the free GPUs after starting them) or decides (the next
    /// scheduling point, or the end) an order of job ids.
    fn answer<'py>(
        &self,
        py: Python<'py>,
        order: Vec<u32>,
        decide: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let answer = if decide {
            Answer::Decide(order)
        } else {
            Answer::Try(order)
        };
        let point = self.with(|e| {
            Ok(py.detach(|| {
                e.as_ref()
                    .filter(|e| e.answer(answer))
                    .and_then(Episode::next)
            }))
        })?;
        point_tuple(py, point)
    }

    /// After the end: the episode's run (results and per-job records).
    fn finish(&self, py: Python<'_>) -> PyResult<PyRun> {
        let episode = self.with(|e| {
            e.take()
                .ok_or_else(|| ArbiterError::new_err("the episode is closed"))
        })?;
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
    interruptible(py, |_| {
        traces::read_csv(&path, format, &traces::read_options(options)?)
    })
}

/// A trace characterised, as `arbiter trace analyze --json` prints it.
#[pyfunction]
#[pyo3(signature = (path, format, report=None))]
fn analyze_trace(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    report: Option<PathBuf>,
) -> PyResult<String> {
    interruptible(py, |_| {
        traces::analyze_json(&path, format, report.as_deref())
    })
}

/// The `[policy]` table (JSON) of an ad-hoc simulation under `policy` from its parameters, flat
/// or as tables (JSON); see `policies::policy_table`.
#[pyfunction]
fn policy_table(policy: &str, params: &str) -> PyResult<String> {
    crate::policies::policy_table(policy, params).map_err(raise)
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
    use super::{
        ArbiterError, DecisionError, PolicyError, PyEpisode, PyPoint, PyRun, ScenarioError,
        TraceError, analyze_trace, assignment, policies, policy_table, read_trace, run_scenario,
        simulate,
    };
}
