"""CuPy arrays through byteps_native.core.push_pull: every dtype, odd sizes,
sum and average, in place and out of place, on one and two emulated machines
(two groups of local ranks with distinct DMLC_WORKER_ID, CPU servers over TCP
on this host)."""
import pytest

from tests.gpu.gpu_env import GPUS, NO_GPU, requires_cuda_build, topologies
from tests.support.jobs import bpslaunch_source

if GPUS == 0:
    pytest.skip(NO_GPU, allow_module_level=True)
pytest.importorskip("cupy", reason="CuPy is not installed")
pytestmark = [requires_cuda_build]

# Small partitions: multi-partition pipelining and padded slices even for
# modest sizes (3 * 65536 / 4 ... elements).
PARTITION_BYTES = "65536"

WORKER = """
import os
import numpy as np
import cupy as cp
import byteps_native.core as bps

local = int(os.environ.get("BYTEPS_LOCAL_RANK", 0))
local_size = int(os.environ.get("BYTEPS_LOCAL_SIZE", 1))
machine = int(os.environ.get("DMLC_WORKER_ID", 0))
gpu = (machine * local_size + local) % cp.cuda.runtime.getDeviceCount()
cp.cuda.Device(gpu).use()
bps.init()
rank, size = bps.rank(), bps.size()

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]
SIZES = [0, 1, 7, 17, 1023, 4096, 65537, 300001]
failures = []
stream = cp.cuda.Stream(non_blocking=True)
for dtype in DTYPES:
    for n in SIZES:
        for average in (False, True):
            base = (np.arange(n) % 5).astype(np.float64)
            host = (base + rank + 1).astype(dtype)
            expect = sum((base + r + 1) for r in range(size))
            if average:
                expect = np.trunc(expect / size) if np.issubdtype(dtype, np.integer) else expect / size
            expect = expect.astype(dtype)
            name = f"t.{np.dtype(dtype).name}.{n}.{int(average)}"
            # Produced on a non-default stream: the engine must wait for it.
            with stream:
                x = cp.asarray(host)
                out_of_place = n % 2 == 1
                out = cp.zeros_like(x) if out_of_place else None
                bps.push_pull(x, name, average=average, output=out)
            got = cp.asnumpy(out if out_of_place else x)
            tol = 1e-2 if dtype == np.float16 else 1e-6
            if np.issubdtype(dtype, np.integer):
                ok = np.array_equal(got, expect)
            else:
                ok = np.allclose(got.astype(np.float64), expect.astype(np.float64), rtol=tol, atol=tol)
            if not ok:
                bad = np.nonzero(got != expect)[0][:5].tolist()
                failures.append(f"{name}: first bad elements {bad}: got {got[bad].tolist()} want {expect[bad].tolist()}")
            if out_of_place and n > 0 and not np.array_equal(cp.asnumpy(x), host):
                failures.append(f"{name}: input modified by an out-of-place push_pull")

# Many in flight at once, mixed with host arrays: completions in any order.
hs, arrays = [], []
for i in range(24):
    a = cp.full(1000 + 97 * i, rank + 1, cp.float32)
    arrays.append(a)
    hs.append(bps.push_pull_async(a, f"inflight.{i}", average=False))
    h = np.full(50 + i, rank + 1, np.float32)
    arrays.append(h)
    hs.append(bps.push_pull_async(h, f"host.{i}", average=False))
for h in hs:
    h.wait()
want = size * (size + 1) / 2
for a in arrays:
    v = cp.asnumpy(a) if isinstance(a, cp.ndarray) else a
    if not np.all(v == want):
        failures.append(f"in-flight array of {v.size}: got {v[:3]} want {want}")
report({"failures": failures, "stats": bps.stats()})
bps.shutdown()
"""


@pytest.mark.parametrize("machines,local", topologies())
def test_cupy_push_pull_every_dtype_and_odd_size(tmp_path, machines, local):
    results = bpslaunch_source(tmp_path, WORKER, local_workers=local, machines=machines,
                               servers=2 if machines > 1 else 0, env={"BYTEPS_PARTITION_BYTES": PARTITION_BYTES},
                               timeout=300, gpus=True).results
    assert len(results) == machines * local
    for rank, r in sorted(results.items()):
        assert r["failures"] == [], f"rank {rank}: " + "\n".join(r["failures"][:10])
        stats = r["stats"]
        assert stats["queue_depth"] == 0
        assert stats["device"]["reducer"] == "nccl"
        if machines > 1:
            assert stats["bytes_pushed"] > 0
            assert stats["device"]["pinned_staging_bytes"] > 0


def test_a_device_this_process_cannot_see_is_refused(tmp_path):
    """Sanity of the error path: a device pointer on a device this process
    cannot see is refused up front, not hung."""
    script = """
import cupy as cp
import byteps_native.core as bps
from byteps_native.core import _core
bps.init()
x = cp.ones(4, cp.float32)
try:
    _core.push_pull_device_async(x.data.ptr, x.data.ptr, 4, _core.FLOAT32, 99, [4], "bad", True, 0, 0, x)
    report({"error": None})
except bps.BytePSError as e:
    report({"error": str(e)})
bps.shutdown()
"""
    results = bpslaunch_source(tmp_path, script, gpus=True).results
    assert "cuda:99" in results[0]["error"]
