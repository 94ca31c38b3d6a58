"""Horovod-style push_pull and its handles, over the torch adapter's data path.

One engine per process serves this API, the c10d backend and byteps_native.core
alike; torch/engine.py starts it and answers the topology.
"""
import itertools
import threading
import zlib

import torch

from byteps_native._runtime import rank_agreement as agreement
from byteps_native._runtime.errors import HorovodInternalError
from byteps_native.compression import apply_to
from byteps_native.torch.compression import Compression, wire_dtype_for, wire_name
from byteps_native.torch import join_protocol as _join
from byteps_native.torch.engine import _require_init, rank, size


def default_name(prefix, tensor):
    """A name for an unnamed tensor. Stable (no counters: each distinct name costs
    engine memory for good) and unambiguous because every rank submits unnamed
    tensors in the same order and the engine serves one name's rounds in order."""
    return f"{prefix}.noname.{str(tensor.dtype).replace('torch.', '')}.{tensor.numel()}"


_shape_at_first_use = {}


def engine_name(name, tensor):
    """The engine fixes a name's dtype and size at first use; Horovod lets a
    name be reused for another shape later (e.g. 'exp_avg' per parameter).
    A later use with another dtype/size gets its own engine name; every rank
    does the same, so names still match, and a cross-rank mismatch at first
    use is still reported by the engine."""
    key = (str(tensor.dtype).replace("torch.", ""), tensor.numel())
    first = _shape_at_first_use.setdefault(name, key)
    return name if first == key else f"{name}.{key[0]}.{key[1]}"


class _Handles:
    """Horovod-style integer handles over torch Futures."""

    def __init__(self):
        self._lock = threading.Lock()
        self._futures = {}
        self._ids = itertools.count()
        self._submitted = 0   # operations handed out so far
        self._in_flight = {}  # user-given name -> (handle, future, self._submitted when it was added)
        self._name_of = {}    # handle -> its user-given name

    def claim(self, name):
        """Horovod's rule: two operations of one name may not be in flight at
        once (unnamed ones are told apart by submission order instead). Here an
        operation counts as in flight until it is synchronized or another
        operation has been submitted after it: completion alone can take
        microseconds once every other rank has submitted, so whether a second
        call at once raised would otherwise depend on timing (Horovod's own test
        of the rule makes that second call at once)."""
        with self._lock:
            entry = self._in_flight.get(name)
            if entry is None:
                return
            _, future, submitted_at = entry
            if not future.done() or submitted_at == self._submitted:
                raise ValueError(f"a collective named {name!r} is already in flight on this rank; "
                                 "synchronize it first or give the second one another name")

    def add(self, future, finish, name=None):
        with self._lock:
            handle = next(self._ids)
            self._futures[handle] = (future, finish)
            self._submitted += 1
            if name is not None:
                self._in_flight[name] = (handle, future, self._submitted)
                self._name_of[handle] = name
        return handle

    def get(self, handle):
        with self._lock:
            if handle not in self._futures:
                raise ValueError(f"unknown or already synchronized push_pull handle {handle}")
            return self._futures[handle]

    def pop(self, handle):
        with self._lock:
            entry = self._futures.pop(handle)
            name = self._name_of.pop(handle, None)
            if name is not None and self._in_flight.get(name, (None,))[0] == handle:
                del self._in_flight[name]
            return entry


_handles = _Handles()


def _submit(output, average, name, priority, compression):
    """In-place push_pull of `output`; returns (future, finish) where finish()
    turns the completed future's value into the caller's result tensor."""
    _require_init("push_pull")
    name = engine_name(name, output) if name else default_name("push_pull", output)
    apply_to(name, compression)  # the engine's compressors (onebit, topk, randomk)
    if hasattr(compression, "wire_dtype"):
        wire_dtype = wire_dtype_for(compression, output)
        future = _join.push_pull_async(output, wire_name(name, wire_dtype), priority, average, wire_dtype)
        return future, lambda: output
    # A Horovod-style compressor without a wire dtype: compress in Python.
    compressed, ctx = compression.compress(output)
    compressed = compressed.contiguous()
    future = _join.push_pull_async(compressed, wire_name(name, compressed.dtype), priority, average)
    return future, lambda: output.copy_(compression.decompress(compressed, ctx))


def push_pull_async_inplace(tensor, average=True, name=None, version=0, priority=0,
                            compression=Compression.none):
    # `version` is BytePS's; it numbered rounds of one name, which the engine tracks itself.
    """Start summing (average=True: averaging) `tensor` across ranks in place; returns a handle."""
    if name:
        _handles.claim(name)
    return _handles.add(*_submit(tensor, average, name, priority, compression), name=name)


def push_pull_async(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Like push_pull_async_inplace, into a new tensor (`tensor` is left unchanged)."""
    if name:
        _handles.claim(name)
    return _handles.add(*_submit(tensor.detach().clone(), average, name, priority, compression), name=name)


def poll(handle):
    """True once the operation behind `handle` has finished (successfully or not)."""
    return _handles.get(handle)[0].done()


def synchronize(handle):
    """Wait for `handle`; returns the result tensor or raises the engine's error
    (HorovodInternalError, a RuntimeError, naming the tensor and the cause)."""
    future, finish = _handles.pop(handle)
    try:
        future.wait()
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e
    return finish()


def push_pull(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    """Sum (average=True: average) of `tensor` across ranks, as a new tensor."""
    return synchronize(push_pull_async(tensor, average, name, version, priority, compression))


def push_pull_inplace(tensor, average=True, name=None, version=0, priority=0, compression=Compression.none):
    return synchronize(push_pull_async_inplace(tensor, average, name, version, priority, compression))


# ---------------------------------------------------------------- agreement check
# An unnamed collective is named after its dtype and shape (default_name), so
# ranks that disagree on them would submit different names and wait for each
# other until BYTEPS_TIMEOUT, which ends the engine. Horovod's coordinator
# reports such a mismatch as an error instead; here one small round under a
# fixed name does the same before the collective is submitted, with the
# engine's rows and comparison (byteps_native/_runtime/rank_agreement.py, the
# same as TF's). Named collectives need no round: the engine compares a
# name's shape at first use.


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def check_ranks_agree(kind, tensors, extra=0, any_first_dim=False, fail_if_joined=False):
    """Raise RuntimeError on every rank when the ranks' unnamed `kind`
    collectives disagree on device, dtype, shape (the first dimension not
    compared when `any_first_dim`: gathers) or `extra` (a root rank, an op).
    Costs one round trip of size() * 16 int64. With `fail_if_joined`, a rank
    that called join() makes it fail (Horovod's rule for broadcast after join)."""
    _require_init(kind)
    n, me = size(), rank()
    if n == 1:
        return
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    rows = torch.zeros(n, agreement.SLOTS, dtype=torch.int64)
    if len(tensors) == 1:
        t = tensors[0]
        mine = agreement.row(kind, _dtype_name(t.dtype), list(t.shape), on_device=t.device.type != "cpu",
                             any_first_dim=any_first_dim, extra=extra)
    else:  # a group: count and a digest of every (dtype, shape)
        digest = zlib.crc32(repr([(str(t.dtype), t.device.type, tuple(t.shape[1:] if any_first_dim else t.shape))
                                  for t in tensors]).encode())
        mine = agreement.group_row(kind, len(tensors), digest, extra=extra)
    rows[me] = torch.tensor(mine, dtype=torch.int64)
    name = f"agree.{kind}.{n}"
    try:
        _join.push_pull_async(rows.view(-1), name, 0, False, None,
                              agreement.SLOTS if fail_if_joined else None).wait()
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e
    if fail_if_joined:
        _join.check_not_joined(rows[:, agreement.KIND_SLOT], f"{kind}")
    error = agreement.disagreement(kind, rows.contiguous().data_ptr(), n, me)
    if error:
        raise RuntimeError(error)
