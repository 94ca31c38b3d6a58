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
from byteps_native.tf.collectives import allreduce, check_ranks_agree, fail_if_joined_beside, joined_round
from byteps_native.tf.compression import Compression
from byteps_native.tf.ops import SUPPORTED_DTYPES, after, push_pull_list
from byteps_native.tf.reduce_ops import Adasum, Average, Sum, resolve_op

init = engine.init
shutdown = engine.shutdown
is_initialized = engine.is_initialized
rank = engine.rank
size = engine.size
local_rank = engine.local_rank
local_size = engine.local_size


def push_pull(tensor, scope="", average=None, device_dense="", device_sparse="", compression=Compression.none,
              op=None, enable_async=False, name=None, priority=0):
    """Sum (average=False / op=Sum) or mean (the default) over processes of `tensor`.

    BytePS's signature; `scope`, `device_*` and `enable_async` are accepted
    (the op runs on the CPU; async is the servers' BYTEPS_ENABLE_ASYNC).
    IndexedSlices are reduced as dense tensors; op=Adasum/Min/Max/Product
    go through ``allreduce``.
    """
    op = resolve_op(op, average, "push_pull")
    if op not in (Average, Sum):
        return allreduce(tensor, op=op, compression=compression, name=name)
    with tf.device("/cpu:0"):  # the op has a CPU kernel only (see docs/tf.md)
        dense = fusion.densify(tensor)
        compressed, ctx = compression.compress(dense)
        base = name or f"bps.tf.push_pull/{scope}{naming.describe(compressed.dtype, compressed.shape)}"
        (out,) = push_pull_list([compressed], [naming.unique(base)], [priority], average=op == Average)
    return compression.decompress(out, ctx)


def _variable_hint(variable, index):
    path = getattr(variable, "path", None) or getattr(variable, "name", None) or "value"
    return f"{index}.{str(path).split(':')[0]}"


def broadcast(tensor, root_rank=0, name=None, scope="", is_variable=True, process_set=None,
              ignore_name_scope=False):
    """Every process receives `root_rank`'s `tensor` (Horovod's and BytePS's
    extra arguments are accepted)."""
    value = tf.convert_to_tensor(tensor)
    check = None
    if name is None:  # ranks that disagree would submit different names (collectives.check_ranks_agree)
        check = check_ranks_agree("broadcast", value, extra=1 + int(root_rank))  # fails after a join()
    with after([check]):  # every engine op waits, zeros included
        out = _broadcast_checked(value, root_rank, name)
    if name is not None:  # Horovod's rule after join(), as the check does for unnamed ones
        out = fail_if_joined_beside(out, f"bps.tf.broadcast.root{root_rank}/{naming.sanitize(name)}.joined")
    return out


def _to_wire(value):
    """(what the engine sums for a broadcast of `value`, how to get `value`'s
    dtype back). Dtypes the engine does not sum travel as their bytes: root's
    bytes plus the others' zeros are root's bytes, exactly."""
    dtype = value.dtype
    if dtype == tf.bool:
        return tf.cast(value, tf.uint8), lambda out: tf.cast(out, tf.bool)
    if dtype in SUPPORTED_DTYPES:
        return value, lambda out: out
    return tf.bitcast(value, tf.uint8), lambda out: tf.bitcast(out, dtype)


def _broadcast_checked(value, root_rank, name):
    if not value.dtype.is_floating:
        return _broadcast_values(value, root_rank, name)

    # Horovod's gradient: every rank joins the average of the output
    # gradients; root keeps it, the others get zeros.
    @tf.custom_gradient
    def differentiable(x):
        def grad(dy):
            reduced = allreduce(dy, op=Average, name=f"{name}.grad" if name else None)
            # `* 0`, not zeros_like: in a graph the zeros must still depend
            # on the allreduce, or this rank would leave it unrun.
            return reduced if engine.rank() == root_rank else reduced * 0
        return _broadcast_values(x, root_rank, name), grad
    return differentiable(value)


def _broadcast_values(value, root_rank, name):
    wire, restore = _to_wire(value)
    contribution = wire if engine.rank() == root_rank else tf.zeros_like(wire)
    hint = name or "value"
    (out,) = fusion.push_pull_many([contribution], f"bps.tf.broadcast.root{root_rank}", [hint])
    return restore(out)


def _broadcast_assigns(variables, root_rank):
    """Assign `root_rank`'s value to every variable; the assigns' results.
    Variables are fused per dtype into few engine calls."""
    is_root = engine.rank() == root_rank
    values, restores = [], []
    for v in variables:
        wire, restore = _to_wire(tf.convert_to_tensor(v))
        restores.append(restore)
        values.append(wire if is_root else tf.zeros_like(wire))
    # Horovod's rule after join(): fail before any variable is assigned.
    with after([joined_round(f"bps.tf.broadcast_variables.root{root_rank}.joined")]):
        reduced = fusion.push_pull_many(values, f"bps.tf.broadcast_variables.root{root_rank}",
                                        [_variable_hint(v, i) for i, v in enumerate(variables)])
    return [v.assign(restore(r)) for v, r, restore in zip(variables, reduced, restores)]


def broadcast_variables(variables, root_rank=0):
    """Assign `root_rank`'s value to every variable on every process.

    Eager: assigns and returns None. In a tf.function: returns the grouped
    assign op. Variables are fused per dtype into few engine calls.
    """
    variables = list(variables)
    if not variables:
        return None
    assigns = _broadcast_assigns(variables, root_rank)
    if tf.executing_eagerly():
        return None
    return tf.group(*[a for a in assigns if a is not None])


def push_pull_gradients(grads, variables, average=True, label="bps.tf.grad", compression=Compression.none,
                        op=None, gradient_predivide_factor=1.0, sparse_as_dense=False):
    """Reduce a gradient list across processes, fused; None gradients stay None.

    Every process must have None at the same positions (same model and loss).
    `gradient_predivide_factor` f splits the average as Horovod does (sum of
    g/f, times f/size); op=Adasum combines gradients with Adasum.
    """
    grads = list(grads)
    op = resolve_op(op, None if op is not None else average, "push_pull_gradients")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is only valid with op=Average (as in Horovod)")
    variables = list(variables) if variables is not None else [None] * len(grads)
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present:
        return grads
    hints = [_variable_hint(variables[i], i) if variables[i] is not None else f"t{i}" for i in present]
    out = list(grads)
    if op == Adasum or compression is not Compression.none:
        for i, hint in zip(present, hints):
            out[i] = allreduce(fusion.densify(grads[i]), op=op, compression=compression, name=f"{label}/{hint}")
        return out
    inputs = [grads[i] for i in present]
    divisor = engine.size() if op == Average else 1
    if gradient_predivide_factor != 1.0:
        inputs = [fusion.densify(g) / tf.cast(gradient_predivide_factor, g.dtype) for g in inputs]
        divisor = engine.size() / gradient_predivide_factor
    reduced = fusion.push_pull_many(inputs, label, hints, divisor)
    for i, g in zip(present, reduced):
        out[i] = g
    return out


class DistributedGradientTape:
    """Wraps a finished tf.GradientTape; ``gradient()`` returns reduced gradients.

    Horovod's options are accepted; ``num_groups``/``groups`` are fusion hints
    (the adapter fuses by itself), ``device_*`` do not apply (CPU op).
    Sources passed to ``register_local_source`` keep their local gradient
    (divided by size() when ``scale_local_gradients``, as Horovod does).
    Other attributes pass through to the wrapped tape.
    """
    _label = "bps.tf.grad"

    def __init__(self, tape, device_dense="", device_sparse="", compression=Compression.none,
                 sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                 process_set=None, scale_local_gradients=True, average=None):
        self._tape = tape
        self._op = resolve_op(None, average, "DistributedGradientTape") if average is not None else \
            resolve_op(op, None, "DistributedGradientTape")
        self._compression = compression
        self._predivide = gradient_predivide_factor
        self._sparse_as_dense = sparse_as_dense
        self._scale_local = scale_local_gradients
        self._local = set()  # id()s: Keras 3 variables have no .ref()

    def register_local_source(self, source):
        """`source`'s gradient stays on this rank (Horovod's model-parallel layers)."""
        self._local.add(id(source))

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads, expand_composites=False)
        shared = [i for i, v in enumerate(flat_sources) if id(v) not in self._local]
        reduced = push_pull_gradients([flat_grads[i] for i in shared], [flat_sources[i] for i in shared],
                                      op=self._op, compression=self._compression,
                                      gradient_predivide_factor=self._predivide,
                                      sparse_as_dense=self._sparse_as_dense, label=self._label)
        out = list(flat_grads)
        for i, g in zip(shared, reduced):
            out[i] = g
        if self._scale_local:
            for i, v in enumerate(flat_sources):
                if id(v) in self._local and out[i] is not None:
                    out[i] = _divide(out[i], engine.size())
        return tf.nest.pack_sequence_as(grads, out)

    def __getattr__(self, name):
        return getattr(self._tape, name)


def _divide(grad, count):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / tf.cast(count, grad.values.dtype), grad.indices, grad.dense_shape)
    return grad / tf.cast(count, grad.dtype)


class PartialDistributedGradientTape(DistributedGradientTape):
    """Horovod's: like DistributedGradientTape, but the gradients of
    `local_layers`' variables stay local (not reduced; divided by size() when
    ``scale_local_gradients``)."""
    _label = "bps.tf.partial_grad"

    def __init__(self, gradtape, device_dense="", device_sparse="", compression=Compression.none,
                 sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                 process_set=None, local_layers=None, scale_local_gradients=True):
        super().__init__(gradtape, compression=compression, op=op, gradient_predivide_factor=gradient_predivide_factor,
                         sparse_as_dense=sparse_as_dense, scale_local_gradients=scale_local_gradients)
        layers = local_layers if isinstance(local_layers, (list, tuple)) else ([local_layers] if local_layers else [])
        for layer in layers:
            for v in layer.trainable_weights:
                self.register_local_source(v)


def broadcast_global_variables(root_rank):
    """tf.compat.v1 graphs: an op giving every global variable root's value.
    Eager TF 2 has no global variable collection (as in Horovod)."""
    if tf.executing_eagerly():
        raise RuntimeError("broadcast_global_variables() does not support eager execution; use "
                           "broadcast_variables(model.variables + optimizer.variables, root_rank) instead")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_(variables, root_rank, name=None, process_set=None):
    """In-place broadcast of `variables` (Horovod's broadcast_): eagerly the
    variables, now holding root's values; in a graph the assigns' results
    (evaluating one runs its assign)."""
    variables = list(variables)
    if not variables:
        return []
    assigns = _broadcast_assigns(variables, root_rank)
    return variables if tf.executing_eagerly() else assigns
