"""Every collective of the 'byteps' c10d backend, for every dtype it accepts,
in a real 2-rank torchrun job (init_process_group('byteps') over env://)."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.torch import WORKERS

REDUCE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"]
REDUCE_CHECKS = ["allreduce_sum", "allreduce_avg", "broadcast", "allgather", "allgather_into_tensor",
                 "reduce_scatter_tensor", "reduce_scatter_list", "reduce", "allreduce_coalesced"]
MOVE_ONLY_DTYPES = ["int8", "int16", "bool", "complex64"]
MOVE_ONLY_CHECKS = ["broadcast_any", "allgather_any", "allreduce_delegated"]
OTHER_CHECKS = ["non_contiguous", "scalar_tensor", "larger_than_a_partition", "async_work_future",
                "many_in_flight", "max_delegated", "allgather_from_own_slot", "gather_bytes_refuses_bad_placement",
                "barrier", "objects", "backend_name"]

CHECKS = ([f"{c}[{d}]" for d in REDUCE_DTYPES for c in REDUCE_CHECKS] +
          [f"{c}[{d}]" for d in MOVE_ONLY_DTYPES for c in MOVE_ONLY_CHECKS] + OTHER_CHECKS)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    results = torchrun(os.path.join(WORKERS, "collectives.py"), nproc=2,
                       result_dir=tmp_path_factory.mktemp("collectives")).check().results
    assert sorted(results) == [0, 1], results
    return results


@pytest.mark.parametrize("check", CHECKS)
def test_collective(job, check):
    for rank, checks in job.items():
        assert checks.get(check) == "ok", f"rank {rank}: {checks.get(check)}"


def test_no_unlisted_checks(job):
    """The worker and this list agree, so no check goes unasserted."""
    assert set(job[0]) == set(CHECKS)
