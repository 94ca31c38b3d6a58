"""The torch DistributedOptimizer over the engine's tensor fusion (issue 40):
bitwise the same parameters as one push_pull per parameter and as gloo, fewer
engine operations per step, and a rank whose parameter has another shape
still gets an error naming that parameter. Two ranks, torchrun, colocated
servers over real sockets: on one machine (shared memory compares the ranks)
and on two emulated machines (the servers compare them)."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.torch import WORKERS

WORKER = os.path.join(WORKERS, "optimizer_fusion.py")


@pytest.fixture(scope="module", params=[(1, 2), (2, 1)], ids=["1x2", "2x1"])
def job(request, tmp_path_factory):
    machines, local = request.param
    out = tmp_path_factory.mktemp(f"optimizer_fusion_{machines}x{local}")
    finished = torchrun(WORKER, nproc=local, machines=machines, result_dir=out, timeout=300,
                        env={"BYTEPS_TIMEOUT": "60"})
    finished.check(ranks=2)
    return finished.results


def test_fused_parameters_are_bitwise_those_of_one_push_pull_per_parameter_and_of_gloo(job):
    for rank, r in sorted(job.items()):
        assert r["fused_as_unfused"], f"rank {rank}: fused training differs from unfused"
        assert r["unfused_as_gloo"], f"rank {rank}: unfused training differs from gloo"
        assert r["fused_as_gloo"], f"rank {rank}: fused training differs from gloo"
        assert r["two_passes_fused_as_unfused"], f"rank {rank}: backward_passes_per_step=2 differs"


def test_engine_operations_per_step_drop_to_one_per_group(job):
    for rank, r in sorted(job.items()):
        # 6 x 2 small linear tensors + wide (weight alone, bias) + head (2) + scale + unused = 18
        assert r["tensors"] == 18, r
        assert set(r["unfused_ops"]) == {18}, r["unfused_ops"]
        assert set(r["fused_ops"]) == {r["groups"]}, (r["fused_ops"], r["groups"])
        assert set(r["fused2_ops"]) == {r["groups"]}, r["fused2_ops"]
        assert r["groups"] <= 6, r["groups"]


def test_a_mismatch_names_the_parameter_not_the_bucket(job):
    for rank, r in sorted(job.items()):
        m = r["mismatch"]
        assert m["groups"] == 1, m  # the three parameters share one bucket
        assert "'DistributedOptimizer.grad.mismatch.odd'" in m["error"], m["error"]
        assert "fused" not in m["error"], m["error"]
        assert r["after_mismatch"] == "ok", r["after_mismatch"]


def test_join_stands_in_for_gradient_groups(job):
    assert job[0]["join"]["halved"], "rank 0's gradients were not averaged with rank 1's stand-in zeros"
    assert {r["join"]["last"] for r in job.values()} == {0}, [r["join"] for r in job.values()]
