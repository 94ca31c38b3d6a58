"""Compression through the servers from torch (issue 29): the DDP hook with
onebit and DistributedOptimizer with top-k, on 2 machines (torchrun agents,
colocated servers), against the NumPy reference over several steps (error
feedback carried between them)."""
import os
import sys

import numpy as np

from launch import torchrun_machines

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core"))
from compression_reference import job_result  # noqa: E402

N, STEPS = 50000, 3


def gradients():
    return [[np.random.default_rng(100 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
            for step in range(STEPS)]


def test_ddp_hook_and_distributed_optimizer_match_the_reference(tmp_path):
    results = torchrun_machines(tmp_path, "compression.py", machines=2, nproc_per_machine=1,
                                env={"BYTEPS_TIMEOUT": "60"})
    assert sorted(results) == [0, 1], results
    # DDP averages: the decompressed answer over 2 (exact in float32). The
    # tensor fits one partition, so the name (and 2 servers) does not matter.
    hook = [s / np.float32(2) for s in job_result("onebit", gradients(), "ddp", 4096000, 2)]
    steps = [s / np.float32(2) for s in job_result("topk:ratio=0.01", gradients(), "opt", 4096000, 2)]
    params = np.cumsum([-s for s in steps], axis=0, dtype=np.float32)
    for rank, res in results.items():
        for step in range(STEPS):
            np.testing.assert_allclose(np.array(res["hook"][step], np.float32), hook[step], rtol=2e-6, atol=1e-6,
                                       err_msg=f"hook rank {rank} step {step}")
            np.testing.assert_allclose(np.array(res["optimizer"][step], np.float32), params[step], rtol=1e-5,
                                       atol=1e-6, err_msg=f"optimizer rank {rank} step {step}")
