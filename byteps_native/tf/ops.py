"""Python face of the BytepsPushPull op, and its gradient."""
import tensorflow as tf

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


def push_pull_list(tensors, names, priorities=None, average=False):
    """Sum (or average over processes) each tensor across all processes.

    All tensors are in flight in the engine at once. `names` must already be
    engine names (see naming.py). Returns a list of tensors.
    """
    tensors = list(tensors)
    if not tensors:
        return []
    for tensor, name in zip(tensors, names):
        check_dtype(tensor.dtype, f"tensor '{name}'")
    return _raw.byteps_push_pull(tensors=tensors, tensor_names=list(names),
                                 priorities=list(priorities or []), average=bool(average))


@tf.RegisterGradient("BytepsPushPull")
def _push_pull_gradient(op, *grads):
    """The gradient of a cross-process sum is the cross-process sum of the gradient."""
    names = [n.decode() if isinstance(n, bytes) else n for n in op.get_attr("tensor_names")]
    keep = [i for i, g in enumerate(grads) if g is not None]
    reduced = push_pull_list([tf.convert_to_tensor(grads[i]) for i in keep],
                             [names[i] + ".grad" for i in keep],
                             average=op.get_attr("average"))
    out = [None] * len(grads)
    for i, g in zip(keep, reduced):
        out[i] = g
    return out
