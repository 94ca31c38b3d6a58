"""One worker of the multi-host test: push_pull tensors whose sum every worker can predict.

Prints one line `RESULT <json>` with the checks and byte counters.
"""
import json
import sys
import zlib

import numpy as np

import byteps_native.core as bps

# (name, elements, dtype): one element, sub-partition, a non-multiple of the partition size
# and of the server count, and several partitions per server.
TENSORS = [
    ("tiny", 1, np.float32),
    ("small", 1000, np.float64),
    ("odd", 1_000_003, np.float32),
    ("ints", 300_001, np.int32),
    ("big", 4 * 1024 * 1024, np.float32),
]
ROUNDS = 3


def contribution(name, count, dtype, worker, rnd):
    seed = zlib.crc32(f"{name}/{worker}/{rnd}".encode())
    # Small integers: sums are exact in every dtype and any summation order.
    return np.random.default_rng(seed).integers(-1000, 1000, size=count).astype(dtype)


def main():
    bps.init()
    me, n = bps.rank(), bps.size()
    checks = []
    for rnd in range(ROUNDS):
        for name, count, dtype in TENSORS:
            x = contribution(name, count, dtype, me, rnd)
            bps.push_pull(x, name=name, average=False)
            expected = sum(contribution(name, count, dtype, w, rnd) for w in range(n)).astype(dtype)
            ok = bool(np.array_equal(x, expected))
            checks.append({"name": name, "round": rnd, "ok": ok, "crc": zlib.crc32(x.tobytes())})
            if not ok:
                bad = int(np.flatnonzero(x != expected)[0])
                print(f"MISMATCH {name} round {rnd} at {bad}: got {x[bad]} expected {expected[bad]}", flush=True)
    print("RESULT " + json.dumps({"rank": me, "size": n, "checks": checks, "stats": bps.stats()}), flush=True)
    bps.shutdown()
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
