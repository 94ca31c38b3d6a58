"""kill -9 one process of a training job: every survivor must end by itself,
within BYTEPS_TIMEOUT, with an error that names the dead peer. Nothing hangs.

Processes are started one by one (not through bpslaunch, which would stop
the survivors itself) so each survivor's own reaction is what is tested.
"""
import re
import time

import pytest

from tests.reliability import Cluster

TIMEOUT = 5  # BYTEPS_TIMEOUT of these jobs
SLACK = 10   # process start-up/teardown on a busy 2-core box


def _run_and_kill(tmp_path, victim, machines=2, local_size=1, servers=1):
    c = Cluster(tmp_path, machines=machines, local_size=local_size, servers=servers, BYTEPS_TIMEOUT=TIMEOUT)
    try:
        workers = c.start("train_loop.py")
        for w in workers:
            assert w.wait_for("STEP 50", 60), "job did not start training:\n" + c.dump()
        for p in c.procs.values():
            assert p.poll() is None, "a process ended before the kill:\n" + c.dump()
        c.procs[victim].kill()
        killed_at = time.monotonic()
        codes = c.wait_all(TIMEOUT + SLACK)
        hung = [n for n, rc in codes.items() if rc is None]
        assert not hung, f"{hung} still running {TIMEOUT + SLACK} s after {victim} was killed:\n" + c.dump()
        for name, p in c.procs.items():
            if name != victim:
                assert p.ended - killed_at < TIMEOUT + SLACK
        return c
    except BaseException:
        c.stop()
        raise


def _assert_named_failure(c, victim, victim_words):
    """Every survivor exits non-zero and its output names the victim."""
    try:
        for name, p in c.procs.items():
            if name == victim:
                continue
            out = p.output()
            assert p.poll() != 0, f"{name} exited 0 after {victim} died:\n{out}"
            if name.startswith("worker"):
                assert p.poll() == 3, f"{name} did not fail with a BytePSError:\n{out}"
                assert "BYTEPS_ERROR 3 " in out, out  # BPS_PEER_FAILURE
                err = out[out.index("BYTEPS_ERROR"):]
            elif name.startswith("server") and not victim.startswith("worker"):
                # A surviving server learns the root cause from a worker that
                # relays it ("worker 0 failed: lost server 1 ...") or sees the
                # workers leave.
                assert re.search(r"failed: lost |disconnected from server \d", out), out
                continue
            else:
                err = out
            assert any(w in err for w in victim_words), f"{name} does not name {victim}:\n{out}"
            assert "WRONG SUM" not in out
    finally:
        c.stop()


def test_kill_worker_with_servers(tmp_path):
    c = _run_and_kill(tmp_path, "worker 1")
    _assert_named_failure(c, "worker 1", ["worker 1 ("])


def test_kill_local_rank_two_machines_of_two(tmp_path):
    # worker 1 is local rank 1 of machine 0: its machine peer sees it through
    # shared memory / pid checks, the other machine through the server.
    c = _run_and_kill(tmp_path, "worker 1", machines=2, local_size=2)
    _assert_named_failure(c, "worker 1", ["worker 1 (", "worker rank 1"])


def test_kill_local_rank_one_machine_no_servers(tmp_path):
    c = _run_and_kill(tmp_path, "worker 1", machines=1, local_size=2, servers=0)
    _assert_named_failure(c, "worker 1", ["worker 1 (", "worker rank 1"])


def test_kill_server(tmp_path):
    c = _run_and_kill(tmp_path, "server 0")
    _assert_named_failure(c, "server 0", ["server 0 (", "server (127.0.0.1"])


def test_kill_one_of_two_servers(tmp_path):
    c = _run_and_kill(tmp_path, "server 1", servers=2)
    # Server ids follow registration order, not start order: the survivor
    # says which id it has, the victim has the other.
    survivor = c.procs["server 0"].output()
    relayed = re.search(r"failed: lost server (\d)", survivor)
    left = re.search(r"disconnected from server (\d)", survivor)
    victim_id = relayed.group(1) if relayed else (1 - int(left.group(1)) if left else "?")
    _assert_named_failure(c, "server 1", [f"server {victim_id} (", "server (127.0.0.1"])


def test_kill_scheduler(tmp_path):
    c = _run_and_kill(tmp_path, "scheduler")
    # Workers name the scheduler, seen by their own watch or relayed by the
    # server's (which watches the scheduler too).
    try:
        for w in c.workers():
            out = w.output()
            assert w.poll() == 3, out
            assert re.search(r"lost the scheduler (at )?127\.0\.0\.1:", out), out
        server = c.procs["server 0"]
        assert server.poll() != 0, server.output()
    finally:
        c.stop()


def test_kill_scheduler_before_workers_arrive(tmp_path):
    """A server waiting for its workers learns the scheduler is gone."""
    with Cluster(tmp_path, machines=1, servers=1, BYTEPS_TIMEOUT=TIMEOUT) as c:
        c.start_role("scheduler", "scheduler")
        server = c.start_role("server", "server 0")
        time.sleep(2)  # the server has registered and is waiting for workers
        assert server.poll() is None, server.output()
        c.procs["scheduler"].kill()
        rc = server.wait(TIMEOUT + SLACK)
        assert rc not in (None, 0), "server still running after the scheduler died:\n" + server.output()
        assert "scheduler" in server.output()
