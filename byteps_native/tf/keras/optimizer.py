"""Keras 3 DistributedOptimizer: gradients are averaged over processes before
the wrapped optimizer applies them (Horovod-style, one device per process).

Do not use it under a tf.distribute strategy whose cross-device ops already
reduce across processes (BytePSOps): gradients would be reduced twice.
"""
from byteps_native.tf.api import push_pull_gradients

_wrapped_classes = {}


def _distributed_class(base):
    """A subclass of `base` whose apply() reduces first (one class per base)."""
    if base in _wrapped_classes:
        return _wrapped_classes[base]

    def apply(self, grads, trainable_variables=None):
        variables = trainable_variables
        if variables is None:
            variables = self._trainable_variables if self.built else None
        grads = push_pull_gradients(list(grads), list(variables) if variables is not None else None,
                                    average=self._bps_average, label="bps.tf.keras.grad")
        return base.apply(self, grads, trainable_variables)

    cls = type(base.__name__, (base,), {
        "apply": apply,
        "__doc__": f"{base.__name__} whose gradients are averaged across BytePS processes.",
        "_bps_average": True,
    })
    _wrapped_classes[base] = cls
    return cls


def DistributedOptimizer(optimizer, average=True):  # pylint: disable=invalid-name
    """Return a new optimizer of the same class and config that reduces
    gradients across processes in ``apply``/``apply_gradients``.

    The wrapped optimizer must not have been built yet (its slot state is not
    carried over).
    """
    cls = _distributed_class(type(optimizer))
    distributed = cls.from_config(optimizer.get_config())
    distributed._bps_average = bool(average)
    return distributed
