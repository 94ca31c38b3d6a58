"""The scheduler's store survives what its clients send: a counter added to
a non-integer value is refused (it used to terminate the scheduler), and
strangers that knock and are refused leave no threads behind."""
import socket
import struct
import time

from tests.reliability import Cluster
from tests.reliability import wire_client as wc

SET, GET, ADD, BYE = 1, 2, 3, 4


def _request(sock, op, key, value=b"", arg=0):
    sock.sendall(struct.pack("<IB3sIIq", 0x53535042, op, b"\0\0\0", len(key), len(value), arg) + key + value)
    reply = wc.recv_exactly(sock, 16)
    assert len(reply) == 16, "scheduler hung up"
    code, length, result = struct.unpack("<iIq", reply)
    return code, wc.recv_exactly(sock, length).decode(errors="replace"), result


def _status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])


def test_store_refuses_bad_counters_and_reaps_strangers(tmp_path):
    with Cluster(tmp_path, machines=1, servers=0) as c:
        scheduler = c.start_role("scheduler", "scheduler")
        port = int(c.env["DMLC_PS_ROOT_PORT"])
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, scheduler.output()
                time.sleep(0.1)
        ok, reason, s = wc.handshake("127.0.0.1", port, c.env["BYTEPS_JOB_TOKEN"], role=0, rank=0)
        assert ok, reason
        assert _request(s, SET, b"k", b"abc")[0] == 0
        code, message, _ = _request(s, ADD, b"k", arg=1)
        assert code == 1 and "does not hold an integer" in message, (code, message)
        assert _request(s, ADD, b"n", arg=(1 << 63) - 1)[0] == 0
        code, message, _ = _request(s, ADD, b"n", arg=1)
        assert code == 1 and "overflow" in message, (code, message)
        assert _request(s, ADD, b"n", arg=-5) == (0, "", (1 << 63) - 6)

        vm_before = _status(scheduler.pid, "VmSize")
        for _ in range(200):
            ok, _, stranger = wc.handshake("127.0.0.1", port, "wrong token")
            stranger.close()
            assert not ok
        time.sleep(1.0)  # the accept loop reaps finished threads every 200 ms
        assert scheduler.poll() is None, scheduler.output()
        threads = _status(scheduler.pid, "Threads")
        vm_after = _status(scheduler.pid, "VmSize")
        # Each unjoined thread kept its 8 MB stack mapped: 200 strangers cost 1.6 GB before.
        assert vm_after - vm_before < 200 * 1024, (vm_before, vm_after)
        assert threads <= 4, threads
        _request_bye = struct.pack("<IB3sIIq", 0x53535042, BYE, b"\0\0\0", 0, 0, 0)
        s.sendall(_request_bye)
        s.close()
        assert scheduler.wait(30) == 0, scheduler.output()
