"""Issue 19, launch UX: what bpslaunch and a waiting worker say.

The other launch bullets have their tests in tests/reliability/
(test_launch_cleanup.py, test_environment.py, test_scheduler_checks.py,
test_config_summary.py); these two had none.
"""
import os
import re
import subprocess
import sys
import time

from tests.support.paths import REPO
from tests.support.ports import free_port


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def test_servers_on_one_machine_are_reported_not_silently_ignored():
    """Before: `--servers 1` with one machine started no server and said nothing."""
    out = subprocess.run([sys.executable, "-m", "byteps_native.launch", "--local-workers", "1", "--servers", "1", "--",
                          sys.executable, "-c", "pass"], env=_env(), cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--servers 1 ignored" in out.stderr and "--force-distributed" in out.stderr, out.stderr


def test_worker_waiting_for_its_scheduler_says_so_before_the_timeout():
    """Before: a worker with no scheduler was silent for BYTEPS_TIMEOUT (300 s).
    Now it says every few seconds what it waits for, then fails after
    BYTEPS_RENDEZVOUS_TIMEOUT naming the scheduler."""
    port = free_port()  # nobody listens there
    env = _env(DMLC_ROLE="worker", DMLC_NUM_WORKER=2, DMLC_WORKER_ID=0, DMLC_NUM_SERVER=1,
               DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=port, BYTEPS_RENDEZVOUS_TIMEOUT=8,
               BYTEPS_JOB_TOKEN="0" * 32)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "import byteps_native.core as bps; bps.init()"], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and time.monotonic() - started < 40, out.stderr
    lines = out.stdout + out.stderr
    # A note while it still tries, naming the scheduler's address and why.
    waiting = [line for line in lines.splitlines()
               if re.search(r"(?i)scheduler at 127\.0\.0\.1:\d+ is not reachable yet: .*still trying", line)
               and f"127.0.0.1:{port}" in line]
    assert waiting, lines[-2000:]
    assert "gave up after 8 s" in lines, lines[-2000:]
