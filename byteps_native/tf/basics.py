"""Horovod's and BytePS's capability and topology queries for TF, with the
answers that hold here, and BytePS calls the engine makes unnecessary."""
import tensorflow as tf

from byteps_native.horovod_basics import (  # noqa: F401  (re-exported)
    ccl_built, check_num_rank_power_of_2, ddl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, rocm_built, start_timeline, stop_timeline)
from byteps_native.tf import engine


def cross_size():
    return engine.cross_size()  # machines may differ in size (issue 29)


def cross_rank():
    return engine.cross_rank()


def is_homogeneous():
    return engine.is_homogeneous()


def cuda_built():
    return False  # the TF op has a CPU kernel only (docs/tf.md)


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
