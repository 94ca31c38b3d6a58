"""A Python speaker of the byteps-native connection handshake
(csrc/transport/tcp/handshake.cc), to play a foreign or misconfigured client.

Frame (128 bytes, little-endian, packed): magic u32, version u16, type u16,
role u16, reserved u16, rank i32, nonce_or_mac[32], reason[80].
The acceptor sends a challenge (a nonce); the client answers a hello with
HMAC-SHA256("byteps-native-v1:" + token, nonce | role u16 | rank i32) and its
own 32-byte nonce in the first bytes of `reason`; the acceptor answers reject
(with a reason) or accept with its proof HMAC(same key, "acceptor" | nonce |
client nonce | role | rank).
"""
import os
import hashlib
import hmac
import re
import socket
import struct

MAGIC = 0x4E535042
# The engine's wire version, from the header it is built from (it moves with the protocol).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "csrc", "transport", "framing.h")) as _f:
    VERSION = int(re.search(r"kWireVersion = (\d+);", _f.read()).group(1))
CHALLENGE, HELLO, ACCEPT, REJECT = 100, 101, 102, 103
FRAME = struct.Struct("<IHHHHi32s80s")
assert FRAME.size == 128


def frame(type_, role=0, rank=-1, payload=b"\0" * 32, magic=MAGIC, version=VERSION, reason=b""):
    return FRAME.pack(magic, version, type_, role, 0, rank, payload, reason)


def proof(token, nonce, role, rank):
    msg = nonce + struct.pack("<Hi", role, rank)
    return hmac.new(b"byteps-native-v1:" + token.encode(), msg, hashlib.sha256).digest()


def acceptor_proof(token, nonce, client_nonce, role, rank):
    msg = b"acceptor" + nonce + client_nonce + struct.pack("<Hi", role, rank)
    return hmac.new(b"byteps-native-v1:" + token.encode(), msg, hashlib.sha256).digest()


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def handshake(host, port, token, role=0, rank=-1, version=VERSION, magic=MAGIC, timeout=10):
    """Runs the client side. Returns (accepted, reason, socket); an accept
    without a valid acceptor proof raises."""
    s = socket.create_connection((host, port), timeout=timeout)
    raw = recv_exactly(s, FRAME.size)
    if len(raw) < FRAME.size:
        return False, "closed before the challenge", s
    f_magic, f_version, f_type, _, _, _, nonce, _ = FRAME.unpack(raw)
    assert (f_magic, f_version, f_type) == (MAGIC, VERSION, CHALLENGE), (f_magic, f_version, f_type)
    client_nonce = os.urandom(32)
    s.sendall(frame(HELLO, role, rank, proof(token, nonce, role, rank), magic=magic, version=version,
                    reason=client_nonce))
    raw = recv_exactly(s, FRAME.size)
    if len(raw) < FRAME.size:
        return False, "closed without an answer", s
    _, _, a_type, _, _, _, their_proof, reason = FRAME.unpack(raw)
    if a_type == ACCEPT:
        assert their_proof == acceptor_proof(token, nonce, client_nonce, role, rank), "acceptor proof is wrong"
    return a_type == ACCEPT, reason.rstrip(b"\0").decode(errors="replace"), s


def listening_ports(pid):
    """(IPv4 address, port) pairs a process listens on (from /proc; no psutil)."""
    import os
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    with open("/proc/net/tcp") as table:
        for line in table.read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                addr, port = cols[1].split(":")
                ip = socket.inet_ntoa(struct.pack("<I", int(addr, 16)))
                ports.add((ip, int(port, 16)))
    return sorted(ports)
