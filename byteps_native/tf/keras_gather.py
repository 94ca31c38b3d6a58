"""Keras' predict returns every process's rows under MirroredStrategy(BytePSOps).

Keras concatenates the per-replica outputs of ``predict`` (``reduce_per_replica``
with ``reduction="concat"``) across workers only when it recognises
MultiWorkerMirroredStrategy (``_collective_all_reduce_multi_worker``: an
``isinstance`` test); for any other strategy it concatenates the local replicas
only, so each process would get its own shard's rows. Keras 3 and Keras 2
(``tf_keras``) share that code. ``install()`` wraps ``reduce_per_replica`` of
whichever of them is loaded: a "concat" under a MirroredStrategy whose
cross-device ops is a multi-process BytePSOps goes through Keras' own MWMS path
(``_multi_worker_concat``: ``strategy.gather`` of the outputs and of each
replica's row count, replicas put back in the input's order), so predict returns
every row on every process in MWMS's order. Other reductions ("sum", "mean",
"first": logs and metrics, already global through the strategy's variables)
and every other strategy go to Keras' original.

Installed by BytePSOps (mirrored_routing.install) and again whenever a
BytePSOps strategy distributes a dataset, so a Keras imported after the
strategy was made is covered too; idempotent and cheap (a sys.modules lookup).
"""
import sys
import threading

# Keras 3's TensorFlow trainer, Keras 2's training module.
_KERAS_MODULES = ("keras.src.backend.tensorflow.trainer", "tf_keras.src.engine.training")
_lock = threading.Lock()
_wrapped = set()


def bytepsops_of(extended):
    """The BytePSOps of a strategy's `extended`, or None. Recognised by the
    marker BytePSOps declares, not by class: cross_device_ops.py installs this
    module and mirrored_routing.py, so they must not import it back."""
    ops = getattr(extended, "_cross_device_ops", None)
    return ops if getattr(type(ops), "ROUTES_MIRRORED_STRATEGY", False) else None


def _is_multi_process_bytepsops(strategy):
    ops = bytepsops_of(getattr(strategy, "extended", None))
    return ops is not None and ops.num_processes > 1


def install():
    """Wrap reduce_per_replica of every Keras module loaded now (once each)."""
    for name in _KERAS_MODULES:
        module = sys.modules.get(name)
        if module is None or name in _wrapped:
            continue
        with _lock:
            if name in _wrapped:
                continue
            _wrapped.add(name)
            if not all(hasattr(module, f) for f in ("reduce_per_replica", "_multi_worker_concat")):
                continue  # a Keras whose predict path we do not know: leave it alone
            module.reduce_per_replica = _wrap(module, module.reduce_per_replica)


def _wrap(module, original):
    def reduce_per_replica(values, strategy, reduction):
        if reduction != "concat" or not _is_multi_process_bytepsops(strategy):
            return original(values, strategy, reduction)
        import tensorflow as tf
        return tf.nest.map_structure(lambda v: module._multi_worker_concat(v, strategy),  # pylint: disable=protected-access
                                     values)

    reduce_per_replica.__wrapped__ = original
    reduce_per_replica.__doc__ = original.__doc__
    return reduce_per_replica
