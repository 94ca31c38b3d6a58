"""The Horovod-style API under both launchers: torchrun (bps.init() reads
RANK/WORLD_SIZE/MASTER_ADDR) and bpslaunch (DMLC_* variables, a dedicated server)."""
import os
import subprocess
import sys

import pytest

from tests.support.jobs import job_env, torchrun
from tests.support.paths import REPO
from tests.support.results import collect
from tests.torch import WORKERS

TOLERANCE = {"plain": 1e-5, "two_passes": 1e-5, "fp16": 2e-2}
API_CASES = ["push_pull_values", "handles", "poll_until_done", "broadcast_object", "topology"]


def bpslaunch(result_dir, worker, local_workers, servers, timeout=240):
    cmd = [sys.executable, "-m", "byteps_native.launch", "--local-workers", str(local_workers),
           "--servers", str(servers), "--", sys.executable, os.path.join(WORKERS, worker)]
    proc = subprocess.run(cmd, env=job_env(result_dir=result_dir), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"bpslaunch failed ({proc.returncode}):\n{proc.stderr[-8000:]}"
    return collect(result_dir)


@pytest.fixture(scope="module", params=["torchrun", "bpslaunch"])
def job(request, tmp_path_factory):
    result_dir = tmp_path_factory.mktemp(request.param)
    if request.param == "torchrun":
        results = torchrun(os.path.join(WORKERS, "horovod_api.py"), nproc=2, result_dir=result_dir).check().results
    else:
        results = bpslaunch(result_dir, "horovod_api.py", local_workers=2, servers=1)
    assert sorted(results) == [0, 1], results
    assert {r["launcher"] for r in results.values()} == {request.param}
    return results


@pytest.mark.parametrize("variant", sorted(TOLERANCE))
def test_distributed_optimizer_parity(job, variant):
    for rank, result in job.items():
        assert result[variant] < TOLERANCE[variant], f"rank {rank}: max |param - reference| = {result[variant]}"


@pytest.mark.parametrize("case", API_CASES)
def test_api(job, case):
    for rank, result in job.items():
        assert result["api"][case] == "ok", f"rank {rank}: {result['api'][case]}"
