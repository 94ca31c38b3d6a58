"""torch as the collective algorithms' Framework (byteps_native/algorithms).

Rounds run at once, on host tensors, through join_protocol (which counts
every engine operation for join()); an engine name gets the tensor's size
appended, since the engine fixes a name's size at first use.
"""
import torch

from byteps_native._runtime.errors import HorovodInternalError
from byteps_native.algorithms import gather
from byteps_native.algorithms.framework import Framework
from byteps_native.torch import engine
from byteps_native.torch import join_protocol as _join


def sum_now(tensor, name, mark_stride=None):
    """The in-place sum over ranks of `tensor`, waited for; a failure is
    Horovod's HorovodInternalError."""
    try:
        return _join.push_pull_async(tensor, name, 0, False, None, mark_stride).wait()
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e


class Torch(Framework):
    def rank(self):
        return engine.rank()

    def size(self):
        return engine.size()

    def sum(self, tensor, name):
        return sum_now(tensor, f"{name}.{tensor.numel()}")

    def sum_failing_if_joined(self, table, name, what):
        # A joined rank standing in sets its first element to -1 (join_protocol).
        sum_now(table, f"{name}.{table.numel()}", mark_stride=table.numel() // engine.size())
        _join.check_not_joined(table, what)
        return table

    def table(self, row, width=None):
        shape = (engine.size(),) if width is None else (engine.size(), width)
        table = torch.zeros(shape, dtype=torch.int64)
        table[engine.rank()] = torch.as_tensor(row, dtype=torch.int64)
        return table

    def length(self, data):
        return data.numel()

    def bytes_of(self, payload):
        if isinstance(payload, bytes):
            return torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else \
                torch.zeros(0, dtype=torch.uint8)
        return torch.from_numpy(payload)

    def minimum(self, a, b):
        return min(int(a), int(b))

    def total(self, values):
        return int(values.sum())

    def padded_length(self, total):
        return gather.padded_length(total)

    def placed_sum(self, data, offset, length, name):
        # Through host memory, as every round here: the engine's gather.
        try:
            return _join.gather_bytes_async(data.cpu(), int(offset), int(length), f"{name}.{length}").wait()
        except RuntimeError as e:
            raise HorovodInternalError(str(e)) from e

    def as_bytes(self, tensor):
        if tensor.numel() == 0:
            return torch.zeros(0, dtype=torch.uint8)
        return tensor.detach().contiguous().reshape(-1).view(torch.uint8)

    def from_bytes(self, data, dtype, row_shape):
        if data.numel() == 0:
            return torch.zeros((0, *row_shape), dtype=dtype)
        return data.clone().view(dtype).reshape(-1, *row_shape)

    def row_bytes(self, dtype, row_shape):
        return max(1, int(torch.Size(row_shape).numel()) * torch.empty((), dtype=dtype).element_size())

    def concat(self, pieces):
        return torch.cat(pieces)

    def cast_counts(self, counts):
        return counts.to(torch.int32)


TORCH = Torch()
