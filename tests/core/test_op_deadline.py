"""Per-op deadlines and cancel through the core API (issue 40 item 3): real
processes, 2 machines x 2 local ranks and a dedicated server. Rank 0's op
runs out of time (or is cancelled) while rank 3 has not come to the round:
ranks 0-2 fail with the cause, naming rank 0, well before BYTEPS_TIMEOUT;
rank 3, arriving later, fails too; then the same name reduces exactly on
every rank (the job and the name stay usable)."""
import time

from tests.support.jobs import bpslaunch_source

SCRIPT = """
import time
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
outcomes = {}

def attempt(key, fn):
    t0 = time.monotonic()
    try:
        fn()
        outcomes[key] = ["ok", "", time.monotonic() - t0]
    except bps.BytePSError as e:
        outcomes[key] = [e.code, str(e), time.monotonic() - t0]

def exact(name):
    x = np.full(1000, r + 1.0, np.float32)
    bps.push_pull(x, name=name, average=False)
    assert np.all(x == n * (n + 1) / 2), x[:3]

def round_ending(name, end):
    x = np.full(1000, r + 1.0, np.float32)
    if r == n - 1:
        time.sleep(4)  # comes to the round after the others' op has ended
        attempt(name + ".late", lambda: bps.push_pull(x, name=name))
    else:
        attempt(name, lambda: end(x, name))
    attempt(name + ".again", lambda: exact(name))

exact("warmup")

def deadline(x, name):
    bps.push_pull(x, name=name, timeout=1.0 if r == 0 else None)

def cancel(x, name):
    handle = bps.push_pull_async(x, name=name)
    if r == 0:
        time.sleep(0.5)
        handle.cancel("the user stopped the step")
    handle.wait()

round_ending("grad", deadline)
round_ending("weights", cancel)
outcomes["codes"] = [bps.DEADLINE_EXCEEDED, bps.CANCELLED]
report(outcomes)
bps.shutdown()
"""


def test_a_deadline_or_cancel_fails_the_round_everywhere_and_the_name_works_again(tmp_path):
    start = time.monotonic()
    results = bpslaunch_source(tmp_path, SCRIPT, machines=2, local_workers=2, servers=1, timeout=180,
                               env={"BYTEPS_TIMEOUT": "60"}).results
    assert sorted(results) == [0, 1, 2, 3], results
    deadline_code, cancel_code = results[0]["codes"]
    for name, code, cause in (("grad", deadline_code, "passed its deadline of 1 s on rank 0"),
                              ("weights", cancel_code, "cancelled on rank 0: the user stopped the step")):
        for rank, r in results.items():
            key = name + (".late" if rank == 3 else "")
            got_code, message, seconds = r[key]
            assert got_code == code, f"rank {rank} {key}: {r[key]}"
            assert cause in message and f"'{name}'" in message, f"rank {rank} {key}: {message}"
            # Far below BYTEPS_TIMEOUT: the round ended by the deadline or cancel, not the watchdog.
            assert seconds < 20, f"rank {rank} {key} took {seconds:.1f} s"
            assert r[name + ".again"][0] == "ok", f"rank {rank}: '{name}' after the failed round: {r[name + '.again']}"
    assert time.monotonic() - start < 150
