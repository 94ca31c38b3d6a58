"""SIGSTOP one process of a training job (issue 20 item 8): a stopped process
keeps its sockets open and its kernel still answers TCP keepalive, so only
silence shows it. The scheduler declares it after BYTEPS_TIMEOUT and fails the
job; every other process exits within BYTEPS_TIMEOUT + a few seconds with an
error naming the stopped peer, and the scheduler does not wait for it."""
import signal
import time

import pytest

from tests.reliability import Cluster

TIMEOUT = 5  # BYTEPS_TIMEOUT of these jobs
SLACK = 12   # watch interval, start-up and teardown on a busy 2-core box


@pytest.mark.parametrize("victim,words", [("worker 1", ["worker 1 "]), ("server 0", ["server 0 "])])
def test_stopped_peer_fails_the_job_naming_it(tmp_path, victim, words):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=TIMEOUT) as c:
        workers = c.start("train_loop.py")
        for w in workers:
            assert w.wait_for("STEP 50", 60), "job did not start training:\n" + c.dump()
        c.procs[victim].kill(signal.SIGSTOP)
        stopped_at = time.monotonic()
        survivors = {n: p for n, p in c.procs.items() if n != victim}
        deadline = stopped_at + TIMEOUT + SLACK
        for p in survivors.values():
            p.wait(max(0.0, deadline - time.monotonic()))
        hung = [n for n, p in survivors.items() if p.poll() is None]
        assert not hung, f"{hung} still running {TIMEOUT + SLACK} s after {victim} was stopped:\n" + c.dump()
        for name, p in survivors.items():
            assert p.poll() != 0, f"{name} exited 0 after {victim} stopped:\n" + c.dump()
            if name.startswith("worker") or name == "scheduler":
                out = p.output()
                assert any(w in out for w in words) and "stopped responding" in out, \
                    f"{name} does not name the stopped {victim}:\n" + c.dump()
        c.procs[victim].kill(signal.SIGKILL)
