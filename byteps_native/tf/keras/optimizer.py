"""Horovod's and BytePS's Keras DistributedOptimizer and
PartialDistributedOptimizer, for Keras 3 optimizers (keras3_optimizer: the
reduction runs in ``apply``) and Keras 2 ones, ``tf_keras`` or ``tf.keras``
under TF_USE_LEGACY_KERAS=1 (keras2_optimizer: it runs where gradients are
computed, as in Horovod). The optimizer's class says which."""
from byteps_native.tf.compression import Compression
from byteps_native.tf.keras import keras2_optimizer, keras3_optimizer
from byteps_native.tf.keras.flavor import is_keras2
from byteps_native.tf.keras.gradient_reduction import GradientReduction
from byteps_native.tf.reduce_ops import Average, resolve_op


def _check_process_set(process_set):
    if process_set is not None and getattr(process_set, "ranks", None) is not None:
        raise NotImplementedError("byteps_native supports only the global process set for TF")


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=None, scale_local_gradients=True, average=None):
    """Return a new optimizer of the same class and config whose gradients are
    reduced across processes before they are applied.

    Horovod's and BytePS's arguments; `device_*`, `num_groups`, `groups` are
    accepted (CPU op, the adapter fuses by itself); sparse gradients are
    reduced densely. The wrapped optimizer's state is not carried over (as in
    Horovod); load_model keeps a saved optimizer's state.
    """
    _check_process_set(process_set)
    op = resolve_op(None, average, "DistributedOptimizer") if average is not None else \
        resolve_op(op, None, "DistributedOptimizer")
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    reduction = GradientReduction(op=op, compression=compression, gradient_predivide_factor=gradient_predivide_factor,
                                  sparse_as_dense=sparse_as_dense, scale_local_gradients=scale_local_gradients)
    flavor = keras2_optimizer if is_keras2(optimizer) else keras3_optimizer
    return flavor.distributed_optimizer(optimizer, reduction, name=name,
                                        backward_passes_per_step=backward_passes_per_step,
                                        average_aggregated_gradients=average_aggregated_gradients)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False, gradient_predivide_factor=1.0,
                                op=Average, backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=None, local_layers=None, scale_local_gradients=True):
    """Horovod's: a DistributedOptimizer whose `local_layers`' trainable
    variables keep their local gradients (divided by size() when
    scale_local_gradients, as Horovod)."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError(f"local_layers must be Keras layers; got {type(layer).__name__}")
    distributed = DistributedOptimizer(optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
                                       gradient_predivide_factor=gradient_predivide_factor, op=op,
                                       backward_passes_per_step=backward_passes_per_step,
                                       average_aggregated_gradients=average_aggregated_gradients,
                                       process_set=process_set, scale_local_gradients=scale_local_gradients)
    for layer in local_layers:
        for variable in layer.trainable_weights:
            distributed.register_local_var(variable)
    return distributed


def make_distributed(optimizer, compression=Compression.none):
    """Turn a loaded model's optimizer itself (its restored state kept) into a distributed one."""
    reduction = GradientReduction(compression=compression)
    if is_keras2(optimizer):
        return keras2_optimizer.make_distributed(optimizer, reduction)
    return keras3_optimizer.make_distributed(optimizer, reduction)
