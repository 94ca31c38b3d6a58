"""Horovod's ``join()`` for TF: a rank that ran out of data joins; the others'
allreduce-style collectives go on, the joined rank contributing zeros, until
every rank has joined. join() returns the rank that joined last, as an int32
scalar tensor (Horovod's type), and may be called eagerly, inside tf.function
and in TF 1 graphs (run through a session): there the eager protocol runs as a
stateful tf.py_function, which automatic control dependencies order after the
collectives before it.

The protocol is the torch adapter's (byteps_native/torch/join_protocol.py;
the joined rank's side, shared, is byteps_native/join_log.py), over the same kind of store (torchrun's TCPStore): every rank counts the
engine operations it submits; a rank that joins announces its count; the
others then publish each operation past that count; the joined rank follows
the log of the lowest rank still training and submits zeros of the same name,
dtype and shape. What differs is where operations are counted: TF ops run in
C++ (inside tf.function and TF 1 graphs too, where Python only traced them),
so the op library logs each submission (csrc/tf/submission_log.h) and a
watcher thread here publishes that log once some rank has joined.

Gathers (allgather, alltoall, the *_object calls) and broadcasts fail on
the ranks still training, as in Horovod, through the data they sum anyway:
their first round (named broadcasts and broadcast_variables: a small round of
their own) is named with JOIN_MARK, a joined rank standing in for it fills its
own row with -1, and the op fails with FailedPreconditionError
(csrc/tf/joined_ranks_check.h). The joined rank stays in join() and the job
goes on: the others may catch the error, go on training, and join.

Needs torchrun's store; under bpslaunch, join() is a barrier that returns the
last rank to arrive, and every rank must issue the same collectives first.
"""
import ctypes
import threading

import numpy as np
import tensorflow as tf

from byteps_native import join_log
from byteps_native._runtime import config, lifecycle
from byteps_native.tf import engine
from byteps_native.tf._library import OPS_PATH
from byteps_native.tf.ops import push_pull_list, sum_over_ranks

_POLL_S = 0.02
_REDUCE_AVERAGE = 1  # BPS_REDUCE_AVERAGE (csrc/c_api/byteps_c.h)
# In the engine name of a round that must fail once a rank joined (kJoinMark
# in csrc/tf/joined_ranks_check.h); naming.sanitize never produces '#'.
JOIN_MARK = "#fails-if-joined"


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.epoch = 0          # one per join(): store keys are per epoch
        self.base = 0           # submission count when this epoch began
        self.publishing = False  # some rank joined: publish every submission
        self.published = 0      # operations of this epoch published so far
        self.joined = False     # this rank is inside join()
        self.watcher = None
        self.stop = threading.Event()


_state = _State()
_lib = None


def _log():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(OPS_PATH)  # already loaded by TensorFlow: a handle only
        lib.byteps_tf_submission_count.restype = ctypes.c_int64
        lib.byteps_tf_submission.restype = ctypes.c_int64
        lib.byteps_tf_submission.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64]
        _lib = lib
    return _lib


def _submitted():
    return _log().byteps_tf_submission_count()


def _submission(index):
    """Submission `index` (since the library loaded) as the op library's text line."""
    buf = ctypes.create_string_buffer(256)
    length = _log().byteps_tf_submission(index, buf, len(buf))
    if length >= len(buf):
        buf = ctypes.create_string_buffer(length + 1)
        length = _log().byteps_tf_submission(index, buf, len(buf))
    if length < 0:
        raise RuntimeError(f"join(): engine operation {index} is no longer in this process's submission log; "
                           "a rank joined more than 131072 operations after another")
    return buf.value


def _store():
    found = lifecycle.torchrun_store()
    if found is None:
        return None
    import torch.distributed as dist
    return dist.PrefixStore(f"byteps_native_tf/{config.restart_count()}/join/", found)


def start_watcher():
    """Runs with the engine (an on_init hook; torchrun jobs of 2 or more):
    from then on this rank publishes its submissions as soon as another rank joins."""
    if _state.watcher is not None or engine.size() == 1 or _store() is None:
        return
    _state.stop.clear()
    _state.watcher = threading.Thread(target=_watch, name="byteps-tf-join-watcher", daemon=True)
    _state.watcher.start()


def stop_watcher():
    """The watcher uses the store: it must stop before the store goes."""
    _state.stop.set()
    if _state.watcher is not None:
        _state.watcher.join(timeout=5)
        _state.watcher = None


lifecycle.on_init(start_watcher, stop=stop_watcher)


def _publish_locked(store):
    """Publish this epoch's submissions not yet published (lock held)."""
    me = engine.rank()
    current = _submitted() - _state.base
    for index in range(_state.published, current):
        store.set(join_log.key(_state.epoch, "op", me, index), _submission(_state.base + index))
    _state.published = max(_state.published, current)


def _watch():
    store = _store()
    while not _state.stop.wait(_POLL_S):
        try:
            with _state.lock:
                if _state.joined:
                    continue
                if _state.publishing:
                    _publish_locked(store)
                    continue
                epoch = _state.epoch
            if int(store.add(join_log.key(epoch, "joined"), 0)) == 0:
                continue
            counts = [int(store.get(join_log.key(epoch, "count", r))) for r in range(engine.size())
                      if store.check([join_log.key(epoch, "count", r)])]
            with _state.lock:
                if _state.epoch != epoch or _state.joined or not counts:
                    continue
                _state.published = min(counts)
                _state.publishing = True
                _publish_locked(store)
        except Exception:  # the job is ending (store or engine gone): nothing to publish for
            return


def _stand_in(line):
    """Submit this joined rank's zeros for another rank's operation."""
    fields = line.split(b" ", 4)
    dtype, reduce_op, priority, ndim = (int(f) for f in fields[:4])
    rest = fields[4].split(b" ", ndim)
    shape, name = [int(d) for d in rest[:ndim]], rest[ndim].decode()
    contribution = np.zeros(shape, tf.dtypes.as_dtype(dtype).as_numpy_dtype)
    marked = JOIN_MARK in name
    if marked:  # one row per rank: ours all -1 fails the op on the others
        contribution[engine.rank()] = -1
    try:
        with tf.device("/cpu:0"):
            push_pull_list([tf.constant(contribution)], [name], [priority], average=reduce_op == _REDUCE_AVERAGE)
    except tf.errors.FailedPreconditionError:
        if not marked:
            raise
        # The op fails here too (our own row is marked); the failure is for
        # the ranks still training.


def join():
    """Horovod's join (see the module docstring): the last rank to join, an
    int32 scalar tensor (in a graph, one that runs the protocol when evaluated)."""
    if _store() is None or engine.size() == 1:
        return _join_as_barrier()
    if tf.executing_eagerly():
        return tf.constant(_join_now(), tf.int32)
    # Stateful: in a tf.function, automatic control dependencies run it after
    # the collectives before it and before those after it.
    last = tf.py_function(_join_now, [], tf.int32, name="byteps_join")
    last.set_shape([])
    return last


def _join_now():
    store = _store()
    me, size = engine.rank(), engine.size()
    with _state.lock:
        if _state.publishing:  # the others' stand-ins must see every operation before the final count
            _publish_locked(store)
        _state.joined = True
        epoch, position = _state.epoch, _submitted() - _state.base
    last = join_log.follow(store, epoch, me, size, position, _stand_in)
    join_log.leave_epoch(store, epoch, size)
    with _state.lock:
        _state.epoch += 1
        _state.base = _submitted()
        _state.publishing = False
        _state.published = 0
        _state.joined = False
    return last


def _join_as_barrier():
    """The last rank to arrive, from a sum of arrival times (run-time ones in a graph)."""
    arrival = tf.scatter_nd([[engine.rank()]], tf.reshape(tf.timestamp(), [1]), [engine.size()])
    return tf.cast(tf.argmax(sum_over_ranks(arrival, "bps.tf.join")), tf.int32)
