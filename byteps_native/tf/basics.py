"""Horovod's and BytePS's capability and topology queries for TF, with the
answers that hold here, and BytePS calls the engine makes unnecessary."""
import tensorflow as tf

from byteps_native.tf import engine


def cross_size():
    return engine.size() // max(1, engine.local_size())


def cross_rank():
    return engine.rank() // max(1, engine.local_size())


def is_homogeneous():
    return True


def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False  # the TF op has a CPU kernel only (docs/tf.md)


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Accepted; the engine's own trace is BYTEPS_TRACE_ON (docs/env.md)."""


def stop_timeline():
    """Accepted; see start_timeline."""


def rank_op(name=None, process_set=None):
    return tf.constant(engine.rank(), tf.int32)


def local_rank_op(name=None):
    return tf.constant(engine.local_rank(), tf.int32)


def size_op(name=None, process_set=None):
    return tf.constant(engine.size(), tf.int32)


def local_size_op(name=None):
    return tf.constant(engine.local_size(), tf.int32)


def process_set_included_op(process_set=None, name=None):
    return tf.constant(1, tf.int32)


def check_num_rank_power_of_2(num_rank):
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


def suspend():
    """BytePS elastic suspend: stops the engine (resume() starts it again)."""
    engine.shutdown()


def resume(num_workers=None, num_servers=None, global_rank=None, context=None):
    engine.init()


def get_pushpull_speed():
    return engine.stats()


class ProcessSet:
    def __init__(self, ranks=None):
        self.ranks = list(ranks) if ranks is not None else None
        self.process_set_id = 0 if ranks is None else None

    def included(self):
        return True

    def size(self):
        return engine.size()

    def rank(self):
        return engine.rank()


global_process_set = ProcessSet()


def add_process_set(process_set):
    raise NotImplementedError("byteps_native supports only the global process set; run one job per subset")


def remove_process_set(process_set):
    raise NotImplementedError("byteps_native supports only the global process set; run one job per subset")
