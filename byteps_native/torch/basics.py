"""Horovod's and BytePS's capability and topology queries that have a fixed
answer here, and BytePS calls that the engine makes unnecessary."""
import torch

from byteps_native.torch import ops
from byteps_native.torch.extension import _c10d


def is_initialized():
    return bool(_c10d.initialized())


def cross_size():
    """Number of machines (Horovod: processes with the same local rank)."""
    return ops.size() // max(1, ops.local_size())


def cross_rank():
    """This process's machine index."""
    return ops.rank() // max(1, ops.local_size())


def is_homogeneous():
    return True


def mpi_threads_supported():
    return False  # no MPI: the engine runs its own threads, never MPI's


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """0 like Horovod without NCCL: the GPU path stages through pinned host memory."""
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True when this build's torch adapter handles CUDA tensors."""
    return bool(torch.cuda.is_available() and "cuda" in _c10d.build_info().lower())


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Accepted; the engine's own trace is BYTEPS_TRACE_ON (docs/env.md)."""


def stop_timeline():
    """Accepted; see start_timeline."""


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
