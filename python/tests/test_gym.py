"""The Gymnasium environment: the env checker, vectorised envs, determinism, and a greedy
"shortest first" agent through it reproducing the built-in `sjf` exactly."""

import subprocess
import sys

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

import arbiter  # noqa: E402
import arbiter.gym  # noqa: E402
from conftest import MURI, SIXTY  # noqa: E402


def test_import_arbiter_does_not_import_gymnasium():
    code = "import sys, arbiter; print('gymnasium' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def small_env(**kwargs):
    return arbiter.gym.ClusterEnv(SIXTY, "tiresias", "2x4", **kwargs)


def test_the_env_passes_the_env_checker():
    from gymnasium.utils.env_checker import check_env

    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(small_env(max_jobs=16), skip_render_check=True)
        check_env(gymnasium.make("arbiter/Cluster-v0").unwrapped, skip_render_check=True)
    # Finite bounds: no warning about an infinite observation space (nor any other).
    assert [str(w.message) for w in caught] == []


def test_every_observation_is_within_the_bounds():
    env = small_env(max_jobs=8)
    obs, info = env.reset(seed=0)
    assert np.isfinite(env.observation_space.high).all()
    high = env.observation_space.high.reshape(-1)
    assert high[8 * 5] == 8 and high[0] == 1.0  # free GPUs of the 2x4 cluster; the `valid` flag
    done = False
    while not done:
        assert env.observation_space.contains(obs)
        obs, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))


def shortest_first(obs, info, max_jobs):
    """The valid row with the shortest trace duration (rows are in submission order; ties go to
    the earlier row, which has the smaller id among equal submission times)."""
    jobs = obs[: max_jobs * len(arbiter.gym.JOB_FEATURES)].reshape(max_jobs, -1)
    mask = info["action_mask"][:max_jobs].astype(bool)
    if not mask.any():
        return max_jobs
    duration = np.where(mask, jobs[:, 3], np.inf)
    return int(np.argmin(duration))


def run_agent(env, agent, seed=0, whole_table=True):
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        assert not whole_table or info["waiting"] <= env.max_jobs, "the table must show every waiting job"
        obs, reward, terminated, truncated, info = env.step(agent(obs, info, env.max_jobs))
        total += reward
        steps += 1
        if terminated or truncated:
            return total, steps, info


def test_a_shortest_first_agent_reproduces_sjf_on_muris_trace3():
    env = gymnasium.make("arbiter/Cluster-v0", max_jobs=400).unwrapped
    total, steps, info = run_agent(env, shortest_first)
    trace3 = [{"name": "trace3", "format": "muri", "path": "../data/muri/trace3.csv", "iteration_time_factor": 1.015}]
    sjf = arbiter.run(MURI, set={"trace": trace3, "policies": ["sjf"]}, timeline=False).results.iloc[0]
    assert info["avg_jct_s"] == sjf.avg_jct_s
    assert info["makespan_s"] == sjf.makespan_s
    # The return is -Σ JCT.
    assert total == pytest.approx(-sjf.avg_jct_s * sjf.jobs, rel=1e-9)


def test_a_shortest_first_agent_reproduces_sjf_on_a_small_trace():
    total, steps, info = run_agent(small_env(max_jobs=64), shortest_first)
    sjf = arbiter.simulate(SIXTY, "tiresias", policy="sjf", cluster="2x4").results.iloc[0]
    assert info["avg_jct_s"] == sjf.avg_jct_s
    assert total == pytest.approx(-sjf.avg_jct_s * sjf.jobs, rel=1e-9)


def test_reset_with_a_seed_is_deterministic_and_abandons_the_episode():
    env = small_env(max_jobs=16)
    rng = np.random.default_rng(1)

    def random_valid(obs, info, max_jobs):
        return int(rng.choice(np.flatnonzero(info["action_mask"])))

    obs, info = env.reset(seed=3)
    env.step(int(np.flatnonzero(info["action_mask"])[0]))  # mid-episode, then abandoned
    rng = np.random.default_rng(1)
    first = run_agent(env, random_valid, seed=3, whole_table=False)
    rng = np.random.default_rng(1)
    second = run_agent(env, random_valid, seed=3, whole_table=False)
    assert first[0] == second[0] and first[1] == second[1]
    assert first[2]["avg_jct_s"] == second[2]["avg_jct_s"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.close()


def test_vectorised_envs_work():
    envs = gymnasium.vector.SyncVectorEnv([lambda: small_env(max_jobs=16) for _ in range(2)])
    obs, info = envs.reset(seed=0)
    assert obs.shape == (2, envs.single_observation_space.shape[0])
    for _ in range(50):
        obs, reward, terminated, truncated, info = envs.step(np.full(2, 16))
    assert reward.shape == (2,)
    envs.close()


def test_a_wrong_trace_is_refused_when_the_env_is_made(tmp_path):
    with pytest.raises(arbiter.TraceError):
        arbiter.gym.ClusterEnv(tmp_path / "missing.csv", "tiresias", "2x4")


def test_an_agent_that_never_starts_anything_still_runs_every_job():
    # "No more" is masked while the cluster would idle: masked, it picks the first job offered.
    env = small_env(max_jobs=16)
    total, steps, info = run_agent(env, lambda obs, info, max_jobs: max_jobs, whole_table=False)
    assert info["jobs"] == 60 and info["avg_jct_s"] > 0
    assert total == pytest.approx(-info["avg_jct_s"] * 60, rel=1e-9)
