"""Policies written in Python, run in-process: subclass :class:`Policy`, implement
:meth:`Policy.schedule`, and pass an instance as ``policy=`` to :func:`arbiter.simulate` or
:func:`arbiter.run`.

At every scheduling point the simulator (Rust, on its own thread) takes the GIL, hands the
policy a :class:`View` — the features the external pipe protocol sends, as NumPy arrays — and
places the order it answers with the same greedy placement the external protocol and the
built-in ordered policies use, so whatever the answer, the decision fits the cluster.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from ._native import DecisionError

# The job columns, in the order the native module packs them (column-major float64).
_COLUMNS = ("id", "tenant", "gpus", "submit_s", "running", "executed_s", "attained_gpu_s", "duration_s", "remaining_s")


class View:
    """What a policy sees at a scheduling point: the time, free GPUs per node, and one entry per
    waiting or running job in each of the job arrays (all of length ``len(view)``, in the same
    order). ``duration_s`` and ``remaining_s`` are oracle values (as SJF and SRTF use); a policy
    that should not know them ignores them.

    Arrays: ``ids`` (int64), ``tenant`` (str, object array; ``tenant_index`` into
    ``tenants``), ``gpus`` (int64), ``submit_s``, ``running`` (bool), ``executed_s``,
    ``attained_gpu_s``, ``duration_s``, ``remaining_s`` (float64, seconds); ``free_gpus``
    (int64, one per node) and ``time_s`` (float). Built on first use, then kept: reading only
    ``ids`` and ``remaining_s`` costs only those.
    """

    __slots__ = ("time_s", "_columns", "_free", "_tenants", "_cache")

    def __init__(self, time_s: float, columns: bytes, free: bytes, tenants: Sequence[str]) -> None:
        self.time_s = time_s
        self._columns = columns
        self._free = free
        self._tenants = tenants
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self._columns) // (8 * len(_COLUMNS))

    def _column(self, name: str) -> np.ndarray:
        cached = self._cache.get(name)
        if cached is None:
            n = len(self)
            i = _COLUMNS.index(name)
            cached = np.frombuffer(self._columns, dtype=np.float64, count=n, offset=8 * n * i)
            self._cache[name] = cached
        return cached

    @property
    def ids(self) -> np.ndarray:
        """The jobs' ids: what an order names."""
        return self._int("id")

    @property
    def gpus(self) -> np.ndarray:
        """GPUs each job asks for."""
        return self._int("gpus")

    @property
    def submit_s(self) -> np.ndarray:
        """Submission times, in seconds."""
        return self._column("submit_s")

    @property
    def running(self) -> np.ndarray:
        """Whether each job holds GPUs now."""
        cached = self._cache.get("running?")
        if cached is None:
            cached = self._cache["running?"] = self._column("running") != 0.0
        return cached

    @property
    def executed_s(self) -> np.ndarray:
        """Seconds each job has run."""
        return self._column("executed_s")

    @property
    def attained_gpu_s(self) -> np.ndarray:
        """GPU-seconds each job has had."""
        return self._column("attained_gpu_s")

    @property
    def duration_s(self) -> np.ndarray:
        """Each job's run time in the trace (oracle)."""
        return self._column("duration_s")

    @property
    def remaining_s(self) -> np.ndarray:
        """Seconds of work each job has left (oracle)."""
        return self._column("remaining_s")

    @property
    def tenant_index(self) -> np.ndarray:
        """Each job's tenant, as an index into :attr:`tenants`."""
        return self._int("tenant")

    @property
    def tenants(self) -> Sequence[str]:
        """The tenants seen so far in this simulation (indexed by :attr:`tenant_index`)."""
        return self._tenants

    @property
    def tenant(self) -> np.ndarray:
        """Each job's tenant (str)."""
        cached = self._cache.get("tenant?")
        if cached is None:
            names = np.asarray(list(self._tenants), dtype=object)
            cached = self._cache["tenant?"] = names[self.tenant_index] if len(self) else np.empty(0, dtype=object)
        return cached

    @property
    def free_gpus(self) -> np.ndarray:
        """Free GPUs per node, in node order."""
        cached = self._cache.get("free")
        if cached is None:
            cached = self._cache["free"] = np.frombuffer(self._free, dtype=np.int64)
        return cached

    def _int(self, name: str) -> np.ndarray:
        key = name + "?"
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._column(name).astype(np.int64)
        return cached

    def __repr__(self) -> str:
        return f"<arbiter.View t={self.time_s}s, {len(self)} jobs, {int(self.free_gpus.sum())} free GPUs>"


Answer = Union[Sequence[int], np.ndarray, Tuple[Union[Sequence[int], np.ndarray], bool]]


class Policy:
    """A scheduling policy written in Python. Subclass it and implement :meth:`schedule`; pass
    an instance as ``policy=`` to :func:`arbiter.simulate` or :func:`arbiter.run`.

    Class attributes: ``name`` (the ``policy`` column of the results; the class's name unless
    given) and ``preempt`` (``False``: running jobs keep their GPUs and the order places the
    waiting ones; ``True``: running jobs compete again at every point and may be stopped).
    """

    name: Optional[str] = None
    preempt: bool = False

    def reset(self) -> None:
        """Called before each simulation (a run of several traces or seeds uses one instance,
        one simulation at a time)."""

    def schedule(self, view: View) -> Answer:
        """The order to serve the jobs in: job ids (``view.ids``), first served first — a list,
        a NumPy integer array, or ``(order, preempt)`` to choose preemption for this point.
        Jobs left out come after, in submission order. Raise nothing: an exception here stops
        the simulation with :class:`arbiter.DecisionError`."""
        raise NotImplementedError("a Policy implements schedule(view)")

    def policy_name(self) -> str:
        """The name its results carry."""
        return self.name or type(self).__name__


def _decide(policy: Policy, time_s: float, columns: bytes, free: bytes, tenants: Sequence[str]) -> Tuple[bytes, bool]:
    """Called by the native module at each scheduling point: the policy's answer as int64 ids
    and the preemption switch, or :class:`DecisionError` naming what is wrong."""
    where = f"policy `{policy.policy_name()}` at t={time_s:g}s"
    try:
        answer: Any = policy.schedule(View(time_s, columns, free, tenants))
    except Exception as error:
        raise DecisionError(f"{where}: schedule raised {type(error).__name__}: {error}") from error
    preempt = policy.preempt
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], (bool, np.bool_)):
        answer, preempt = answer
    if isinstance(answer, np.ndarray):
        if answer.ndim != 1 or answer.dtype.kind not in "iu":
            raise DecisionError(f"{where}: the order must be a 1-D array of integer job ids, got an array of {answer.dtype} with shape {answer.shape}")
        return answer.astype(np.int64, copy=False).tobytes(), bool(preempt)
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
        raise DecisionError(f"{where}: schedule must return an order of job ids (a list or an integer array), got {type(answer).__name__}")
    ids = []
    for item in answer:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            raise DecisionError(f"{where}: the order must hold job ids (int), got {item!r} ({type(item).__name__})")
        ids.append(int(item))
    try:
        return np.asarray(ids, dtype=np.int64).tobytes(), bool(preempt)
    except OverflowError:
        bad = next(i for i in ids if not -(2**63) <= i < 2**63)
        raise DecisionError(f"{where}: its order names job {bad}, which is not waiting or running") from None
