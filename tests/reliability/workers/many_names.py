"""More distinct tensor names over a job's life than the machine's
shared-memory key table holds (the test sets BYTEPS_LOCAL_KEY_TABLE_SIZE
small). Usage: many_names.py <names> <in_flight>.

Each step pushes one name used every step ("weights", 3 partitions) and
`in_flight` fresh names at once ("batch<step>.<i>", never used again, 1-2
partitions), some steps revisiting an old name; every sum is checked exactly.
Prints DONE <names pushed> <stats local_keys_used> or FAILED <error>.
"""
import sys

import numpy as np

import byteps_native.core as bps

names, in_flight = int(sys.argv[1]), int(sys.argv[2])
bps.init()
r, n = bps.rank(), bps.size()
print(f"READY rank {r}", flush=True)
pushed = 0
try:
    step = 0
    while pushed < names:
        arrays, handles = [], []
        weights = np.full(3000, r + 1.0 + step, np.float32)  # 3 partitions of 4 KB
        handles.append(bps.push_pull_async(weights, name="weights", average=False))
        arrays.append((weights, n * (n + 1) / 2 + n * step))
        for i in range(in_flight):
            # Every fifth step also revisits a name of long ago: its entry was
            # reclaimed meanwhile and must come back with the right rounds.
            name = f"batch{step // 2}.{i}" if step % 5 == 4 else f"batch{step}.{i}"
            x = np.full(200 + 700 * (i % 2), r + 1.0 + i, np.float32)
            handles.append(bps.push_pull_async(x, name=name, average=False))
            arrays.append((x, n * (n + 1) / 2 + n * i))
            pushed += 1
        for h in handles:
            h.wait()
        for a, want in arrays:
            assert np.all(a == want), f"step {step}: wrong sum {a[0]} != {want}"
        step += 1
    print(f"DONE {pushed} {bps.stats().get('local_keys_used')}", flush=True)
except Exception as e:  # reported, not raised: the test reads every rank's line
    print(f"FAILED {type(e).__name__}: {e}", flush=True)
    raise
bps.shutdown()
