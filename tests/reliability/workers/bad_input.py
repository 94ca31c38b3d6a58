"""Pushes deliberately inconsistent tensors. Usage: bad_input.py <case>.

Prints RESULT ok | RESULT error <code> <message> for the bad push, then
checks that a good tensor still reduces (AFTER ok | AFTER error ...).
"""
import sys
import time

import numpy as np

import byteps_native.core as bps


def attempt(fn):
    try:
        fn()
        return "ok"
    except bps.BytePSError as e:
        message = e.args[0] if e.args else str(e)
        code = getattr(e, "code", e.args[1] if len(e.args) > 1 else "?")
        return f"error {code} {message}"


case = sys.argv[1]
bps.init()
r = bps.rank()
print(f"READY rank {r}", flush=True)

if case == "shape":
    x = np.ones((10, 5 + r), np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "dtype":
    x = np.ones(64, np.float32 if r == 0 else np.float64)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "same_bytes_other_shape":
    # Same byte count and dtype, different shape: only the signature differs.
    x = np.ones((4, 6) if r == 0 else (6, 4), np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "average":
    # Same tensor everywhere, but rank 0 asks for the mean and the others for the sum.
    x = np.ones(64, np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight", average=(r == 0))
elif case == "partitions":
    # Different sizes that cut into different numbers of partitions
    # (BYTEPS_PARTITION_BYTES is small in this case): the ranks' rounds of the
    # partitions only one of them has drift apart.
    x = np.ones(3000 + 2000 * r, np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "local_only":
    # Only local rank 1 of machine 0 differs: the other machine agrees and
    # waits at the server until machine 0 tells it.
    x = np.ones((10, 6 if r == 1 else 5), np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "plain":
    # Nothing wrong here; the disagreement is in the environment (the test's).
    x = np.ones(3000, np.float32)
    bad = lambda: bps.push_pull(x, name="fc1.weight")
elif case == "resize_between_steps":
    # Every rank agrees, but the tensor behind one name grows between steps.
    def bad():
        small = np.ones(16, np.float32)
        bps.push_pull(small, name="grown", average=False)
        big = np.ones(300000, np.float32)
        bps.push_pull(big, name="grown", average=False)
        assert np.all(big == bps.size()), "wrong sum after the resize"
else:
    raise SystemExit(f"unknown case {case}")

started = time.monotonic()
result = attempt(bad)
print(f"SECONDS {time.monotonic() - started:.3f}", flush=True)
print("RESULT " + result, flush=True)
if case != "resize_between_steps":
    # The rejected name is usable again once every rank pushes the same tensor.
    def reuse():
        for step in range(3):
            y = np.full(5000, r + 1.0 + step, np.float32)
            bps.push_pull(y, name="fc1.weight", average=False)
            want = bps.size() * (bps.size() + 1) / 2 + bps.size() * step
            assert np.all(y == want), f"wrong sum after reuse: {y[0]} != {want}"
    print("REUSE " + attempt(reuse), flush=True)
good = np.full(1000, r + 1.0, np.float32)
after = attempt(lambda: bps.push_pull(good, name="good.tensor", average=False))
if after == "ok" and not np.all(good == bps.size() * (bps.size() + 1) / 2):
    after = "wrong sum"
print("AFTER " + after, flush=True)
bps.shutdown()
