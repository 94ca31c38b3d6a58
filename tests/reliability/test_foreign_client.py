"""A foreign client -- no token, a wrong token, another wire version, or
plain garbage -- is refused (and logged) by servers and the scheduler while
the job trains on undisturbed."""
import os
import socket
import struct
import subprocess
import sys
import threading

from tests.reliability import Cluster
from tests.support.jobs import role_env
from tests.support.paths import REPO
from tests.reliability import wire_client as wc

STEPS = 600


def _attacks(host, port):
    """Every way a stranger can knock; returns what each got back."""
    results = {}
    ok, reason, s = wc.handshake(host, port, "not-the-token")
    s.close()
    results["wrong token"] = (ok, reason)
    ok, reason, s = wc.handshake(host, port, "")
    s.close()
    results["empty token"] = (ok, reason)
    ok, reason, s = wc.handshake(host, port, "not-the-token", version=1)
    s.close()
    results["other version"] = (ok, reason)
    ok, reason, s = wc.handshake(host, port, "not-the-token", magic=0x12345678)
    s.close()
    results["bad magic"] = (ok, reason)
    # Garbage instead of a hello, then a truncated hello: closed, not crashed.
    for label, payload in [("garbage", os.urandom(4096)), ("truncated", wc.frame(wc.HELLO)[:50])]:
        with socket.create_connection((host, port), timeout=10) as s:
            wc.recv_exactly(s, wc.FRAME.size)
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                answer = wc.recv_exactly(s, wc.FRAME.size)
            except OSError:  # reset by the peer: refused the hard way
                answer = b""
            results[label] = (len(answer) == wc.FRAME.size and wc.FRAME.unpack(answer)[2] == wc.ACCEPT, "")
    return results


def test_foreign_clients_refused_while_training(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=20) as c:
        workers = c.start("train_loop.py", STEPS)
        for w in workers:
            assert w.wait_for("STEP 50", 60), c.dump()
        token = c.env["BYTEPS_JOB_TOKEN"]
        server_addrs = wc.listening_ports(c.procs["server 0"].pid)
        assert server_addrs, c.dump()
        # The server listens on the configured interface (DMLC_INTERFACE=lo), not on every address.
        assert all(ip == "127.0.0.1" for ip, _ in server_addrs), server_addrs
        # Strangers that connect and say nothing must not stall anyone.
        silent = [socket.create_connection(a, timeout=10) for a in server_addrs * 8]
        silent += [socket.create_connection(("127.0.0.1", int(c.env["DMLC_PS_ROOT_PORT"])), timeout=10)
                   for _ in range(8)]
        targets = {"server": server_addrs[0], "scheduler": ("127.0.0.1", int(c.env["DMLC_PS_ROOT_PORT"]))}
        for who, (host, port) in targets.items():
            results = _attacks(host, port)
            for label, (accepted, reason) in results.items():
                assert not accepted, f"{who} accepted a client with {label}"
            assert "BYTEPS_JOB_TOKEN" in results["wrong token"][1], results
            assert "wire version 1" in results["other version"][1], results
            assert "bad magic" in results["bad magic"][1] or "not a byteps-native" in results["bad magic"][1]
        # The job's own token still works (the refusals were about the token).
        ok, reason, s = wc.handshake(*targets["scheduler"], token, role=0, rank=99)
        assert ok, reason
        s.sendall(struct.pack("<IB3sIIq", 0x53535042, 4, b"\0\0\0", 0, 0, 0))  # store goodbye
        s.close()
        codes = c.wait_all(120)
        for s in silent:
            s.close()
        assert all(rc == 0 for rc in codes.values()), "training did not survive the strangers:\n" + c.dump()
        for w in workers:
            assert f"DONE {STEPS}" in w.output(), w.output()
        for who in ("server 0", "scheduler"):
            log = c.procs[who].output()
            assert "rejected connection from 127.0.0.1" in log and "BYTEPS_JOB_TOKEN" in log, log


def test_impostor_acceptor_is_refused():
    """Something that listens where the scheduler should be and accepts
    everyone, without the token: the worker refuses it (mutual auth)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def impostor():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(wc.frame(wc.CHALLENGE, payload=os.urandom(32)))
                wc.recv_exactly(conn, wc.FRAME.size)
                conn.sendall(wc.frame(wc.ACCEPT, payload=os.urandom(32)))
                wc.recv_exactly(conn, 1)

    threading.Thread(target=impostor, daemon=True).start()
    env = role_env(DMLC_ROLE="worker", DMLC_NUM_WORKER=2, DMLC_WORKER_ID=0, DMLC_NUM_SERVER=1,
                   DMLC_PS_ROOT_PORT=port, BYTEPS_RENDEZVOUS_TIMEOUT=5)
    try:
        r = subprocess.run([sys.executable, "-c", "import byteps_native.core as bps; bps.init()"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
    assert r.returncode != 0, r.stderr
    assert "accepted the connection but does not hold this job's BYTEPS_JOB_TOKEN" in r.stderr, r.stderr
