"""Trains a few steps, goes idle while the test cuts a server's link, then tries once more."""
import json
import sys
import time

import numpy as np

import byteps_native.core as bps

bps.init()
a = np.ones(100000, np.float32)
for step in range(5):
    bps.push_pull(a, "w", average=False)
print("READY", flush=True)
time.sleep(float(sys.argv[1]))  # no operation pending: only heartbeats can notice the cut
t0 = time.monotonic()
try:
    bps.push_pull(a, "w", average=False)
    outcome = {"code": 0, "message": ""}
except bps.BytePSError as e:
    outcome = {"code": e.code, "message": str(e)}
outcome["seconds"] = time.monotonic() - t0
print("RESULT " + json.dumps(outcome), flush=True)
sys.exit(3 if outcome["code"] else 0)
