"""Soak: many steps of random tensor sets with checksums; reports RSS.

Usage: soak.py <steps>. Every rank draws the same random choice of tensors
per step (seeded by the step) and fills them with rank-dependent integers
whose sum is known exactly, in every dtype. Prints RSS <step> <kB> at
checkpoints, DONE at the end; exits 4 on a wrong sum.
"""
import sys

import numpy as np

import byteps_native.core as bps

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


steps = int(sys.argv[1])
bps.init()
rank, size = bps.rank(), bps.size()
catalog = np.random.default_rng(1234)
# 40 named tensors of fixed random sizes (1 element .. 400 k) and dtypes.
tensors = []
for i in range(40):
    n = int(catalog.choice([1, 7, 63, 1000, 4097, 65537, 400000], p=[.1, .1, .15, .25, .2, .15, .05]))
    n = max(1, n + int(catalog.integers(0, 50)))
    tensors.append((f"layer{i}.grad", n, DTYPES[i % len(DTYPES)]))
print(f"READY rank {rank} of {size}", flush=True)
checkpoints = {min(steps, 200), steps // 4, steps // 2, steps}
for step in range(1, steps + 1):
    pick = np.random.default_rng(step).choice(len(tensors), size=1 + step % 4, replace=False)
    live = []
    for i in pick:
        name, n, dtype = tensors[i]
        base = (np.arange(n, dtype=np.int64) + step) % 11
        x = (base * (rank + 1)).astype(dtype)
        live.append((x, base, dtype, bps.push_pull_async(x, name=name, average=False, priority=int(i % 3))))
    for x, base, dtype, handle in live:
        handle.wait()
        want = (base * (size * (size + 1) // 2)).astype(dtype)
        if not np.array_equal(x, want):
            bad = int(np.flatnonzero(x != want)[0])
            print(f"WRONG SUM step {step} dtype {np.dtype(dtype)} n {len(x)} at {bad}: {x[bad]} != {want[bad]}",
                  flush=True)
            sys.exit(4)
    if step in checkpoints:
        print(f"RSS {step} {rss_kb()}", flush=True)
bps.shutdown()
print(f"DONE {steps}", flush=True)
