"""Horovod's and BytePS's torch API (collectives, op=, Adasum, optimizer
options, BytePS's DistributedDataParallel) across 2 torchrun processes."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.compat import WORKERS

CASES = ["allreduce_ops", "adasum", "allgather", "broadcast", "alltoall", "reducescatter", "join_and_barrier", "join_uneven_batches", "process_sets",
         "built_flags", "optimizer_options", "staleness_needs_async", "distributed_data_parallel", "missing_name_says_what_instead", "sync_batch_norm",
         "mixed_devices_fail_on_every_rank", "group_on_two_devices_fails_where_submitted",
         "duplicate_name_while_not_synchronized"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_api")
    job = torchrun(os.path.join(WORKERS, "torch_api.py"), result_dir=out, env={"BYTEPS_TIMEOUT": "20"})
    return job.check(ranks=2).results


@pytest.mark.parametrize("case", CASES)
def test_case(job, case):
    for rank, result in job.items():
        assert result["cases"][case] == "ok", f"rank {rank}: {result['cases'][case]}"
