"""Horovod's and BytePS's capability and topology queries that have a fixed
answer here, and BytePS calls that the engine makes unnecessary."""
from byteps_native.horovod_basics import (  # noqa: F401  (re-exported)
    ccl_built, ddl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
    nccl_built, rocm_built, start_timeline, stop_timeline)
from byteps_native.torch import ops
from byteps_native.torch.extension import _c10d


def is_initialized():
    return bool(_c10d.initialized())


def cross_size():
    return _c10d.cross_size()  # machines may differ in size (issue 29)


def cross_rank():
    return _c10d.cross_rank()


def is_homogeneous():
    return _c10d.is_homogeneous()


def cuda_built():
    """True when this build's torch adapter handles CUDA tensors."""
    info = _c10d.build_info().lower()  # "...; cuda: no" or "...; cuda: <version>"
    return "cuda:" in info and "cuda: no" not in info


def declare(name):
    """BytePS pre-declared tensor names so keys matched across workers; the
    engine derives keys from names, so there is nothing to declare."""
    return name


def suspend():
    """BytePS elastic suspend: stops the engine (resume() starts it again)."""
    ops.shutdown()


def resume(num_workers=None, num_servers=None, global_rank=None, context=None):
    """BytePS elastic resume: restarts the engine from the launcher's variables."""
    ops.init()


def byteps_torch_set_num_grads(num_grads):
    """BytePS bookkeeping for its grouped push_pull; not needed here."""
    return num_grads


def get_pushpull_speed():
    """BytePS's (timestamp, MB/s) of recent push_pulls, from the engine counters."""
    from byteps_native.core import stats
    return stats()
