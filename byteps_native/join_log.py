"""The part of Horovod's ``join()`` both adapters share: a joined rank follows
the operation log of the ranks still training, over a c10d-style store
(set / get / add / check; torchrun's TCPStore).

Every rank counts the engine operations it submits. A rank that joins
announces its count; the others then publish each operation past that count
under ``<epoch>/op/<rank>/<index>`` (byteps_native/torch/join_protocol.py
and byteps_native/tf/join_protocol.py say how each framework counts and
publishes). The joined rank follows the log of the lowest rank still
training, then, once every rank has joined, of the one with the longest log,
and stands in for each operation (zeros of the same name, dtype and shape).
All ranks issue the same sequence until they join, so operation i is the same
on every rank.
"""
import os
import time


def key(epoch, *parts):
    return "/".join([str(epoch), *map(str, parts)])


def follow(store, epoch, me, size, position, stand_in):
    """Announce that this rank joined after `position` operations of `epoch`
    and call `stand_in(record)` for each operation the others published past
    it, up to the longest log. Returns the rank that joined last."""
    store.set(key(epoch, "count", me), str(position))
    if int(store.add(key(epoch, "joined"), 1)) == size:
        store.set(key(epoch, "last"), str(me))
    patience = float(os.environ.get("BYTEPS_TIMEOUT", "300"))
    progress_at = time.monotonic()
    while True:
        if time.monotonic() - progress_at > patience:
            missing = [r for r in range(size) if not store.check([key(epoch, "count", r)])]
            raise RuntimeError(f"join(): no progress for {patience:.0f} s (BYTEPS_TIMEOUT); ranks {missing} have "
                               "not joined and published no operation: every rank must call join() once its "
                               "data ends")
        training = [r for r in range(size) if not store.check([key(epoch, "count", r)])]
        if training:
            leader, target = training[0], None
        else:
            finals = {r: int(store.get(key(epoch, "count", r))) for r in range(size)}
            leader = max(finals, key=finals.get)
            target = finals[leader]
            if position >= target:
                break
        op_key = key(epoch, "op", leader, position)
        if store.check([op_key]):
            stand_in(store.get(op_key))
            position += 1
            progress_at = time.monotonic()
        elif target is not None:
            raise RuntimeError(f"join(): rank {leader} finished with {target} operations but published only "
                               f"{position}; this is a byteps_native bug")
        else:
            time.sleep(0.001)
    return int(store.get(key(epoch, "last")))


def leave_epoch(store, epoch, size):
    """Every rank has joined and stood in up to the longest log. A small
    barrier keeps a fast rank's next epoch from mixing with this one."""
    store.add(key(epoch, "left"), 1)
    while int(store.add(key(epoch, "left"), 0)) < size:
        time.sleep(0.001)
