"""Horovod-style Keras API for byteps-native: Keras 3, and Keras 2 (tf_keras,
or tf.keras under TF_USE_LEGACY_KERAS=1; see byteps_native/tf/keras/flavor.py)."""
from byteps_native.tf.api import (broadcast, broadcast_variables, init, is_initialized, local_rank,
                                  local_size, push_pull, rank, shutdown, size)
from byteps_native.tf.keras.callbacks import BroadcastGlobalVariablesCallback, MetricAverageCallback
from byteps_native.tf.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer

__all__ = ["init", "shutdown", "is_initialized", "size", "rank", "local_rank", "local_size",
           "push_pull", "broadcast", "broadcast_variables", "DistributedOptimizer", "PartialDistributedOptimizer",
           "BroadcastGlobalVariablesCallback", "MetricAverageCallback"]

# ---- Horovod / BytePS API compatibility (owned by the "compat" helper; issue 18) ----
from byteps_native.tf.keras import callbacks, elastic  # noqa: E402,F401
from byteps_native.tf.basics import (  # noqa: E402,F401
    ProcessSet, add_process_set, ccl_built, cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
    gloo_built, gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, remove_process_set,
    rocm_built, start_timeline, stop_timeline)
from byteps_native.tf.api import broadcast_global_variables  # noqa: E402,F401
from byteps_native.tf.compression import Compression  # noqa: E402,F401
from byteps_native.tf.engine import is_initialized  # noqa: E402,F401
from byteps_native.tf.keras.functions import allgather, allreduce, load_model, reducescatter  # noqa: E402,F401
from byteps_native.tf.reduce_ops import Adasum, Average, Sum  # noqa: E402,F401
from byteps_native.tf.missing_names import make_getattr as _make_getattr  # noqa: E402

__getattr__ = _make_getattr("byteps_native.tf.keras")
# ---- end of the compatibility block ----
