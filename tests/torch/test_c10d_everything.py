"""torch.distributed beyond the engine's collectives, on 'byteps', in a real
2-rank torchrun job: delegate ops, subgroups, barrier as a fence, sequence
numbers, inference mode, DDP bucket names/priorities, one name for large tensors, PowerSGD vs gloo."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.torch import WORKERS

CHECKS = ["reduce_ops", "small_dtypes", "gather_scatter", "all_to_all", "point_to_point", "sparse_allreduce",
          "subgroups", "objects", "barrier_is_fence", "sequence_numbers", "inference_mode",
          "ddp_bucket_names_and_priorities", "large_tensors_keep_one_name", "powersgd_matches_gloo"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    results = torchrun(os.path.join(WORKERS, "c10d_everything.py"), nproc=2,
                       result_dir=tmp_path_factory.mktemp("everything")).check().results
    assert sorted(results) == [0, 1], results
    return results


@pytest.mark.parametrize("check", CHECKS)
def test_everything(job, check):
    for rank, checks in job.items():
        assert checks.get(check) == "ok", f"rank {rank}: {checks.get(check)}"


def test_no_unlisted_checks(job):
    assert set(job[0]) == set(CHECKS)
