"""Scenario runs and ad-hoc simulations, and their results."""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple, Union

from . import _convert, _frames, _native
from ._convert import PathLike
from ._native import PolicyError
from ._policy import Policy

if TYPE_CHECKING:
    import pandas as pd

class Run:
    """A finished run: its tables as DataFrames (built on first use, then kept), its warnings and
    its report."""

    def __init__(self, native: "_native.Run", policy_name: Optional[str] = None) -> None:
        self._native = native
        # A policy written in Python runs as the kind `external`; its rows carry its name.
        self._policy_name = policy_name

    def _named(self, frame: "pd.DataFrame") -> "pd.DataFrame":
        if self._policy_name is not None and "policy" in frame.columns:
            if _frames.frames() == "polars":
                import polars as pl

                return frame.with_columns(pl.col("policy").replace("external", self._policy_name))
            frame["policy"] = frame["policy"].replace("external", self._policy_name)
        return frame

    @property
    def name(self) -> str:
        """The scenario's name (``simulate`` for an ad-hoc simulation)."""
        return self._native.name

    @cached_property
    def results(self) -> "pd.DataFrame":
        """One row per trace × tenant × policy × seed, with the columns of ``arbiter run --json``:
        ``trace``, ``policy``, ``tenant``, ``seed``, then every metric (``jobs``,
        ``avg_jct_s``, ``p50_jct_s``, ``p99_jct_s``, ``avg_queue_s``, ``makespan_s``,
        ``gpu_utilization``, ...; docs/metrics.md), ``events``, ``wall_s``, ``capacity_gpus``,
        ``stranded_gpu_fraction``."""
        return self._named(_frames.rows(self._native.results_json()))

    @cached_property
    def published(self) -> "pd.DataFrame":
        """The scenario's published numbers with ours beside them, as ``arbiter run`` prints
        them: ``trace``, ``policy``, ``tenant``, ``metric``, ``value`` (published), ``source``,
        ``tolerance``, ``ours``, ``relative_diff``, ``comparable``, ``within_tolerance``. Empty
        for a scenario without published numbers."""
        return self._named(_frames.rows(self._native.published_json()))

    @cached_property
    def jobs(self) -> "pd.DataFrame":
        """One row per job of every simulation: ``trace``, ``policy``, ``seed``, then the
        per-job CSV's columns (``arbiter run --jobs-dir``; ``job``, ``tenant``, ``gpus``,
        ``submit_s``, ``first_start_s``, ``finish_s``, ``jct_s``, ``queue_s``, ``outcome``, ...)
        with its values (seconds to the millisecond, the simulator's resolution)."""
        return self._named(_frames.csv(self._native.jobs_csv(), _frames.JOBS_TEXT_COLUMNS))

    @property
    def warnings(self) -> List[str]:
        """What ``arbiter run`` prints as warnings (jobs that can never run on the cluster, ...)."""
        return self._native.warnings()

    def report(self, dir: PathLike) -> Path:
        """Writes the HTML report ``arbiter run --report DIR`` writes (index.html, self-contained,
        with every figure also as SVG and PNG under figures/); returns the page's path. A run made
        with ``timeline=False`` has no Gantt chart or time series in it. A policy written in
        Python carries its name there, as in the DataFrames."""
        return Path(self._native.write_report(os.fspath(dir), self._policy_name))

    def __repr__(self) -> str:
        return f"<arbiter.Run {self.name!r}>"


def run(path: PathLike, set: _convert.Overrides = None, *, timeline: bool = True, policy: Optional[Policy] = None) -> Run:
    """Runs the scenario file ``path`` as ``arbiter run`` does: every trace × tenant × policy ×
    seed, in parallel on every core.

    ``set`` overrides scenario keys as ``--set`` does: a dict of keys to Python values
    (``{"policies": ["srtf"], "trace.0.max_jobs": 200, "policy.horus": {"lookahead": 5}}``) or a
    list of ``"KEY=VALUE"`` strings as typed on the command line. ``timeline`` records what ran
    where and when, for :meth:`Run.report`'s Gantt chart and time series; it changes no result.
    ``policy`` (an :class:`arbiter.Policy` instance) runs every simulation under that policy
    written in Python instead of the scenario's ``policies``, one simulation at a time; its rows
    carry its name.

    Raises :class:`~arbiter.ScenarioError`, :class:`~arbiter.TraceError` or
    :class:`~arbiter.PolicyError` with the command line's message; ``KeyboardInterrupt`` on Ctrl-C.
    """
    overrides = _convert.assignments(set)
    if policy is None:
        return Run(_native.run_scenario(os.fspath(path), overrides, timeline))
    _check_policy(policy)
    overrides = overrides + ['policies=["external"]']
    return Run(_native.run_scenario(os.fspath(path), overrides, timeline, policy), policy.policy_name())


def ad_hoc_tables(
    cluster: Union[str, Mapping[str, Any]],
    placement: Union[str, Mapping[str, Any], None],
    simulation: Optional[Mapping[str, Any]],
    policy_params: Optional[Mapping[str, Any]] = None,
) -> Tuple[Optional[str], str]:
    """An ad-hoc simulation's ``NODESxGPUS`` shorthand (or ``None``) and its top-level tables
    as JSON, from :func:`simulate`'s arguments."""
    tables: dict = {}
    if policy_params:
        tables["policy"] = policy_params
    if isinstance(placement, str):
        tables["placement"] = {"strategy": placement}
    elif placement is not None:
        tables["placement"] = dict(placement)
    if simulation is not None:
        tables["simulation"] = dict(simulation)
    shorthand: Optional[str] = None
    if isinstance(cluster, str):
        shorthand = cluster
    else:
        tables["cluster"] = dict(cluster)
    return shorthand, _convert.to_json(tables)


def _policy_table(policy: str, python_policy: Optional[Policy], params: Mapping[str, Any]) -> Optional[dict]:
    """The ``[policy]`` table of :func:`simulate`'s ``policy_params``: flat parameters of
    ``policy`` put in its tables, tables as given."""
    if not params:
        return None
    if python_policy is not None:
        # Tables only (tenant_weights, ...): a policy written in Python has no parameters here.
        try:
            return json.loads(_native.policy_table("external", _convert.to_json(dict(params))))
        except PolicyError as error:
            flat = next(k for k in params if k in str(error))
            raise PolicyError(f"policy `{python_policy.policy_name()}` is written in Python and takes no parameters here (its constructor does): unknown field `{flat}`") from None
    return json.loads(_native.policy_table(policy, _convert.to_json(dict(params))))


def _check_policy(policy: Any) -> None:
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a policy name or an arbiter.Policy instance, got {type(policy).__name__}")


def simulate(
    trace: PathLike,
    format: str = "native",
    policy: Union[str, Policy] = "fifo",
    cluster: Union[str, Mapping[str, Any]] = "8x8",
    *,
    seed: int = 0,
    placement: Union[str, Mapping[str, Any], None] = None,
    simulation: Optional[Mapping[str, Any]] = None,
    set: _convert.Overrides = None,
    timeline: bool = True,
    **policy_params: Any,
) -> Run:
    """One simulation, as ``arbiter simulate`` runs it: ``trace`` read as ``format`` (``philly``,
    ``tiresias``, ``muri``, ``gavel``, ``pollux``, ``chronus``, ``native``) under ``policy`` on
    ``cluster``, with ``seed``. ``policy`` is a policy's name or an :class:`arbiter.Policy`
    instance (a policy written in Python).

    ``cluster`` is ``"NODESxGPUS"`` (one rack; ``arbiter simulate --cluster``) or a scenario's
    ``[cluster]`` table as a dict (``{"spec_file": "data/muri/n8g8.csv"}``, ``{"gpu_types":
    {"k80": 36, "v100": 36}, "gpus_per_node": 4}``). ``placement`` is a strategy name
    (``consolidated``, ``spread``, ``relaxed``, ``anywhere``) or a ``[placement]`` table;
    ``simulation`` a ``[simulation]`` table (``{"restart_overhead_s": 30, "round_s": 360}``).
    ``policy_params`` are the policy's parameters, by name (``simulate(..., policy="las",
    queues=3)``: ``[policy.las] queues``), or keys of the ``[policy]`` table as dicts
    (``las={"queues": 3}``, ``horus={"lookahead": 5}``, ``tenant_weights={...}``); a name the
    policy does not take raises :class:`~arbiter.PolicyError` naming it. ``set``
    overrides any key as in :func:`run`, and ``timeline`` is as there. Relative paths resolve
    against the current directory.

    Returns a :class:`Run` with one row of results.
    """
    python_policy: Optional[Policy] = None
    if not isinstance(policy, str):
        _check_policy(policy)
        python_policy, policy = policy, "external"
    shorthand, tables = ad_hoc_tables(cluster, placement, simulation, _policy_table(policy, python_policy, policy_params))
    native = _native.simulate(
        os.fspath(trace),
        format,
        policy,
        shorthand,
        seed,
        tables,
        _convert.assignments(set),
        timeline,
        python_policy,
    )
    return Run(native, python_policy.policy_name() if python_policy is not None else None)
