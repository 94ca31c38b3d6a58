"""Horovod's capability and topology queries, framework-neutral. The answers
are fixed here (no MPI, Gloo, DDL, oneCCL or ROCm; GPU tensors stage through
pinned host memory rather than NCCL); byteps_native/torch/basics.py and
byteps_native/tf/basics.py add what depends on the framework."""


def cross_size(size, local_size):
    """Number of machines (Horovod: processes with the same local rank)."""
    return size // max(1, local_size)


def cross_rank(rank, local_size):
    """This process's machine index."""
    return rank // max(1, local_size)


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


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Accepted; the engine's own trace is BYTEPS_TRACE_ON (docs/env.md)."""


def stop_timeline():
    """Accepted; see start_timeline."""


def check_num_rank_power_of_2(num_rank):
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0
