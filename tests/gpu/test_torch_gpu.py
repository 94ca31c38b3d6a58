"""The torch backend and DDP hook on CUDA tensors: every dtype and odd sizes
through all_reduce (on a side stream), the set-up collectives DDP uses, direct
push_pull futures, and DDP parity with a single-process reference -- on one
machine and on two emulated machines (two torchrun "nodes" on this host, each
its own group of local ranks with a colocated server)."""
import os

import pytest

from tests.gpu.gpu_env import GPUS, NO_GPU, needs_gpus, requires_cuda_build
from tests.support.jobs import torchrun as torchrun_job

if GPUS == 0:
    pytest.skip(NO_GPU, allow_module_level=True)
pytestmark = [requires_cuda_build]

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "workers", "torch_gpu_worker.py")


def torchrun(tmp_path, mode, machines, local, timeout=300, env=None):
    job = torchrun_job(WORKER, [mode, tmp_path], nproc=local, machines=machines, result_dir=tmp_path, timeout=timeout,
                       gpus=True,
                       env=dict({"BYTEPS_PARTITION_BYTES": "262144", "NCCL_NVLS_ENABLE": "0"}, **(env or {})),
                       machine_env=lambda m: {"GPU_OFFSET": str(m * local)}).check()
    assert len(job.results) == machines * local, job.output[-6000:]
    return job.results


TOPOLOGIES = [pytest.param(1, 2, id="1x2", marks=needs_gpus(2)),
              pytest.param(1, 4, id="1x4", marks=needs_gpus(4)),
              pytest.param(2, 2, id="2x2", marks=needs_gpus(4)),
              pytest.param(2, 1, id="2x1", marks=needs_gpus(2))]


@pytest.mark.parametrize("machines,local", TOPOLOGIES)
@pytest.mark.parametrize("mode", ["collectives", "ddp"])
def test_torch_on_gpu(tmp_path, mode, machines, local):
    results = torchrun(tmp_path, mode, machines, local)
    for rank, r in sorted(results.items()):
        assert r["failures"] == [], f"rank {rank}:\n" + "\n".join(r["failures"][:12])
        assert r["stats"]["queue_depth"] == 0
