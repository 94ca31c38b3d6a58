"""A Python key-value store (e.g. torch's TCPStore) as the C ABI's `bps_store`.

Used where no compiled adapter bridges a c10d store: dedicated servers joining a
torchrun job, and the TF face under torchrun (lifecycle.py); they rendezvous
through the same TCPStore as the workers (MASTER_ADDR:MASTER_PORT). The engine calls these
callbacks from its own threads, only at start-up (never per partition).
"""
import ctypes
import datetime

BPS_TIMEOUT = 4
BPS_PEER_FAILURE = 3

# The error buffers are c_void_p, not c_char_p: ctypes hands a c_char_p
# argument to Python as a bytes copy, so the message never reached the engine
# and writing it overran that copy (a heap corruption: segfault at exit).
_SET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_void_p, ctypes.c_size_t)
_GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p,
                        ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_size_t)
_ADD = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                        ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_size_t)


class _BpsStore(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("set", _SET), ("get", _GET), ("add", _ADD)]


def _error(err, cap, exc):
    if not err or cap <= 0:
        return
    message = (str(exc).strip().splitlines() or [type(exc).__name__])[0].encode()[: cap - 1] + b"\0"
    ctypes.memmove(err, message, len(message))


class CStore:
    """Keeps the callbacks alive as long as the engine may call them; pass
    ``pointer()`` where the C ABI takes a ``const bps_store*``."""

    def __init__(self, store):
        self._store = store

        def set_(ctx, key, value, length, err, cap):
            try:
                self._store.set(key.decode(), ctypes.string_at(value, length))
                return 0
            except Exception as e:  # noqa: BLE001 -- every failure must reach the engine as a code
                _error(err, cap, e)
                return BPS_PEER_FAILURE

        def get(ctx, key, timeout_ms, buf, cap, length, err, errcap):
            try:
                self._store.wait([key.decode()], datetime.timedelta(milliseconds=max(1, timeout_ms)))
            except Exception as e:  # noqa: BLE001
                _error(err, errcap, e)
                return BPS_TIMEOUT if "timeout" in str(e).lower() else BPS_PEER_FAILURE
            try:
                value = self._store.get(key.decode())
            except Exception as e:  # noqa: BLE001
                _error(err, errcap, e)
                return BPS_PEER_FAILURE
            length[0] = len(value)
            ctypes.memmove(buf, value, min(cap, len(value)))
            return 0

        def add(ctx, key, delta, result, err, cap):
            try:
                result[0] = self._store.add(key.decode(), delta)
                return 0
            except Exception as e:  # noqa: BLE001
                _error(err, cap, e)
                return BPS_PEER_FAILURE

        self._callbacks = (_SET(set_), _GET(get), _ADD(add))
        self.struct = _BpsStore(None, *self._callbacks)

    def pointer(self):
        return ctypes.cast(ctypes.pointer(self.struct), ctypes.c_void_p)
