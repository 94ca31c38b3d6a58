"""What this host offers the GPU tests, and the skip reasons when it does not."""
import os

import pytest


def gpu_count():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.device_count()
    except Exception:
        pass
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def engine_has_cuda():
    try:
        from byteps_native._runtime import library
        return library.capabilities()["cuda"]
    except Exception:
        return False


GPUS = gpu_count()
NO_GPU = "no CUDA GPU on this host (CI has none): run scripts/gpu_suite.sh on a GPU machine"

requires_gpu = pytest.mark.skipif(GPUS == 0, reason=NO_GPU)
requires_cuda_build = pytest.mark.skipif(
    not engine_has_cuda(), reason="byteps-native was built without CUDA (see `python -m byteps_native.info`)")


# TEST_SHARE_GPU=1: tests that honour it put their ranks on one GPU when the
# host has too few (a one-GPU lease trying multi-rank code paths). Their
# figures and passes are not the layout's: report them as shared-GPU runs.
SHARE_GPU = os.environ.get("TEST_SHARE_GPU") == "1"


def needs_gpus(n):
    return pytest.mark.skipif(GPUS < n, reason=f"needs {n} GPUs, this host has {GPUS}")


def topologies(max_gpus=None):
    """(machines, local ranks) pairs this host can run: local ranks of one
    emulated machine need distinct GPUs (NCCL refuses two ranks on one GPU);
    single-rank machines may share one."""
    out = []
    for machines, local in [(1, 1), (2, 1), (1, 2), (2, 2), (1, 4)]:
        need = machines * local if local > 1 else 1
        marks = [needs_gpus(need)]
        out.append(pytest.param(machines, local, id=f"{machines}x{local}", marks=marks))
    return out
