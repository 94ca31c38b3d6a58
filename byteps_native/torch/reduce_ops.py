"""Horovod's reduction operators (``hvd.Average``, ``hvd.Sum``, ``hvd.Adasum``, ...)
and the arithmetic the engine does not do itself.

The engine sums. Average and Sum map onto it directly; Min, Max, Product and
Adasum need every rank's whole tensor, so they run over an allgather and
reduce locally (cost: size() times the bytes of a push_pull, see
docs/migration.md).
"""
import torch

from byteps_native.reduce_ops import (  # noqa: F401  (re-exported)
    ALL_OPS, Adasum, Average, Max, Min, Product, ReduceOp, Sum, resolve_op)


def adasum_pair(a, b):
    """Adasum of two gradients (Maleki et al., as Horovod defines it):
    a' = (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b.
    Orthogonal gradients add; parallel ones average. Dot products in float64."""
    a64, b64 = a.double().flatten(), b.double().flatten()
    dot = torch.dot(a64, b64)
    a_norm_sq = torch.dot(a64, a64)
    b_norm_sq = torch.dot(b64, b64)
    a_coeff = 1.0 - dot / (2.0 * a_norm_sq) if a_norm_sq > 0 else torch.tensor(1.0, dtype=torch.float64)
    b_coeff = 1.0 - dot / (2.0 * b_norm_sq) if b_norm_sq > 0 else torch.tensor(1.0, dtype=torch.float64)
    return (a_coeff * a.double() + b_coeff * b.double()).to(a.dtype)


def adasum_tree(tensors):
    """Horovod's reduction order: adjacent ranks pair up, then adjacent pairs,
    and so on (recursive doubling), so every rank computes the same value.
    A count that is not a power of two carries the odd one up a level."""
    level = list(tensors)
    while len(level) > 1:
        paired = [adasum_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def reduce_gathered(op, tensors):
    """Reduce a list of same-shaped tensors (one per rank, in rank order)."""
    stacked = torch.stack(tensors)
    if op == Min:
        return stacked.min(dim=0).values
    if op == Max:
        return stacked.max(dim=0).values
    if op == Product:
        return stacked.prod(dim=0).to(tensors[0].dtype)
    if op == Adasum:
        return adasum_tree(tensors)
    raise AssertionError(f"reduce_gathered does not handle {op!r}")
