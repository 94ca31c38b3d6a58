"""Compression through the servers from torch (issue 29), on 2 machines
(torchrun agents, colocated servers), against the NumPy reference over
several steps (error feedback carried between them): the Python DDP hook, the
C++ DDP hook (register_push_pull_hook(compression=...)), ranks mixing the
two, and DistributedOptimizer; C++ hooks that disagree fail on every rank."""
import os

import numpy as np
import pytest

from tests.core.compression_reference import job_result
from tests.support.jobs import torchrun
from tests.torch import WORKERS

N, STEPS = 50000, 3
PARTITION_BYTES, SERVERS = 256000, 2  # the host tensors' default with servers


def gradients():
    return [[np.random.default_rng(100 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
            for step in range(STEPS)]


def averaged(spec, name):
    """DDP averages: the decompressed answer over 2 (exact in float32)."""
    return [s / np.float32(2) for s in job_result(spec, gradients(), name, PARTITION_BYTES, SERVERS)]


@pytest.fixture(scope="module")
def exact_job(tmp_path_factory):
    results = torchrun(os.path.join(WORKERS, "compression.py"), machines=2, nproc=1, args=["exact"],
                       env={"BYTEPS_TIMEOUT": "60"}, result_dir=tmp_path_factory.mktemp("compression")).check().results
    assert sorted(results) == [0, 1], results
    return results


# The bucket's name matters to randomk only (its indices are drawn from it):
# "<prefix>ddp.bucket<index>.<dtype>.<numel>", as both hooks spell it.
@pytest.mark.parametrize("case,spec,name", [
    ("python_onebit", "onebit", "ddp.bucket0.float32.50000"),
    ("cpp_onebit", "onebit", "cpp.ddp.bucket0.float32.50000"),
    ("cpp_randomk", "randomk:ratio=0.05,seed=3", "cppr.ddp.bucket0.float32.50000"),
    ("mixed_topk", "topk:ratio=0.01", "mixed.ddp.bucket0.float32.50000"),
    ("cpp_onebit_momentum", "onebit:momentum=0.9", "cppm.ddp.bucket0.float32.50000"),
])
def test_ddp_hooks_match_the_reference(exact_job, case, spec, name):
    expect = averaged(spec, name)
    for rank, res in exact_job.items():
        for step in range(STEPS):
            # onebit's scale is summed in double precision in another order: a float32 ulp at most
            np.testing.assert_allclose(np.array(res[case][step], np.float32), expect[step], rtol=2e-6, atol=1e-6,
                                       err_msg=f"{case} rank {rank} step {step}")


@pytest.mark.parametrize("case", ["cpp_onebit_layers", "python_onebit_layers"])
def test_ddp_hooks_keep_a_onebit_scale_per_parameter(exact_job, case):
    """One bucket of two parameters whose gradients differ 1000-fold: each
    parameter's answer is onebit of that parameter alone (one slice here, so
    the bucket's layout order does not matter), not one scale for the bucket."""
    small = [[np.random.default_rng(100 * step + r + 7).standard_normal(3001).astype(np.float32) * np.float32(1e-3)
              for r in range(2)] for step in range(STEPS)]
    spec = "onebit:momentum=0.9"
    expect_p = [s / np.float32(2) for s in job_result(spec, gradients(), "p", PARTITION_BYTES, SERVERS)]
    expect_q = [s / np.float32(2) for s in job_result(spec, small, "q", PARTITION_BYTES, SERVERS)]
    for rank, res in exact_job.items():
        for step in range(STEPS):
            p, q = (np.array(g, np.float32) for g in res[case][step])
            np.testing.assert_allclose(p, expect_p[step], rtol=2e-6, atol=1e-6, err_msg=f"{case} p rank {rank}")
            np.testing.assert_allclose(q, expect_q[step], rtol=2e-6, atol=1e-9, err_msg=f"{case} q rank {rank}")
        assert np.abs(q).max() < 0.01  # one scale for the bucket would give q p's scale (~0.8)


def test_distributed_optimizer_matches_the_reference(exact_job):
    params = np.cumsum([-s for s in averaged("topk:ratio=0.01", "opt")], axis=0, dtype=np.float32)
    for rank, res in exact_job.items():
        for step in range(STEPS):
            np.testing.assert_allclose(np.array(res["optimizer"][step], np.float32), params[step], rtol=1e-5,
                                       atol=1e-6, err_msg=f"optimizer rank {rank} step {step}")


def test_cpp_hooks_that_disagree_fail_on_every_rank(tmp_path):
    results = torchrun(os.path.join(WORKERS, "compression.py"), machines=2, nproc=1, args=["disagree"],
                       env={"BYTEPS_TIMEOUT": "30"}, result_dir=tmp_path).check().results
    assert sorted(results) == [0, 1], results
    causes = {
        "other_compressor": ["'other_compressor.ddp.bucket0.float32.50000'", "ranks disagree on this tensor's "
                             "compression", "onebit", "topk (k=500)"],
        "uncompressed": ["'uncompressed.ddp.bucket0.float32.50000'", "compresses it", "sends it uncompressed"],
        # Either rank's push may come first: both descriptions, in either order.
        "other_options": ["'other_options.ddp.bucket0.float32.50000'", "ranks disagree on this tensor's compression",
                          "onebit with error feedback and nesterov momentum, server error feedback"],
    }
    for rank, res in results.items():
        for case, words in causes.items():
            for word in words:
                assert word in res[case], f"rank {rank} {case}: error does not mention {word}: {res[case]}"
    after = averaged("onebit", "after")[0][:4]
    for rank, res in results.items():
        np.testing.assert_allclose(np.array(res["after"], np.float32), after, rtol=2e-6, atol=1e-6,
                                   err_msg=f"rank {rank}: the job did not train after the refused tensors")
