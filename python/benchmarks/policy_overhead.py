"""What a policy written in Python costs per decision on top of its own code (issue 28: target
<= 20 us). Not a test: run it by hand, `python3 python/benchmarks/policy_overhead.py`.

A Python SJF (shortest trace duration first, non-preemptive: the built-in `sjf`'s order, so
the very same decisions and events) against the built-in `sjf` on the same trace: the
difference, less the Python code's own time (measured inside `schedule`: one `np.lexsort`),
divided by the number of decisions. Views carry every waiting and running job, so the cost grows with the jobs in the
system; the script reports it for a small trace and for Muri's busiest one.
"""

import sys
import time
from pathlib import Path

import numpy as np

import arbiter

ROOT = Path(__file__).resolve().parents[2]


class SJF(arbiter.Policy):
    def __init__(self):
        self.decisions = 0
        self.jobs_seen = 0
        self.own_s = 0.0

    def reset(self):
        self.__init__()

    def schedule(self, view):
        started = time.perf_counter()
        self.decisions += 1
        self.jobs_seen += len(view)
        order = view.ids[np.lexsort((view.ids, view.duration_s))]
        self.own_s += time.perf_counter() - started
        return order


def best_of(n, fn):
    best = float("inf")
    for _ in range(n):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def measure(label, simulate, repeats):
    policy = SJF()
    python_s = best_of(repeats, lambda: simulate(policy))
    builtin_s = best_of(repeats, lambda: simulate("sjf"))
    overhead_us = (python_s - builtin_s - policy.own_s) / policy.decisions * 1e6
    print(f"{label}: {policy.decisions} decisions, {policy.jobs_seen / policy.decisions:.0f} jobs per view; "
          f"Python SJF {python_s:.3f} s, built-in sjf {builtin_s:.3f} s, its own code {policy.own_s:.3f} s: "
          f"{overhead_us:.1f} us per decision on top")


def main():
    sixty = ROOT / "data" / "tiresias" / "60_job.csv"
    measure("tiresias 60_job (2x4)", lambda p: arbiter.simulate(sixty, "tiresias", policy=p, cluster="2x4", timeline=False), 20)
    muri = ROOT / "scenarios" / "muri-traces.toml"
    for trace in ("trace3", "trace2"):
        entry = {"name": trace, "format": "muri", "path": f"../data/muri/{trace}.csv", "iteration_time_factor": 1.015}

        def one(p, entry=entry):
            if isinstance(p, str):
                return arbiter.run(muri, set={"trace": [entry], "policies": [p]}, timeline=False)
            return arbiter.run(muri, set={"trace": [entry]}, policy=p, timeline=False)

        measure(f"muri {trace} (n8g8)", one, 3)


if __name__ == "__main__":
    sys.exit(main())
