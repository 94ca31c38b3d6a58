"""Horovod's reduction operators (``hvd.Average``, ``hvd.Sum``, ``hvd.Adasum``, ...)
and the arithmetic the engine does not do itself.

The engine sums. Average and Sum map onto it directly; Min, Max, Product and
Adasum need every rank's whole tensor, so they run over an allgather and
reduce locally (cost: size() times the bytes of a push_pull, see
docs/migration.md).
"""
import torch


class ReduceOp(int):
    """An int like Horovod's constants, with a readable repr."""

    def __new__(cls, value, name):
        op = super().__new__(cls, value)
        op._name = name
        return op

    def __repr__(self):
        return f"byteps_native.torch.{self._name}"

    __str__ = __repr__


Average = ReduceOp(0, "Average")
Sum = ReduceOp(1, "Sum")
Adasum = ReduceOp(2, "Adasum")
Min = ReduceOp(3, "Min")
Max = ReduceOp(4, "Max")
Product = ReduceOp(5, "Product")

ALL_OPS = (Average, Sum, Adasum, Min, Max, Product)


def resolve_op(op, average, who):
    """Horovod's rule: `average=` is the old spelling of `op=`; both at once is an error."""
    if op is not None and average is not None:
        raise ValueError(f"{who}: pass either op= or the deprecated average=, not both")
    if op is None:
        return Sum if average is False else Average
    if op not in ALL_OPS:
        raise ValueError(f"{who}: unknown op {op!r}; use one of Average, Sum, Adasum, Min, Max, Product")
    return ALL_OPS[int(op)]


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
