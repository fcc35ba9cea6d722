"""Policies written in Python that answer a full decision (placements) instead of an order: the
same planner checks them as every built-in policy, so a Python FIFO that places by hand gives the
built-in `fifo` numbers, and every bad placement is a `DecisionError` naming the job."""

import numpy as np
import pandas as pd
import pytest

import arbiter
from conftest import MURI, SIXTY

TRACE3 = [{"name": "trace3", "format": "muri", "path": "../data/muri/trace3.csv", "iteration_time_factor": 1.015}]


def consolidated(free, capacity, gpus):
    """Muri's scenario's placement (Tiresias' `yarn` scheme, one rack, one GPU type): the first
    node with enough free GPUs; a job larger than a node takes whole free nodes, in order, plus
    the first other node with room for the rest. ``None`` if it does not fit."""
    for node in range(len(free)):
        if free[node] >= gpus:
            return [(node, gpus)]
    if gpus <= capacity.max():
        return None
    placement, left = [], gpus
    for node in range(len(free)):
        if left >= capacity[node] and free[node] == capacity[node] > 0:
            placement.append((node, int(capacity[node])))
            left -= capacity[node]
    if left > 0:
        used = {n for n, _ in placement}
        rest = next((n for n in range(len(free)) if n not in used and free[n] >= left), None)
        if rest is None:
            return None
        placement.append((rest, int(left)))
    return placement


class PlacingFifo(arbiter.Policy):
    """The built-in `fifo` by hand: waiting jobs by submission time (then id), each placed as
    above; the first that does not fit blocks those after it (head-of-line blocking). With
    ``preempt``, the running jobs are listed too, where they run (``view.placements``)."""

    def __init__(self, preempt=False):
        self.preempt = preempt

    def schedule(self, view):
        free = view.free_gpus.copy()
        capacity = free.copy()
        for placement in view.placements.values():
            for node, gpus in placement:
                capacity[node] += gpus
        ids, gpus, running = view.ids, view.gpus, view.running
        run = dict(view.placements) if self.preempt else {}
        for i in np.lexsort((ids, view.submit_s)):
            if running[i]:
                continue
            placement = consolidated(free, capacity, int(gpus[i]))
            if placement is None:
                if gpus[i] > capacity.sum():
                    continue  # never fits: it does not block the others
                break
            for node, n in placement:
                free[node] -= n
            run[int(ids[i])] = placement
        return arbiter.Decision(run)


@pytest.mark.parametrize("preempt", [False, True], ids=["by-changes", "whole-decision"])
def test_a_python_fifo_that_places_by_hand_gives_the_builtin_fifo_numbers(preempt):
    ours = arbiter.run(MURI, set={"trace": TRACE3}, policy=PlacingFifo(preempt), timeline=False)
    builtin = arbiter.run(MURI, set={"trace": TRACE3, "policies": ["fifo"]}, timeline=False)
    assert ours.results.policy.tolist() == ["PlacingFifo"]
    columns = [c for c in builtin.results.columns if c not in ("policy", "wall_s")]
    pd.testing.assert_frame_equal(ours.results[columns], builtin.results[columns])
    # Nobody was preempted or moved: the running jobs listed where they run were kept.
    assert ours.results.preemptions_per_job[0] == 0 and ours.results.migrations_per_job[0] == 0
    # Every per-job record too, but why a job last waited: a Decision does not say (the built-in
    # fifo says for the jobs it tried to place).
    jobs = [c for c in builtin.jobs.columns if c not in ("policy", "last_wait_reason")]
    pd.testing.assert_frame_equal(ours.jobs[jobs], builtin.jobs[jobs])


def test_a_dict_is_a_decision_and_preempting_stops_the_jobs_left_out():
    class OneAtATime(arbiter.Policy):
        """Runs only the waiting job submitted first, at every point, on node 0 then node 1:
        the running one stops whenever another job is first in line (preemption)."""

        preempt = True

        def schedule(self, view):
            waiting = np.flatnonzero(~view.running)
            if len(waiting) == 0:
                return dict(view.placements)
            first = waiting[np.argmin(view.submit_s[waiting])]
            gpus = int(view.gpus[first])
            return {int(view.ids[first]): [(0, min(gpus, 4))] + ([(1, gpus - 4)] if gpus > 4 else [])}

    results = arbiter.simulate(SIXTY, "tiresias", policy=OneAtATime(), cluster="2x4").results
    assert results.policy[0] == "OneAtATime" and results.jobs[0] == 60
    assert results.preemptions_per_job[0] > 0


class Answer(arbiter.Policy):
    def __init__(self, answer, preempt=False):
        self.answer = answer
        self.preempt = preempt

    def schedule(self, view):
        return self.answer(view)


def decision_error(answer, preempt=False):
    with pytest.raises(arbiter.DecisionError) as raised:
        arbiter.simulate(SIXTY, "tiresias", policy=Answer(answer, preempt), cluster="2x4")
    message = str(raised.value)
    assert "policy `Answer` at t=" in message
    return message


def first_waiting(view, gpus=None):
    """The id and GPUs of a waiting job (asking for `gpus`, if given)."""
    for job, n, running in zip(view.ids, view.gpus, view.running):
        if not running and (gpus is None or n == gpus):
            return int(job), int(n)
    return None, None


def test_a_job_not_waiting_or_running_is_named():
    assert "job999999 is not an active job" in decision_error(lambda view: arbiter.Decision({999999: [(0, 1)]}))
    assert "its decision names job -4, which is not waiting or running" in decision_error(lambda view: {-4: [(0, 1)]})


def test_a_node_the_cluster_does_not_have_is_named():
    def answer(view):
        job, gpus = first_waiting(view)
        return {job: [(7, gpus)]}

    message = decision_error(answer)
    assert "its placement names node 7, which the cluster does not have (nodes 0 to 1)" in message
    assert message.split(": ")[1].startswith("job ")


def test_the_wrong_gpu_count_is_named():
    def answer(view):
        job, gpus = first_waiting(view)
        return {job: [(0, gpus + 1)]} if gpus < 4 else {}

    message = decision_error(answer)
    assert "asks for" in message and "has" in message and "placement node0:" in message


def test_more_gpus_than_a_node_has_free_is_named():
    def answer(view):
        # Every waiting 1-GPU job on node 0, more than its 4 GPUs once enough have arrived.
        return {int(j): [(0, 1)] for j, g, r in zip(view.ids, view.gpus, view.running) if g == 1 and not r}

    message = decision_error(answer)
    assert "node0 has" in message and "free GPUs, placement asks for 1" in message


def test_zero_gpus_and_malformed_placements_are_named():
    def zero(view):
        job, _ = first_waiting(view)
        return {job: [(0, 0)]}

    assert "gives node 0 0 GPUs" in decision_error(zero)

    def not_pairs(view):
        job, _ = first_waiting(view)
        return {job: [0, 1]}

    assert "a placement must be a list of (node, gpus) pairs, got 0 in it" in decision_error(not_pairs)
    assert "must map job ids (int) to placements, got 'x'" in decision_error(lambda view: {"x": [(0, 1)]})
    assert "a Decision's run must map job ids to placements, got list" in decision_error(lambda view: arbiter.Decision([1, 2]))


def test_moving_a_running_job_without_preemption_is_refused_naming_it():
    def answer(view):
        for job, placement in view.placements.items():
            node, gpus = placement[0]
            if len(placement) == 1 and view.free_gpus[1 - node] >= gpus:
                return {job: [(1 - node, gpus)]}
        # Nothing to move yet: start what fits on one node.
        free, run = view.free_gpus.copy(), {}
        for job, gpus, running in zip(view.ids, view.gpus, view.running):
            node = int(np.argmax(free))
            if not running and free[node] >= gpus:
                free[node] -= gpus
                run[int(job)] = [(node, int(gpus))]
        return run

    message = decision_error(answer)
    assert "a decision by changes may only start jobs" in message and ": job" in message
