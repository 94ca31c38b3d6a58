"""Horovod's reduction operators for TF, and the arithmetic the engine (which
sums) does not do: Min/Max/Product/Adasum reduce an allgather locally."""
import tensorflow as tf

from byteps_native.reduce_ops import (  # noqa: F401  (re-exported)
    ALL_OPS, Adasum, Average, Max, Min, Product, ReduceOp, Sum, resolve_op)


def handle_average_backwards_compatibility(op, average):
    return resolve_op(op, average, "allreduce")


def _adasum_pair(a, b):
    """a' = (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, dot products in float64."""
    a64, b64 = tf.cast(a, tf.float64), tf.cast(b, tf.float64)
    dot = tf.reduce_sum(a64 * b64)
    a_sq, b_sq = tf.reduce_sum(a64 * a64), tf.reduce_sum(b64 * b64)
    a_coeff = tf.where(a_sq > 0, 1.0 - dot / (2.0 * tf.where(a_sq > 0, a_sq, 1.0)), 1.0)
    b_coeff = tf.where(b_sq > 0, 1.0 - dot / (2.0 * tf.where(b_sq > 0, b_sq, 1.0)), 1.0)
    return tf.cast(a_coeff * a64 + b_coeff * b64, a.dtype)


def reduce_stacked(op, stacked, count):
    """Reduce `stacked` ([count, ...], one row per rank in rank order)."""
    if op == Min:
        return tf.reduce_min(stacked, axis=0)
    if op == Max:
        return tf.reduce_max(stacked, axis=0)
    if op == Product:
        return tf.reduce_prod(stacked, axis=0)
    if op == Adasum:  # Horovod's order: adjacent ranks pair up, then adjacent pairs, ...
        level = [stacked[i] for i in range(count)]
        while len(level) > 1:
            paired = [_adasum_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                paired.append(level[-1])
            level = paired
        return level[0]
    raise AssertionError(f"reduce_stacked does not handle {op!r}")
