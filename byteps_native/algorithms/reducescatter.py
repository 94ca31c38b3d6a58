"""Reducescatter as a full reduction of which each rank keeps its rows:
Horovod's split of the first dimension, the first rows % size ranks getting
one row more (docs/migration.md says what the full reduction costs)."""


def _row_start(fw, rank, base, extra):
    return base * rank + fw.minimum(rank, extra)


def kept_rows(fw, reduced, rows):
    """This rank's rows of `reduced` (whose first dimension is `rows`)."""
    n, me = fw.size(), fw.rank()
    base, extra = rows // n, rows % n
    return reduced[_row_start(fw, me, base, extra):_row_start(fw, me + 1, base, extra)]


def row_counts(rows, n):
    """Every rank's row count, for a known `rows`."""
    return [rows // n + (1 if r < rows % n else 0) for r in range(n)]
