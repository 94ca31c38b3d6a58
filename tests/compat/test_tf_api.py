"""Horovod's and BytePS's TF and Keras API across 2 processes started by
torchrun: the TF engine joins torchrun's job (no bpslaunch needed)."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.compat import WORKERS

CASES = ["joined_torchrun_job", "allreduce_ops", "adasum", "allgather", "alltoall", "reducescatter",
         "flags_and_join", "keras_fit_with_options", "tape_options", "keras_load_model", "missing_names"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("tf_api")
    job = torchrun(os.path.join(WORKERS, "tf_api.py"), result_dir=out, env={"BYTEPS_TIMEOUT": "30"})
    return job.check(ranks=2).results


@pytest.mark.parametrize("case", CASES)
def test_case(job, case):
    for rank, result in job.items():
        assert result["cases"][case] == "ok", f"rank {rank}: {result['cases'][case]}"
