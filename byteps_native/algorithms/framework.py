"""What a framework supplies to the algorithms of this package.

The algorithms never touch a tensor themselves: they call these methods on
the object an adapter passes in, so the same steps build torch tensors run
at once or TF ops traced into a graph (where a length is a tensor known only
at run time). Tensors index and slice with Python's ``[]`` in both.
"""


class Framework:
    """The operations an adapter implements (torch/collectives.py, tf/collectives.py)."""

    def rank(self):
        """This process's rank (an int)."""
        raise NotImplementedError

    def size(self):
        """The number of ranks (an int)."""
        raise NotImplementedError

    # ---- rounds: each is one engine operation on the whole tensor
    def sum(self, tensor, name):
        """The sum over ranks of `tensor`, named after `name` (the adapter
        makes it an engine name, adding what the engine needs: the size)."""
        raise NotImplementedError

    def sum_failing_if_joined(self, table, name, what):
        """As sum() for a table with one row per rank, that fails (naming
        `what`) once a rank has joined: a joined rank marks its row."""
        raise NotImplementedError

    # ---- tensors
    def table(self, row, width=None):
        """An int64 tensor with one row per rank: `row` at this rank's, zeros
        elsewhere. [size] for a scalar `row` (width None), else [size, width]."""
        raise NotImplementedError

    def length(self, data):
        """The number of elements of a 1-D tensor (an integer scalar)."""
        raise NotImplementedError

    def bytes_of(self, payload):
        """A 1-D uint8 tensor holding `payload` (bytes or a NumPy uint8 array)."""
        raise NotImplementedError

    def minimum(self, a, b):
        """min(a, b) of integer scalars (either may be a tensor)."""
        raise NotImplementedError

    def total(self, values):
        """The sum of a 1-D tensor's elements (an integer scalar)."""
        raise NotImplementedError

    def padded_length(self, total):
        """The next power of two >= max(total, MIN_GATHER_BYTES): each
        distinct length is an engine name, kept for good, so lengths come
        from a ladder."""
        raise NotImplementedError

    def placed_sum(self, data, offset, length, name):
        """The uint8 sum over ranks of a zero tensor of `length` with `data`
        at `offset` (each rank's at its own): the engine's gather where the
        adapter can call it (csrc/core/placed_sum.h), else a placement and a sum."""
        raise NotImplementedError

    def as_bytes(self, tensor):
        """`tensor`'s bytes as a 1-D uint8 tensor."""
        raise NotImplementedError

    def from_bytes(self, data, dtype, row_shape):
        """Rows of `row_shape` and `dtype` from a 1-D uint8 tensor."""
        raise NotImplementedError

    def row_bytes(self, dtype, row_shape):
        """Bytes of one row (at least 1, so that rows of nothing still count)."""
        raise NotImplementedError

    def concat(self, pieces):
        """The pieces (tensors of rows) concatenated along the first dimension."""
        raise NotImplementedError

    def cast_counts(self, counts):
        """Row counts as the framework's answer (int32)."""
        raise NotImplementedError
