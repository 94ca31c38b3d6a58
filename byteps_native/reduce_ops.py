"""Horovod's reduction constants (``hvd.Average``, ``hvd.Sum``, ``hvd.Adasum``, ...),
one set shared by the torch and TF APIs: plain ints, no framework import.

The arithmetic the engine does not do itself (Min/Max/Product/Adasum over an
allgather) is per framework, in byteps_native/{torch,tf}/reduce_ops.py."""


class ReduceOp(int):
    """An int like Horovod's constants, with a readable repr."""

    def __new__(cls, value, name):
        op = super().__new__(cls, value)
        op._name = name
        return op

    def __repr__(self):
        return f"byteps_native.{self._name}"

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
