"""The C++ DDP communication hook (byteps_native.torch.register_push_pull_hook):
2 ranks train the same model with it and with the framework's own backend
(gloo on CPU, NCCL on GPUs) and end with the same parameters; its compressed
forms equal the Python compressed hooks. The CPU case runs everywhere (CI);
the CUDA case on hosts with 2 GPUs and a CUDA build."""
import os

import pytest

from tests.gpu.gpu_env import GPUS, engine_has_cuda, needs_gpus
from tests.support.jobs import torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "workers", "ddp_cpp_hook_worker.py")

pytest.importorskip("torch")


@pytest.mark.parametrize("kind", [
    "cpu",
    pytest.param("cuda", marks=[needs_gpus(2), pytest.mark.skipif(
        GPUS >= 2 and not engine_has_cuda(), reason="byteps-native was built without CUDA")]),
])
def test_cpp_hook_matches_native_ddp(tmp_path, kind):
    job = torchrun(WORKER, [kind, tmp_path], nproc=2, result_dir=tmp_path, timeout=240, gpus=True,
                   env={"NCCL_NVLS_ENABLE": "0"}).check()
    results = job.results
    assert sorted(results) == [0, 1], job.output[-6000:]
    for rank, r in sorted(results.items()):
        assert r["failures"] == [], f"rank {rank}:\n" + "\n".join(r["failures"])
