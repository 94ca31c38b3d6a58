"""Python face of the BytepsPushPull op, and its gradient."""
import contextlib
import threading

import tensorflow as tf
from tensorflow.python.framework import auto_control_deps as _auto_control_deps

from byteps_native._runtime import config
from byteps_native.tf import naming
from byteps_native.tf._library import ops as _raw

# dtypes the engine sums; others must be cast by the caller (see broadcast).
SUPPORTED_DTYPES = frozenset([tf.float32, tf.float64, tf.float16, tf.bfloat16,
                              tf.int32, tf.int64, tf.uint8])


def check_dtype(dtype, what):
    dtype = tf.as_dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        names = ", ".join(sorted(d.name for d in SUPPORTED_DTYPES))
        raise TypeError(f"BytePS cannot reduce {what} of dtype {dtype.name}; supported: {names} "
                        f"(cast it first)")


_gates = threading.local()


@contextlib.contextmanager
def after(checks):
    """Every BytepsPushPull op built inside waits for `checks` (graph ops:
    rank-agreement checks, asserts; None entries and eager mode: nothing).

    Why a direct control edge on each engine op, not one
    tf.control_dependencies block around the caller: TF puts the block's edge
    only on the first ops built inside it (constants among them), and Grappler
    folds those constants away with the edge, so an engine op whose input
    derives from static shapes only (a gather's lengths, a broadcast's zeros)
    would reach the engine before the check fails, and wait for peers that
    never come."""
    checks = [c for c in checks if c is not None]
    stack = getattr(_gates, "stack", [])
    _gates.stack = stack + checks
    try:
        yield
    finally:
        _gates.stack = stack


def shape_suffix(tensor):
    """Run-time shape as text, for tensors whose static shape is not fully
    known: the engine fixes a name's size on first use, so each distinct
    shape must reach the engine under its own name."""
    return tf.strings.reduce_join(tf.strings.as_string(tf.shape(tensor)), separator=",")


def push_pull_list(tensors, names, priorities=None, average=False, name_suffixes=None, timeout_seconds=None,
                   fusion_bytes=0):
    """Sum (or average over processes) each tensor across all processes.

    All tensors are in flight in the engine at once. `names` must already be
    engine names (see naming.py). Tensors with a partly unknown static shape
    get their run-time shape appended to their name (see shape_suffix).
    timeout_seconds > 0: the op fails with DeadlineExceededError naming the
    tensors still pending after that many seconds (CommunicationOptions).
    fusion_bytes: the engine packs host tensors of one dtype into buckets of
    at most that many bytes (0: each alone; fusion.py passes the limit).
    Returns a list of tensors.
    """
    tensors = list(tensors)
    if not tensors:
        return []
    for tensor, name in zip(tensors, names):
        check_dtype(tensor.dtype, f"tensor '{name}'")
    if name_suffixes is None and not naming.sizes_in_names():
        name_suffixes = tf.constant([], tf.string)  # one name whatever the size: see naming.sizes_in_names
    if name_suffixes is None:
        dynamic = [not t.shape.is_fully_defined() for t in tensors]
        if any(dynamic):
            name_suffixes = tf.stack([shape_suffix(t) if d else tf.constant("")
                                      for t, d in zip(tensors, dynamic)])
        else:
            name_suffixes = tf.constant([], tf.string)
    gates = [] if tf.executing_eagerly() else getattr(_gates, "stack", [])
    with tf.control_dependencies(gates):
        return _raw.byteps_push_pull(tensors=tensors, name_suffixes=name_suffixes, tensor_names=list(names),
                                     priorities=list(priorities or []), average=bool(average),
                                     timeout_seconds=check_timeout(timeout_seconds), fusion_bytes=int(fusion_bytes))


def sum_over_ranks(tensor, name, mark=""):
    """The sum over ranks of `tensor` on the CPU, under a unique engine name
    for `name`; `mark` is appended after the unique part (join_protocol's
    JOIN_MARK: a round that fails once a rank joined)."""
    with tf.device("/cpu:0"):
        (out,) = push_pull_list([tensor], [naming.unique(name) + mark], average=False)
    return out


def check_timeout(timeout_seconds):
    """CommunicationOptions.timeout_seconds as the op's attr (0: none)."""
    if timeout_seconds is None:
        return 0.0
    value = float(timeout_seconds)
    if value < 0:
        raise ValueError(f"timeout_seconds must be >= 0 (0 or None: no timeout), got {timeout_seconds}")
    return value


@tf.RegisterGradient("BytepsPushPull")
def _push_pull_gradient(op, *grads):
    """The gradient of a cross-process sum is the cross-process sum of the gradient."""
    names = [n.decode() if isinstance(n, bytes) else n for n in op.get_attr("tensor_names")]
    keep = [i for i, g in enumerate(grads) if g is not None]
    suffixes = op.inputs[-1]  # gradients have the forward tensors' shapes
    if keep != list(range(len(grads))) and suffixes.shape.num_elements() != 0:
        suffixes = tf.gather(suffixes, keep)
    grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
    # A gradient may arrive in another dtype than its forward tensor (a float32
    # output_gradients for a float64 sum): it gets its own name, since the
    # engine fixes a name's dtype at first use.
    reduced = push_pull_list([grads[i] for i in keep],
                             [names[i] + ".grad" + ("" if grads[i].dtype == op.inputs[i].dtype
                                                     else f".{grads[i].dtype.name}") for i in keep],
                             average=op.get_attr("average"), name_suffixes=suffixes,
                             timeout_seconds=op.get_attr("timeout_seconds"))
    out = [None] * len(grads)
    for i, g in zip(keep, reduced):
        out[i] = g
    return out + [None]  # no gradient for name_suffixes


# BytepsLocalPushPull's instances of one round (one per local replica) must
# not be chained in program order: tf.function chains stateful ops without
# resource inputs that way (auto_control_deps.py, op_is_stateful), the
# replicas' instances are traced one after another, and a chain would make
# replica 1's instance wait for replica 0's, which waits for replica 1's.
# TensorFlow exempts its own collectives through this set for that reason.
_auto_control_deps.ASYNC_STATEFUL_OPS = _auto_control_deps.ASYNC_STATEFUL_OPS | {"BytepsLocalPushPull"}


def local_push_pull(tensors, names, round_name, replica, replicas, local_op, push, average=False,
                    priorities=None, timeout_seconds=None, wait_seconds=None, fusion_bytes=0):
    """One local replica's part of a per-replica all-reduce
    (local_push_pull_kernel.cc): the instances of `round_name` of the
    `replicas` local replicas meet in the process, the local result
    (`local_op`: "sum", "first" or "concat") is formed once and, with `push`,
    summed across processes in one engine submission; every replica gets it.
    wait_seconds: how long to wait for the other local replicas (default:
    the engine's BYTEPS_TIMEOUT)."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    for tensor, name in zip(tensors, names):
        check_dtype(tensor.dtype, f"tensor '{name}'")
    if wait_seconds is None:
        wait_seconds = config.timeout_s()
    return _raw.byteps_local_push_pull(
        tensors=tensors, tensor_names=list(names), round=round_name, replica=int(replica), replicas=int(replicas),
        local_op=local_op, push=bool(push), average=bool(average), priorities=list(priorities or []),
        timeout_seconds=check_timeout(timeout_seconds), wait_seconds=float(wait_seconds),
        fusion_bytes=int(fusion_bytes))
