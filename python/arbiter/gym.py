"""A Gymnasium environment for learned schedulers: ``arbiter.gym.ClusterEnv``, registered as
``arbiter/Cluster-v0`` when this module is imported (``import arbiter`` does not import
gymnasium; install it with ``pip install ./python[gym]``).

    >>> import gymnasium, arbiter.gym
    >>> env = gymnasium.make("arbiter/Cluster-v0")      # Muri's trace3 on 8 x 8 GPUs
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.n - 1)

Decima-style: at each scheduling point the agent starts waiting jobs one at a time. Action
``i < max_jobs`` picks row ``i`` of the job table (the waiting jobs not yet picked, in
submission order, padded); action ``max_jobs`` is "no more this round": the picks start (placed
as the external protocol and the built-in ``sjf`` place an order; running jobs keep their GPUs,
jobs not picked wait) and the simulation runs to the next scheduling point. ``info["action_mask"]``
says which actions are valid: a row is, while its job's GPUs fit in the GPUs left free by the
picks so far; "no more" is, unless the cluster would idle (nothing running, nothing picked, a
job fits: every episode then runs every job to its end). A masked action counts as "no more"
where that is valid, else picks the first job offered. Scheduling points where no job could be
picked pass without a step, and so does a round once nothing more fits.

The reward is −(jobs in the system) × seconds since the last step, so an episode's return is
−Σ JCT (seconds); ``reward_scale`` multiplies it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import gymnasium
import numpy as np
from gymnasium import spaces

from . import _convert, _native
from ._policy import _COLUMNS
from ._run import Run, ad_hoc_tables

DATA = Path(__file__).resolve().parent / "data" / "muri"
#: Muri's trace3 (bundled), as ``scenarios/muri-traces.toml`` runs it.
DEFAULT_TRACE = DATA / "trace3.csv"

#: Features of each row of the job table.
JOB_FEATURES = ("valid", "gpus", "wait_s", "duration_s", "fits")
#: Features of the cluster, after the job table.
CLUSTER_FEATURES = ("free_gpus", "total_gpus", "running_jobs", "waiting_jobs", "picked_jobs")


class ClusterEnv(gymnasium.Env):
    """One simulation per episode, its scheduling decisions taken by the agent.

    ``trace``, ``format``, ``cluster``, ``placement``, ``simulation``, ``set`` are as in
    :func:`arbiter.simulate` (any trace format and cluster a scenario accepts); with no
    ``trace``, Muri's trace3 on its cluster (8 nodes × 8 GPUs, consolidated placement, as
    ``scenarios/muri-traces.toml`` runs it). ``max_jobs`` is the job table's size (waiting jobs
    beyond it are not offered until rows free up); ``oracle=False`` hides the trace durations
    (``duration_s`` reads 0); ``sim_seed`` is the simulation's seed when ``reset`` gives none.

    Observation: a float32 vector, ``max_jobs`` rows of :data:`JOB_FEATURES` then
    :data:`CLUSTER_FEATURES`. ``info``: ``action_mask`` (int8, ``max_jobs + 1``), ``time_s``,
    ``waiting`` (waiting jobs not yet picked, also those beyond the table); at the end also the
    episode's results (``avg_jct_s``, ``jobs``, ``makespan_s``, ...) and ``run`` (an
    :class:`arbiter.Run`).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        trace: Optional[Union[str, os.PathLike]] = None,
        format: str = "muri",
        cluster: Union[str, Mapping[str, Any], None] = None,
        *,
        max_jobs: int = 64,
        placement: Union[str, Mapping[str, Any], None] = None,
        simulation: Optional[Mapping[str, Any]] = None,
        set: _convert.Overrides = None,
        oracle: bool = True,
        reward_scale: float = 1.0,
        sim_seed: int = 0,
    ) -> None:
        overrides: List[str] = _convert.assignments(set)
        if trace is None:
            trace = DEFAULT_TRACE
            cluster = {"spec_file": str(DATA / "n8g8.csv"), "gpu_type": "V100"} if cluster is None else cluster
            placement = {"strategy": "consolidated", "keep_placements": False} if placement is None else placement
            simulation = {"schedule_on_events": True, "overhead": "per-event"} if simulation is None else simulation
            overrides = ["trace.0.iteration_time_factor=1.015"] + overrides
        shorthand, tables = ad_hoc_tables("8x8" if cluster is None else cluster, placement, simulation)
        self._start_args = (os.fspath(trace), format, shorthand, tables, overrides)
        self.max_jobs = int(max_jobs)
        self.oracle = oracle
        self.reward_scale = float(reward_scale)
        self.sim_seed = int(sim_seed)
        self.action_space = spaces.Discrete(self.max_jobs + 1)
        self._episode: Optional[_native.Episode] = None
        self._done = True
        # Fail early on a wrong trace, format or cluster (and learn the cluster's size).
        probe = _native.Episode(self._start_args[0], format, shorthand, self.sim_seed, self._start_args[3], overrides)
        first = probe.first()
        self._total_gpus = int(sum(first[4])) if first[0] == "view" else 0
        probe.close()
        self.observation_space = spaces.Box(0.0, self._high(), dtype=np.float32)

    def _high(self) -> np.ndarray:
        """The observation's upper bounds: 1 for the flags, the cluster's GPUs for free GPUs,
        its total, and running jobs (each holds at least one GPU of its own); the largest
        float32 for what only the trace bounds (a job's GPUs, seconds, jobs waiting or picked)."""
        most = np.finfo(np.float32).max
        job = {"valid": 1.0, "gpus": most, "wait_s": most, "duration_s": most, "fits": 1.0}
        total = float(self._total_gpus)
        cluster = {"free_gpus": total, "total_gpus": total, "running_jobs": total, "waiting_jobs": most, "picked_jobs": most}
        row = np.array([job[f] for f in JOB_FEATURES], dtype=np.float32)
        return np.concatenate([np.tile(row, self.max_jobs), np.array([cluster[f] for f in CLUSTER_FEATURES], dtype=np.float32)])

    # -- the episode -------------------------------------------------------------------------

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self.close()
        trace, format, shorthand, tables, overrides = self._start_args
        self._episode = _native.Episode(trace, format, shorthand, self.sim_seed if seed is None else int(seed), tables, overrides)
        self._tenants: List[str] = []
        self._done = False
        self._carry = 0.0
        self._final: Dict[str, Any] = {}
        self._arrive(self._episode.first())
        self._advance_while_idle()
        return self._observation(), self._info()

    def step(self, action):
        if self._episode is None or self._done:
            raise RuntimeError("step() after the episode ended: call reset()")
        action = int(action)
        mask = self._mask()
        if not mask[action if 0 <= action <= self.max_jobs else self.max_jobs]:
            # A masked action: "no more" where that is allowed, else the first job offered.
            action = self.max_jobs if mask[self.max_jobs] else int(np.flatnonzero(mask)[0])
        if action < self.max_jobs:
            self._picks.append(int(self._rows[action]))
            message = self._episode.answer(self._picks, False)
            self._check(message)
            self._free = np.asarray(message[1], dtype=np.int64)
            self._table()
            if not self._mask()[: self.max_jobs].any():
                self._decide()
        else:
            self._decide()
        reward, self._carry = self._carry, 0.0
        return self._observation(), reward * self.reward_scale, self._done, False, self._info()

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    # -- inside ------------------------------------------------------------------------------

    def _check(self, message) -> None:
        if message[0] == "refused":
            from ._native import DecisionError

            raise DecisionError(f"the environment's order was refused: {message[1]}")

    def _arrive(self, message) -> None:
        """A message after a decision: a scheduling point, or the end."""
        self._check(message)
        if message[0] == "end":
            self._carry += message[1]
            self._done = True
            assert self._episode is not None
            run = Run(self._episode.finish(), "agent")
            self._episode = None
            row = run.results.iloc[0].to_dict()
            self._final = {**row, "run": run}
            self._rows = np.empty(0, dtype=np.int64)
            return
        _, self._time_s, reward, columns, free, tenants = message
        self._carry += reward
        self._tenants.extend(tenants)
        n = len(columns) // (8 * len(_COLUMNS))
        table = np.frombuffer(columns, dtype=np.float64).reshape(len(_COLUMNS), n)
        self._ids = table[0].astype(np.int64)
        self._gpus = table[2].astype(np.int64)
        self._submit = table[3]
        self._running = table[4] != 0.0
        self._duration = table[7]
        self._free = np.asarray(free, dtype=np.int64)
        self._picks: List[int] = []
        self._table()

    def _table(self) -> None:
        """The rows offered: waiting jobs not yet picked, in submission order."""
        waiting = ~self._running
        if self._picks:
            waiting &= ~np.isin(self._ids, self._picks)
        index = np.flatnonzero(waiting)
        index = index[np.lexsort((self._ids[index], self._submit[index]))]
        self._waiting = len(index)
        self._index = index[: self.max_jobs]
        self._rows = self._ids[self._index]

    def _mask(self) -> np.ndarray:
        mask = np.zeros(self.max_jobs + 1, dtype=np.int8)
        mask[self.max_jobs] = 1
        if not self._done:
            mask[: len(self._index)] = self._gpus[self._index] <= self._free.sum()
            # The cluster may not idle: with nothing running and nothing picked, a job that
            # fits must start (else "start nothing, ever" would end the episode early).
            if not self._picks and not self._running.any() and mask[: self.max_jobs].any():
                mask[self.max_jobs] = 0
        return mask

    def _decide(self) -> None:
        assert self._episode is not None
        self._arrive(self._episode.answer(self._picks, True))
        self._advance_while_idle()

    def _advance_while_idle(self) -> None:
        """Scheduling points where nothing can be picked pass without the agent."""
        while not self._done and not self._mask()[: self.max_jobs].any():
            assert self._episode is not None
            self._arrive(self._episode.answer([], True))

    def _observation(self) -> np.ndarray:
        jobs = np.zeros((self.max_jobs, len(JOB_FEATURES)), dtype=np.float32)
        cluster = np.zeros(len(CLUSTER_FEATURES), dtype=np.float32)
        if not self._done:
            k = len(self._index)
            free = self._free.sum()
            jobs[:k, 0] = 1.0
            jobs[:k, 1] = self._gpus[self._index]
            jobs[:k, 2] = np.maximum(self._time_s - self._submit[self._index], 0.0)
            jobs[:k, 3] = self._duration[self._index] if self.oracle else 0.0
            jobs[:k, 4] = self._gpus[self._index] <= free
            cluster[:] = (free, self._total_gpus, self._running.sum(), self._waiting, len(self._picks))
        return np.concatenate([jobs.ravel(), cluster])

    def _info(self) -> Dict[str, Any]:
        info: Dict[str, Any] = {"action_mask": self._mask(), "time_s": getattr(self, "_time_s", 0.0), "waiting": 0 if self._done else self._waiting}
        info.update(self._final)
        return info


if "arbiter/Cluster-v0" not in gymnasium.registry:
    gymnasium.register(id="arbiter/Cluster-v0", entry_point="arbiter.gym:ClusterEnv")

__all__ = ["ClusterEnv", "CLUSTER_FEATURES", "DEFAULT_TRACE", "JOB_FEATURES"]
