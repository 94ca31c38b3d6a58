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
