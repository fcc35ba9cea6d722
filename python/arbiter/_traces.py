"""Trace files: read into a DataFrame of jobs, or characterised as the Philly study and Helios do."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _convert, _frames, _native
from ._convert import PathLike

if TYPE_CHECKING:
    import pandas as pd

def read_trace(path: PathLike, format: str = "native", **options: Any) -> "pd.DataFrame":
    """The jobs of a trace file, one row each, in Arbiter's native columns (what ``arbiter trace
    convert`` writes): ``trace_id``, ``tenant``, ``user``, ``name``, ``model``, ``submit_s``,
    ``gpus``, ``gpu_type``, ``run_time_s``, ``iterations``, ``priority``,
    ``restart_overhead_s``, ``deadline_s``, ``io_s``, ``cpu_s``, ``gpu_s``, ``iteration_s``,
    ``trace_duration_s``, ``deadline_options`` (docs/trace-formats.md). ``options`` are a
    scenario's ``[[trace]]`` reader options (``iteration_time_factor=1.015`` for Muri's traces).

    Raises :class:`~arbiter.TraceError` naming the file, line and column of a bad row."""
    text = _native.read_trace(os.fspath(path), format, _convert.to_json(options))
    return _frames.csv(text, _frames.TRACE_TEXT_COLUMNS)


@dataclass(frozen=True)
class TraceAnalysis:
    """A trace characterised (``arbiter trace analyze``): by job size, tenant and arrival time."""

    #: Jobs in the trace.
    jobs: int
    #: GPU-hours of work.
    gpu_hours: float
    #: By job size class (``gpus``: ``1``, ``2-4``, ``5-8``, ``>8``): ``jobs``, ``job_share``,
    #: ``gpu_hours``, ``gpu_time_share``, ``p50_duration_s``, ``p90_duration_s``.
    sizes: "pd.DataFrame"
    #: Each size class's duration CDF: ``gpus``, ``duration_s``, ``fraction`` (at most that long).
    duration_cdf: "pd.DataFrame"
    #: By tenant, most GPU-time first: ``tenant``, ``jobs``, ``gpu_hours``, ``gpu_time_share``,
    #: ``mean_gpus``.
    tenants: "pd.DataFrame"
    #: Share of GPU-time in the largest 1% and 10% of jobs.
    top_1pct_gpu_time_share: float
    top_10pct_gpu_time_share: float
    #: Submissions per hour of day (0-23) and per weekday (Monday first); None without timestamps.
    arrivals_by_hour: Optional["pd.Series"]
    arrivals_by_weekday: Optional["pd.Series"]
    #: Everything, as ``arbiter trace analyze --json`` prints it.
    data: Dict[str, Any] = field(repr=False)

    @classmethod
    def _from(cls, data: Dict[str, Any]) -> "TraceAnalysis":
        sizes = [{k: v for k, v in s.items() if k != "duration_cdf"} for s in data["sizes"]]
        cdf = [{"gpus": s["gpus"], "duration_s": x, "fraction": f} for s in data["sizes"] for x, f in s["duration_cdf"]]
        hours, days = data.get("arrivals_by_hour"), data.get("arrivals_by_weekday")
        weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        return cls(
            jobs=data["jobs"],
            gpu_hours=data["gpu_hours"],
            sizes=_frames.records(sizes),
            duration_cdf=_frames.records(cdf).reindex(columns=["gpus", "duration_s", "fraction"]),
            tenants=_frames.records(data["tenants"]),
            top_1pct_gpu_time_share=data["top_1pct_gpu_time_share"],
            top_10pct_gpu_time_share=data["top_10pct_gpu_time_share"],
            arrivals_by_hour=None if hours is None else _frames.series(hours, "arrivals", index=range(24)),
            arrivals_by_weekday=None if days is None else _frames.series(days, "arrivals", index=weekdays),
            data=data,
        )


@dataclass(frozen=True)
class PodAnalysis:
    """An Alibaba PAI pod list characterised (``arbiter trace analyze --format pai-pods``)."""

    #: Pods in the list.
    pods: int
    #: GPUs asked for in all (a share of one GPU counted as its fraction).
    gpu_demand: float
    #: By request class: ``class``, ``pods``, ``pod_share``, ``gpu_demand_share``,
    #: ``p50_lifetime_s``, then one ``phase_<name>`` column per final phase (share of the class).
    classes: "pd.DataFrame"
    #: Share of the GPU pods that ask for a share of one GPU, and of those constrained to types.
    fractional_share_of_gpu_pods: float
    gpu_type_constrained_share: float
    #: The GPU share the fractional pods ask for: ``milli_gpu``, ``fraction`` (at most that).
    fractional_milli_cdf: "pd.DataFrame"
    #: Pods by final phase and by QoS class, as shares of all.
    phases: "pd.Series"
    qos: "pd.Series"
    #: Everything, as ``arbiter trace analyze --json`` prints it.
    data: Dict[str, Any] = field(repr=False)

    @classmethod
    def _from(cls, data: Dict[str, Any]) -> "PodAnalysis":
        classes = [
            {**{k: v for k, v in c.items() if k != "phases"}, **{f"phase_{p}": share for p, share in c["phases"].items()}}
            for c in data["classes"]
        ]
        cdf = [{"milli_gpu": x, "fraction": f} for x, f in data["fractional_milli_cdf"]]
        return cls(
            pods=data["pods"],
            gpu_demand=data["gpu_demand"],
            classes=_frames.records(classes),
            fractional_share_of_gpu_pods=data["fractional_share_of_gpu_pods"],
            gpu_type_constrained_share=data["gpu_type_constrained_share"],
            fractional_milli_cdf=_frames.records(cdf).reindex(columns=["milli_gpu", "fraction"]),
            phases=_frames.series(data["phases"], "share"),
            qos=_frames.series(data["qos"], "share"),
            data=data,
        )


def analyze_trace(path: PathLike, format: str = "native", report: Optional[PathLike] = None) -> Union[TraceAnalysis, PodAnalysis]:
    """Characterises a trace as the Philly study (ATC'19) and Helios (SC'21) do (``arbiter trace
    analyze``): a :class:`TraceAnalysis`; ``format="pai-pods"`` reads an Alibaba PAI pod list
    instead, a :class:`PodAnalysis`. With ``report``, also writes the HTML report there
    (``--report DIR``)."""
    text = _native.analyze_trace(os.fspath(path), format, _convert.optional_path(report))
    data = json.loads(text)
    return PodAnalysis._from(data) if format == "pai-pods" else TraceAnalysis._from(data)
