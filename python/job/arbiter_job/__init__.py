"""Arbiter job helper: make a training loop preemptible under the Arbiter scheduler.

Standard library only. Arbiter starts each run of a job with:

    ARBITER_JOB_ID, ARBITER_URL, ARBITER_JOB_TOKEN   who the job is, where the API is, its token
    ARBITER_CHECKPOINT_DIR                          where to checkpoint (kept across runs)
    ARBITER_CHECKPOINT_SIGNAL                       the signal that asks it to stop (default TERM)
    ARBITER_LEASE_S, ARBITER_RUN                    round length, run number (1, 2, ...)
    ARBITER_GPUS, ARBITER_PREVIOUS_GPUS             this run's GPU count, the last run's (if any)
    CUDA_VISIBLE_DEVICES                            its GPUs

An elastic job (``arbiter submit --gpus 2..8``) may be restarted on another GPU count: read
:attr:`Job.gpus` to size the data-parallel group (and the per-GPU batch, for a fixed global
batch), and pass ``on_resize`` to :meth:`Job.run` (or check :attr:`Job.resized`) to adapt a
checkpoint taken on another count.

A job that spans several nodes (Arbiter's Slurm executor) starts its command once, on the first
node; ``srun`` in the command starts one process per node. Each process reads its place in the
gang from :attr:`Job.rank`, :attr:`Job.world_size`, :attr:`Job.local_rank`, :attr:`Job.nodes`
and :meth:`Job.dist_env` (what ``torch.distributed`` needs), taken from Slurm's variables
(``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_JOB_NODELIST``, ...), else from torchrun's
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), else a single process.

Use it like this::

    from arbiter_job import Job

    job = Job()
    state = job.load() or {"step": 0}           # resume where the last run stopped
    while state["step"] < total_steps:
        train_one_step()
        state["step"] += 1
        job.report(steps=state["step"])          # throttled; feeds `arbiter show`
        if job.should_stop:                      # the scheduler wants the GPUs back
            job.save(state)                      # checkpoint ...
            job.exit_preempted()                 # ... and exit cleanly (code 0): requeued
    job.save(state)

or hand the loop to :meth:`Job.run`. Outside Arbiter (no ARBITER_JOB_ID) everything still
works: reports are skipped and checkpoints go to ``./arbiter-checkpoint``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

__all__ = ["Job", "expand_hostlist"]

_CHECKPOINT_FILE = "arbiter_state.json"


class Job:
    """The running job's side of the Arbiter protocol."""

    def __init__(self, report_interval_s: float = 10.0, install_signal_handler: bool = True) -> None:
        env = os.environ
        self.job_id: Optional[str] = env.get("ARBITER_JOB_ID")
        self.url: Optional[str] = env.get("ARBITER_URL")
        self._token: Optional[str] = env.get("ARBITER_JOB_TOKEN")
        self.checkpoint_dir: str = env.get("ARBITER_CHECKPOINT_DIR", os.path.abspath("arbiter-checkpoint"))
        self.run_number: int = int(env.get("ARBITER_RUN", "1"))
        self.lease_s: Optional[float] = float(env["ARBITER_LEASE_S"]) if "ARBITER_LEASE_S" in env else None
        self.report_interval_s = report_interval_s
        self.should_stop = False
        self._last_report = 0.0
        self._last_steps: Optional[int] = None
        self._last_time: Optional[float] = None
        self._last_throughput: Optional[float] = None
        if install_signal_handler:
            name = env.get("ARBITER_CHECKPOINT_SIGNAL", "TERM").upper()
            name = name if name.startswith("SIG") else "SIG" + name
            signal.signal(getattr(signal, name, signal.SIGTERM), self._on_signal)

    # -- place in a multi-node gang ----------------------------------------------------------

    @staticmethod
    def _int_env(*names: str, default: int) -> int:
        for name in names:
            value = os.environ.get(name, "").strip()
            if value.isdigit():
                return int(value)
        return default

    # -- elastic jobs ---------------------------------------------------------------------------

    @property
    def gpus(self) -> int:
        """GPUs this run has (``ARBITER_GPUS``; else those ``CUDA_VISIBLE_DEVICES`` lists; else 1)."""
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        return self._int_env("ARBITER_GPUS", default=len(visible) or 1)

    @property
    def previous_gpus(self) -> Optional[int]:
        """GPUs the previous run of this job had (``ARBITER_PREVIOUS_GPUS``), None on the first run."""
        value = os.environ.get("ARBITER_PREVIOUS_GPUS", "").strip()
        return int(value) if value.isdigit() else None

    @property
    def resized(self) -> bool:
        """Whether this run has another GPU count than the previous one (an elastic resize)."""
        return self.previous_gpus is not None and self.previous_gpus != self.gpus

    @property
    def rank(self) -> int:
        """This process's rank in the gang (0 on the first node, or when alone)."""
        return self._int_env("SLURM_PROCID", "RANK", default=0)

    @property
    def world_size(self) -> int:
        """How many processes the gang has (1 when alone)."""
        return self._int_env("SLURM_NTASKS", "SLURM_NPROCS", "WORLD_SIZE", default=1)

    @property
    def local_rank(self) -> int:
        """This process's rank among those on its node."""
        return self._int_env("SLURM_LOCALID", "LOCAL_RANK", default=0)

    @property
    def node_rank(self) -> int:
        """Which node of the gang this process is on (0 for the first)."""
        return self._int_env("SLURM_NODEID", "GROUP_RANK", default=0)

    @property
    def nodes(self) -> list:
        """The gang's node names, first node first (``[]`` outside Slurm)."""
        return expand_hostlist(os.environ.get("SLURM_JOB_NODELIST", os.environ.get("SLURM_NODELIST", "")))

    def dist_env(self, port: int = 29500) -> dict:
        """``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` for
        ``torch.distributed.init_process_group(init_method="env://")``: the first node is the
        master (``MASTER_ADDR``/``MASTER_PORT`` already set win)."""
        nodes = self.nodes
        return {
            "MASTER_ADDR": os.environ.get("MASTER_ADDR") or (nodes[0] if nodes else "127.0.0.1"),
            "MASTER_PORT": os.environ.get("MASTER_PORT") or str(port),
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
        }

    # -- preemption -------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Only set a flag: the loop checkpoints at a step boundary, where its state is whole.
        self.should_stop = True

    def exit_preempted(self) -> None:
        """Exit after checkpointing because the scheduler asked: code 0, the job is requeued."""
        sys.stdout.flush()
        sys.stderr.flush()
        sys.exit(0)

    # -- checkpoints ------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.checkpoint_dir, _CHECKPOINT_FILE)

    def save(self, state: Any) -> None:
        """Atomically write a JSON-serializable state (write to a temporary file, then rename):
        a run killed mid-write never leaves a torn checkpoint."""
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.checkpoint_dir, prefix=".arbiter-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.checkpoint_path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def load(self) -> Any:
        """The state the last run saved, or None on a first run."""
        try:
            with open(self.checkpoint_path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    # -- progress ---------------------------------------------------------------------------

    def report(self, steps: int, throughput: Optional[float] = None, total_steps: Optional[int] = None, force: bool = False) -> bool:
        """Tell the scheduler how far the job is (at most every `report_interval_s` unless
        `force`). Throughput in steps/s is measured between reports when not given; with
        `total_steps` the scheduler estimates the remaining time from it, and it learns the job's
        speed on each GPU type it runs on. Returns whether a report was sent. Never raises: a
        scheduler that is briefly unreachable must not kill training."""
        now = time.monotonic()
        if not force and now - self._last_report < self.report_interval_s:
            return False
        if throughput is None and self._last_steps is not None and self._last_time is not None and now > self._last_time:
            if steps > self._last_steps:
                throughput = (steps - self._last_steps) / (now - self._last_time)
            else:
                throughput = self._last_throughput  # no new steps since the last report
        if throughput is not None:
            self._last_throughput = throughput
        self._last_report, self._last_steps, self._last_time = now, steps, now
        if not (self.job_id and self.url and self._token):
            return False
        body = {"steps": int(steps)}
        if throughput is not None and throughput >= 0:
            body["throughput"] = float(throughput)
        if total_steps is not None:
            body["total_steps"] = int(total_steps)
        request = urllib.request.Request(
            f"{self.url.rstrip('/')}/v1/jobs/{self.job_id}/progress",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return 200 <= response.status < 300
        except (urllib.error.URLError, OSError):
            return False

    # -- the whole loop ---------------------------------------------------------------------

    def run(
        self,
        step: Callable[[Any], Any],
        total_steps: int,
        initial_state: Callable[[], Any] = lambda: {},
        save: Optional[Callable[[Any], None]] = None,
        load: Optional[Callable[[], Any]] = None,
        on_resize: Optional[Callable[[Any, int, int], Any]] = None,
    ) -> Any:
        """Run `step(state) -> state` until `total_steps` steps are done, resuming from the last
        checkpoint and checkpointing (then exiting with code 0) when asked to stop. `save` and
        `load` default to :meth:`save` / :meth:`load` of a JSON state; pass your own to save
        model weights. The state handed to `step` is a dict with `step` and `user` keys. An
        elastic job restarted on another GPU count has `on_resize(user_state, old_gpus,
        new_gpus) -> user_state` called once, after the checkpoint is loaded."""
        save = save or self.save
        load = load or self.load
        resumed = load()
        state = resumed if resumed is not None else {"step": 0, "user": initial_state()}
        if resumed is not None and self.resized and on_resize is not None and self.previous_gpus is not None:
            state["user"] = on_resize(state["user"], self.previous_gpus, self.gpus)
        while state["step"] < total_steps:
            state["user"] = step(state["user"])
            state["step"] += 1
            self.report(state["step"], total_steps=total_steps)
            if self.should_stop:
                save(state)
                self.report(state["step"], total_steps=total_steps, force=True)
                self.exit_preempted()
        save(state)
        self.report(state["step"], total_steps=total_steps, force=True)
        return state["user"]


def expand_hostlist(hostlist: str) -> list:
    """Slurm's compressed host list as names: ``"n[1-2,4],gpu-a"`` → ``["n1", "n2", "n4",
    "gpu-a"]`` (zero padding kept: ``x[01-02]`` → ``x01``, ``x02``). Raises ValueError on a
    malformed list."""
    names: list = []
    for item in _split_top(hostlist):
        expanded = [""]
        rest = item
        while rest:
            open_at = rest.find("[")
            if open_at < 0:
                expanded = [e + rest for e in expanded]
                break
            close_at = rest.find("]", open_at)
            if close_at < 0:
                raise ValueError(f"unclosed [ in host list {hostlist!r}")
            prefix, ranges, rest = rest[:open_at], rest[open_at + 1:close_at], rest[close_at + 1:]
            values = []
            for part in ranges.split(","):
                low, _, high = part.partition("-")
                if not low.isdigit() or (high and not high.isdigit()):
                    raise ValueError(f"bad range {part!r} in host list {hostlist!r}")
                high = high or low
                if int(high) < int(low) or int(high) - int(low) > 100_000:
                    raise ValueError(f"bad range {part!r} in host list {hostlist!r}")
                values += [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
            expanded = [e + prefix + v for e in expanded for v in values]
        names += expanded
    return names


def _split_top(hostlist: str) -> list:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(hostlist):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(hostlist[start:i])
            start = i + 1
    items.append(hostlist[start:])
    return [item.strip() for item in items if item.strip()]
