"""Horovod's TF collectives (allreduce with op=, allgather, alltoall,
reducescatter, join, barrier, objects) over the BytepsPushPull op.

Everything is built from TF ops, so it runs eagerly and inside tf.function.
The algorithms beyond a sum (gathers as a length round and a zero-padded
byte sum, alltoall, reducescatter's rows, objects, barrier) are
byteps_native/algorithms, run on TF through framework.py; this module adds
rank agreement, gradients and Horovod's signatures.

After a join() the gathers fail on the ranks still training, as in Horovod:
their first round (lengths, splits, rank agreement) is one the joined rank
marks (JOIN_MARK; byteps_native/tf/join_protocol.py).
"""
import numpy as np
import tensorflow as tf

from byteps_native._runtime import rank_agreement as agreement
from byteps_native.algorithms import alltoall as alltoall_algorithm
from byteps_native.algorithms import gather, objects, reducescatter as reducescatter_algorithm, rounds
from byteps_native.compression import apply_to
from byteps_native.tf import engine, fusion, join_protocol, naming
from byteps_native.tf._library import ops as _raw
from byteps_native.tf.compression import Compression
from byteps_native.tf.framework import TF
from byteps_native.tf.join_protocol import JOIN_MARK
from byteps_native.tf.ops import after, push_pull_list, sum_over_ranks
from byteps_native.tf.reduce_ops import Average, Sum, reduce_stacked, resolve_op


def joined_round(name):
    """A small round that fails, as Horovod's broadcasts do, once a rank has
    joined: raises at once eagerly (returns None), or returns the op to wait
    for in a graph. For broadcasts that have no first round to mark."""
    if engine.size() == 1:
        return None
    marks = sum_over_ranks(tf.zeros([engine.size()], tf.int32), name, JOIN_MARK)
    return None if tf.executing_eagerly() else marks


def fail_if_joined_beside(output, name):
    """`output` (a named broadcast's), failing once a rank joined: a
    joined_round beside it; in a graph both run at once and `output` waits
    for the round."""
    marks = joined_round(name)
    if marks is None:
        return output
    with tf.control_dependencies([marks]):
        return tf.identity(output)


def _gather_name(prefix, value, name):
    if name:
        return f"bps.tf.{prefix}/{naming.sanitize(name)}"
    rows = naming.describe(value.dtype, value.shape[1:]) if value.shape.rank else f"{value.dtype.name}[scalar]"
    return f"bps.tf.{prefix}/rows_of_{rows}"


def _allgather_rows(value, name):
    """(the gathered rows, every rank's row count)."""
    with tf.device("/cpu:0"):
        return gather.gather_rows(TF, value, value.dtype, value.shape[1:].as_list(),
                                  _gather_name("allgather", value, name), "allgather")


def allgather(tensor, name=None, process_set=None, ignore_name_scope=False, same_shape=True):
    """Concatenation along the first dimension of every rank's `tensor`
    (first dimensions may differ; BytePS's `same_shape=` hint is accepted and
    not needed). Differentiable for floating dtypes, as Horovod's: the
    gradient is the ranks' average output gradient, this rank's rows."""
    _check_process_set(process_set)
    value = tf.convert_to_tensor(tensor)
    if value.shape.rank == 0:
        value = tf.reshape(value, [1])
    check = check_ranks_agree("allgather", value, any_first_dim=True) if name is None else None
    # Every engine op of the gather waits for the check (in a graph the
    # lengths round does not depend on the data: its size is a constant there).
    with after([check]):
        return _allgather_checked(value, name)


def _allgather_checked(value, name):
    if not value.dtype.is_floating:
        return _allgather_rows(value, name)[0]

    @tf.custom_gradient
    def gather(x):
        gathered, rows = _allgather_rows(x, name)

        def grad(dy):
            reduced = allreduce(dy, op=Average, name=f"{name or 'allgather'}.grad" if name else None)
            start = tf.reduce_sum(rows[:engine.rank()])
            return tf.reshape(reduced[start:start + rows[engine.rank()]], tf.shape(x))
        return gathered, grad
    return gather(value)


def grouped_allgather(tensors, name=None, process_set=None):
    return [allgather(t, f"{name or 'grouped'}.{i}") for i, t in enumerate(tensors)]


# An unnamed collective is named after its dtype and shape, so ranks that
# disagree on them would wait for each other until BYTEPS_TIMEOUT ends the
# engine. As in torch (byteps_native/torch/ops.py), one small round under a
# fixed name compares them first, with the engine's rows and comparison
# (csrc/core/rank_agreement.h through csrc/tf/ranks_agree_op.cc), and fails
# every rank with Horovod's FailedPreconditionError naming each rank's tensor.
_FAIL_AFTER_JOIN = ("allgather", "alltoall", "broadcast")  # Horovod fails them once a rank joined


def check_ranks_agree(kind, value, any_first_dim=False, extra=0):
    """None once checked (eager), or the check's op to depend on (graph)."""
    n, me = engine.size(), engine.rank()
    if n == 1:
        return None
    row = _raw.byteps_agreement_row(tf.shape(value, out_type=tf.int64), kind=kind, dtype=value.dtype.name,
                                    any_first_dim=bool(any_first_dim and value.shape.rank), extra=int(extra))
    table = tf.scatter_nd([[me]], tf.reshape(row, [1, agreement.SLOTS]), [n, agreement.SLOTS])
    mark = JOIN_MARK if kind in _FAIL_AFTER_JOIN else ""  # Horovod's rule, without a round of its own
    rows = sum_over_ranks(table, f"bps.tf.agree.{kind}.{n}", mark)
    checked = _raw.byteps_check_ranks_agree(rows, kind=kind, rank=me)
    return None if tf.executing_eagerly() else checked


def _check_process_set(process_set):
    if process_set is not None and getattr(process_set, "ranks", None) is not None:
        raise NotImplementedError("byteps_native supports only the global process set")


# Integer dtypes the engine does not reduce: widened for the sum (as Horovod
# accepts them), narrowed back after.
_WIDENED = {tf.int8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64}


def _reduce_dense(value, op, name, prescale_factor, postscale_factor, compression):
    if value.dtype in _WIDENED and op in (Average, Sum):
        out = _reduce_dense(tf.cast(value, _WIDENED[value.dtype]), op, name, prescale_factor, postscale_factor,
                            compression)
        return tf.cast(out, value.dtype)
    value = _scale(value, prescale_factor)
    if op in (Average, Sum):
        compressed, ctx = compression.compress(value)
        base = name or f"bps.tf.allreduce/{naming.describe(compressed.dtype, compressed.shape)}"
        engine_name = naming.unique(base)
        # The engine's compressors (onebit, topk, randomk) are declared for the
        # name when the op is built; tensors of a partly unknown shape get a
        # run-time suffix and travel uncompressed (docs/compression.md).
        apply_to(engine_name, compression)
        with tf.device("/cpu:0"):
            (out,) = push_pull_list([compressed], [engine_name], average=op == Average)
        out = compression.decompress(out, ctx)
    else:
        stacked = allgather(tf.expand_dims(value, 0), name=f"{name or 'allreduce'}.{op._name}")
        out = reduce_stacked(op, stacked, engine.size())
    return _scale(out, postscale_factor)


def _scale(value, factor):
    """value * factor as Horovod's TF ops scale: integers in float64 math,
    then truncated back; float16 in float32 math."""
    if factor == 1.0:
        return value
    math = tf.float64 if value.dtype.is_integer else (tf.float32 if value.dtype == tf.float16 else value.dtype)
    return tf.cast(tf.cast(value, math) * tf.cast(factor, math), value.dtype)


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=None, ignore_name_scope=False):
    """Horovod's allreduce (default: average over ranks). IndexedSlices are
    reduced as Horovod does, by an allgather of their values and indices."""
    _check_process_set(process_set)
    op = resolve_op(op, average, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError(f"allreduce of IndexedSlices supports op=Average or Sum, got {op!r} "
                                      "(as Horovod)")
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("allreduce of IndexedSlices takes no prescale_factor/postscale_factor "
                                      "(as Horovod)")
        values = allgather(tensor.values, name=f"{name or 'sparse'}.values")
        indices = allgather(tensor.indices, name=f"{name or 'sparse'}.indices")
        if op == Average:
            values = values / tf.cast(engine.size(), values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    value = tf.convert_to_tensor(tensor)
    check = check_ranks_agree("allreduce", value, extra=1 + int(op)) if name is None else None
    with after([check]):
        return _reduce_dense(value, op, name, prescale_factor, postscale_factor, compression)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None, name=None):
    op = resolve_op(op, average, "grouped_allreduce")
    if op in (Average, Sum) and prescale_factor == 1.0 and postscale_factor == 1.0 and \
            compression is Compression.none and not any(isinstance(t, tf.IndexedSlices) for t in tensors):
        values = [tf.convert_to_tensor(t) for t in tensors]
        widened = [tf.cast(v, _WIDENED[v.dtype]) if v.dtype in _WIDENED else v for v in values]
        reduced = fusion.push_pull_many(widened, f"bps.tf.{name or 'grouped'}", [str(i) for i in range(len(tensors))],
                                        engine.size() if op == Average else 1)
        return [tf.cast(r, v.dtype) if v.dtype != r.dtype else r for v, r in zip(values, reduced)]
    return [allreduce(t, op=op, compression=compression, prescale_factor=prescale_factor,
                      postscale_factor=postscale_factor, name=f"{name or 'grouped'}.{i}")
            for i, t in enumerate(tensors)]


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Rows `splits[j]` of `tensor` go to rank j. Returns the received rows,
    and with `splits` also the received splits, as Horovod's TF alltoall does.
    Differentiable for floating dtypes: the gradient goes back by an alltoall
    with the received splits."""
    _check_process_set(process_set)
    value = tf.convert_to_tensor(tensor)
    check = check_ranks_agree("alltoall", value, any_first_dim=True) if name is None else None
    with after([check]):
        return _alltoall_checked(value, splits, name)


def _alltoall_checked(value, splits, name):
    if value.dtype.is_floating:
        @tf.custom_gradient
        def exchange(x):
            output, received = _alltoall(x, splits, name)

            def grad(dy, _=None):
                return _alltoall(dy, received, f"{name}.grad" if name else None)[0]
            return (output, received), grad
        output, received = exchange(value)
    else:
        output, received = _alltoall(value, splits, name)
    return output if splits is None else (output, received)


def _alltoall(value, splits, name):
    n, me = engine.size(), engine.rank()
    rows = tf.shape(value, out_type=tf.int64)[0]
    asserts = []  # ops in a graph (None eagerly, where they raise at once): the exchange waits for them
    if splits is None:
        asserts.append(tf.debugging.assert_equal(
            rows % n, tf.constant(0, tf.int64), message=f"alltoall without splits needs a first dimension divisible "
                                                        f"by {n}"))
        splits = tf.fill([n], rows // n)
    splits = tf.cast(tf.convert_to_tensor(splits), tf.int64)
    asserts.append(tf.debugging.assert_equal(tf.reduce_sum(splits), rows,
                                             message="alltoall: splits must sum to the first dimension"))
    with after(asserts):
        return _exchange_rows(value, splits, name)


def _exchange_rows(value, splits, name):
    if value.shape.rank == 0:
        value = tf.reshape(value, [1])
    with tf.device("/cpu:0"):
        return alltoall_algorithm.exchange_rows(TF, value, splits, value.dtype, value.shape[1:].as_list(),
                                                _gather_name("alltoall", value, name), "alltoall")


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=None, ignore_name_scope=False, prescale_factor=1.0, postscale_factor=1.0):
    """The reduction of `tensor`, split along the first dimension; this rank's part
    (the first ranks get one row more when it does not divide evenly, as in Horovod).
    Differentiable for floating dtypes with Horovod's gradient: the allgather of
    the output gradients, times size() for op=Sum."""
    op = resolve_op(op, None, "reducescatter")
    if op not in (Average, Sum):
        raise ValueError(f"reducescatter supports op=Average or Sum, got {op!r}")
    value = tf.convert_to_tensor(tensor)

    def scatter(x):
        return _reducescatter(x, compression, op, name, prescale_factor, postscale_factor)
    if not value.dtype.is_floating:
        return scatter(value)

    @tf.custom_gradient
    def differentiable(x):
        def grad(dy):
            dy = dy * tf.cast(engine.size(), dy.dtype) if op == Sum else dy
            return allgather(dy, name=f"{name}.grad" if name else None)
        return scatter(x), grad
    return differentiable(value)


def _reducescatter(tensor, compression, op, name, prescale_factor, postscale_factor):
    reduced = allreduce(tensor, op=op, compression=compression, name=name, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor)
    return reducescatter_algorithm.kept_rows(TF, reduced, tf.shape(reduced)[0])


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average, process_set=None,
                          prescale_factor=1.0, postscale_factor=1.0):
    return [reducescatter(t, compression=compression, op=op, name=f"grouped_reducescatter.{i}",
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)
            for i, t in enumerate(tensors)]


def join():
    """Horovod's join: this rank is out of data; until every rank has joined it
    stands in with zeros for the collectives the others still issue (their
    gathers and broadcasts fail meanwhile, as in Horovod). Returns the rank
    that joined last, an int32 scalar tensor; eagerly, in tf.function and in
    TF 1 graphs (byteps_native/tf/join_protocol.py)."""
    return join_protocol.join()


def barrier(process_set=None):
    _check_process_set(process_set)
    rounds.barrier(TF, "bps.tf.barrier")


def _evaluate(tensors, session):
    """The tensors' values, eagerly or (TF 1 graph mode, as Horovod allows)
    through `session`, the default session, or a new one."""
    if tf.executing_eagerly():
        return [t.numpy() for t in tensors]
    session = session or tf.compat.v1.get_default_session()
    if session is None:
        with tf.compat.v1.Session() as fresh:
            return fresh.run(list(tensors))
    return session.run(list(tensors))


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """Root's picklable `obj` on every rank (eagerly, or in graph mode through a session)."""
    return objects.broadcast_object(TF, obj, root_rank, f"bps.tf.broadcast_object/{name or 'broadcast_object'}",
                                    lambda tensors: _evaluate(tensors, session))


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=None):
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=None):
    """Every rank's picklable `obj`, in rank order (eagerly, or in graph mode through a session)."""
    return objects.allgather_object(TF, obj, f"bps.tf.allgather_object/{name or 'obj'}",
                                    lambda tensors: _evaluate(tensors, session))
