"""Horovod's ``hvd.elastic`` for Keras: see byteps_native.tf.elastic."""
from byteps_native.tf.elastic import (  # noqa: F401
    CommitStateCallback, HorovodInternalError, HostsUpdatedInterrupt, KerasState, ObjectState, State,
    TensorFlowKerasState, UpdateBatchStateCallback, UpdateEpochStateCallback, run)
