"""Keras 3 DistributedOptimizer: gradients are averaged over processes before
the wrapped optimizer applies them (Horovod-style, one device per process).

Do not use it under a tf.distribute strategy whose cross-device ops already
reduce across processes (BytePSOps): gradients would be reduced twice.

backward_passes_per_step=N uses Keras 3's own gradient accumulation
(``gradient_accumulation_steps``): the update is applied every N steps with
the mean of the N gradients (times N with average_aggregated_gradients=False,
Horovod's default, which sums them). Gradients are reduced across processes
every step: the same result as Horovod's reduce-every-N, with N times the
traffic (docs/migration.md).
"""
from byteps_native.tf.api import push_pull_gradients
from byteps_native.tf.compression import Compression
from byteps_native.tf.reduce_ops import Average, resolve_op

_wrapped_classes = {}


def _distributed_class(base):
    """A subclass of `base` whose apply() reduces first (one class per base).
    It keeps the base's module and name, so saved models load as the base class."""
    if base in _wrapped_classes:
        return _wrapped_classes[base]

    def apply(self, grads, trainable_variables=None):
        variables = trainable_variables
        if variables is None:
            variables = self._trainable_variables if self.built else None
        grads = push_pull_gradients(list(grads), list(variables) if variables is not None else None,
                                    label="bps.tf.keras.grad", compression=self._bps_compression,
                                    op=self._bps_op, gradient_predivide_factor=self._bps_predivide)
        if self._bps_scale != 1.0:
            grads = [None if g is None else g * self._bps_scale for g in grads]
        return base.apply(self, grads, trainable_variables)

    cls = type(base.__name__, (base,), {
        "apply": apply,
        "__doc__": f"{base.__name__} whose gradients are averaged across BytePS processes.",
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "_bps_op": Average,
        "_bps_compression": Compression.none,
        "_bps_predivide": 1.0,
        "_bps_scale": 1.0,
    })
    _wrapped_classes[base] = cls
    return cls


def make_distributed(optimizer, compression=Compression.none, op=Average, gradient_predivide_factor=1.0,
                     gradient_scale=1.0):
    """Turn `optimizer` itself (built or not, its state kept) into a distributed one."""
    optimizer.__class__ = _distributed_class(type(optimizer))
    optimizer._bps_op = op
    optimizer._bps_compression = compression
    optimizer._bps_predivide = float(gradient_predivide_factor)
    optimizer._bps_scale = float(gradient_scale)
    return optimizer


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0,
                         groups=None, process_set=None, scale_local_gradients=True, average=None):
    """Return a new optimizer of the same class and config that reduces
    gradients across processes in ``apply``/``apply_gradients``.

    Horovod's and BytePS's arguments; `device_*`, `num_groups`, `groups`,
    `sparse_as_dense` are accepted (CPU op, the adapter fuses by itself, sparse
    gradients are reduced densely). The wrapped optimizer must not have been
    built yet (its slot state is not carried over; see load_model for that).
    """
    if process_set is not None and getattr(process_set, "ranks", None) is not None:
        raise NotImplementedError("byteps_native supports only the global process set")
    op = resolve_op(None, average, "DistributedOptimizer") if average is not None else \
        resolve_op(op, None, "DistributedOptimizer")
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    config = optimizer.get_config()
    if name:
        config["name"] = name
    scale = 1.0
    if backward_passes_per_step > 1:
        config["gradient_accumulation_steps"] = int(backward_passes_per_step)
        if not average_aggregated_gradients:
            scale = float(backward_passes_per_step)  # Keras averages the N gradients, Horovod sums them
    distributed = type(optimizer).from_config(config)
    return make_distributed(distributed, compression, op, gradient_predivide_factor, scale)
