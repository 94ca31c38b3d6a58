"""Writes the seed corpus of the libFuzzer harnesses in csrc/fuzz/.

    python tests/fuzz_corpus/make_corpus.py

frame/            inputs of frame_decoder_fuzz: bytes a peer sends on a data
                  connection (64-byte MessageHeader + payload, csrc/transport/framing.h, csrc/ps/protocol.h)
handshake_store/  inputs of handshake_store_fuzz: a mode byte (0 accept,
                  1 connect, 2 store requests) + the bytes the peer sends
Seeds are small, valid or almost valid messages; the fuzzer mutates from there.
Files are named by content so reruns are stable.
"""
import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x4E535042, 2
PUSH, RESPONSE, ERROR, BYE, HEARTBEAT = 1, 2, 3, 4, 5
HEADER = struct.Struct("<IHHQQIIQIBBHIIQ")
assert HEADER.size == 64
HS = struct.Struct("<IHHHHi32s80s")
STORE_REQ = struct.Struct("<IB3sIIq")
STORE_MAGIC = 0x53535042


def header(type_, payload=b"", key=7, round_=0, dtype=0, contributors=2, magic=MAGIC, version=VERSION,
           payload_bytes=None):
    n = len(payload) if payload_bytes is None else payload_bytes
    return HEADER.pack(magic, version, type_, key, 99, round_, 0, n, 1, dtype, 0, contributors, 1234, 4096000,
                       n) + payload


def hs(type_, role=0, rank=0, blob=b"\0" * 32, reason=b"", magic=MAGIC, version=VERSION):
    return HS.pack(magic, version, type_, role, 0, rank, blob, reason)


def store(op, key=b"", value=b"", arg=0, magic=STORE_MAGIC):
    return STORE_REQ.pack(magic, op, b"\0\0\0", len(key), len(value), arg) + key + value


FRAME_SEEDS = {
    "push_f32": header(PUSH, struct.pack("<4f", 1, 2, 3, 4)),
    "push_f16": header(PUSH, b"\0\x3c" * 8, dtype=2),
    "push_u8_odd": header(PUSH, b"\x01\x02\x03", dtype=6),
    "response": header(RESPONSE, struct.pack("<2d", 1.5, -2), dtype=1, contributors=0),
    "error_key0": header(ERROR, b"worker 1 (10.0.0.2:4000) disconnected", key=0),
    "error_tensor": header(ERROR, b"ranks disagree on this tensor"),
    "bye": header(BYE),
    "heartbeat": header(HEARTBEAT),
    "push_then_bye": header(PUSH, b"\0" * 8) + header(BYE),
    "many_small": b"".join(header(HEARTBEAT) for _ in range(5)) + header(ERROR, b"x"),
    "truncated_header": header(PUSH, b"\0" * 8)[:40],
    "truncated_payload": header(PUSH, b"\0" * 64)[:100],
    "oversized": header(PUSH, payload_bytes=1 << 40),
    "error_too_long": header(ERROR, payload_bytes=1 << 20),
    "bad_version": header(PUSH, b"\0" * 4, version=1),
    "bad_magic": header(PUSH, b"\0" * 4, magic=0x12345678),
    "unknown_type": header(77),
    "bye_with_payload": header(BYE, b"zz"),
}

HANDSHAKE_STORE_SEEDS = {
    "accept_hello": b"\0" + hs(101, role=0, rank=3, blob=b"\x11" * 32),
    "accept_hello_server": b"\0" + hs(101, role=1, rank=-1),
    "accept_hello_bad_role": b"\0" + hs(101, role=9),
    "accept_other_version": b"\0" + hs(101, version=1),
    "accept_bad_magic": b"\0" + hs(101, magic=0x1),
    "accept_short": b"\0" + hs(101)[:60],
    "connect_accepted": b"\x01" + hs(100, blob=b"\x22" * 32) + hs(102),
    "connect_rejected": b"\x01" + hs(100) + hs(103, reason=b"authentication failed: no token"),
    "connect_rejected_unterminated": b"\x01" + hs(100) + hs(103, reason=b"R" * 80),
    "connect_wrong_first": b"\x01" + hs(102),
    "connect_other_version": b"\x01" + hs(100, version=3),
    "store_set_get": b"\x02" + store(1, b"server/0", b"127.0.0.1:4000") + store(2, b"server/0", arg=1000),
    "store_add": b"\x02" + store(3, b"workers_joined", arg=1) + store(3, b"workers_joined", arg=-5),
    "store_add_to_text": b"\x02" + store(1, b"k", b"abc") + store(3, b"k", arg=1),
    "store_add_overflow": b"\x02" + store(3, b"c", arg=(1 << 63) - 1) + store(3, b"c", arg=1),
    "store_get_missing": b"\x02" + store(2, b"nobody", arg=5),
    "store_bye": b"\x02" + store(1, b"a", b"b") + store(4),
    "store_huge_key": b"\x02" + STORE_REQ.pack(STORE_MAGIC, 1, b"\0\0\0", 1 << 30, 0, 0),
    "store_unknown_op": b"\x02" + store(9, b"k"),
    "store_bad_magic": b"\x02" + store(1, b"k", b"v", magic=0),
    "store_truncated": b"\x02" + store(1, b"key", b"value")[:30],
}


def write(folder, seeds):
    path = os.path.join(HERE, folder)
    os.makedirs(path, exist_ok=True)
    for label, blob in seeds.items():
        name = f"seed-{label}-{hashlib.sha1(blob).hexdigest()[:10]}"
        with open(os.path.join(path, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    write("frame", FRAME_SEEDS)
    write("handshake_store", HANDSHAKE_STORE_SEEDS)
