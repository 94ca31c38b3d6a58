"""Horovod-style API: one process per device, explicit collective calls.

    import byteps_native.tf as bps
    bps.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = bps.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)   # averaged over processes
    bps.broadcast_variables(model.variables, root_rank=0)     # once, after the first step

Everything here goes through the BytepsPushPull op, so it works eagerly and
inside tf.function. Engine names derive from call site, position, variable
path, dtype and shape (see naming.py); pass `name=` for tensors whose shape
changes between calls.
"""
import tensorflow as tf

from byteps_native.tf import engine, fusion, naming
from byteps_native.tf.ops import push_pull_list

init = engine.init
shutdown = engine.shutdown
is_initialized = engine.is_initialized
rank = engine.rank
size = engine.size
local_rank = engine.local_rank
local_size = engine.local_size


def push_pull(tensor, average=True, name=None, priority=0):
    """Sum (average=False) or mean over processes (average=True) of `tensor`.

    IndexedSlices are reduced as dense tensors.
    """
    with tf.device("/cpu:0"):  # the op has a CPU kernel only (see docs/tf.md)
        dense = fusion.densify(tensor)
        base = name or f"bps.tf.push_pull/{naming.describe(dense.dtype, dense.shape)}"
        (out,) = push_pull_list([dense], [naming.unique(base)], [priority], average=average)
    return out


def _variable_hint(variable, index):
    path = getattr(variable, "path", None) or getattr(variable, "name", None) or "value"
    return f"{index}.{str(path).split(':')[0]}"


def broadcast(tensor, root_rank=0, name=None):
    """Every process receives `root_rank`'s `tensor`."""
    value = tf.convert_to_tensor(tensor)
    original_dtype = value.dtype
    if original_dtype == tf.bool:
        value = tf.cast(value, tf.uint8)
    contribution = value if engine.rank() == root_rank else tf.zeros_like(value)
    hint = name or "value"
    (out,) = fusion.push_pull_many([contribution], f"bps.tf.broadcast.root{root_rank}", [hint])
    return tf.cast(out, original_dtype) if original_dtype == tf.bool else out


def broadcast_variables(variables, root_rank=0):
    """Assign `root_rank`'s value to every variable on every process.

    Eager: assigns and returns None. In a tf.function: returns the grouped
    assign op. Variables are fused per dtype into few engine calls.
    """
    variables = list(variables)
    if not variables:
        return None
    is_root = engine.rank() == root_rank
    values, casts = [], []
    for v in variables:
        value = tf.convert_to_tensor(v)
        casts.append(value.dtype == tf.bool)
        value = tf.cast(value, tf.uint8) if value.dtype == tf.bool else value
        values.append(value if is_root else tf.zeros_like(value))
    reduced = fusion.push_pull_many(values, f"bps.tf.broadcast_variables.root{root_rank}",
                                    [_variable_hint(v, i) for i, v in enumerate(variables)])
    assigns = [v.assign(tf.cast(r, tf.bool) if c else r) for v, r, c in zip(variables, reduced, casts)]
    if tf.executing_eagerly():
        return None
    return tf.group(*[a for a in assigns if a is not None])


def push_pull_gradients(grads, variables, average=True, label="bps.tf.grad"):
    """Reduce a gradient list across processes, fused; None gradients stay None.

    Every process must have None at the same positions (same model and loss).
    """
    grads = list(grads)
    variables = list(variables) if variables is not None else [None] * len(grads)
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present:
        return grads
    divisor = engine.size() if average else 1
    hints = [_variable_hint(variables[i], i) if variables[i] is not None else f"t{i}" for i in present]
    reduced = fusion.push_pull_many([grads[i] for i in present], label, hints, divisor)
    out = list(grads)
    for i, g in zip(present, reduced):
        out[i] = g
    return out


class DistributedGradientTape:
    """Wraps a finished tf.GradientTape; ``gradient()`` returns reduced gradients.

    Other attributes pass through to the wrapped tape.
    """

    def __init__(self, tape, average=True):
        self._tape = tape
        self._average = average

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads, expand_composites=False)
        reduced = push_pull_gradients(flat_grads, flat_sources, self._average)
        return tf.nest.pack_sequence_as(grads, reduced)

    def __getattr__(self, name):
        return getattr(self._tape, name)
