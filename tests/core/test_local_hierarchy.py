"""Intra-machine hierarchy: shared-memory hygiene and bounded staging memory."""
import glob
import os
import signal
import subprocess
import sys
import time

from tests.support.jobs import bpslaunch_source
from tests.support.paths import REPO
from tests.support.ports import free_port

STAGING = """
import numpy as np
import byteps_native.core as bps
bps.init()
grads = {f"p{i}": np.ones(2000 + 997 * i, np.float32) for i in range(12)}
total = sum(a.nbytes for a in grads.values())
samples = []
for step in range(1000):
    hs = [bps.push_pull_async(a, name, average=True) for name, a in grads.items()]
    for h in hs:
        h.wait()
    if step in (10, 999):
        samples.append(bps.stats()["staging_bytes"])
report({"samples": samples, "gradient_bytes": total, "local_size": bps.local_size()})
bps.shutdown()
"""


def test_staging_memory_does_not_grow_over_1000_steps(tmp_path):
    results = bpslaunch_source(tmp_path, STAGING, local_workers=2, timeout=300).results
    for r in results.values():
        early, late = r["samples"]
        assert early == late, "staging grew between step 10 and 999"
        # One slot per local rank per partition: ~ the gradient bytes of the machine.
        machine_bytes = r["gradient_bytes"] * r["local_size"]
        assert late <= machine_bytes * 1.1 + 64 * 12 * r["local_size"], (late, machine_bytes)


POOLED = """
import numpy as np
import byteps_native.core as bps
bps.init()
r, n = bps.rank(), bps.size()
samples = []
for i in range(64):
    # A new name each step, 1 MiB: it takes the warm slots of earlier names,
    # idle (or reclaimed, in a small key table).
    a = np.arange(262144, dtype=np.float32) * (r + 1) + i
    bps.push_pull(a, f"new{i}", average=False)
    want = np.arange(262144, dtype=np.float64) * (n * (n + 1) / 2) + n * i
    assert np.array_equal(a, want.astype(np.float32)), i
    s = bps.stats()
    samples.append((s["staging_bytes"], s["staging_backed_bytes"]))
report({"samples": samples, "reserve": bps.stats()["staging_reserve_bytes"], "local_size": bps.local_size()})
bps.shutdown()
"""


def test_new_names_take_pooled_staging_and_what_is_held_stays_bounded(tmp_path):
    """Issue 27: staging is pooled. A name seen for the first time takes warm
    slots (from the reserve, or freed by reclaimed names) and the sums stay
    exact; the machine holds at most its peak of slots plus the reserve."""
    results = bpslaunch_source(tmp_path, POOLED, local_workers=2, timeout=300,
                               env={"BYTEPS_LOCAL_KEY_TABLE_SIZE": "16",
                                    "BYTEPS_LOCAL_STAGING_RESERVE": str(4 << 20)}).results
    for r in results.values():
        L = r["local_size"]
        assert r["reserve"] == L * (4 << 20)
        peak_in_slots = max(in_slots for in_slots, _ in r["samples"])
        assert peak_in_slots <= 16 * L * (1 << 20) + 64 * 16 * L  # the table's 16 entries, one slot per rank
        for in_slots, backed in r["samples"]:
            assert in_slots <= backed <= peak_in_slots + r["reserve"] + 4096, (in_slots, backed)


def test_a_new_name_takes_the_slots_of_names_gone_idle(tmp_path):
    """Issue 27: names cost nothing new. With the default key table (nothing
    is reclaimed), 64 names used one after the other hold the slots of the
    rounds in flight, not one slot per name ever used: a rank's new slot
    first frees its slots of keys every rank is done with. Sums stay exact."""
    results = bpslaunch_source(tmp_path, POOLED, local_workers=2, timeout=300).results
    for r in results.values():
        L = r["local_size"]
        peak_in_slots = max(in_slots for in_slots, _ in r["samples"])
        # One name in flight, one maybe still released by the other rank, and
        # rounding: 3 names' slots, not 64.
        assert peak_in_slots <= 3 * L * ((1 << 20) + 64), r["samples"]
        for in_slots, backed in r["samples"]:
            assert in_slots <= backed <= peak_in_slots + r["reserve"] + 4096, (in_slots, backed)



def _segments(job_id):
    return glob.glob(f"/dev/shm/bpsn-{job_id}-*")


def test_no_segments_left_after_normal_exit(tmp_path):
    job_id = "cafe0001"
    bpslaunch_source(tmp_path,
                     "import byteps_native.core as bps\nbps.init()\nimport numpy as np\n"
            "bps.push_pull(np.ones(10, np.float32), 'x')\nreport({})\nbps.shutdown()\n",
                     local_workers=3, env={"BYTEPS_JOB_ID": job_id})
    assert _segments(job_id) == []


def test_segments_are_unlinked_while_running_and_a_killed_rank_fails_the_others(tmp_path):
    """Names are unlinked as soon as every rank mapped them, so a kill -9 leaves
    nothing behind; the surviving rank fails with an error naming the dead one."""
    job_id = "cafe0002"
    script = os.path.join(str(tmp_path), "w.py")
    with open(script, "w") as f:
        f.write(
            "import os, time, numpy as np, byteps_native.core as bps\n"
            "bps.init()\n"
            "a = np.ones(1000, np.float32)\n"
            "bps.push_pull(a, 'warm')\n"
            f"open(os.path.join({str(tmp_path)!r}, 'ready.%d' % bps.rank()), 'w').close()\n"
            "if bps.rank() == 1:\n"
            "    time.sleep(600)\n"
            "try:\n"
            "    bps.push_pull(a, 'never')\n"
            "except bps.BytePSError as e:\n"
            f"    open(os.path.join({str(tmp_path)!r}, 'error.txt'), 'w').write(str(e))\n"
            "    raise SystemExit(3)\n")
    # Started by hand (not bpslaunch, which would stop the survivor itself).
    port = free_port()
    base = dict(os.environ, BYTEPS_JOB_ID=job_id, BYTEPS_TIMEOUT="30", DMLC_PS_ROOT_URI="127.0.0.1",
                DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_WORKER="1", DMLC_NUM_SERVER="0", DMLC_WORKER_ID="0",
                BYTEPS_LOCAL_SIZE="2", BYTEPS_JOB_TOKEN="t0ken")
    scheduler = subprocess.Popen([sys.executable, "-m", "byteps_native.scheduler"], env=dict(base, DMLC_ROLE="scheduler"),
                                 cwd=REPO, stderr=subprocess.DEVNULL)
    workers = [subprocess.Popen([sys.executable, script], env=dict(base, DMLC_ROLE="worker", BYTEPS_LOCAL_RANK=str(r)),
                                cwd=REPO, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        deadline = time.time() + 60
        while not all(os.path.exists(os.path.join(str(tmp_path), f"ready.{r}")) for r in (0, 1)):
            assert time.time() < deadline and workers[0].poll() is None, "job did not start"
            time.sleep(0.1)
        assert _segments(job_id) == [], "segment names must be gone once every rank mapped them"
        os.kill(workers[1].pid, signal.SIGKILL)
        workers[0].wait(timeout=45)  # detected well before BYTEPS_TIMEOUT
        scheduler.wait(timeout=45)
    finally:
        for p in workers + [scheduler]:
            if p.poll() is None:
                p.kill()
    proc = workers[0]
    assert proc.returncode != 0
    message = open(os.path.join(str(tmp_path), "error.txt")).read()
    # Whichever detector fires first (the scheduler's membership watch or the
    # local pid check), the message names the dead rank.
    assert ("local rank 1" in message and "died" in message) or "worker 1 (" in message, message
    assert _segments(job_id) == []


def test_launcher_binds_local_ranks_to_their_cores(tmp_path):
    import os as _os
    cores = sorted(_os.sched_getaffinity(0))
    if len(cores) < 2:
        import pytest
        pytest.skip("needs at least 2 cores to split between 2 local ranks")
    results = bpslaunch_source(tmp_path,
                               "import os, byteps_native.core as bps\nbps.init()\n"
                         "report({'cpus': sorted(os.sched_getaffinity(0))})\nbps.shutdown()\n",
                               local_workers=2,
                               env={"BYTEPS_NUMA_ON": "1", "BYTEPS_VISIBLE_CPU_CORES": ",".join(map(str, cores[:2]))}).results
    assert results[0]["cpus"] == [cores[0]] and results[1]["cpus"] == [cores[1]], results
