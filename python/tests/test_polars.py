"""Tables as polars DataFrames (`arbiter.set_frames("polars")`, the `polars` extra): the same
values as the pandas ones. Skipped, saying so, where polars is not installed."""

import pytest

import arbiter
from conftest import MURI, SIXTY

pl = pytest.importorskip("polars", reason="polars is not installed (pip install \"./python[polars]\")")


@pytest.fixture
def polars_frames():
    arbiter.set_frames("polars")
    yield
    arbiter.set_frames("pandas")


def test_results_jobs_and_traces_come_as_polars_with_the_pandas_values(polars_frames):
    class Fifo(arbiter.Policy):
        def schedule(self, view):
            return view.ids

    run = arbiter.simulate(SIXTY, "tiresias", policy="srtf", cluster="2x4")
    ours = arbiter.simulate(SIXTY, "tiresias", policy=Fifo(), cluster="2x4")
    trace = arbiter.read_trace(SIXTY, "tiresias")
    assert arbiter.frames() == "polars"
    for frame in (run.results, run.jobs, trace, ours.results, arbiter.policies()):
        assert isinstance(frame, pl.DataFrame)
    assert ours.results["policy"].to_list() == ["Fifo"] and set(ours.jobs["policy"].to_list()) == {"Fifo"}
    arbiter.set_frames("pandas")
    pandas_run = arbiter.simulate(SIXTY, "tiresias", policy="srtf", cluster="2x4")
    assert run.results.columns == list(pandas_run.results.columns)
    assert run.results["avg_jct_s"].to_list() == pandas_run.results["avg_jct_s"].tolist()
    assert run.jobs.columns == list(pandas_run.jobs.columns)
    assert run.jobs["jct_s"].to_list() == pandas_run.jobs["jct_s"].tolist()
    assert trace["trace_id"].dtype == pl.Utf8 and len(trace) == 60
    assert arbiter.run(MURI, set={"policies": ["srtf"], "trace": [{"name": "trace3", "format": "muri", "path": "../data/muri/trace3.csv", "iteration_time_factor": 1.015}]}, timeline=False).results.shape[0] == 1


def test_an_unknown_library_is_refused():
    with pytest.raises(ValueError, match="unknown DataFrame library 'arrow'"):
        arbiter.set_frames("arrow")
    assert arbiter.frames() == "pandas"
