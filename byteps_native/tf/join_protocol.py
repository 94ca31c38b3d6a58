"""Horovod's ``join()`` for TF: a rank that ran out of data joins; the others'
allreduce-style collectives go on, the joined rank contributing zeros, until
every rank has joined. join() returns the rank that joined last, as an int32
scalar tensor (Horovod's type), and may be called eagerly, inside tf.function
and in TF 1 graphs (run through a session): there the eager protocol runs as a
stateful tf.py_function, which automatic control dependencies order after the
collectives before it.

The protocol is byteps_native/join_protocol.py, shared with torch, over the
same kind of store (torchrun's TCPStore). What is TF's own is where
operations are counted: TF ops run in C++ (inside tf.function and TF 1 graphs
too, where Python only traced them), so the log is the engine's own record of
every submission (bps_submission_count / bps_submission,
csrc/core/submission_log.h), which the shared watcher publishes once some rank
has joined; and how a joined rank stands in for one (_stand_in).

Gathers (allgather, alltoall, the *_object calls) and broadcasts fail on
the ranks still training, as in Horovod, through the data they sum anyway:
their first round (named broadcasts and broadcast_variables: a small round of
their own) is named with JOIN_MARK, a joined rank standing in for it fills its
own row with -1, and the op fails with FailedPreconditionError
(the engine's rule, csrc/core/join_mark.h). The joined rank stays in join() and the job
goes on: the others may catch the error, go on training, and join.

Needs torchrun's store; under bpslaunch, join() is a barrier that returns the
last rank to arrive, and every rank must issue the same collectives first.
"""
import ctypes

import numpy as np
import tensorflow as tf

from byteps_native import join_protocol
from byteps_native._runtime import config, library, lifecycle
from byteps_native.tf import engine
from byteps_native.tf.ops import push_pull_list, sum_over_ranks

_REDUCE_AVERAGE = 1  # BPS_REDUCE_AVERAGE (csrc/c_api/byteps_c.h)
# In the engine name of a round that must fail once a rank joined
# (BPS_JOIN_MARK, csrc/core/join_mark.h); naming.sanitize never produces '#'.
JOIN_MARK = "#fails-if-joined"
# bps_dtype values (csrc/c_api/byteps_c.h) as TensorFlow dtypes.
_ENGINE_DTYPES = {0: tf.float32, 1: tf.float64, 2: tf.float16, 3: tf.bfloat16, 4: tf.int32, 5: tf.int64, 6: tf.uint8}


def _submitted():
    return library.engine().bps_submission_count()


def _submission(index):
    """Engine operation `index` (since the process started) as the engine's text line."""
    lib = library.engine()
    buf = ctypes.create_string_buffer(256)
    length = lib.bps_submission(index, buf, len(buf))
    if length >= len(buf):
        buf = ctypes.create_string_buffer(length + 1)
        length = lib.bps_submission(index, buf, len(buf))
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


_protocol = join_protocol.JoinProtocol("byteps-tf-join-watcher", _store, engine.rank, engine.size, _submitted,
                                       _submission)
# Runs with the engine (torchrun jobs of 2 or more); the watcher uses the
# store, so it stops before the store goes.
lifecycle.on_init(_protocol.start_watcher, stop=_protocol.stop_watcher)


def _stand_in(line):
    """Submit this joined rank's zeros for another rank's operation: one
    tensor, or a group (the engine's fusion) as the same group, so its buckets
    get the same names and signatures (csrc/core/submission_log.h)."""
    if line.startswith(b"group "):
        head, *members = line.split(b"\n")
        _, fusion_bytes, _count = head.split(b" ")
        _submit_zeros([_parse(m) for m in members], int(fusion_bytes))
    else:
        _submit_zeros([_parse(line)], 0)


def _parse(line):
    """(dtype, reduce_op, priority, shape, name) of one line of the log."""
    fields = line.split(b" ", 5)
    dtype, reduce_op, priority, _device, ndim = (int(f) for f in fields[:5])
    rest = fields[5].split(b" ", ndim)
    return dtype, reduce_op, priority, [int(d) for d in rest[:ndim]], rest[ndim].decode()


def _submit_zeros(members, fusion_bytes):
    contributions, names, priorities, marked = [], [], [], False
    for dtype, _reduce_op, priority, shape, name in members:
        contribution = np.zeros(shape, _ENGINE_DTYPES[dtype].as_numpy_dtype)
        if JOIN_MARK in name:  # one row per rank: ours all -1 fails the op on the others
            contribution[engine.rank()] = -1
            marked = True
        contributions.append(tf.constant(contribution))
        names.append(name)
        priorities.append(priority)
    average = {m[1] for m in members} == {_REDUCE_AVERAGE}
    try:
        with tf.device("/cpu:0"):
            push_pull_list(contributions, names, priorities, average=average, fusion_bytes=fusion_bytes)
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
    return _protocol.join(_stand_in)


def _join_as_barrier():
    """The last rank to arrive, from a sum of arrival times (run-time ones in a graph)."""
    arrival = tf.scatter_nd([[engine.rank()]], tf.reshape(tf.timestamp(), [1]), [engine.size()])
    return tf.cast(tf.argmax(sum_over_ranks(arrival, "bps.tf.join")), tf.int32)
