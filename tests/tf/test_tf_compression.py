"""Compression through the servers from TensorFlow (issue 29), on 2 workers
and a server: DistributedGradientTape, the Keras DistributedOptimizer and
BytePSOps, each with the compressor's options (worker momentum, nesterov,
server error feedback) against the NumPy reference over several steps (the
error feedback and momentum carried between them); ranks that disagree on
the options fail on every rank, naming both."""
import json

import numpy as np
import pytest

from tests.core.compression_reference import job_result
from tests.support.jobs import require_success
from tests.tf import run_job

N, STEPS = 50000, 3


@pytest.mark.parametrize("face,kind,options,spec", [
    ("tape", "onebit", {}, "onebit"),
    ("tape", "onebit", {"momentum": 0.9}, "onebit:momentum=0.9"),
    ("optimizer", "topk", {"ratio": 0.01, "momentum": 0.8, "nesterov": False, "server_error_feedback": True},
     "topk:ratio=0.01,momentum=0.8,nesterov=0,server_ef=1"),
    ("bytepsops", "onebit", {"momentum": 0.9, "server_error_feedback": True}, "onebit:momentum=0.9,server_ef=1"),
])
def test_faces_match_the_reference(face, kind, options, spec):
    outcomes = run_job("compression_worker.py", num_workers=2, args=[face, kind, json.dumps(options)])
    require_success(outcomes)
    grads = [[np.random.default_rng(100 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
             for step in range(STEPS)]
    expect = [s / np.float32(2) for s in job_result(spec, grads, "tf", 256000, 1)]
    for o in outcomes:
        assert o.result["spec"] == spec
        for step in range(STEPS):
            np.testing.assert_allclose(np.array(o.result["grads"][step], np.float32), expect[step], rtol=2e-6,
                                       atol=1e-6, err_msg=f"{face} rank {o.rank} step {step}")


def test_a_fused_buffer_keeps_a_onebit_scale_per_variable():
    """BytePSOps.batch_reduce of two gradients 1000-fold apart, fused into one
    engine tensor (byteps_native/tf/fusion.py): each
    answer is onebit of that gradient alone (one slice: the order inside the
    buffer does not matter), not one scale for the buffer."""
    outcomes = run_job("compression_worker.py", num_workers=2, args=["fused", "onebit", json.dumps({"momentum": 0.9})])
    require_success(outcomes)
    big = [[np.random.default_rng(100 * step + r).standard_normal(N).astype(np.float32) for r in range(2)]
           for step in range(STEPS)]
    small = [[np.random.default_rng(100 * step + r + 7).standard_normal(3001).astype(np.float32) * np.float32(1e-3)
              for r in range(2)] for step in range(STEPS)]
    expect_w = [s / np.float32(2) for s in job_result("onebit:momentum=0.9", big, "w", 256000, 1)]
    expect_v = [s / np.float32(2) for s in job_result("onebit:momentum=0.9", small, "v", 256000, 1)]
    for o in outcomes:
        for step in range(STEPS):
            gw, gv = (np.array(g, np.float32) for g in o.result["grads"][step])
            np.testing.assert_allclose(gw, expect_w[step], rtol=2e-6, atol=1e-6, err_msg=f"w rank {o.rank}")
            np.testing.assert_allclose(gv, expect_v[step], rtol=2e-6, atol=1e-9, err_msg=f"v rank {o.rank}")


def test_ranks_that_disagree_on_the_options_fail_on_every_rank():
    outcomes = run_job("compression_worker.py", num_workers=2,
                       args=["disagree", "onebit", json.dumps({"momentum": 0.9, "server_error_feedback": True})],
                       env={"BYTEPS_TIMEOUT": "30"})
    require_success(outcomes)
    for o in outcomes:
        error = o.result["error"]
        assert error, f"rank {o.rank} reported no error"
        assert "ranks disagree on this tensor's compression" in error, (o.rank, error)
        assert "nesterov momentum, server error feedback" in error, (o.rank, error)
