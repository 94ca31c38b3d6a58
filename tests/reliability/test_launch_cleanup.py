"""bpslaunch never leaves a process behind, and says what is missing."""
import subprocess
import sys
import time

from tests.support.jobs import role_env
from tests.support.paths import REPO
from tests.support.processes import job_processes

LAUNCH = [sys.executable, "-m", "byteps_native.launch"]


def test_a_worker_command_that_cannot_start_stops_the_job():
    env = role_env()
    for argv in (["--local-workers", "2", "--", "pyhton", "x.py"],
                 ["--local-workers", "1", "--machines", "2", "--servers", "1", "--", "pyhton", "x.py"]):
        r = subprocess.run(LAUNCH + argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert "cannot start worker 0 (pyhton x.py)" in r.stderr and "No such file" in r.stderr, r.stderr
        deadline = time.monotonic() + 10
        while job_processes(env["BYTEPS_JOB_ID"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        # Before: the scheduler (and servers) ran on for good.
        assert not job_processes(env["BYTEPS_JOB_ID"]), argv


def test_role_unset_says_what_to_set():
    env = role_env()
    r = subprocess.run(LAUNCH + ["--", sys.executable, "-c", "pass"], env=env, cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "DMLC_ROLE is not set" in r.stderr and "--local-workers" in r.stderr, r.stderr
    assert "None" not in r.stderr, r.stderr
