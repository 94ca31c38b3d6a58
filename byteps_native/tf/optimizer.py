"""``horovod.tensorflow.DistributedOptimizer``: TF 2 has only Keras
optimizers, so it is byteps_native.tf.keras's, with Horovod's TF signature.
Keras is imported at the first call, not with byteps_native.tf (importing it
loads Keras, and picks Keras 2 or 3 for the process)."""
from byteps_native.tf.compression import Compression
from byteps_native.tf.reduce_ops import Average


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=None, scale_local_gradients=True):
    """``horovod.tensorflow.DistributedOptimizer`` / ``byteps.tensorflow.DistributedOptimizer``
    for a Keras optimizer (TF 2 has no other kind): see byteps_native.tf.keras."""
    from byteps_native.tf.keras.optimizer import DistributedOptimizer as keras_distributed
    return keras_distributed(optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
                             compression=compression, sparse_as_dense=sparse_as_dense,
                             gradient_predivide_factor=gradient_predivide_factor, op=op,
                             backward_passes_per_step=backward_passes_per_step,
                             average_aggregated_gradients=average_aggregated_gradients)
