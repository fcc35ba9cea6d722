"""Same input and seed, same DataFrames; another seed, other numbers where chance plays a part
(random failures)."""

import pandas as pd

import arbiter
from conftest import MURI, SIXTY

FAILURES = {"simulation": {"failures": {"probability_per_attempt": 0.3, "max_retries": 2}}}


def simulate(seed):
    return arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", seed=seed, set=FAILURES)


def test_the_same_seed_gives_identical_dataframes():
    first, second = simulate(7), simulate(7)
    pd.testing.assert_frame_equal(first.results.drop(columns="wall_s"), second.results.drop(columns="wall_s"))
    pd.testing.assert_frame_equal(first.jobs, second.jobs)


def test_another_seed_gives_other_failures():
    assert not simulate(7).jobs.failures.equals(simulate(8).jobs.failures)


def test_a_scenario_run_twice_gives_identical_dataframes():
    overrides = {"policies": ["srtf", "dlas-gpu"], "trace.0.max_jobs": 300}
    first, second = arbiter.run(MURI, set=overrides), arbiter.run(MURI, set=overrides)
    pd.testing.assert_frame_equal(first.results.drop(columns="wall_s"), second.results.drop(columns="wall_s"))
    pd.testing.assert_frame_equal(first.published, second.published)
    pd.testing.assert_frame_equal(first.jobs, second.jobs)
