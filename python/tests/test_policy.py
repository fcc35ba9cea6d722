"""Policies written in Python, in-process: a Python SRTF gives exactly the built-in `srtf`
numbers on Muri's eight traces, and every bad answer is a `DecisionError` naming the job."""

import numpy as np
import pandas as pd
import pytest

import arbiter
from conftest import MURI, SIXTY


class SRTF(arbiter.Policy):
    """Shortest remaining time first, preemptive: the built-in `srtf`'s order (remaining time,
    then id; a negative remaining time counts as 0, as its key does)."""

    preempt = True

    def schedule(self, view):
        return view.ids[np.lexsort((view.ids, np.maximum(view.remaining_s, 0.0)))]


def test_a_python_srtf_gives_the_builtin_srtf_numbers_on_muris_eight_traces():
    ours = arbiter.run(MURI, policy=SRTF(), timeline=False)
    builtin = arbiter.run(MURI, set={"policies": ["srtf"]}, timeline=False)
    assert len(ours.results) == 8
    assert set(ours.results.policy) == {"SRTF"}
    columns = [c for c in builtin.results.columns if c not in ("policy", "wall_s")]
    pd.testing.assert_frame_equal(ours.results[columns], builtin.results[columns])
    trace3 = ours.results.set_index("trace").avg_jct_s["trace3"]
    assert round(trace3) == 193082
    jobs = [c for c in builtin.jobs.columns if c != "policy"]
    pd.testing.assert_frame_equal(ours.jobs[jobs], builtin.jobs[jobs])


class Recorder(arbiter.Policy):
    """FIFO by hand, recording what it sees."""

    name = "recorder"

    def __init__(self):
        self.views = []
        self.resets = 0

    def reset(self):
        self.resets += 1

    def schedule(self, view):
        # Every array read now: a view is readable only during this call, what was read stays.
        for name in FEATURES + ("free_gpus", "tenants", "placements"):
            getattr(view, name)
        self.views.append(view)
        return view.ids[np.argsort(view.submit_s, kind="stable")].tolist()


FEATURES = ("ids", "gpus", "submit_s", "running", "executed_s", "attained_gpu_s", "duration_s", "remaining_s", "tenant", "tenant_index")


def test_the_view_has_the_external_protocols_features_as_arrays():
    policy = Recorder()
    run = arbiter.simulate(SIXTY, "tiresias", policy=policy, cluster="2x4")
    assert policy.resets == 1
    assert run.results.policy.tolist() == ["recorder"]
    assert run.results.jobs[0] == 60
    view = max(policy.views, key=len)
    n = len(view)
    for name in FEATURES:
        assert getattr(view, name).shape == (n,), name
    assert view.ids.dtype == np.int64 and view.running.dtype == bool
    assert view.free_gpus.tolist() == [view.free_gpus[0], view.free_gpus[1]] and len(view.free_gpus) == 2
    assert (view.free_gpus >= 0).all() and view.free_gpus.sum() <= 8
    assert len(set(view.ids.tolist())) == n
    assert (view.remaining_s <= view.duration_s + 1e-9).all()
    assert all(isinstance(t, str) for t in view.tenant)
    assert set(view.placements) == set(view.ids[view.running].tolist())
    for job, placement in view.placements.items():
        assert sum(g for _, g in placement) == view.gpus[view.ids == job][0]
    times = [v.time_s for v in policy.views]
    assert times == sorted(times)


def test_a_view_is_read_during_its_call_only():
    class Keeper(arbiter.Policy):
        def schedule(self, view):
            self.view = view
            self.ids = view.ids
            return view.ids

    keeper = Keeper()
    arbiter.simulate(SIXTY, "tiresias", policy=keeper, cluster="2x4")
    assert keeper.view.ids is keeper.ids and len(keeper.ids) == len(keeper.view)
    with pytest.raises(arbiter.ArbiterError, match="readable only during the schedule"):
        keeper.view.remaining_s


def test_the_same_numbers_as_fifo_without_blocking_when_ordered_by_submission():
    # The external protocol's placement: fit-first (no head-of-line blocking), as fifo-backfill
    # is not; the order alone decides. Same answer through arbiter.run and simulate.
    a = arbiter.simulate(SIXTY, "tiresias", policy=Recorder(), cluster="2x4").results.avg_jct_s[0]
    b = arbiter.simulate(SIXTY, "tiresias", policy=Recorder(), cluster="2x4").results.avg_jct_s[0]
    assert a == b


class Answer(arbiter.Policy):
    def __init__(self, answer):
        self.answer = answer

    def schedule(self, view):
        return self.answer(view)


def decision_error(answer):
    with pytest.raises(arbiter.DecisionError) as raised:
        arbiter.simulate(SIXTY, "tiresias", policy=Answer(answer), cluster="2x4")
    return raised.value


def test_an_unknown_job_is_a_decision_error_naming_it():
    error = decision_error(lambda view: [999999])
    assert isinstance(error, arbiter.PolicyError) and isinstance(error, arbiter.ArbiterError)
    assert "policy `Answer` at t=" in str(error)
    assert "its order names job 999999, which is not waiting or running" in str(error)
    assert "names job -1," in str(decision_error(lambda view: [-1]))


def test_a_job_twice_is_a_decision_error_naming_it():
    error = decision_error(lambda view: [int(view.ids[0]), int(view.ids[0])])
    assert "twice" in str(error) and f"job " in str(error)


def test_a_wrong_type_is_a_decision_error():
    assert "must return an order of job ids" in str(decision_error(lambda view: None))
    assert "must hold job ids (int), got 'a'" in str(decision_error(lambda view: ["a"]))
    assert "1-D array of integer job ids" in str(decision_error(lambda view: view.submit_s))


def test_an_exception_in_the_policy_is_a_decision_error_caused_by_it():
    def boom(view):
        raise ValueError("no idea")

    error = decision_error(boom)
    assert "schedule raised ValueError: no idea" in str(error)
    assert isinstance(error.__cause__, ValueError)


def test_a_policy_that_is_not_a_policy_is_refused():
    with pytest.raises(TypeError, match="arbiter.Policy"):
        arbiter.simulate(SIXTY, "tiresias", policy=object(), cluster="2x4")
    with pytest.raises(NotImplementedError):
        arbiter.Policy().schedule(None)
    # An unimplemented schedule stops the simulation with a DecisionError.
    with pytest.raises(arbiter.DecisionError, match="NotImplementedError"):
        arbiter.simulate(SIXTY, "tiresias", policy=arbiter.Policy(), cluster="2x4")


def test_preemption_can_be_chosen_per_decision():
    class Both(arbiter.Policy):
        def schedule(self, view):
            order = view.ids[np.lexsort((view.ids, np.maximum(view.remaining_s, 0.0)))]
            return order, True

    both = arbiter.simulate(SIXTY, "tiresias", policy=Both(), cluster="2x4").results
    builtin = arbiter.simulate(SIXTY, "tiresias", policy="srtf", cluster="2x4").results
    assert both.avg_jct_s[0] == builtin.avg_jct_s[0]


def test_a_python_sjf_gives_the_builtin_sjf_numbers():
    class SJF(arbiter.Policy):
        def schedule(self, view):
            return view.ids[np.lexsort((view.ids, view.duration_s))]

    trace3 = [{"name": "trace3", "format": "muri", "path": "../data/muri/trace3.csv", "iteration_time_factor": 1.015}]
    ours = arbiter.run(MURI, set={"trace": trace3}, policy=SJF(), timeline=False).results
    builtin = arbiter.run(MURI, set={"trace": trace3, "policies": ["sjf"]}, timeline=False).results
    assert ours.avg_jct_s[0] == builtin.avg_jct_s[0] and ours.events[0] == builtin.events[0]


def test_the_report_names_a_python_policy_as_the_results_do(tmp_path):
    run = arbiter.simulate(SIXTY, "tiresias", policy=Recorder(), cluster="2x4")
    html = run.report(tmp_path / "report").read_text()
    assert "recorder" in html and "external" not in html
    assert run.results.policy.tolist() == ["recorder"]
