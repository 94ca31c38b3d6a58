"""A training loop of push_pulls with checksums: the victim and survivors of
the failure tests. Usage: train_loop.py [steps] (0 = until something fails).

Prints INIT as it calls init() (the fault campaign times a wait for the
scheduler from it), READY, then STEP <n> every 50 steps; on a BytePSError (init included) prints
BYTEPS_ERROR <code>: <message> and exits 3; on a wrong sum exits 4.
"""
import os
import sys
import time

import numpy as np

import byteps_native.core as bps

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
print("INIT", flush=True)
try:
    bps.init()
except bps.BytePSError as e:  # a fault during start-up: name it like one during training
    print(f"BYTEPS_ERROR in init: {e.args[0] if e.args else e}", flush=True)
    sys.exit(3)
print(f"READY rank {bps.rank()} of {bps.size()} pid {os.getpid()}", flush=True)
n = bps.size()
step = 0
try:
    while steps == 0 or step < steps:
        a = np.full(3000, bps.rank() + 1 + step % 7, np.float32)
        b = np.arange(50000, dtype=np.int64) * (bps.rank() + 1)
        ha = bps.push_pull_async(a, name="grad.a", average=False)
        hb = bps.push_pull_async(b, name="grad.b", average=False)
        ha.wait()
        hb.wait()
        want_a = n * (n + 1) / 2 + n * (step % 7)
        if not (np.all(a == want_a) and np.all(b == np.arange(50000) * (n * (n + 1) // 2))):
            print(f"WRONG SUM at step {step}: a[0]={a[0]} want {want_a}", flush=True)
            sys.exit(4)
        step += 1
        if step % 50 == 0:
            print(f"STEP {step}", flush=True)
        time.sleep(0.001)
except bps.BytePSError as e:
    message = e.args[0] if e.args else str(e)
    code = getattr(e, "code", e.args[1] if len(e.args) > 1 else "?")
    print(f"BYTEPS_ERROR {code} after {step} steps: {message}", flush=True)
    sys.exit(3)
bps.shutdown()
print(f"DONE {step}", flush=True)
