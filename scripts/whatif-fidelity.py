#!/usr/bin/env python3
"""How closely `arbiter whatif` reproduces a daemon running real processes (issue 30, item 4).

Starts `arbiter serve` with the local executor on a declared cluster (no GPU is needed: jobs
are `sleep`s and see their GPUs only as CUDA_VISIBLE_DEVICES), submits a seeded stream of jobs
from two tenants through the HTTP API — sleeps of 5 to 40 s on 1 or 2 GPUs, arriving 0 to 8 s
apart, enough to make them queue — waits for every one to end, exports the history (`arbiter
history export`) and replays it under the same policy and configuration (`arbiter whatif
--json`). Prints the comparison's headline and writes the history, the configuration and the
comparison into the output folder.

    python3 scripts/whatif-fidelity.py --arbiter target/release/arbiter --jobs 30 --out out/fidelity

Standard library only. Takes about as long as the jobs run (five minutes for 30 jobs on 4 GPUs).
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request


def request(url, token, method="GET", body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.loads(answer.read() or b"null")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arbiter", default="target/release/arbiter", help="the arbiter binary")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--gpus", default="4xa100", help="the declared cluster")
    parser.add_argument("--policy", default="fifo")
    parser.add_argument("--round-s", type=float, default=30.0, help="the daemon's round_s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="out/whatif-fidelity")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    arbiter = os.path.abspath(args.arbiter)
    work = tempfile.mkdtemp(prefix="arbiter-fidelity-")
    # As root each tenant runs as its own uid, which must reach its checkpoint directory.
    os.chmod(work, 0o711)
    config = os.path.join(args.out, "arbiter.toml")
    shared = "" if os.geteuid() == 0 else "allow_shared_identity = true\n"
    with open(config, "w") as f:
        f.write(f'policy = "{args.policy}"\ngpus = "{args.gpus}"\nround_s = {args.round_s}\n{shared}')
    data = os.path.join(work, "data")
    daemon = subprocess.Popen([arbiter, "serve", "--config", config, "--data-dir", data, "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "daemon.log"), "w"))
    try:
        addr_file = os.path.join(data, "daemon.addr")
        for _ in range(400):
            if os.path.exists(addr_file) and open(addr_file).read().endswith("\n"):
                break
            if daemon.poll() is not None:
                sys.exit("the daemon did not start: " + open(os.path.join(work, "daemon.log")).read())
            time.sleep(0.05)
        url = "http://" + open(addr_file).read().strip()
        admin = open(os.path.join(data, "admin.token")).read().strip()
        tokens = {t: request(f"{url}/v1/tenants", admin, "POST", {"name": t})["token"] for t in ("a", "b")}
        rng = random.Random(args.seed)
        ids = []
        started = time.time()
        for i in range(args.jobs):
            tenant = "ab"[i % 2]
            seconds = rng.randint(5, 40)
            gpus = rng.choice([1, 1, 2])
            job = request(f"{url}/v1/jobs", tokens[tenant], "POST", {"command": f"sleep {seconds}", "gpus": gpus, "expected_run_time_s": seconds, "name": f"sleep-{i}"})
            ids.append((tenant, job["id"]))
            time.sleep(rng.uniform(0, 8))
        while True:
            states = [request(f"{url}/v1/jobs/{id}", tokens[t])["state"]["state"] for t, id in ids]
            if all(s in ("succeeded", "failed", "cancelled") for s in states):
                break
            time.sleep(1)
        print(f"{args.jobs} jobs ran in {time.time() - started:.0f} s", file=sys.stderr)
        history = os.path.join(args.out, "hist.csv")
        env = dict(os.environ, ARBITER_URL=url, ARBITER_TOKEN=admin)
        subprocess.run([arbiter, "history", "export", "--out", history], env=env, check=True)
    finally:
        daemon.terminate()
        daemon.wait()
    out = subprocess.run([arbiter, "whatif", history, "--config", config, "--json", "--jobs-csv", os.path.join(args.out, "jobs.csv")], check=True, capture_output=True, text=True).stdout
    with open(os.path.join(args.out, "whatif.json"), "w") as f:
        f.write(out)
    c = json.loads(out)
    a, s = c["actual"], c["simulated"]
    print(f"{c['compared']} of {c['jobs']} jobs compared under {c['policy']} on {c['cluster']}")
    for key in ("avg_jct_s", "p50_jct_s", "p95_jct_s", "avg_queue_s", "makespan_s"):
        diff = (s[key] - a[key]) / a[key] * 100 if a[key] else 0.0
        print(f"{key:<12} actual {a[key]:9.1f}  simulated {s[key]:9.1f}  {diff:+.1f}%")
    print(f"GPU utilization actual {a['gpu_utilization'] * 100:.1f}%, simulated {s['gpu_utilization'] * 100:.1f}%")


if __name__ == "__main__":
    main()
