"""Strangers that hold handshakes open: they must neither crash a process
whose job ends under them (the handshake once ran on a detached thread that
outlived the server) nor stop rendezvous by using up threads and file
descriptors (each handshake now has a deadline of its own, the pending ones
are capped, and accept() out of descriptors does not spin)."""
import os
import resource
import socket
import sys
import threading
import time

from tests.reliability import Cluster
from tests.support.processes import LoggedProcess
from tests.reliability import wire_client as wc


def _half_hello(host, port):
    """A stranger that reads the challenge, sends part of a hello and waits."""
    s = socket.create_connection((host, port), timeout=10)
    wc.recv_exactly(s, wc.FRAME.size)
    s.sendall(wc.frame(wc.HELLO)[:40])
    return s


def test_stranger_mid_handshake_when_a_dedicated_server_ends(tmp_path):
    with Cluster(tmp_path, machines=2, servers=2, BYTEPS_TIMEOUT=20) as c:
        workers = c.start("train_loop.py", 300)
        for w in workers:
            assert w.wait_for("STEP 50", 60), c.dump()
        strangers = []
        for name in ("server 0", "server 1"):
            for addr in wc.listening_ports(c.procs[name].pid):
                strangers += [_half_hello(*addr) for _ in range(40)]
        for w in workers:
            w.wait(90)
        # The job is over: finish the hellos one by one while the servers
        # shut down, so that handshakes wake up as the servers go away.
        rest = wc.frame(wc.HELLO)[40:]
        for s in strangers:
            try:
                s.sendall(rest)
            except OSError:
                pass
            time.sleep(0.005)
        codes = c.wait_all(60)
        for s in strangers:
            s.close()
        # Before: the server was destroyed under the handshake threads
        # (std::bad_alloc, SIGABRT or SIGBUS at the end of a good job).
        assert all(rc == 0 for rc in codes.values()), c.dump()
        for w in workers:
            assert "DONE 300" in w.output(), w.output()


def _raise_own_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= need


def test_drip_connections_do_not_stop_rendezvous(tmp_path):
    """1,100 strangers that drip a byte a second into their hello, against a
    scheduler limited to 1,024 open files: the job still meets and trains."""
    if not _raise_own_fd_limit(1400):
        import pytest
        pytest.skip("cannot open 1,100 sockets here")
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=20) as c:
        port = int(c.env["DMLC_PS_ROOT_PORT"])
        argv = ["prlimit", "--nofile=1024:1024", sys.executable, "-m", "byteps_native.scheduler"]
        c.procs["scheduler"] = LoggedProcess("scheduler", argv, dict(c.env, DMLC_ROLE="scheduler"),
                                             os.path.join(c.log_dir, "scheduler.log"))
        drips, stop = [], threading.Event()
        deadline = time.monotonic() + 30
        while len(drips) < 1100 and time.monotonic() < deadline:
            try:
                drips.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                time.sleep(0.05)  # the scheduler is not listening yet, or its backlog is full
        assert len(drips) >= 1100, f"only {len(drips)} stranger connections"

        def drip():
            while not stop.is_set():
                for s in drips:
                    try:
                        s.send(b"\0", socket.MSG_DONTWAIT)
                    except OSError:
                        pass
                stop.wait(1.0)

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        try:
            c.start_role("server", "server 0")
            workers = [c.start_worker(m, 0, "train_loop.py", 100) for m in range(2)]
            codes = c.wait_all(120)
        finally:
            stop.set()
            t.join()
            for s in drips:
                s.close()
        assert all(rc == 0 for rc in codes.values()), c.dump()
        for w in workers:
            assert "DONE 100" in w.output(), w.output()
        log = c.procs["scheduler"].output()
        assert "dropped connection from 127.0.0.1" in log, log
