"""Alltoall as sums: a round of every rank's splits (an n x n table: row r
says how many rows rank r sends to each rank), then a gather of every rank's
rows, from which each rank keeps what was sent to it."""
from byteps_native.algorithms.gather import gather_rows


def exchange_rows(fw, tensor, splits, dtype, row_shape, name, what):
    """(the rows sent to this rank, in source rank order; how many came from
    each rank). `splits`: this rank's row count per destination (checked by
    the caller: n non-negative counts summing to its rows)."""
    n, me = fw.size(), fw.rank()
    matrix = fw.sum_failing_if_joined(fw.table(splits, n), f"{name}.splits", what)
    rows, counts = gather_rows(fw, tensor, dtype, row_shape, name, what)
    pieces = []
    for src in range(n):
        start = fw.total(counts[:src]) + fw.total(matrix[src, :me])
        pieces.append(rows[start:start + matrix[src, me]])
    return fw.concat(pieces), fw.cast_counts(matrix[:, me])
