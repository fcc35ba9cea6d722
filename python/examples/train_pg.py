"""Trains a small policy-gradient scheduler (REINFORCE, NumPy only) in the Gymnasium environment
on Muri's trace3 for a few minutes, then prints its average JCT next to the built-in fifo, sjf
and srtf. Not run in CI: `python3 python/examples/train_pg.py [--minutes 2]` (needs
`pip install ./python[gym]`; the numbers of one run are in docs/python.md).

The policy scores each job it may start with a linear function of its features (log GPUs, log
wait, log trace duration, whether it fits) and starts jobs while any fits (work-conserving); it
samples from the masked softmax of the scores while training and takes the best score to
evaluate. The reward is −(jobs in the system) × seconds: the return is −Σ JCT.
"""

import argparse
import time
from pathlib import Path

import gymnasium
import numpy as np

import arbiter
import arbiter.gym

ROOT = Path(__file__).resolve().parents[2]
FEATURES = 6


def action_features(obs, info, max_jobs):
    """One feature row per action (the job rows, then "no more"), and the valid ones."""
    jobs = obs[: max_jobs * len(arbiter.gym.JOB_FEATURES)].reshape(max_jobs, -1)
    phi = np.zeros((max_jobs + 1, FEATURES))
    phi[:max_jobs, 0] = np.log1p(jobs[:, 1])
    phi[:max_jobs, 1] = np.log1p(jobs[:, 2]) / 10.0
    phi[:max_jobs, 2] = np.log1p(jobs[:, 3]) / 10.0
    phi[:max_jobs, 3] = jobs[:, 4]
    phi[:max_jobs, 4] = 1.0
    phi[max_jobs, 5] = 1.0
    valid = info["action_mask"].astype(bool)
    # Work-conserving: "no more" only when no job can start (the environment then moves on).
    if valid[:max_jobs].any():
        valid[max_jobs] = False
    return phi, valid


def probabilities(w, phi, valid):
    scores = np.where(valid, phi @ w, -np.inf)
    scores -= scores.max()
    p = np.exp(scores)
    return p / p.sum()


def episode(env, w, rng, greedy=False):
    obs, info = env.reset(seed=0)
    grads, rewards = [], []
    while True:
        phi, valid = action_features(obs, info, env.max_jobs)
        p = probabilities(w, phi, valid)
        action = int(np.argmax(p)) if greedy else int(rng.choice(len(p), p=p))
        grads.append(phi[action] - p @ phi)
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            return np.array(grads), np.array(rewards), info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()

    env = gymnasium.make("arbiter/Cluster-v0", max_jobs=64, reward_scale=1e-6).unwrapped
    rng = np.random.default_rng(0)
    w = np.zeros(FEATURES)
    started = time.perf_counter()
    episodes = steps = 0
    while time.perf_counter() - started < args.minutes * 60:
        batch = [episode(env, w, rng) for _ in range(args.batch)]
        returns_to_go = [np.cumsum(r[::-1])[::-1] for _, r, _ in batch]
        flat = np.concatenate(returns_to_go)
        mean, std = flat.mean(), flat.std() + 1e-8
        gradient = sum(((g - mean) / std) @ grads for (grads, _, _), g in zip(batch, returns_to_go)) / len(flat)
        w += args.lr * gradient / (np.linalg.norm(gradient) + 1e-8)
        episodes += len(batch)
        steps += len(flat)
        jct = np.mean([info["avg_jct_s"] for _, _, info in batch])
        print(f"{time.perf_counter() - started:6.0f} s  episodes {episodes:4d}  sampled avg JCT {jct:10.0f} s  w {np.round(w, 2)}", flush=True)
    elapsed = time.perf_counter() - started

    _, _, info = episode(env, w, rng, greedy=True)
    trace3 = [{"name": "trace3", "format": "muri", "path": "../data/muri/trace3.csv", "iteration_time_factor": 1.015}]
    builtin = arbiter.run(ROOT / "scenarios" / "muri-traces.toml", set={"trace": trace3, "policies": ["fifo", "sjf", "srtf"]}, timeline=False).results
    print(f"\ntrained {episodes} episodes ({steps} steps, {steps / elapsed:.0f} steps/s with the agent) in {elapsed:.0f} s")
    print("Muri trace3, average JCT:")
    print(f"  {'policy-gradient agent':22s} {info['avg_jct_s']:12,.0f} s")
    for row in builtin.itertuples():
        print(f"  {row.policy:22s} {row.avg_jct_s:12,.0f} s")


if __name__ == "__main__":
    main()
