"""The shared-memory staging arena fits /dev/shm (issue 13, bug 6).

Containers often mount a 64 MB /dev/shm (Docker's default; our k8s manifest
mounts none). A job whose staging outgrows it must fail with an error naming
/dev/shm and how to enlarge it, on every local rank, not die of SIGBUS.

Each test runs the job in a private mount namespace (`unshare -m`) with a
small tmpfs mounted over /dev/shm, so the host's /dev/shm is untouched."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import REPO

SHM_MB = 24


def _can_mount_private_tmpfs():
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /dev/shm"],
                           capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _can_mount_private_tmpfs(),
                                reason="needs root and unshare -m to mount a small /dev/shm")


def _run_with_small_shm(tmp_path, body, timeout=120):
    script = os.path.join(str(tmp_path), "worker.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent("""
            import json, os, sys
            import numpy as np
            import byteps_native.core as bps
            bps.init()
            rank = bps.rank()
            out = {}
        """) + textwrap.dedent(body) + textwrap.dedent(f"""
            with open(os.path.join({str(tmp_path)!r}, "result.%d.json" % rank), "w") as f:
                json.dump(out, f)
            bps.shutdown()
        """))
    launch = [sys.executable, "-m", "byteps_native.launch", "--local-workers", "2", "--", sys.executable, script]
    shell = f"mount -t tmpfs -o size={SHM_MB}m tmpfs /dev/shm && exec " + " ".join(launch)
    env = dict(os.environ, BYTEPS_TIMEOUT="20", BYTEPS_PARTITION_BYTES=str(1 << 20))
    proc = subprocess.run(["unshare", "-m", "sh", "-c", shell], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    results = {}
    for r in (0, 1):
        path = os.path.join(str(tmp_path), f"result.{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                results[r] = json.load(f)
    return proc, results


def test_staging_beyond_dev_shm_fails_clearly_on_every_rank(tmp_path):
    # 64 MB of float32: its staging (a slot per local rank) is far beyond 24 MB.
    proc, results = _run_with_small_shm(tmp_path, """
        small = np.full(1000, rank + 1.0, np.float32)
        bps.push_pull(small, name="small", average=False)  # staged before the arena fills
        big = np.ones(16 << 20, np.float32)
        try:
            bps.push_pull(big, name="too.big")
            out["big"] = "ok"
        except bps.BytePSError as e:
            out["big"] = str(e)
        small = np.full(1000, rank + 1.0, np.float32)
        try:
            bps.push_pull(small, name="small", average=False)
            out["small"] = "ok" if np.all(small == 3.0) else "wrong sum"
        except bps.BytePSError as e:
            out["small"] = str(e)
    """)
    detail = f"rc={proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    assert proc.returncode != -7 and "Bus error" not in proc.stderr and "SIGBUS" not in proc.stderr, detail
    assert sorted(results) == [0, 1], "a rank did not report (crashed?)\n" + detail
    for rank, r in results.items():
        msg = r["big"]
        assert msg != "ok", f"rank {rank}: a 128 MB staging need succeeded in a {SHM_MB} MB /dev/shm?"
        assert "/dev/shm" in msg and ("shm-size" in msg or "remount" in msg), f"rank {rank}: unclear error: {msg}"
        assert r["small"] == "ok", f"rank {rank}: the job did not survive the rejected tensor: {r['small']}"


def test_staging_that_fits_a_small_dev_shm_works(tmp_path):
    proc, results = _run_with_small_shm(tmp_path, """
        total = 0.0
        for step in range(3):
            a = np.full(1 << 20, rank + 1.0, np.float32)  # 4 MB: 8 MB staged per step
            bps.push_pull(a, name="fits", average=False)
            total += float(a[0])
        out["total"] = total
    """)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-5000:]}"
    assert results[0]["total"] == results[1]["total"] == 9.0
