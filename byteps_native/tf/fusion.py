"""Cross-process reduction of many tensors in few engine operations.

Small gradients cost more in per-message overhead than in bytes, so the
tensors of one call go to the engine as one group (one BytepsPushPull op,
bps_push_pull_group_async): the engine's fusion (csrc/core/fused_group.h, the
one the torch DistributedOptimizer uses) packs host tensors of one dtype into
buckets of at most BYTEPS_FUSION_BYTES (alias BYTEPS_TF_FUSION_BYTES; default
32 MiB; partitioned further at BYTEPS_PARTITION_BYTES) and gives each tensor
its own part of the result. Earlier tensors get higher priority because the
first layers are needed first by the next forward pass; a mismatch names the
user's tensor, not a bucket; compressed tensors share buckets of their
compression, a segment each (onebit: a scale per tensor).
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


def divide(tensor, divisor):
    if divisor == 1:
        return tensor
    if tensor.dtype.is_integer:  # documented: integer means truncate toward zero
        return tf.truncatediv(tensor, tf.cast(divisor, tensor.dtype))
    return tensor / tf.cast(divisor, tensor.dtype)


def push_pull_many(tensors, label, hints=None, divisor=1, device="/cpu:0", timeout_seconds=None, compression=None,
                   submit=None, name=naming.unique):
    """Sum every tensor across all processes, then divide by `divisor`.

    tensors: dense tensors or IndexedSlices (densified). label: what the call
    site is (part of every engine name). hints: per-tensor stable descriptions
    (variable paths); default their positions. divisor == engine size uses the
    engine's own average. timeout_seconds: see ops.push_pull_list. Returns
    dense tensors in input order. compression: one of the engine's
    compressors (docs/compression.md), declared for every engine name here.
    submit: the op that carries the group (default push_pull_list; the
    per-replica all-reduce passes its local round, same arguments). name: how
    a tensor's base name becomes its engine name (default naming.unique).
    """
    if not tensors:
        return []
    hints = list(hints) if hints is not None else [f"t{i}" for i in range(len(tensors))]
    with tf.device(device):
        dense = [densify(t) for t in tensors]
        for t, hint in zip(dense, hints):
            check_dtype(t.dtype, f"'{hint}'")
        sized = naming.sizes_in_names()
        names = [name(f"{label}/{hint}" + (f":{naming.describe(t.dtype, t.shape)}" if sized else ""))
                 for t, hint in zip(dense, hints)]
        for n in names:  # the engine fuses tensors of one compression, a segment each
            apply_to(n, compression)
        engine_average = divisor != 1 and divisor == engine.size()
        # Earlier tensors first: the first layers are needed first by the next forward pass.
        reduced = (submit or push_pull_list)(dense, names, priorities=[-k for k in range(len(dense))],
                                             average=engine_average, timeout_seconds=timeout_seconds,
                                             fusion_bytes=fusion_bytes())
        return [out if engine_average else divide(out, divisor) for out in reduced]
