"""Cross-process reduction of many tensors in few engine calls.

Small gradients cost more in per-message overhead than in bytes, so tensors of
one dtype are flattened and concatenated into buckets of at most
BYTEPS_FUSION_BYTES (alias BYTEPS_TF_FUSION_BYTES; default 32 MiB; the engine partitions buckets further
at BYTEPS_PARTITION_BYTES), every bucket goes to the engine in one op, and the
results are split back. Buckets keep the callers' order; earlier buckets get
higher priority because the first layers are needed first by the next forward
pass.
"""
import tensorflow as tf

from byteps_native._runtime import config
from byteps_native.compression import apply_to
from byteps_native.tf import engine, naming
from byteps_native.tf.ops import check_dtype, push_pull_list

DEFAULT_FUSION_BYTES = config.DEFAULT_FUSION_BYTES


def fusion_bytes():
    """The engine's fusion limit (BYTEPS_FUSION_BYTES; BYTEPS_TF_FUSION_BYTES
    is its alias), read by the engine's rules (_runtime/config.py)."""
    return config.fusion_bytes()


def densify(value):
    """IndexedSlices (e.g. Embedding gradients) become dense: a sum of dense
    tensors is exact and needs no per-step variable-size exchange."""
    if isinstance(value, tf.IndexedSlices):
        if value.dense_shape is None:
            raise ValueError("cannot reduce IndexedSlices without dense_shape; "
                             "pass a dense tensor instead")
        return tf.math.unsorted_segment_sum(value.values, value.indices, value.dense_shape[0])
    return tf.convert_to_tensor(value)


def _static_bytes(tensor):
    n = tensor.shape.num_elements()
    return None if n is None else n * tensor.dtype.size


def divide(tensor, divisor):
    if divisor == 1:
        return tensor
    if tensor.dtype.is_integer:  # documented: integer means truncate toward zero
        return tf.truncatediv(tensor, tf.cast(divisor, tensor.dtype))
    return tensor / tf.cast(divisor, tensor.dtype)


def _make_buckets(tensors, limit):
    """Lists of indices; one dtype per bucket; unknown sizes travel alone."""
    buckets, open_bucket, open_bytes = [], {}, {}
    for i, tensor in enumerate(tensors):
        nbytes = _static_bytes(tensor)
        if nbytes is None or limit == 0 or nbytes >= limit:
            buckets.append([i])
            continue
        dtype = tensor.dtype
        if dtype in open_bucket and open_bytes[dtype] + nbytes > limit:
            del open_bucket[dtype]
        if dtype not in open_bucket:
            open_bucket[dtype] = []
            open_bytes[dtype] = 0
            buckets.append(open_bucket[dtype])
        open_bucket[dtype].append(i)
        open_bytes[dtype] += nbytes
    return buckets


def push_pull_many(tensors, label, hints=None, divisor=1, device="/cpu:0", timeout_seconds=None, compression=None,
                   submit=None, name=naming.unique):
    """Sum every tensor across all processes, then divide by `divisor`.

    tensors: dense tensors or IndexedSlices (densified). label: what the call
    site is (part of every engine name). hints: per-tensor stable descriptions
    (variable paths); default their positions. divisor == engine size uses the
    engine's own average. timeout_seconds: see ops.push_pull_list. Returns
    dense tensors in input order. compression: one of the engine's
    compressors (docs/compression.md), declared for every engine name here.
    submit: the op that carries the buckets (default push_pull_list; the
    per-replica all-reduce passes its local round, same arguments). name: how
    a bucket's base name becomes its engine name (default naming.unique).
    """
    if not tensors:
        return []
    hints = list(hints) if hints is not None else [f"t{i}" for i in range(len(tensors))]
    with tf.device(device):
        dense = [densify(t) for t in tensors]
        for t, hint in zip(dense, hints):
            check_dtype(t.dtype, f"'{hint}'")
        buckets = _make_buckets(dense, fusion_bytes())
        sized = naming.sizes_in_names()
        payloads, names = [], []
        for members in buckets:
            if len(members) == 1:
                t = dense[members[0]]
                payloads.append(t)
                size = f":{naming.describe(t.dtype, t.shape)}" if sized else ""
                names.append(name(f"{label}/{hints[members[0]]}{size}"))
            else:
                flat = tf.concat([tf.reshape(dense[i], [-1]) for i in members], axis=0)
                payloads.append(flat)
                first, last = hints[members[0]], hints[members[-1]]
                size = f":{naming.describe(flat.dtype, flat.shape)}" if sized else f":{flat.dtype.name}"
                names.append(name(f"{label}/fused:{first}..{last}:{len(members)}x{size}"))
        for name, members in zip(names, buckets):
            # A fused bucket's parts: onebit keeps a scale per tensor (docs/compression.md).
            sizes = [dense[i].shape.num_elements() for i in members] if len(members) > 1 else None
            apply_to(name, compression, sizes)
        engine_average = divisor != 1 and divisor == engine.size()
        reduced = (submit or push_pull_list)(payloads, names, priorities=[-k for k in range(len(buckets))],
                                 average=engine_average, timeout_seconds=timeout_seconds)
        results = [None] * len(dense)
        for members, out in zip(buckets, reduced):
            if not engine_average:
                out = divide(out, divisor)
            if len(members) == 1:
                results[members[0]] = out
                continue
            offset = 0
            for i in members:
                n = dense[i].shape.num_elements()
                results[i] = tf.reshape(out[offset:offset + n], dense[i].shape)
                offset += n
        return results
