"""Horovod's and BytePS's capability and topology queries that have a fixed
answer here, and BytePS calls that the engine makes unnecessary."""
import json

from byteps_native.horovod_basics import (  # noqa: F401  (re-exported)
    ccl_built, ddl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
    nccl_built, rocm_built, start_timeline, stop_timeline)
from byteps_native._runtime import library
from byteps_native.torch import engine
from byteps_native.torch.engine import cross_rank, cross_size, is_homogeneous, is_initialized  # noqa: F401


def cuda_built():
    """True when this build's torch adapter handles CUDA tensors."""
    return library.capabilities()["cuda"]


def declare(name):
    """BytePS pre-declared tensor names so keys matched across workers; the
    engine derives keys from names, so there is nothing to declare."""
    return name


def suspend():
    """BytePS elastic suspend: stops the engine (resume() starts it again)."""
    engine.shutdown()


def resume(num_workers=None, num_servers=None, global_rank=None, context=None):
    """BytePS elastic resume: restarts the engine from the launcher's variables."""
    engine.init()


def byteps_torch_set_num_grads(num_grads):
    """BytePS bookkeeping for its grouped push_pull; not needed here."""
    return num_grads


def get_pushpull_speed():
    """BytePS's (timestamp, MB/s) of recent push_pulls, from the engine counters."""
    return json.loads(library.stats_json())
