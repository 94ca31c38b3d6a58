"""Horovod-style Keras API for byteps-native (Keras 3)."""
from byteps_native.tf.api import (broadcast, broadcast_variables, init, is_initialized, local_rank,
                                  local_size, push_pull, rank, shutdown, size)
from byteps_native.tf.keras.callbacks import BroadcastGlobalVariablesCallback, MetricAverageCallback
from byteps_native.tf.keras.optimizer import DistributedOptimizer

__all__ = ["init", "shutdown", "is_initialized", "size", "rank", "local_rank", "local_size",
           "push_pull", "broadcast", "broadcast_variables", "DistributedOptimizer",
           "BroadcastGlobalVariablesCallback", "MetricAverageCallback"]
