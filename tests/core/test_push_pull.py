"""push_pull correctness through real jobs: shm local reduce, servers, both."""
import pytest

from tests.support.jobs import bpslaunch_source

# (machines, local workers per machine, servers)
TOPOLOGIES = [(1, 1, 0), (1, 2, 0), (1, 3, 0), (1, 4, 0), (2, 1, 1), (2, 1, 2), (3, 1, 2), (4, 1, 1), (2, 2, 2),
              (1, 2, 1)]

CHECK_ALL_DTYPES = """
import numpy as np, ml_dtypes
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
partition = 64 * 1024  # small partitions: many partitions and slices per tensor
sizes = [1, 3, 17, 1000, partition // 4 + 1, 3 * partition // 4 - 5, SIZES_EXTRA]
dtypes = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"]
checked = 0
for size in sizes:
    for dt in dtypes:
        npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
        rng = np.random.default_rng(size)
        base = rng.integers(0, 4, size=(n, size))  # small ints: exact in every dtype
        mine = base[r].astype(npdt)
        expect = base.sum(axis=0)
        if dt == "uint8":
            expect = expect % 256
        out = np.empty_like(mine)
        bps.push_pull(mine, name=f"t.{size}.{dt}", average=False, output=out)
        assert np.array_equal(out.astype(np.float64), expect.astype(np.float64)), (size, dt, out[:8], expect[:8])
        assert np.array_equal(mine, base[r].astype(npdt)), "out-of-place push_pull modified its input"
        # In place, averaged: integers truncate toward zero.
        avg = base[r].astype(npdt)
        bps.push_pull(avg, name=f"a.{size}.{dt}", average=True)
        if dt in ("int32", "int64", "uint8"):
            want = np.trunc(base.sum(axis=0) / n)
            if dt == "uint8":
                want = (base.sum(axis=0) % 256) // n
        else:
            want = base.sum(axis=0) / n
        tol = 1e-2 if dt in ("float16", "bfloat16") else 1e-6
        assert np.allclose(avg.astype(np.float64), want, atol=tol), (size, dt, avg[:8], want[:8])
        checked += 1
report({"checked": checked, "stats": bps.stats()})
bps.shutdown()
"""


@pytest.mark.parametrize("machines,local,servers", TOPOLOGIES, ids=[f"m{m}x{l}-s{s}" for m, l, s in TOPOLOGIES])
def test_every_dtype_and_odd_size(tmp_path, machines, local, servers):
    script = CHECK_ALL_DTYPES.replace("SIZES_EXTRA", "300001")
    results = bpslaunch_source(tmp_path, script, local_workers=local, machines=machines, servers=servers,
                               force_distributed=(machines == 1 and servers > 0),
                               env={"BYTEPS_PARTITION_BYTES": str(64 * 1024)}).results
    assert sorted(results) == list(range(machines * local))
    for r in results.values():
        assert r["checked"] == 7 * 7
        if servers:
            assert r["stats"]["bytes_pushed"] > 0  # really crossed the network


LARGE = """
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
for nbytes in [64 << 20, (64 << 20) - 4, 4096000 * 3 + 12]:
    a = np.full(nbytes // 4, r + 1, np.float32)
    a[::1021] = r  # position-dependent content catches misplaced partitions
    bps.push_pull(a, name=f"big{nbytes}", average=False)
    want = np.full(nbytes // 4, n * (n + 1) / 2, np.float32)
    want[::1021] = n * (n - 1) / 2
    assert np.array_equal(a, want), nbytes
report({"ok": True})
bps.shutdown()
"""


@pytest.mark.parametrize("machines,local,servers", [(1, 2, 0), (2, 1, 2), (2, 2, 1)])
def test_64mb_and_partition_remainders(tmp_path, machines, local, servers):
    results = bpslaunch_source(tmp_path, LARGE, local_workers=local, machines=machines, servers=servers,
                               timeout=300).results
    assert all(r["ok"] for r in results.values()) and len(results) == machines * local


MANY_IN_FLIGHT = """
import random
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
names = [f"layer{i}" for i in range(60)]
order = list(range(60))
random.Random(r).shuffle(order)  # every rank submits in a different order
arrays = {i: np.full(1000 + 37 * i, float(r + i), np.float64) for i in order}
handles = [(i, bps.push_pull_async(arrays[i], names[i], average=False, priority=i % 5)) for i in order]
for i, h in handles:
    h.wait()
    assert np.all(arrays[i] == sum(q + i for q in range(n))), i
report({"ok": True})
bps.shutdown()
"""


@pytest.mark.parametrize("machines,local,servers", [(1, 3, 0), (2, 2, 2), (3, 1, 1)])
def test_many_tensors_in_flight_in_different_orders(tmp_path, machines, local, servers):
    results = bpslaunch_source(tmp_path, MANY_IN_FLIGHT, local_workers=local, machines=machines,
                               servers=servers).results
    assert len(results) == machines * local


RANDOM_ROUNDS = """
import zlib
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
rng = np.random.default_rng(1234)  # same sequence of sizes on every rank
mine = np.random.default_rng(r)
checksums = []
for step in range(1000):
    size = int(rng.integers(1, 20000))
    data = [np.random.default_rng(step * 100 + q).integers(-1000, 1000, size).astype(np.int64) for q in range(n)]
    a = data[r].copy()
    bps.push_pull(a, name=f"slot{step % 7}.{size}", average=False)
    assert np.array_equal(a, sum(data)), step
    checksums.append(zlib.crc32(a.tobytes()))
report({"crc": zlib.crc32(np.array(checksums, np.uint32).tobytes()), "staging": bps.stats()["staging_bytes"]})
bps.shutdown()
"""


def test_1000_rounds_of_random_sizes_with_checksums(tmp_path):
    results = bpslaunch_source(tmp_path, RANDOM_ROUNDS, local_workers=2, machines=2, servers=2, timeout=300,
                               env={"BYTEPS_PARTITION_BYTES": str(32 * 1024)}).results
    assert len({r["crc"] for r in results.values()}) == 1  # every rank saw identical sums


ASYNC = """
import time
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
a = np.ones(5000, np.float32)
seen = []
for step in range(20):
    a[:] = 1
    bps.push_pull(a, name="w", average=False)
    seen.append(float(a[0]))
report({"seen": seen})
bps.shutdown()
"""


def test_async_mode_applies_pushes_as_they_come(tmp_path):
    results = bpslaunch_source(tmp_path, ASYNC, local_workers=1, machines=2, servers=1,
                               env={"BYTEPS_ENABLE_ASYNC": "1"}).results
    all_seen = sorted(v for r in results.values() for v in r["seen"])
    # Each pull returns the running sum right after that push: 40 distinct
    # pushes of ones give every running total from 1 to 40 exactly once.
    assert all_seen == [float(i) for i in range(1, 41)]
    for r in results.values():
        assert r["seen"] == sorted(r["seen"])  # monotone per worker


def test_single_process_without_launcher(tmp_path):
    import subprocess
    import sys
    code = ("import numpy as np, byteps_native.core as bps; bps.init(); a = np.arange(10, dtype=np.float32); "
            "bps.push_pull(a, 'x'); assert bps.size() == 1 and a[3] == 3; bps.shutdown(); print('ok')")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


CUT = """
import numpy as np
import byteps_native.core as bps
bps.init()
x = np.full(256000, bps.rank() + 1, np.float32)  # 1,024,000 bytes
bps.push_pull(x, name="cut", average=False)
assert np.all(x == sum(range(1, bps.size() + 1))), x[:4]
report({"stats": bps.stats()})
bps.shutdown()
"""


@pytest.mark.parametrize("env,partitions", [({}, 4), ({"BYTEPS_PARTITION_BYTES": "1024000"}, 1)],
                         ids=["default", "set"])
def test_host_tensors_through_servers_are_cut_at_their_default(tmp_path, env, partitions):
    """Issue 38: through servers a host tensor is cut at 256000 B unless
    BYTEPS_PARTITION_BYTES says otherwise (device tensors keep 1024000 B:
    tests/cpp/partition_defaults_test.cc)."""
    results = bpslaunch_source(tmp_path, CUT, local_workers=1, machines=2, servers=1, env=env).results
    assert sorted(results) == [0, 1]
    for r in results.values():
        assert r["stats"]["partitions_completed"] == partitions, r["stats"]
        assert r["stats"]["bytes_pushed"] == 1024000, r["stats"]
