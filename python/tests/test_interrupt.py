"""Ctrl-C during a run stops its simulations and raises KeyboardInterrupt in Python, promptly."""

import signal
import subprocess
import sys
import textwrap
import time

from conftest import MURI

SCRIPT = textwrap.dedent(f"""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where started with SIGINT ignored
    import arbiter
    print("started", flush=True)
    started = time.perf_counter()
    try:
        arbiter.run({str(MURI)!r})                             # the whole scenario: over a minute
    except KeyboardInterrupt:
        print(f"interrupted {{time.perf_counter() - started:.2f}}", flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def interrupt(script, after_s):
    """Runs `script` in a child Python, sends it SIGINT `after_s` after it says it started;
    returns its exit code, its output and how long it took to stop."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "started"
        time.sleep(after_s)  # well into the simulations
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=60)
        return child.returncode, out, time.perf_counter() - sent
    finally:
        child.kill()


def test_ctrl_c_stops_a_run_with_keyboard_interrupt():
    code, out, stopped_after = interrupt(SCRIPT, 2.0)
    assert code == 3, out
    assert out.startswith("interrupted"), out
    assert stopped_after < 10, f"took {stopped_after:.1f} s to stop"


SLOW_POLICY = textwrap.dedent(f"""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import arbiter

    class Slow(arbiter.Policy):
        def schedule(self, view):
            time.sleep(0.001)                                  # 8 traces x thousands of points
            return []

    print("started", flush=True)
    try:
        arbiter.run({str(MURI)!r}, policy=Slow())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def test_ctrl_c_stops_a_run_under_a_python_policy():
    code, out, stopped_after = interrupt(SLOW_POLICY, 1.5)
    assert code == 3, out
    assert stopped_after < 10, f"took {stopped_after:.1f} s to stop"
