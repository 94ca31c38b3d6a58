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
from byteps_native.tf.keras.gradient_reduction import GradientReduction

_wrapped_classes = {}


def distributed_class(base):
    """A subclass of `base` whose apply() reduces first (one class per base).
    It keeps the base's module and name, so saved models load as the base class."""
    if base in _wrapped_classes:
        return _wrapped_classes[base]
    if _wrapped_classes.get(getattr(base, "_bps_base", None)) is base:  # already distributed: not twice
        return base

    def apply(self, grads, trainable_variables=None):
        variables = trainable_variables
        if variables is None:
            variables = self._trainable_variables if self.built else None
        grads = self._bps_reduction.reduce(list(grads), list(variables) if variables is not None else None)
        if self._bps_scale != 1.0:
            grads = [None if g is None else g * self._bps_scale for g in grads]
        return base.apply(self, grads, trainable_variables)

    def register_local_var(self, var):
        """Horovod's: `var`'s gradient stays on this worker (not reduced)."""
        self._bps_reduction = self.__dict__.get("_bps_reduction") or GradientReduction()
        self._bps_reduction.register_local_var(var)

    cls = type(base.__name__, (base,), {
        "apply": apply,
        "register_local_var": register_local_var,
        "__doc__": f"{base.__name__} whose gradients are averaged across BytePS processes.",
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "_bps_reduction": GradientReduction(),  # from_config copies: the defaults
        "_bps_scale": 1.0,
        "_bps_base": base,
    })
    _wrapped_classes[base] = cls
    return cls


def make_distributed(optimizer, reduction, gradient_scale=1.0):
    """Turn `optimizer` itself (built or not, its state kept) into a distributed one."""
    optimizer.__class__ = distributed_class(type(optimizer))
    optimizer._bps_reduction = reduction
    optimizer._bps_scale = float(gradient_scale)
    return optimizer


def distributed_optimizer(optimizer, reduction, name=None, backward_passes_per_step=1,
                          average_aggregated_gradients=False):
    """A new optimizer of `optimizer`'s class and config that reduces in apply()."""
    config = optimizer.get_config()
    if name:
        config["name"] = name
    scale = 1.0
    if backward_passes_per_step > 1:
        config["gradient_accumulation_steps"] = int(backward_passes_per_step)
        if not average_aggregated_gradients:
            scale = float(backward_passes_per_step)  # Keras averages the N gradients, Horovod sums them
    return make_distributed(type(optimizer).from_config(config), reduction, scale)
