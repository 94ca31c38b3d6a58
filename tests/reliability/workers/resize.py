"""One tensor name whose size changes between steps. Usage: resize.py <case>.

agree:    every rank pushes 'x' with 100, 300, 100, 5000, 7 floats (both
          shrinking and growing, one and several partitions); prints
          STEP <i> ok | STEP <i> error ... per step.
disagree: rank 1 pushes 'x' with 300 floats where the others push 100;
          prints RESULT ok | RESULT error <code> <message>, then REUSE (the
          name with an agreed size) and AFTER (another name).
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


def push_checked(count, step, name="x"):
    r, n = bps.rank(), bps.size()
    y = np.arange(count, dtype=np.float32) + (r + 1) + step
    bps.push_pull(y, name=name, average=False)
    want = n * np.arange(count, dtype=np.float32) + n * (n + 1) / 2 + n * step
    assert np.array_equal(y, want), f"wrong sum for {count} elements: {y[:4]} != {want[:4]}"


case = sys.argv[1]
bps.init()
r = bps.rank()
print(f"READY rank {r}", flush=True)
if case == "agree":
    for i, count in enumerate([100, 300, 100, 5000, 7, 300, 5000]):
        print(f"STEP {i} " + attempt(lambda: push_checked(count, i)), flush=True)
elif case == "disagree":
    print("FIRST " + attempt(lambda: push_checked(100, 0)), flush=True)
    x = np.ones(300 if r == 1 else 100, np.float32)
    print("RESULT " + attempt(lambda: bps.push_pull(x, name="x", average=False)), flush=True)
    print("REUSE " + attempt(lambda: [push_checked(c, s) for s, c in enumerate([100, 300, 100])]), flush=True)
    print("AFTER " + attempt(lambda: push_checked(1000, 0, name="good.tensor")), flush=True)
else:
    raise SystemExit(f"unknown case {case}")
bps.shutdown()
