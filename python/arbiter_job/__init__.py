"""Arbiter job helper: make a training loop preemptible under the Arbiter scheduler.

Standard library only. Arbiter starts each run of a job with:

    ARBITER_JOB_ID, ARBITER_URL, ARBITER_JOB_TOKEN   who the job is, where the API is, its token
    ARBITER_CHECKPOINT_DIR                          where to checkpoint (kept across runs)
    ARBITER_CHECKPOINT_SIGNAL                       the signal that asks it to stop (default TERM)
    ARBITER_LEASE_S, ARBITER_RUN                    round length, run number (1, 2, ...)
    CUDA_VISIBLE_DEVICES                            its GPUs

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

__all__ = ["Job"]

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
    ) -> Any:
        """Run `step(state) -> state` until `total_steps` steps are done, resuming from the last
        checkpoint and checkpointing (then exiting with code 0) when asked to stop. `save` and
        `load` default to :meth:`save` / :meth:`load` of a JSON state; pass your own to save
        model weights. The state handed to `step` is a dict with `step` and `user` keys."""
        save = save or self.save
        load = load or self.load
        resumed = load()
        state = resumed if resumed is not None else {"step": 0, "user": initial_state()}
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
