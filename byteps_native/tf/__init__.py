"""TensorFlow adapter of byteps-native.

* ``BytePSOps``: cross-device ops for ``tf.distribute.MirroredStrategy`` that
  reduce across machines (one process per machine, local devices mirrored).
* Horovod-style API: ``init``, ``size``, ``rank``, ``push_pull``,
  ``broadcast``, ``broadcast_variables``, ``DistributedGradientTape``; Keras
  pieces in ``byteps_native.tf.keras``.

Importing checks that the op library matches the running TensorFlow.
"""
from byteps_native.tf.api import (DistributedGradientTape, broadcast, broadcast_variables, init,
                                  is_initialized, local_rank, local_size, push_pull,
                                  push_pull_gradients, rank, shutdown, size)
from byteps_native.tf.cross_device_ops import BytePSOps
from byteps_native.tf.engine import stats

__all__ = ["BytePSOps", "stats", "init", "shutdown", "is_initialized", "size", "rank", "local_rank",
           "local_size", "push_pull", "push_pull_gradients", "broadcast", "broadcast_variables",
           "DistributedGradientTape"]

# ---- Horovod / BytePS API compatibility (owned by the "compat" helper; issue 18) ----
from byteps_native.tf import util  # noqa: E402,F401  (elastic: imported on first use, it loads Keras)
from byteps_native.tf.api import (  # noqa: E402,F401
    PartialDistributedGradientTape, broadcast_, broadcast_global_variables)
from byteps_native.tf.optimizer import DistributedOptimizer  # noqa: E402,F401
from byteps_native.tf.util import _executing_eagerly, refs_to_vars, vars_to_refs  # noqa: E402,F401
from byteps_native.tf.basics import (  # noqa: E402,F401
    ProcessSet, add_process_set, ccl_built, check_num_rank_power_of_2, cross_rank, cross_size, cuda_built,
    ddl_built, get_pushpull_speed, global_process_set, gloo_built, gloo_enabled, is_homogeneous,
    local_rank_op, local_size_op, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    process_set_included_op, rank_op, remove_process_set, resume, rocm_built, size_op, start_timeline,
    stop_timeline, suspend)
from byteps_native.tf.collectives import (  # noqa: E402,F401
    allgather, allgather_object, allreduce, alltoall, barrier, broadcast_object, broadcast_object_fn,
    grouped_allgather, grouped_allreduce, grouped_reducescatter, join, reducescatter)
from byteps_native.tf.compression import Compression  # noqa: E402,F401
from byteps_native.tf.hooks import BroadcastGlobalVariablesHook  # noqa: E402,F401
from byteps_native.tf.reduce_ops import (  # noqa: E402,F401
    Adasum, Average, Max, Min, Product, Sum, handle_average_backwards_compatibility)
from byteps_native.tf.missing_names import make_getattr as _make_getattr  # noqa: E402

__getattr__ = _make_getattr("byteps_native.tf")
# ---- end of the compatibility block ----
