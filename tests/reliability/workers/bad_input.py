"""Pushes deliberately inconsistent tensors. Usage: bad_input.py <case>.

Prints RESULT ok | RESULT error <code> <message> for the bad push, then
checks that a good tensor still reduces (AFTER ok | AFTER error ...).
"""
import sys

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

print("RESULT " + attempt(bad), flush=True)
good = np.full(1000, r + 1.0, np.float32)
after = attempt(lambda: bps.push_pull(good, name="good.tensor", average=False))
if after == "ok" and not np.all(good == bps.size() * (bps.size() + 1) / 2):
    after = "wrong sum"
print("AFTER " + after, flush=True)
bps.shutdown()
