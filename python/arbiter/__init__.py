"""Arbiter from Python: run scenarios, simulate policies and read traces, with results as pandas
DataFrames.

The simulator is Arbiter's own (Rust, compiled into ``arbiter._native``): a run here and
``arbiter run`` with the same ``--set`` give the same numbers and the same error messages.
Simulations of one call run in parallel on every core with the GIL released; Ctrl-C stops them
(``KeyboardInterrupt``).

    >>> import arbiter
    >>> run = arbiter.run("scenarios/muri-traces.toml", set={"policies": ["srtf"]})
    >>> run.results        # one row per trace x tenant x policy x seed (``arbiter run --json``)
    >>> run.published      # ours next to the published numbers
    >>> run.jobs           # one row per job of every simulation
    >>> run.report("out/muri")

Errors raise :class:`ArbiterError` subclasses: :class:`ScenarioError` (a scenario key, ``set``
override or argument), :class:`TraceError` (a trace file, column or row), :class:`PolicyError`
(a policy name or parameter, or a policy that failed) and its subclass :class:`DecisionError` (a
policy written in Python answered what cannot be carried out, or raised).

Policies written in Python subclass :class:`Policy` and run in-process:
``arbiter.simulate(trace, policy=MyPolicy())``; ``schedule(view)`` answers an order of job ids
or a :class:`Decision` (placements).
"""

from ._native import ArbiterError, DecisionError, PolicyError, ScenarioError, TraceError
from ._frames import frames, set_frames
from ._policies import policies
from ._policy import Decision, Policy, View
from ._run import Run, run, simulate
from ._traces import PodAnalysis, TraceAnalysis, analyze_trace, read_trace

__version__ = "0.1.0"

__all__ = [
    "ArbiterError",
    "Decision",
    "DecisionError",
    "PodAnalysis",
    "Policy",
    "PolicyError",
    "Run",
    "ScenarioError",
    "TraceAnalysis",
    "TraceError",
    "View",
    "analyze_trace",
    "frames",
    "policies",
    "read_trace",
    "run",
    "set_frames",
    "simulate",
]
