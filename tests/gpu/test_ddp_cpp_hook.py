"""The C++ DDP communication hook (byteps_native.torch.register_push_pull_hook):
2 ranks train the same model with it and with the framework's own backend
(gloo on CPU, NCCL on GPUs) and end with the same parameters; its compressed
forms equal the Python compressed hooks. The CPU case runs everywhere (CI);
the CUDA case on hosts with 2 GPUs and a CUDA build."""
import json
import os
import socket
import subprocess
import sys

import pytest

from gpu_env import GPUS, engine_has_cuda, needs_gpus

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(HERE, "workers", "ddp_cpp_hook_worker.py")

pytest.importorskip("torch")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", [
    "cpu",
    pytest.param("cuda", marks=[needs_gpus(2), pytest.mark.skipif(
        GPUS >= 2 and not engine_has_cuda(), reason="byteps-native was built without CUDA")]),
])
def test_cpp_hook_matches_native_ddp(tmp_path, kind):
    env = dict(os.environ, BYTEPS_TIMEOUT="60", OMP_NUM_THREADS="1", NCCL_NVLS_ENABLE="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), WORKER, kind, str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    results = {}
    for rank in range(2):
        with open(os.path.join(str(tmp_path), f"result.{rank}.json")) as f:
            results[rank] = json.load(f)
    for rank, r in sorted(results.items()):
        assert r["failures"] == [], f"rank {rank}:\n" + "\n".join(r["failures"])
