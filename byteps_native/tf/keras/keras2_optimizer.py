"""Keras 2 (tf_keras) DistributedOptimizer, as Horovod's: gradients are
reduced where they are computed, in ``compute_gradients`` /
``_compute_gradients`` (what ``minimize`` and so ``model.fit`` call) and in
``get_gradients`` (legacy OptimizerV2), so that ``apply_gradients`` gets
reduced gradients. Both of tf_keras's optimizer families are covered: the
default ``tf_keras.optimizers.Optimizer`` and ``tf_keras.optimizers.legacy``
(OptimizerV2). A script that computes gradients itself and only calls
``apply_gradients`` should use DistributedGradientTape, as with Horovod.

``_aggregate_gradients`` (OptimizerV2's cross-replica step inside
``apply_gradients``) is left as it is: it sums over the replicas of a
tf.distribute strategy, not over processes.
"""
from byteps_native.tf.keras.gradient_accumulation import LocalGradientAccumulator
from byteps_native.tf.keras.gradient_reduction import GradientReduction

_wrapped_classes = {}


def _grads_and_vars_list(grads_and_vars):
    return list(grads_and_vars)  # zip objects are consumed once; the caller may read them twice


class _DistributedKeras2:
    """Methods of every distributed Keras 2 optimizer class (see distributed_class)."""

    _bps_reduction = GradientReduction()  # from_config copies get these defaults
    _agg_helper = None

    def register_local_var(self, var):
        """Horovod's: `var`'s gradient stays on this worker (not reduced)."""
        if "_bps_reduction" not in self.__dict__:
            self._bps_reduction = GradientReduction()
        self._bps_reduction.register_local_var(var)

    def _bps_reduce(self, grads, variables):
        if self._agg_helper is not None:
            return self._agg_helper.compute_gradients(grads, variables)
        return self._bps_reduction.reduce(grads, variables)

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        base = self._bps_base
        if hasattr(base, "_compute_gradients"):  # legacy OptimizerV2
            grads_and_vars = base._compute_gradients(self, loss, var_list, grad_loss, tape=tape)
        else:
            grads_and_vars = base.compute_gradients(self, loss, var_list, tape=tape)
        grads_and_vars = _grads_and_vars_list(grads_and_vars)
        if not grads_and_vars:
            return grads_and_vars
        grads, variables = zip(*grads_and_vars)
        return list(zip(self._bps_reduce(grads, variables), variables))

    def get_gradients(self, loss, params):
        grads = self._bps_base.get_gradients(self, loss, params)
        return self._bps_reduce(grads, params)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = _grads_and_vars_list(grads_and_vars)
        base_apply = self._bps_base.apply_gradients
        if self._agg_helper is None:
            return base_apply(self, grads_and_vars, *args, **kwargs)
        self._agg_helper.apply_gradients(lambda: base_apply(self, grads_and_vars, *args, **kwargs), self)
        return self.iterations


def distributed_class(base):
    """A subclass of `base` with the methods above (one class per base),
    under the base's name and module so that saved models name the base."""
    if base in _wrapped_classes:
        return _wrapped_classes[base]
    if _wrapped_classes.get(getattr(base, "_bps_base", None)) is base:  # already distributed: not twice
        return base
    methods = {name: value for name, value in vars(_DistributedKeras2).items()
               if not name.startswith("__")}
    if not hasattr(base, "get_gradients"):  # only OptimizerV2 has it
        del methods["get_gradients"]
    cls = type(base.__name__, (base,), {
        **methods,
        "_bps_base": base,
        "__doc__": f"{base.__name__} whose gradients are averaged across BytePS processes.",
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
    })
    _wrapped_classes[base] = cls
    return cls


def make_distributed(optimizer, reduction, backward_passes_per_step=1, average_aggregated_gradients=False):
    """Turn `optimizer` itself (its state kept) into a distributed one."""
    optimizer.__class__ = distributed_class(type(optimizer))
    optimizer._bps_reduction = reduction
    if backward_passes_per_step > 1:
        _ = optimizer.iterations  # OptimizerV2 creates it on first use: now, not inside a tf.cond branch
        optimizer._agg_helper = LocalGradientAccumulator(backward_passes_per_step, reduction.reduce,
                                                         reduction.sparse_as_dense, average_aggregated_gradients)
    return optimizer


def distributed_optimizer(optimizer, reduction, name=None, backward_passes_per_step=1,
                          average_aggregated_gradients=False):
    """A new optimizer of `optimizer`'s class and config (as Horovod: its
    state is not carried over) that reduces where gradients are computed."""
    config = optimizer.get_config()
    if name:
        config["name"] = name
    distributed = distributed_class(type(optimizer)).from_config(config)
    return make_distributed(distributed, reduction, backward_passes_per_step, average_aggregated_gradients)

