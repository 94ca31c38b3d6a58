"""Compression through the servers from TensorFlow (issue 29):
DistributedGradientTape with onebit on 2 workers and a server, against the
NumPy reference over several steps (error feedback between them)."""
import os
import sys

import numpy as np

from tf_cluster import require_success, run_job

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core"))
from compression_reference import job_result  # noqa: E402

N, STEPS = 50000, 3


def test_gradient_tape_onebit_matches_the_reference():
    outcomes = run_job("compression_worker.py", num_workers=2)
    require_success(outcomes)
    grads = [[np.random.default_rng(100 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
             for step in range(STEPS)]
    expect = [s / np.float32(2) for s in job_result("onebit", grads, "tf", 4096000, 1)]
    for o in outcomes:
        for step in range(STEPS):
            np.testing.assert_allclose(np.array(o.result["grads"][step], np.float32), expect[step], rtol=2e-6,
                                       atol=1e-6, err_msg=f"rank {o.rank} step {step}")
