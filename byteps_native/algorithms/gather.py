"""Allgather as sums: a length round, then a zero-padded byte sum.

Each rank writes its bytes at its own offset of a zeroed uint8 buffer and
the buffer is summed over ranks, which is exact for every dtype (x + 0 = x
bytewise, no carries). The offsets come from a first round that sums a table
of every rank's length (each rank fills its own slot). Cost: every rank
sends and receives the whole gathered buffer, size() times what a ring
allgather moves (docs/migration.md).
"""
MIN_GATHER_BYTES = 1024


def padded_length(total):
    """The power-of-two ladder of gather buffers, for a known length."""
    size = MIN_GATHER_BYTES
    while size < total:
        size *= 2
    return size


def lengths_round(fw, length, name, what):
    """Every rank's `length`, in rank order; fails once a rank joined."""
    return fw.sum_failing_if_joined(fw.table(length), f"{name}.lengths", what)


def gather_bytes(fw, data, length, name, what):
    """(every rank's bytes concatenated in rank order, each rank's length) of
    the 1-D uint8 `data` of `length` bytes; fails once a rank joined."""
    lengths = lengths_round(fw, length, name, what)
    total = fw.total(lengths)
    padded = fw.padded_length(total)
    gathered = fw.placed_sum(data, fw.total(lengths[:fw.rank()]), padded, f"{name}.bytes")
    return gathered[:total], lengths


def gather_rows(fw, tensor, dtype, row_shape, name, what):
    """(every rank's rows of `tensor` concatenated in rank order, each rank's
    row count); ranks may differ in their number of rows."""
    data = fw.as_bytes(tensor)
    gathered, lengths = gather_bytes(fw, data, fw.length(data), name, what)
    return fw.from_bytes(gathered, dtype, row_shape), lengths // fw.row_bytes(dtype, row_shape)
