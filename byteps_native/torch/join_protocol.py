"""Horovod's ``join()``: a rank that ran out of data joins; the others'
collectives go on, the joined rank contributing zeros, until every rank has
joined. join() returns the rank that joined last.

The engine reduces by name and needs every rank's push for each round, so a
joined rank must learn which engine operations the others still issue. Every
engine call of the Horovod API goes through ``push_pull_async`` /
``broadcast_async`` below, which count them (and keep the recent ones). Once a
rank announces in the c10d store that it joined (with its count), a watcher
thread on every other rank publishes the operations past that count, and from
then on each new one before it is submitted. The joined rank follows the log of
the lowest rank still training and submits zeros of the same name, dtype and
shape (byteps_native/join_log.py, shared with TF). All ranks issue the same
sequence until they join, so operation i is the same on every rank. Gathers (allgather, alltoall, allgather_object) fail on
the ranks still training, as in Horovod: the joined rank answers their length
round with -1 in its slot.

Needs the c10d store (torchrun); under bpslaunch join() is a barrier that
returns the last rank to arrive, and every rank must issue the same
collectives before joining.
"""
import collections
import pickle
import threading
import time

import torch
import torch.distributed as dist

from byteps_native import join_log
from byteps_native._runtime import lifecycle
from byteps_native.torch import engine
from byteps_native.torch.extension import _c10d

_POLL_S = 0.02
_KEEP = 100000  # operations kept for a rank that joins later than the others' watchers look


class _Log:
    def __init__(self):
        self.lock = threading.Lock()
        self.epoch = 0           # one per join(): keys are per epoch
        self.count = 0           # engine operations issued in this epoch
        self.recent = collections.deque(maxlen=_KEEP)
        self.publishing = False  # some rank joined: publish each operation first
        self.joined = False      # this rank is inside join()
        self.watcher = None
        self.stop = threading.Event()


_log = _Log()


def start_watcher():
    """Runs with the engine (an on_init hook) once torch.distributed is up,
    else at the first operation (an engine started by
    init_process_group('byteps') starts before the default group exists):
    from then on this rank publishes its operations once another rank joins."""
    if _log.watcher is not None or not dist.is_initialized() or engine.size() <= 1:
        return
    _log.stop.clear()
    _log.watcher = threading.Thread(target=_watch, name="byteps-join-watcher", daemon=True)
    _log.watcher.start()


def stop_watcher():
    """The watcher calls into the c10d store: it must be gone before the store is."""
    _log.stop.set()
    if _log.watcher is not None:
        _log.watcher.join(timeout=5)
        _log.watcher = None


lifecycle.on_init(start_watcher, stop=stop_watcher)


def _store():
    if not dist.is_initialized():
        return None
    return dist.PrefixStore("byteps_native/join/", dist.distributed_c10d._get_default_store())


def _record(descriptor):
    """Count (and, once some rank joined, publish) one engine operation."""
    with _log.lock:
        if _log.joined:
            return
        index = _log.count
        _log.count += 1
        _log.recent.append(descriptor)
        if _log.publishing:
            _store().set(join_log.key(_log.epoch, "op", engine.rank(), index), pickle.dumps(descriptor))
        elif _log.watcher is None:
            start_watcher()


def _watch():
    """Starts publishing this rank's operations once another rank has joined."""
    store = _store()
    while not _log.stop.wait(_POLL_S):
        with _log.lock:
            if _log.publishing or _log.joined:
                continue
            epoch = _log.epoch
        try:
            if int(store.add(join_log.key(epoch, "joined"), 0)) == 0:
                continue
            counts = [int(store.get(join_log.key(epoch, "count", r))) for r in range(engine.size())
                      if store.check([join_log.key(epoch, "count", r)])]
        except Exception:  # the job is ending (store gone): nothing to publish for
            return
        with _log.lock:
            if _log.epoch != epoch or _log.joined or not counts:
                continue
            start = min(counts)
            backlog = list(_log.recent)[len(_log.recent) - (_log.count - start):] if _log.count > start else []
            for offset, descriptor in enumerate(backlog):
                store.set(join_log.key(epoch, "op", engine.rank(), start + offset), pickle.dumps(descriptor))
            _log.publishing = True


def push_pull_async(tensor, name, priority, average, wire_dtype=None, mark_stride=None):
    """_c10d.push_pull_async, counted for join(). `mark_stride`: a gather's
    length round; a joined rank sets element rank * mark_stride to -1 there, so
    that the gather fails on the ranks still training (check_not_joined)."""
    _record(("push_pull", name, tensor.dtype, tuple(tensor.shape), priority, average, wire_dtype, mark_stride,
             tensor.device.type))
    return _c10d.push_pull_async(tensor, name, priority, average, wire_dtype)


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
    _, name, dtype, shape, priority, average, wire_dtype, mark_stride, device_type = descriptor
    zeros = _zeros_like_theirs(shape, dtype, device_type)
    if mark_stride is not None:
        zeros.view(-1)[engine.rank() * mark_stride] = -1
    return _c10d.push_pull_async(zeros, name, priority, average, wire_dtype)


def join(device=-1):
    """Horovod's join (see the module docstring); returns the last rank to join."""
    store = _store()
    me, size = engine.rank(), engine.size()
    if store is None or size == 1:
        return _join_as_barrier()
    with _log.lock:
        _log.joined = True
        epoch, position = _log.epoch, _log.count
    pending = []  # stand-ins are submitted as the log is read, and waited for at the end
    last = join_log.follow(store, epoch, me, size, position,
                           lambda record: pending.append(_stand_in(pickle.loads(record))))
    for future in pending:
        future.wait()
    join_log.leave_epoch(store, epoch, size)
    with _log.lock:
        _log.epoch += 1
        _log.count = 0
        _log.recent.clear()
        _log.publishing = False
        _log.joined = False
    return last


def _join_as_barrier():
    arrival = torch.zeros(engine.size(), dtype=torch.float64)
    arrival[engine.rank()] = time.time()
    _c10d.push_pull_async(arrival, f"join.{engine.size()}", 0, False, None).wait()
    return int(torch.argmax(arrival))
