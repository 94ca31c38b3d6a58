"""Horovod's ``join()`` for torch: the protocol is byteps_native/join_protocol.py
(shared with TF); this module says where torch counts operations and how a
joined rank stands in for one.

Every engine call of the Horovod API goes through ``push_pull_async`` /
``broadcast_async`` below, which count them (and keep the recent ones as
records) and, once some rank has joined, publish each one before it is
submitted. Gathers (allgather, alltoall, allgather_object) fail on the ranks
still training, as in Horovod: the joined rank answers their length round
with -1 in its slot.

Needs the c10d store (torchrun); under bpslaunch join() is a barrier that
returns the last rank to arrive, and every rank must issue the same
collectives before joining.
"""
import collections
import pickle
import time

import torch
import torch.distributed as dist

from byteps_native import join_protocol
from byteps_native._runtime import lifecycle
from byteps_native.torch import engine
from byteps_native.torch.extension import _c10d

_KEEP = 100000  # operations kept for a rank that joins later than the others' watchers look


class _Records:
    """This process's engine operations: how many ever, and the recent ones."""

    def __init__(self):
        self.count = 0
        self.recent = collections.deque(maxlen=_KEEP)

    def submission(self, index):
        first = self.count - len(self.recent)
        if index < first:
            raise RuntimeError(f"join(): engine operation {index} is no longer kept (the last {_KEEP} are); "
                               f"a rank joined more than {_KEEP} operations after another")
        return pickle.dumps(self.recent[index - first])


_records = _Records()


def _store():
    if not dist.is_initialized():
        return None
    return dist.PrefixStore("byteps_native/join/", dist.distributed_c10d._get_default_store())


_protocol = join_protocol.JoinProtocol("byteps-join-watcher", _store, engine.rank, engine.size,
                                       lambda: _records.count, _records.submission)


def start_watcher():
    """Runs with the engine (an on_init hook) once torch.distributed is up,
    else at the first operation (an engine started by
    init_process_group('byteps') starts before the default group exists)."""
    if dist.is_initialized():
        _protocol.start_watcher()


lifecycle.on_init(start_watcher, stop=_protocol.stop_watcher)


def _record(descriptor):
    """Count (and, once some rank joined, publish) one engine operation."""
    with _protocol.lock:
        if _protocol.joined:
            return
        _records.count += 1
        _records.recent.append(descriptor)
        if _protocol.publishing:
            _protocol.publish_locked()
        elif _protocol.watcher is None:
            start_watcher()


def push_pull_async(tensor, name, priority, average, wire_dtype=None, mark_stride=None):
    """_c10d.push_pull_async, counted for join(). `mark_stride`: a gather's
    length round; a joined rank sets element rank * mark_stride to -1 there, so
    that the gather fails on the ranks still training (check_not_joined)."""
    _record(("push_pull", name, tensor.dtype, tuple(tensor.shape), priority, average, wire_dtype, mark_stride,
             tensor.device.type))
    return _c10d.push_pull_async(tensor, name, priority, average, wire_dtype)


def push_pull_group_async(tensors, names, priorities, average, wire_dtypes, fusion_bytes):
    """_c10d.push_pull_group_async (the engine fuses host tensors), counted
    for join() as one operation: a joined rank stands in with the same group
    of zeros, so the engine packs the same buckets there."""
    _record(("push_pull_group", tuple(names), tuple(t.dtype for t in tensors), tuple(tuple(t.shape) for t in tensors),
             tuple(priorities), average, tuple(wire_dtypes), fusion_bytes))
    return _c10d.push_pull_group_async(tensors, list(names), list(priorities), average, list(wire_dtypes),
                                       fusion_bytes)


def gather_bytes_async(data, offset, length, name):
    """_c10d.gather_bytes_async, counted for join(): to the other ranks it is
    a uint8 sum of `length` bytes, so a joined rank stands in with zeros."""
    _record(("push_pull", name, torch.uint8, (length,), 0, False, None, None, data.device.type))
    return _c10d.gather_bytes_async(data, offset, length, name)


def check_not_joined(counts, what):
    """Raise Horovod's error when a joined rank answered a gather's length round."""
    joined = sorted({int(i) for i in torch.nonzero(counts.reshape(-1) < 0).flatten()})
    if joined:
        raise RuntimeError(f"{what} cannot run while a rank has joined (Horovod's rule): element(s) {joined} "
                           "came from joined ranks; only allreduce-style collectives continue after join()")


def broadcast_async(tensor, root_rank, name):
    _record(("broadcast", name, tensor.dtype, tuple(tensor.shape), root_rank, tensor.device.type))
    return _c10d.broadcast_async(tensor, root_rank, name)


def _zeros_like_theirs(shape, dtype, device_type):
    """Zeros on the device type the other ranks used: the engine takes GPU
    tensors another way (NCCL among a machine's GPUs) than CPU ones."""
    device = torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device("cpu")
    return torch.zeros(shape, dtype=dtype, device=device)


def _stand_in(descriptor):
    """Submit this joined rank's part of another rank's operation."""
    if descriptor[0] == "broadcast":
        _, name, dtype, shape, root, device_type = descriptor
        return _c10d.broadcast_async(_zeros_like_theirs(shape, dtype, device_type), root, name)
    if descriptor[0] == "push_pull_group":
        _, names, dtypes, shapes, priorities, average, wire_dtypes, fusion_bytes = descriptor
        zeros = [torch.zeros(shape, dtype=dtype) for shape, dtype in zip(shapes, dtypes)]
        futures = _c10d.push_pull_group_async(zeros, list(names), list(priorities), average, list(wire_dtypes),
                                              fusion_bytes)
        return torch.futures.collect_all(futures)
    _, name, dtype, shape, priority, average, wire_dtype, mark_stride, device_type = descriptor
    zeros = _zeros_like_theirs(shape, dtype, device_type)
    if mark_stride is not None:
        zeros.view(-1)[engine.rank() * mark_stride] = -1
    return _c10d.push_pull_async(zeros, name, priority, average, wire_dtype)


def join(device=-1):
    """Horovod's join (byteps_native/join_protocol.py); returns the last rank to join."""
    if _store() is None or engine.size() == 1:
        return _join_as_barrier()
    pending = []  # stand-ins are submitted as the log is read, and waited for at the end

    def finish():
        for future in pending:
            future.wait()
    return _protocol.join(lambda record: pending.append(_stand_in(pickle.loads(record))), finish)


def _join_as_barrier():
    arrival = torch.zeros(engine.size(), dtype=torch.float64)
    arrival[engine.rank()] = time.time()
    _c10d.push_pull_async(arrival, f"join.{engine.size()}", 0, False, None).wait()
    return int(torch.argmax(arrival))
