"""The `arbiter` package's API: scenario runs, ad-hoc simulations, traces and policies as
DataFrames, checked against the command line where its binary was built."""

import threading
import time

import pandas as pd
import pytest

import arbiter
from conftest import MURI, ROOT, SIXTY, cli_json

SRTF = {"policies": ["srtf"]}


@pytest.fixture(scope="module")
def muri_srtf():
    return arbiter.run(MURI, set=SRTF)


def test_muri_trace3_under_srtf_is_the_published_193082_s(muri_srtf):
    results = muri_srtf.results
    trace3 = results[(results.trace == "trace3") & (results.policy == "srtf") & (results.tenant == "all")]
    assert len(trace3) == 1
    assert round(trace3.avg_jct_s.iloc[0]) == 193_082
    published = muri_srtf.published
    row = published[(published.trace == "trace3") & (published.policy == "srtf") & (published.metric == "avg_jct_s")]
    assert row.value.iloc[0] == 193_082 and bool(row.within_tolerance.iloc[0])


def test_results_have_one_row_per_trace_tenant_policy_seed(muri_srtf):
    results = muri_srtf.results
    assert list(results.columns[:4]) == ["trace", "policy", "tenant", "seed"]
    assert len(results) == 8 and results.trace.is_unique
    assert muri_srtf.name == "muri-traces"


def test_results_and_published_are_what_arbiter_run_json_prints(muri_srtf, cli):
    expected = cli_json(cli, "run", str(MURI), "--set", 'policies=["srtf"]')
    results = muri_srtf.results
    # The same columns (the command line prints them in name order, we in the rows' order).
    assert set(results.columns) == set(expected["results"][0].keys())
    ours = results.drop(columns="wall_s").to_dict("records")
    theirs = [{k: v for k, v in row.items() if k != "wall_s"} for row in expected["results"]]
    assert ours == theirs
    published = muri_srtf.published
    assert set(published.columns) == set().union(*(c.keys() for c in expected["published"]))
    assert len(published) == len(expected["published"])
    assert published.ours.fillna(-1).tolist() == [-1 if c["ours"] is None else c["ours"] for c in expected["published"]]


def test_jobs_are_every_job_of_every_simulation(muri_srtf):
    jobs = muri_srtf.jobs
    assert list(jobs.columns[:6]) == ["trace", "policy", "seed", "job", "trace_id", "tenant"]
    assert {"jct_s", "queue_s", "outcome", "preemptions"} <= set(jobs.columns)
    assert len(jobs) == muri_srtf.results.jobs.sum()
    trace3 = jobs[jobs.trace == "trace3"]
    finished = trace3[trace3.outcome == "completed"]
    assert finished.jct_s.mean() == pytest.approx(muri_srtf.results.set_index("trace").avg_jct_s["trace3"])
    assert jobs.deadline_s.dtype == float, "a column with no value is NaN, not None"


def test_set_takes_the_command_lines_strings_too():
    as_dict = arbiter.run(MURI, set={"policies": ["srtf"], "trace.0.max_jobs": 50}).results
    as_cli = arbiter.run(MURI, set=['policies=["srtf"]', "trace.0.max_jobs=50"]).results
    pd.testing.assert_frame_equal(as_dict.drop(columns="wall_s"), as_cli.drop(columns="wall_s"))
    assert as_dict.set_index("trace").jobs["trace1"] == 50


def test_the_report_is_written(muri_srtf, tmp_path):
    page = muri_srtf.report(tmp_path / "report")
    assert page == tmp_path / "report" / "index.html"
    assert "trace3" in page.read_text()
    assert any((tmp_path / "report" / "figures").glob("*.svg"))


def test_simulate_runs_one_ad_hoc_simulation():
    run = arbiter.simulate(SIXTY, format="tiresias", policy="srtf", cluster="2x4")
    assert len(run.results) == 1
    row = run.results.iloc[0]
    assert (row.trace, row.policy, row.jobs, row.capacity_gpus) == ("60_job", "srtf", 60, 8)
    assert len(run.jobs) == 60


def test_simulate_gives_the_command_lines_numbers(cli):
    for policy in ["fifo", "srtf", "las"]:
        expected = cli_json(cli, "simulate", "--trace", str(SIXTY), "--format", "tiresias", "--policy", policy, "--cluster", "2x4")
        row = arbiter.simulate(SIXTY, format="tiresias", policy=policy, cluster="2x4").results.iloc[0]
        for metric in ["avg_jct_s", "p99_jct_s", "avg_queue_s", "makespan_s", "gpu_utilization"]:
            assert row[metric] == pytest.approx(expected[metric]), (policy, metric)


def test_simulate_takes_policy_parameters_and_tables():
    default = arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4").results.iloc[0]
    tuned = arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", las={"queue_limits_gpu_s": [100], "queues": 2})
    assert tuned.results.iloc[0].avg_jct_s != default.avg_jct_s
    spread = arbiter.simulate(SIXTY, format="tiresias", policy="fifo", cluster={"nodes_per_rack": 2, "gpus_per_node": 4},
                              placement="spread", simulation={"restart_overhead_s": 30})
    assert spread.results.iloc[0].capacity_gpus == 8


def test_simulate_takes_a_policys_parameters_by_name():
    tables = arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", las={"queue_limits_gpu_s": [100], "queues": 2})
    flat = arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", queue_limits_gpu_s=[100], queues=2)
    mixed = arbiter.simulate(SIXTY, format="tiresias", policy="tiresias-l", cluster="2x4", queues=2, las={"queue_limits_gpu_s": [100]})
    assert flat.results.avg_jct_s[0] == tables.results.avg_jct_s[0] == mixed.results.avg_jct_s[0]
    # dlas-gpu reads las's table.
    dlas = arbiter.simulate(SIXTY, format="tiresias", policy="dlas-gpu", cluster="2x4", queues=2, queue_limits_gpu_s=[100])
    assert dlas.results.avg_jct_s[0] != arbiter.simulate(SIXTY, format="tiresias", policy="dlas-gpu", cluster="2x4").results.avg_jct_s[0]


def test_an_unknown_policy_parameter_is_named_with_what_the_policy_takes():
    with pytest.raises(arbiter.PolicyError) as raised:
        arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", queus=2)
    assert str(raised.value) == "policy `las`: unknown field `queus`, expected one of `queue_limits_gpu_s`, `queues`, `starvation_factor`"
    with pytest.raises(arbiter.PolicyError, match="policy `fifo`: unknown field `queues`; it takes no parameters"):
        arbiter.simulate(SIXTY, format="tiresias", policy="fifo", cluster="2x4", queues=2)
    with pytest.raises(arbiter.PolicyError, match="`queues` is given twice"):
        arbiter.simulate(SIXTY, format="tiresias", policy="las", cluster="2x4", queues=2, las={"queues": 3})

    class Mine(arbiter.Policy):
        def schedule(self, view):
            return view.ids

    with pytest.raises(arbiter.PolicyError, match="policy `Mine` is written in Python and takes no parameters here"):
        arbiter.simulate(SIXTY, format="tiresias", policy=Mine(), cluster="2x4", queues=2)
    # Tables still reach the simulation under a Python policy.
    assert arbiter.simulate(SIXTY, format="tiresias", policy=Mine(), cluster="2x4", tenant_weights={"a": 2}).results.jobs[0] == 60


def test_read_trace_gives_the_native_columns():
    jobs = arbiter.read_trace(SIXTY, "tiresias")
    assert len(jobs) == 60
    assert list(jobs.columns[:6]) == ["trace_id", "tenant", "user", "name", "model", "submit_s"]
    assert jobs.trace_id.iloc[0] == "0" and jobs.gpus.dtype.kind == "i"
    muri = arbiter.read_trace(ROOT / "data" / "muri" / "trace3.csv", "muri", iteration_time_factor=1.015)
    plain = arbiter.read_trace(ROOT / "data" / "muri" / "trace3.csv", "muri")
    assert muri.run_time_s.iloc[0] == pytest.approx(plain.run_time_s.iloc[0] * 1.015, rel=1e-3)


def test_analyze_trace_characterises_and_reports(tmp_path, cli):
    analysis = arbiter.analyze_trace(SIXTY, "tiresias", report=tmp_path / "analysis")
    assert analysis.jobs == 60
    assert analysis.sizes.gpus.tolist() == ["1", "2-4", "5-8", ">8"]
    assert analysis.sizes.jobs.sum() == 60
    assert set(analysis.duration_cdf.columns) == {"gpus", "duration_s", "fraction"}
    assert (tmp_path / "analysis" / "index.html").is_file()
    assert analysis.data == cli_json(cli, "trace", "analyze", str(SIXTY), "--format", "tiresias")


def test_policies_lists_every_policy_with_its_descriptor(cli):
    policies = arbiter.policies()
    assert {"name", "describe", "family", "daemon"} <= set(policies.columns)
    listed = [line.split()[0] for line in cli("policies").stdout.splitlines() if line.strip()]
    assert policies.name.tolist() == listed
    assert policies.set_index("name").family["max-min-fairness"] == "gavel-allocation"
    as_cli = cli_json(cli, "policies")
    assert policies.name.tolist() == [p["name"] for p in as_cli]
    by_name = policies.set_index("name")
    assert by_name.aliases["fifo"] == ["yarn-cs"]
    assert by_name.paper["fifo"] and by_name.detail["fifo"]


def test_simulations_run_without_the_gil():
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        started = time.perf_counter()
        arbiter.run(MURI, set={"policies": ["srtf", "las", "fifo"]})
        elapsed = time.perf_counter() - started
    finally:
        done.set()
        counter.join()
    # With the GIL held for the run, the counter would stand still but for the 50 ms polls.
    assert elapsed > 0 and ticks > 100_000 * elapsed, (ticks, elapsed)
