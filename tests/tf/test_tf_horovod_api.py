"""Horovod-style API across 2 processes, one device each."""
import numpy as np
import pytest

from tests.support.jobs import require_success
from tests.tf import run_job


@pytest.fixture(scope="module")
def job():
    outcomes = run_job("horovod_worker.py", num_workers=2)
    require_success(outcomes)
    return outcomes


def test_topology(job):
    assert sorted(o.result["rank"] for o in job) == [0, 1]
    for o in job:
        assert (o.result["size"], o.result["local_rank"], o.result["local_size"]) == (2, 0, 1)


def test_push_pull(job):
    for o in job:
        r = o.result
        np.testing.assert_allclose(r["push_pull_sum"], [3.0, 6.0, 9.0])
        np.testing.assert_allclose(r["push_pull_avg"], [1.5, 3.0, 4.5])
        assert r["push_pull_int64_sum"] == [3, 20]
        np.testing.assert_allclose(r["push_pull_graph"], [3.0, 6.0, 9.0])


def test_broadcast(job):
    for o in job:
        np.testing.assert_allclose(o.result["broadcast"], [105.0, 106.0])
        assert o.result["broadcast_bool"] == [1, 1]


def test_broadcast_variables(job):
    for o in job:
        np.testing.assert_allclose(o.result["broadcast_variables"][0], [[0.0, 0.0], [0.0, 0.0]])
        assert o.result["broadcast_variables"][1] == 7


def test_distributed_gradient_tape_averages(job):
    for o in job:  # d/dw of sum(w * [1,2] * (rank+1)), averaged over ranks 0,1
        np.testing.assert_allclose(o.result["tape_grad"], [1.5, 3.0])


def test_push_pull_gradient(job):
    # y = sum over ranks of x_r * (r + 1); every rank seeds dy = 1. The gradient of a
    # cross-process sum is the cross-process sum of the seeds (2), times this rank's (r + 1).
    for o in job:
        np.testing.assert_allclose(o.result["op_gradient"], [2.0 * (o.rank + 1)] * 2)


def test_keras_distributed_optimizer_with_callbacks(job):
    for o in job:
        r = o.result
        assert r["optimizer_class"] == "SGD"
        for i, (a, e) in enumerate(zip(r["keras_weights"], r["keras_reference_weights"])):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-4, atol=2e-5,
                                       err_msg=f"rank {o.rank} weight {i}")
    assert job[0].result["keras_logged_loss"] == job[1].result["keras_logged_loss"], \
        "MetricAverageCallback should make logged metrics identical"
