"""Soak: 2000 steps of random tensor sets with checksums on 2 machines x 2
local ranks and 2 servers; every sum exact, resident memory flat.

BYTEPS_SOAK_STEPS=100000 runs the long version (documented in
docs/reliability.md)."""
import os
import re

from tests.reliability import Cluster

STEPS = int(os.environ.get("BYTEPS_SOAK_STEPS", "2000"))
RSS_GROWTH_LIMIT_KB = 32 * 1024


def _rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def test_soak_random_sizes_checksums_stable_rss(tmp_path):
    with Cluster(tmp_path, machines=2, local_size=2, servers=2, BYTEPS_TIMEOUT=30,
                 BYTEPS_PARTITION_BYTES=512000) as c:
        workers = c.start("soak.py", STEPS)
        servers = [c.procs["server 0"], c.procs["server 1"]]
        first_checkpoint = min(STEPS, 200)
        for w in workers:
            assert w.wait_for(f"RSS {first_checkpoint} ", 120), c.dump()
        server_rss_early = [_rss(s.pid) for s in servers]
        for w in workers:
            assert w.wait_for(f"RSS {STEPS // 2} ", 60 + STEPS * 0.2), c.dump()
        server_rss_late = [_rss(s.pid) for s in servers]
        codes = c.wait_all(60 + STEPS * 0.2)
        assert all(rc == 0 for rc in codes.values()), c.dump()
        for w in workers:
            out = w.output()
            assert f"DONE {STEPS}" in out and "WRONG SUM" not in out, out
            rss = {int(s): int(kb) for s, kb in re.findall(r"^RSS (\d+) (\d+)$", out, re.M)}
            growth = rss[STEPS] - rss[first_checkpoint]
            print(f"{w.name} RSS kB by step: {rss}")
            assert growth < RSS_GROWTH_LIMIT_KB, f"{w.name} RSS grew {growth} kB: {rss}"
        for s, early, late in zip(servers, server_rss_early, server_rss_late):
            print(f"{s.name} RSS kB: step {first_checkpoint}: {early}, step {STEPS // 2}: {late}")
            assert late - early < RSS_GROWTH_LIMIT_KB, f"{s.name} RSS grew from {early} to {late} kB"
