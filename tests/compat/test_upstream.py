"""Horovod's own torch unit tests (tests/compat/upstream/horovod/test_torch.py,
import line swapped) with 2 processes under torchrun: the CI subset below
must pass on both ranks. The whole file, with every failure classified:

    PYTHONPATH=. python3 tests/compat/upstream/run_upstream.py -v
"""
from upstream.run_upstream import run_suite

# Tests that pass in one job, in this order. Left out until fixed (open, see
# docs/migration.md): the *_error / *_duplicate_name tests end in an engine
# timeout that fails the rest of the job, and gathers after the process-set
# tests time out.
CI_TESTS = [
    "test_horovod_allreduce", "test_horovod_allreduce_average", "test_horovod_allreduce_async_fused",
    "test_async_sparse_allreduce", "test_allgather_object", "test_compression_fp16",
]


def test_horovod_torch_unit_tests_ci_subset():
    merged, log = run_suite("horovod/test_torch.py", timeout=240,
                            tests=[f"TorchTests::{name}" for name in CI_TESTS])
    assert merged is not None, log[-5000:]
    assert sorted(merged) == sorted(CI_TESTS), (sorted(merged), log[-3000:])
    failed = {name: outcome for name, outcome in merged.items() if outcome[0] != "passed"}
    assert not failed, failed
