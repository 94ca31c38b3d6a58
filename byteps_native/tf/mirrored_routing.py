"""Makes tf.distribute.MirroredStrategy send its reductions to BytePSOps.

Why this exists: MirroredStrategy was written for one process, and three of
its shortcuts would silently keep values local when the strategy spans
processes through BytePSOps:

1. ``reduce_to`` (hence ``strategy.reduce`` and reading SUM/MEAN
   sync-on-read variables) switches to a local ReductionToOneDevice whenever a
   destination is a CPU device -- which is every destination on CPU hosts.
2. int32 values always go to ReductionToOneDevice.
3. ``num_replicas_in_sync`` counts local devices only, so Keras and
   ``tf.nn.compute_average_loss`` would scale losses by 1/local replicas while
   gradients are summed over all processes (gradients too large by the number
   of processes).

``install()`` wraps those three members. Each wrapper defers to TensorFlow's
original unless the strategy's cross-device ops is a BytePSOps, so other
strategies are untouched; the per-process data split still uses the local
replica count. Installed once, by BytePSOps' constructor.
"""
import threading

from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import mirrored_strategy
from tensorflow.python.distribute import reduce_util
from tensorflow.python.distribute import values as value_lib
from tensorflow.python.util import nest

from byteps_native.tf import engine
from byteps_native.tf.cross_device_ops import BytePSOps

_lock = threading.Lock()
_installed = False


def _byteps_ops(extended):
    ops = getattr(extended, "_cross_device_ops", None)
    return ops if isinstance(ops, BytePSOps) else None


def install():
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True

    extended_cls = mirrored_strategy.MirroredExtended
    original_get_ops = extended_cls._get_cross_device_ops
    original_reduce_to = extended_cls._reduce_to

    def _get_cross_device_ops(self, value):
        ops = _byteps_ops(self)
        if ops is not None and self._use_merge_call():
            return ops  # including int32: the engine sums int32
        return original_get_ops(self, value)

    def _reduce_to(self, reduce_op, value, destinations, options):
        ops = _byteps_ops(self)
        if ops is None or not self._use_merge_call():
            return original_reduce_to(self, reduce_op, value, destinations, options)
        if distribute_utils.is_mirrored(value) and reduce_op == reduce_util.ReduceOp.MEAN:
            return value  # already equal everywhere

        def reduce_one(v):
            if not isinstance(v, value_lib.DistributedValues):
                return cross_device_ops_lib.reduce_non_distributed_value(
                    reduce_op, v, destinations, self._num_replicas_in_sync)
            return ops.reduce(reduce_op, v, destinations=destinations,
                              options=self._communication_options.merge(options))

        return nest.map_structure(reduce_one, value)

    def num_replicas_in_sync(self):
        """Number of replicas over which gradients are aggregated (all processes)."""
        local = self._extended._num_replicas_in_sync  # pylint: disable=protected-access
        if _byteps_ops(self._extended) is not None:  # pylint: disable=protected-access
            return local * engine.size()
        return local

    extended_cls._get_cross_device_ops = _get_cross_device_ops
    extended_cls._reduce_to = _reduce_to
    for strategy_cls in (mirrored_strategy.MirroredStrategy, mirrored_strategy.MirroredStrategyV1):
        strategy_cls.num_replicas_in_sync = property(num_replicas_in_sync)
