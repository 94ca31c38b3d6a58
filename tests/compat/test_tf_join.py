"""Horovod's TF join() across 2 processes started by torchrun: uneven steps,
the joined rank standing in with zeros; join() eagerly, in tf.function and in
a TF 1 session; gathers after a join failing as in Horovod, then the job going
on and ending cleanly (workers/tf_join.py)."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.compat import WORKERS

CASES = ["eager_allreduce_then_join", "function_steps_then_join", "next_epoch_everyone_again",
         "join_inside_function_after_function_steps", "join_at_the_end_of_a_training_function",
         "upstream_join_allreduce", "gathers_after_join_fail_then_job_goes_on", "tf1_session_steps_then_join",
         "bpslaunch_barrier_form"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("tf_join")
    job = torchrun(os.path.join(WORKERS, "tf_join.py"), result_dir=out, env={"BYTEPS_TIMEOUT": "30"})
    return job.check(ranks=2).results


@pytest.mark.parametrize("case", CASES)
def test_case(job, case):
    for rank, result in job.items():
        assert result["cases"][case] == "ok", f"rank {rank}: {result['cases'][case]}"
