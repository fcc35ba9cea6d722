"""Policies written in Python, run in-process: subclass :class:`Policy`, implement
:meth:`Policy.schedule`, and pass an instance as ``policy=`` to :func:`arbiter.simulate` or
:func:`arbiter.run`.

At every scheduling point the simulator (Rust, on its own thread) takes the GIL and hands the
policy a :class:`View` — the features the external pipe protocol sends, as NumPy arrays computed
when first read. An order it answers is placed with the same greedy placement the external
protocol and the built-in ordered policies use, so whatever the order, the decision fits the
cluster; a :class:`Decision` (placements) is checked by the same planner as every built-in
policy's decision.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._native import DecisionError

# The job columns, numbered as the native module numbers them, and each one's dtype.
_COLUMNS = ("id", "tenant", "gpus", "submit_s", "running", "executed_s", "attained_gpu_s", "duration_s", "remaining_s")
_DTYPES = (np.int64, np.int64, np.int64, np.float64, np.bool_, np.float64, np.float64, np.float64, np.float64)
_INDEX = {name: i for i, name in enumerate(_COLUMNS)}


class View:
    """What a policy sees at a scheduling point: the time, free GPUs per node, and one entry per
    waiting or running job in each of the job arrays (all of length ``len(view)``, in the same
    order). ``duration_s`` and ``remaining_s`` are oracle values (as SJF and SRTF use); a policy
    that should not know them ignores them.

    Arrays: ``ids`` (int64), ``tenant`` (str, object array; ``tenant_index`` into
    ``tenants``), ``gpus`` (int64), ``submit_s``, ``running`` (bool), ``executed_s``,
    ``attained_gpu_s``, ``duration_s``, ``remaining_s`` (float64, seconds); ``free_gpus``
    (int64, one per node) and ``time_s`` (float); ``placements`` (each running job's GPUs).

    Each array is computed by the simulator when it is first read, in its own dtype, and NumPy
    wraps the simulator's bytes without a copy: reading only ``ids`` and ``remaining_s`` of a
    thousand-job queue costs only those two. The arrays are read-only. A view is readable only
    during the :meth:`Policy.schedule` call that received it; arrays read then stay valid after.
    """

    __slots__ = ("time_s", "_point", "_n", "_tenants", "_cache")

    def __init__(self, time_s: float, point: Any, jobs: int, tenants: List[str]) -> None:
        self.time_s = time_s
        self._point = point
        self._n = jobs
        self._tenants = tenants
        self._cache: Dict[str, Any] = {}

    def __len__(self) -> int:
        return self._n

    def _column(self, name: str) -> np.ndarray:
        cached = self._cache.get(name)
        if cached is None:
            i = _INDEX[name]
            cached = self._cache[name] = np.frombuffer(self._point.column(i), dtype=_DTYPES[i])
        return cached

    @property
    def ids(self) -> np.ndarray:
        """The jobs' ids: what an order or a decision names."""
        return self._column("id")

    @property
    def gpus(self) -> np.ndarray:
        """GPUs each job asks for."""
        return self._column("gpus")

    @property
    def submit_s(self) -> np.ndarray:
        """Submission times, in seconds."""
        return self._column("submit_s")

    @property
    def running(self) -> np.ndarray:
        """Whether each job holds GPUs now."""
        return self._column("running")

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
        cached = self._cache.get("tenant")
        if cached is None:
            cached = self._column("tenant")
            self._tenants.extend(self._point.new_tenants())
        return cached

    @property
    def tenants(self) -> Sequence[str]:
        """The tenants seen so far in this simulation (indexed by :attr:`tenant_index`)."""
        self.tenant_index
        return self._tenants

    @property
    def tenant(self) -> np.ndarray:
        """Each job's tenant (str)."""
        cached = self._cache.get("tenant?")
        if cached is None:
            codes = self.tenant_index
            names = np.asarray(self._tenants, dtype=object)
            cached = self._cache["tenant?"] = names[codes] if len(codes) else np.empty(0, dtype=object)
        return cached

    @property
    def free_gpus(self) -> np.ndarray:
        """Free GPUs per node, in node order (node ``i`` is what a placement names ``i``)."""
        cached = self._cache.get("free")
        if cached is None:
            cached = self._cache["free"] = np.frombuffer(self._point.free_gpus(), dtype=np.int64)
        return cached

    @property
    def placements(self) -> Dict[int, List[Tuple[int, int]]]:
        """Each running job's GPUs, ``{job id: [(node, gpus), ...]}``: what a :class:`Decision`
        answers to keep it where it is."""
        cached = self._cache.get("placements")
        if cached is None:
            cached = self._cache["placements"] = dict(self._point.placements())
        return cached

    def __repr__(self) -> str:
        return f"<arbiter.View t={self.time_s}s, {len(self)} jobs>"


class Decision:
    """A full answer from :meth:`Policy.schedule`: where each job runs, instead of an order.

    ``run`` maps job ids to placements, each a list of ``(node, gpus)`` pairs (nodes numbered as
    :attr:`View.free_gpus`; the GPUs add up to what the job asks for). With ``preempt`` false
    (the policy's ``preempt`` attribute unless given) running jobs that ``run`` leaves out keep
    their GPUs, and ``run`` starts waiting jobs (or names a running job where it runs, see
    :attr:`View.placements`); with ``preempt`` true, exactly the jobs in ``run`` run after this
    point: running jobs left out stop (back to waiting), and a running job given other GPUs
    moves there. Jobs are placed in the order given. The decision is checked as every built-in
    policy's is (job waiting or running, GPU count, node capacity, GPU type); what fails raises
    :class:`DecisionError` naming the job. A plain ``dict`` answer is ``Decision(run=that dict)``.
    """

    __slots__ = ("run", "preempt")

    def __init__(self, run: Mapping[int, Sequence[Tuple[int, int]]], preempt: Optional[bool] = None) -> None:
        self.run = run
        self.preempt = preempt

    def __repr__(self) -> str:
        return f"Decision(run={self.run!r}, preempt={self.preempt!r})"


Answer = Union[Sequence[int], np.ndarray, Tuple[Union[Sequence[int], np.ndarray], bool], Decision, Mapping[int, Sequence[Tuple[int, int]]]]


class Policy:
    """A scheduling policy written in Python. Subclass it and implement :meth:`schedule`; pass
    an instance as ``policy=`` to :func:`arbiter.simulate` or :func:`arbiter.run`.

    Class attributes: ``name`` (the ``policy`` column of the results and the report's label;
    the class's name unless given) and ``preempt`` (``False``: running jobs keep their GPUs and
    the answer places waiting ones; ``True``: running jobs compete again at every point and may
    be stopped).
    """

    name: Optional[str] = None
    preempt: bool = False

    def reset(self) -> None:
        """Called before each simulation (a run of several traces or seeds uses one instance,
        one simulation at a time)."""

    def schedule(self, view: View) -> Answer:
        """The order to serve the jobs in: job ids (``view.ids``), first served first — a list,
        a NumPy integer array, or ``(order, preempt)`` to choose preemption for this point.
        Jobs left out come after, in submission order; each is placed greedily as the built-in
        ordered policies place theirs. Or, for full control, a :class:`Decision` (or a dict)
        saying where each job runs. Raise nothing: an exception here stops the simulation with
        :class:`arbiter.DecisionError`."""
        raise NotImplementedError("a Policy implements schedule(view)")

    def policy_name(self) -> str:
        """The name its results carry."""
        return self.name or type(self).__name__


class _Runner:
    """One simulation of a Python policy, as the native module drives it: ``decide`` is called
    at each scheduling point and answers ``(placements?, int64 bytes, preempt)`` — an order of
    job ids, or per job its id, its number of nodes and its ``(node, gpus)`` pairs."""

    __slots__ = ("policy", "name", "tenants", "_schedule")

    def __init__(self, policy: Policy) -> None:
        policy.reset()
        self.policy = policy
        self.name = policy.policy_name()
        self.tenants: List[str] = []
        self._schedule = policy.schedule

    def decide(self, time_s: float, point: Any, jobs: int) -> Tuple[bool, bytes, bool]:
        try:
            answer: Any = self._schedule(View(time_s, point, jobs, self.tenants))
        except Exception as error:
            raise DecisionError(f"{self._where(time_s)}: schedule raised {type(error).__name__}: {error}") from error
        # The common answer first, checked in as few steps as possible.
        if type(answer) is np.ndarray and answer.dtype == np.int64 and answer.ndim == 1:
            return False, answer.tobytes(), bool(self.policy.preempt)
        return self._other(time_s, answer)

    def _where(self, time_s: float) -> str:
        return f"policy `{self.name}` at t={time_s:g}s"

    def _other(self, time_s: float, answer: Any) -> Tuple[bool, bytes, bool]:
        where = self._where(time_s)
        preempt = self.policy.preempt
        if isinstance(answer, Mapping):
            answer = Decision(answer)
        if isinstance(answer, Decision):
            return True, _placements(where, answer.run), bool(preempt if answer.preempt is None else answer.preempt)
        if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], (bool, np.bool_)):
            answer, preempt = answer
        if isinstance(answer, np.ndarray):
            if answer.ndim != 1 or answer.dtype.kind not in "iu":
                raise DecisionError(f"{where}: the order must be a 1-D array of integer job ids, got an array of {answer.dtype} with shape {answer.shape}")
            if answer.dtype.kind == "u" and len(answer) and answer.max() >= 2**63:
                raise DecisionError(f"{where}: its order names job {int(answer.max())}, which is not waiting or running")
            return False, answer.astype(np.int64, copy=False).tobytes(), bool(preempt)
        if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
            raise DecisionError(f"{where}: schedule must return an order of job ids (a list or an integer array) or a Decision, got {type(answer).__name__}")
        ids = []
        for item in answer:
            ids.append(_int(where, "the order must hold job ids (int)", item))
        return False, _int64_bytes(where, ids, "its order names job {}, which is not waiting or running"), bool(preempt)


def _int(where: str, what: str, item: Any) -> int:
    """``item`` as an int, or the :class:`DecisionError` saying ``what`` it should be."""
    if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
        raise DecisionError(f"{where}: {what}, got {item!r} ({type(item).__name__})")
    return int(item)


def _int64_bytes(where: str, words: List[int], too_large: str) -> bytes:
    try:
        return np.asarray(words, dtype=np.int64).tobytes()
    except OverflowError:
        bad = next(i for i in words if not -(2**63) <= i < 2**63)
        raise DecisionError(f"{where}: {too_large.format(bad)}") from None


def _placements(where: str, run: Any) -> bytes:
    """A decision's placements as the native module reads them (see :class:`_Runner`)."""
    if not isinstance(run, Mapping):
        raise DecisionError(f"{where}: a Decision's run must map job ids to placements, got {type(run).__name__}")
    words: List[int] = []
    for job, placement in run.items():
        job = _int(where, "a Decision's run must map job ids (int) to placements", job)
        shape = f"job {job}: a placement must be a list of (node, gpus) pairs"
        if isinstance(placement, (str, bytes)) or not hasattr(placement, "__iter__"):
            raise DecisionError(f"{where}: {shape}, got {placement!r}")
        pairs = list(placement)
        words.append(job)
        words.append(len(pairs))
        for pair in pairs:
            if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
                raise DecisionError(f"{where}: {shape}, got {pair!r} in it")
            words.append(_int(where, f"{shape} of ints", pair[0]))
            words.append(_int(where, f"{shape} of ints", pair[1]))
    return _int64_bytes(where, words, "its decision names job or node {}, which does not exist")
