"""Tests of the arbiter_job helper: checkpoints, the preemption signal, progress reports, and a
real run under `arbiter serve` when the binary is built."""

import http.server
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The job helper's own distribution folder (python/job): importable from here without installing.
PYTHON_DIR = ROOT / "python" / "job"
sys.path.insert(0, str(PYTHON_DIR))

from arbiter_job import Job  # noqa: E402


def test_save_is_atomic_and_load_returns_none_on_a_first_run(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBITER_CHECKPOINT_DIR", str(tmp_path))
    job = Job(install_signal_handler=False)
    assert job.load() is None
    job.save({"step": 7, "weights": [1, 2]})
    assert job.load() == {"step": 7, "weights": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["arbiter_state.json"], "no temporary files left"


def test_the_checkpoint_signal_sets_should_stop(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBITER_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("ARBITER_CHECKPOINT_SIGNAL", "USR1")
    job = Job()
    try:
        assert not job.should_stop
        os.kill(os.getpid(), signal.SIGUSR1)
        assert job.should_stop
    finally:
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)


TRAINING = """
import sys, time
sys.path.insert(0, {python_dir!r})
from arbiter_job import Job
job = Job()
print("started at", (job.load() or {{"step": 0}})["step"], flush=True)
def step(user):
    if "sum" not in user:
        print("ready: first step running", flush=True)  # the signal handler is installed
    time.sleep(0.02)
    return {{"sum": user.get("sum", 0) + 1}}
result = job.run(step, total_steps=100)
print("done", result["sum"], flush=True)
"""


def test_run_checkpoints_exits_cleanly_when_preempted_and_resumes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINING.format(python_dir=str(PYTHON_DIR)))
    env = dict(os.environ, ARBITER_CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    first = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    # Signal only once the child says its handler is installed and a step is under way (a fixed
    # sleep lost the race on a busy machine: issue 9, item 28).
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in first.stdout] + [lines.put(None)], daemon=True).start()
    seen = []
    while not (seen and seen[-1] is not None and seen[-1].startswith("ready")):
        try:
            seen.append(lines.get(timeout=60))
        except queue.Empty:
            first.kill()
            pytest.fail(f"no readiness marker from the child within 60 s; it printed {seen}")
        assert seen[-1] is not None, f"the child ended before it was ready: {seen}"
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0, seen
    out = "".join(line for line in iter(lines.get, None))
    assert "done" not in out, "the child stopped early, on the signal"
    saved = json.loads((tmp_path / "ckpt" / "arbiter_state.json").read_text())
    assert 0 < saved["step"] < 100
    assert saved["user"]["sum"] == saved["step"]
    second = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert second.returncode == 0
    assert f"started at {saved['step']}" in second.stdout
    assert "done 100" in second.stdout, "every step counted exactly once across the two runs"


class _Recorder(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Recorder.received.append((self.path, self.headers["Authorization"], json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_reports_carry_the_job_token_and_measured_throughput(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("ARBITER_JOB_ID", "5")
        monkeypatch.setenv("ARBITER_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("ARBITER_JOB_TOKEN", "secret")
        job = Job(report_interval_s=0, install_signal_handler=False)
        assert job.report(10)
        time.sleep(0.1)
        assert job.report(20)
        path, auth, body = _Recorder.received[-1]
        assert path == "/v1/jobs/5/progress"
        assert auth == "Bearer secret"
        assert body["steps"] == 20 and 10 < body["throughput"] < 1000
        # A report without new steps repeats the last measured throughput instead of 0.
        assert job.report(20, force=True)
        assert _Recorder.received[-1][2]["throughput"] == body["throughput"]
    finally:
        server.shutdown()
    # An unreachable scheduler never breaks training.
    monkeypatch.setenv("ARBITER_URL", "http://127.0.0.1:1")
    assert Job(report_interval_s=0, install_signal_handler=False).report(1) is False


def _arbiter_binary():
    for candidate in [os.environ.get("ARBITER_BIN"), ROOT / "target" / "debug" / "arbiter", ROOT / "target" / "release" / "arbiter"]:
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


def _reachable_by_others(path, mode=0o001):
    """Whether any user can reach `path` (every folder above it lets others in) and has `mode`
    on it (0o001: run it, 0o004: read it)."""
    path = Path(os.path.realpath(path))
    return bool(os.stat(path).st_mode & mode) and all(os.stat(p).st_mode & 0o001 for p in path.parents)


def _job_python():
    """A Python interpreter the job can run. As root the daemon runs jobs as their tenant's own
    unprivileged uid, which cannot enter e.g. /root/.pyenv."""
    if os.geteuid() != 0:
        return sys.executable
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3"]
    return next((c for c in candidates if c and Path(c).is_file() and _reachable_by_others(c)), None)


@pytest.mark.skipif(_arbiter_binary() is None, reason="build the arbiter binary first (cargo build)")
def test_a_job_reports_progress_to_a_real_daemon():
    python = _job_python()
    if python is None:
        pytest.skip("running as root, and no Python interpreter that other users can run (the job runs as a tenant uid)")
    if os.geteuid() == 0 and not (_reachable_by_others(_arbiter_binary())
                                  and _reachable_by_others(PYTHON_DIR / "arbiter_job" / "__init__.py", 0o004)):
        pytest.skip("running as root, and the checkout is not readable by the tenant uids jobs run as")
    # Not pytest's tmp_path: as root that is private (mode 700) and the tenant's uid could not
    # reach the script, its working folder or its checkpoint folder.
    base = Path(tempfile.mkdtemp(prefix="arbiter-pytest-"))
    base.chmod(0o755)
    data = base / "data"
    stderr_path = base / "daemon.stderr"
    with open(stderr_path, "wb") as stderr:
        daemon = subprocess.Popen(
            [_arbiter_binary(), "serve", "--data-dir", str(data), "--gpus", "1xa100", "--listen", "127.0.0.1:0", "--round-s", "1"],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.time() + 20
        while not (data / "daemon.addr").exists() or not (data / "daemon.addr").read_text().endswith("\n"):
            assert daemon.poll() is None, "daemon exited: " + stderr_path.read_text(errors="replace")
            assert time.time() < deadline, "daemon did not start: " + stderr_path.read_text(errors="replace")
            time.sleep(0.05)
        url = "http://" + (data / "daemon.addr").read_text().strip()
        token = (data / "admin.token").read_text().strip()

        def call(method, path, body=None):
            request = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read() or b"null")

        script = base / "train.py"
        script.write_text(TRAINING.format(python_dir=str(PYTHON_DIR)).replace("Job()", "Job(report_interval_s=0.2)"))
        script.chmod(0o644)
        job_id = call("POST", "/v1/jobs", {"command": f"{python} {script}", "working_dir": str(base)})["id"]
        deadline = time.time() + 60
        while (job := call("GET", f"/v1/jobs/{job_id}"))["state"]["state"] != "succeeded":
            assert job["state"]["state"] in ("queued", "running"), job
            assert time.time() < deadline, job
            time.sleep(0.1)
        assert job["progress"]["steps"] == 100, job
        assert job["progress"]["throughput"] > 0
        assert job["total_steps"] == 100
        assert job["throughput_by_gpu_type"]["a100"] > 0, "the daemon learned its speed on the type it ran on"
    finally:
        daemon.kill()
        daemon.wait()
        shutil.rmtree(base, ignore_errors=True)


def test_the_gangs_ranks_come_from_slurm_then_torchrun_then_a_single_process(monkeypatch):
    for name in ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NODELIST",
                 "SLURM_NODELIST", "RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"]:
        monkeypatch.delenv(name, raising=False)
    job = Job(install_signal_handler=False)
    assert (job.rank, job.world_size, job.local_rank, job.node_rank, job.nodes) == (0, 1, 0, 0, [])
    assert job.dist_env() == {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (job.rank, job.world_size) == (3, 4)
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_NODEID", "1")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    assert (job.rank, job.world_size, job.node_rank, job.nodes) == (1, 2, 1, ["gpu07", "gpu08"])
    assert job.dist_env(port=1234)["MASTER_ADDR"] == "gpu07" and job.dist_env(port=1234)["MASTER_PORT"] == "1234"


def test_host_lists_expand_like_slurms():
    from arbiter_job import expand_hostlist

    assert expand_hostlist("n[1-2,4],gpu-a,x[01-03]") == ["n1", "n2", "n4", "gpu-a", "x01", "x02", "x03"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_hostlist("") == []
    for bad in ["n[1-", "n[3-1]", "n[a]"]:
        try:
            expand_hostlist(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


def test_an_elastic_run_learns_its_gpu_count_and_adapts_a_checkpoint_from_another(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBITER_CHECKPOINT_DIR", str(tmp_path))
    for name in ("ARBITER_GPUS", "ARBITER_PREVIOUS_GPUS", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    job = Job(install_signal_handler=False)
    assert (job.gpus, job.previous_gpus, job.resized) == (1, None, False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3")
    assert Job(install_signal_handler=False).gpus == 2
    # A first run on 4 GPUs stops half way (a checkpoint with a per-GPU batch for 4 GPUs).
    monkeypatch.setenv("ARBITER_GPUS", "4")
    first = Job(install_signal_handler=False)
    first.save({"step": 5, "user": {"per_gpu_batch": 64}})
    # Restarted on 2: on_resize sees 4 -> 2 once, and the loop resumes at step 5.
    monkeypatch.setenv("ARBITER_GPUS", "2")
    monkeypatch.setenv("ARBITER_PREVIOUS_GPUS", "4")
    job = Job(install_signal_handler=False)
    assert (job.gpus, job.previous_gpus, job.resized) == (2, 4, True)
    calls = []

    def on_resize(state, old, new):
        calls.append((old, new))
        return {"per_gpu_batch": state["per_gpu_batch"] * old // new}

    steps = []
    result = job.run(lambda s: steps.append(1) or s, total_steps=8, on_resize=on_resize)
    assert calls == [(4, 2)]
    assert result == {"per_gpu_batch": 128}
    assert len(steps) == 3, "resumed at step 5 of 8"
    # Same count as before: no resize.
    monkeypatch.setenv("ARBITER_PREVIOUS_GPUS", "2")
    assert Job(install_signal_handler=False).resized is False
