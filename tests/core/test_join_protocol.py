"""Issue 40: one join protocol (byteps_native/join_protocol.py) under both
faces. Here two ranks run it as threads of one process over a real c10d
HashStore, with plain lists as their submission logs: the rank that joins
first stands in for exactly the operations the other submits after it, in
order, and both learn which rank joined last; a second epoch starts clean."""
import threading

import pytest

from byteps_native import join_protocol

dist = pytest.importorskip("torch.distributed")


class _Rank:
    def __init__(self, store, rank, size):
        self.log = []
        self.stood_in = []
        self.protocol = join_protocol.JoinProtocol(f"test-join-{rank}", lambda: store, lambda: rank,
                                                   lambda: size, lambda: len(self.log),
                                                   lambda i: self.log[i].encode())

    def submit(self, record):
        with self.protocol.lock:
            self.log.append(record)


def _run_epoch(ranks, early, late, extra_ops):
    joined_early = threading.Event()
    results = {}

    def early_rank():
        results[early] = ranks[early].protocol.join(lambda record: ranks[early].stood_in.append(record.decode()))
        joined_early.set()

    thread = threading.Thread(target=early_rank)
    thread.start()
    # The late rank's watcher sees the join and publishes from the early rank's
    # count on. (In a job the late rank's next collective cannot complete
    # before that: it waits for the joined rank's stand-in.)
    while not ranks[late].protocol.publishing:
        threading.Event().wait(0.001)
    for op in extra_ops:
        ranks[late].submit(op)
    results[late] = ranks[late].protocol.join(lambda record: pytest.fail(f"the last rank stood in for {record}"))
    thread.join(timeout=30)
    assert not thread.is_alive() and joined_early.is_set()
    return results


def test_the_first_rank_to_join_stands_in_for_the_others_operations():
    store = dist.HashStore()
    ranks = [_Rank(store, r, 2) for r in range(2)]
    for rank in ranks:
        for op in ("a", "b"):
            rank.submit(op)  # both ranks issue the same operations until one joins
        rank.protocol.start_watcher()
    try:
        results = _run_epoch(ranks, early=0, late=1, extra_ops=["c", "d", "e"])
        assert results == {0: 1, 1: 1}, "join() returns the rank that joined last, on every rank"
        assert ranks[0].stood_in == ["c", "d", "e"]
        # A second epoch: counts start again from each rank's new base.
        ranks[0].stood_in.clear()
        for rank in ranks:
            rank.submit("f")
        results = _run_epoch(ranks, early=1, late=0, extra_ops=["g"])
        assert results == {0: 0, 1: 0} and ranks[1].stood_in == ["g"]
    finally:
        for rank in ranks:
            rank.protocol.stop_watcher()


def test_a_rank_that_joins_before_its_watcher_looked_still_publishes_what_the_other_needs():
    """The late rank submits past the early rank's count and joins before its
    watcher's next poll (here: never): join() itself must see that a rank
    joined and publish those operations, or the early rank's join fails."""
    store = dist.HashStore()
    ranks = [_Rank(store, r, 2) for r in range(2)]
    ranks[1].protocol.POLL_S = 3600  # the late rank's watcher never looks in time
    for rank in ranks:
        for op in ("a", "b"):
            rank.submit(op)
        rank.protocol.start_watcher()
    results, errors = {}, []

    def run(rank, stand_in):
        try:
            results[rank] = ranks[rank].protocol.join(stand_in)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(f"rank {rank}: {e}")

    early = threading.Thread(target=run, args=(0, lambda record: ranks[0].stood_in.append(record.decode())),
                             daemon=True)
    late = threading.Thread(target=run, args=(1, lambda record: errors.append(f"rank 1 stood in for {record}")),
                            daemon=True)
    try:
        early.start()
        while int(store.add(join_protocol.key(0, "joined"), 0)) == 0:
            threading.Event().wait(0.001)
        assert not ranks[1].protocol.publishing
        for op in ("c", "d"):
            ranks[1].submit(op)
        late.start()
        early.join(timeout=30)
        late.join(timeout=30)
        assert not early.is_alive() and not late.is_alive(), f"join() hung; errors so far: {errors}"
        assert errors == []
        assert results == {0: 1, 1: 1}
        assert ranks[0].stood_in == ["c", "d"]
    finally:
        for rank in ranks:
            rank.protocol.stop_watcher()
