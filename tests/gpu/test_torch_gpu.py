"""The torch backend and DDP hook on CUDA tensors: every dtype and odd sizes
through all_reduce (on a side stream), the set-up collectives DDP uses, direct
push_pull futures, and DDP parity with a single-process reference -- on one
machine and on two emulated machines (two torchrun "nodes" on this host, each
its own group of local ranks with a colocated server)."""
import json
import os
import socket
import subprocess
import sys

import pytest

from gpu_env import GPUS, NO_GPU, needs_gpus, requires_cuda_build

if GPUS == 0:
    pytest.skip(NO_GPU, allow_module_level=True)
pytestmark = [requires_cuda_build]

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "workers", "torch_gpu_worker.py")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path, mode, machines, local, timeout=300, env=None):
    port = _free_port()
    base = dict(os.environ, BYTEPS_TIMEOUT="60", BYTEPS_PARTITION_BYTES="262144", NCCL_NVLS_ENABLE="0",
                PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    procs = []
    for m in range(machines):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(machines), "--node_rank", str(m),
               "--nproc_per_node", str(local), "--master_addr", "127.0.0.1", "--master_port", str(port),
               WORKER, mode, str(tmp_path)]
        procs.append(subprocess.Popen(cmd, env=dict(base, GPU_OFFSET=str(m * local)), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        logs.append(out)
        assert p.returncode == 0, f"torchrun failed ({p.returncode}):\n{out[-6000:]}"
    results = {}
    for name in os.listdir(str(tmp_path)):
        if name.startswith("result."):
            with open(os.path.join(str(tmp_path), name)) as f:
                results[int(name.split(".")[1])] = json.load(f)
    assert len(results) == machines * local, "\n".join(logs)[-6000:]
    return results


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
