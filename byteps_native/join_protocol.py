"""Horovod's ``join()``, once for every face: a rank that ran out of data
joins; the others' collectives go on, the joined rank contributing zeros,
until every rank has joined. join() returns the rank that joined last.

The engine reduces by name and needs every rank's push for each round, so a
joined rank must learn which engine operations the others still issue. Every
rank counts the engine operations it submits (its SubmissionLog). A rank that
joins announces its count in a c10d-style store (set / get / add / check;
torchrun's TCPStore); a watcher thread on every other rank then publishes
each operation past that count under ``<epoch>/op/<rank>/<index>``, and from
then on each new one. The joined rank follows the log of the lowest rank
still training, then, once every rank has joined, of the one with the longest
log, and stands in for each operation (zeros of the same name, dtype and
shape). All ranks issue the same sequence until they join, so operation i is
the same on every rank.

A face supplies only what is its framework's: where submissions are counted
(torch in Python, TF through the engine's own log, csrc/core/submission_log.h), how a
record becomes a stand-in, and its store (JoinProtocol's arguments):
byteps_native/torch/join_protocol.py and byteps_native/tf/join_protocol.py.
"""
import os
import threading
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
    barrier keeps a fast rank's next epoch from mixing with this one. A rank
    whose join() failed never arrives: after BYTEPS_TIMEOUT the others fail
    too, saying so, instead of waiting forever."""
    store.add(key(epoch, "left"), 1)
    patience = float(os.environ.get("BYTEPS_TIMEOUT", "300"))
    deadline = time.monotonic() + patience
    while int(store.add(key(epoch, "left"), 0)) < size:
        if time.monotonic() > deadline:
            left = int(store.add(key(epoch, "left"), 0))
            raise RuntimeError(f"join(): only {left} of {size} ranks finished join() within {patience:.0f} s "
                               "(BYTEPS_TIMEOUT); another rank's join() failed or it stopped: see its error")
        time.sleep(0.001)


class JoinProtocol:
    """One face's join state: its watcher, what it has published, its epochs.

    `store()`: the store (a fresh handle is fine) or None when the job has
    none. `rank()` / `size()`: this process's place. `submitted()`: engine
    operations submitted so far, ever (a count that never goes back).
    `submission(index)`: operation `index`'s record (bytes) for a stand-in."""

    POLL_S = 0.02

    def __init__(self, name, store, rank, size, submitted, submission):
        self.name = name
        self._store, self._rank, self._size = store, rank, size
        self._submitted, self._submission = submitted, submission
        self.lock = threading.Lock()
        self.epoch = 0           # one per join(): store keys are per epoch
        self.base = 0            # submitted() when this epoch began
        self.publishing = False  # some rank joined: publish every submission
        self.published = 0       # operations of this epoch published so far
        self.joined = False      # this rank is inside join()
        self.watcher = None
        self.stop = threading.Event()

    def start_watcher(self):
        """From now on this rank publishes its submissions once another rank joins."""
        if self.watcher is not None or self._size() <= 1 or self._store() is None:
            return
        self.stop.clear()
        self.watcher = threading.Thread(target=self._watch, name=self.name, daemon=True)
        self.watcher.start()

    def stop_watcher(self):
        """The watcher uses the store: it must stop before the store goes."""
        self.stop.set()
        if self.watcher is not None:
            self.watcher.join(timeout=5)
            self.watcher = None

    def publish_locked(self, store=None):
        """Publish this epoch's submissions not yet published (lock held).
        A face that counts in Python calls it after each submission, so the
        joined rank need not wait for the watcher's next poll."""
        if store is None:
            store = self._store()
        me = self._rank()
        current = self._submitted() - self.base
        for index in range(self.published, current):
            store.set(key(self.epoch, "op", me, index), self._submission(self.base + index))
        self.published = max(self.published, current)

    def _start_publishing_if_joined_locked(self, store):
        """If a rank joined this epoch, publish from the lowest count announced."""
        epoch = self.epoch
        if int(store.add(key(epoch, "joined"), 0)) == 0:
            return
        counts = [int(store.get(key(epoch, "count", r))) for r in range(self._size())
                  if store.check([key(epoch, "count", r)])]
        if counts:
            self.published = min(counts)
            self.publishing = True

    def _watch(self):
        store = self._store()
        while not self.stop.wait(self.POLL_S):
            try:
                with self.lock:
                    if self.joined:
                        continue
                    if self.publishing:
                        self.publish_locked(store)
                        continue
                    epoch = self.epoch
                if int(store.add(key(epoch, "joined"), 0)) == 0:
                    continue
                counts = [int(store.get(key(epoch, "count", r))) for r in range(self._size())
                          if store.check([key(epoch, "count", r)])]
                with self.lock:
                    if self.epoch != epoch or self.joined or not counts:
                        continue
                    self.published = min(counts)
                    self.publishing = True
                    self.publish_locked(store)
            except Exception:  # the job is ending (store or engine gone): nothing to publish for
                return

    def join(self, stand_in, finish=None):
        """This rank joins: `stand_in(record)` for each operation the others
        publish past this rank's count, then `finish()` (waiting for the
        stand-ins), then every rank leaves the epoch. Returns the last rank
        to join."""
        store = self._store()
        me, size = self._rank(), self._size()
        with self.lock:
            if not self.publishing:
                # Another rank may have joined since the watcher last looked
                # (it polls every POLL_S): without this look, the operations
                # this rank submitted past that rank's count were never
                # published, and the other rank's join() failed naming them.
                self._start_publishing_if_joined_locked(store)
            if self.publishing:  # the others' stand-ins must see every operation before the final count
                self.publish_locked(store)
            self.joined = True
            epoch, position = self.epoch, self._submitted() - self.base
        last = follow(store, epoch, me, size, position, stand_in)
        if finish is not None:
            finish()
        leave_epoch(store, epoch, size)
        with self.lock:
            self.epoch += 1
            self.base = self._submitted()
            self.publishing = False
            self.published = 0
            self.joined = False
        return last
