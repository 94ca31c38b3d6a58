"""The engine library, ``byteps_native/lib/libbyteps_engine.so``, through its
C ABI (csrc/c_api/byteps_c.h), loaded once per process.

Every compiled adapter (the pybind ``core._core``, torch's ``_c10d``, TF's op
library) links this same library, so one process has one engine whichever
faces it imports. The Python side reaches the engine's lifecycle, topology
and counters here and nowhere else; the adapters keep only their data paths
(buffers, torch Futures, TF kernels), which need their framework's C++ types.
"""
import ctypes
import os
import threading

from byteps_native._runtime.errors import EngineError

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINE_PATH = os.path.join(PACKAGE_ROOT, "lib", "libbyteps_engine.so")
C_API_VERSION = 1  # BPS_C_API_VERSION this package speaks

_lock = threading.Lock()
_engine = None


class InitOptions(ctypes.Structure):
    """bps_init_options."""
    _fields_ = [("struct_size", ctypes.c_int32), ("rank", ctypes.c_int32), ("size", ctypes.c_int32),
                ("local_rank", ctypes.c_int32), ("local_size", ctypes.c_int32), ("store", ctypes.c_void_p)]


def repo_root():
    return os.path.dirname(PACKAGE_ROOT)


def rebuild_hint():
    return f"rebuild with: cd {repo_root()} && pip install --no-build-isolation -e ."


def engine():
    """The engine library, loaded once (RTLD_GLOBAL: the TF op library, loaded
    later, resolves its bps_* symbols to this same copy)."""
    global _engine
    with _lock:
        if _engine is None:
            if not os.path.exists(ENGINE_PATH):
                raise ImportError(f"byteps-native engine library not found at {ENGINE_PATH}; {rebuild_hint()}")
            lib = ctypes.CDLL(ENGINE_PATH, mode=ctypes.RTLD_GLOBAL)
            lib.bps_init.argtypes = [ctypes.c_void_p]  # const bps_init_options* or NULL
            lib.bps_last_error.restype = ctypes.c_char_p
            lib.bps_build_info.restype = ctypes.c_char_p
            lib.bps_capabilities.restype = ctypes.c_uint32
            lib.bps_stats_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.bps_stats_json.restype = ctypes.c_size_t
            lib.bps_run_server_with_store.argtypes = [ctypes.c_void_p]
            lib.bps_submission_count.restype = ctypes.c_int64
            lib.bps_submission.restype = ctypes.c_int64
            lib.bps_submission.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64]
            lib.bps_joined_ranks_check.restype = ctypes.c_size_t
            lib.bps_joined_ranks_check.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                                                   ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]
            _engine = lib
        return _engine


def last_error():
    return (engine().bps_last_error() or b"").decode(errors="replace")


def failure(code, kind=EngineError, what=None):
    """A failed bps_* call as `kind` with .code (the bps_status_code): the
    engine's own words, after "`what` failed (engine status N): " where given."""
    words = last_error()
    error = kind(f"{what} failed (engine status {code}): {words}" if what else words)
    error.code = code
    return error


def check(code, what=None):
    """Raise failure(code, what=what) when a bps_* call failed."""
    if code != 0:
        raise failure(code, what=what)


def build_info():
    return engine().bps_build_info().decode(errors="replace")


CAPABILITY_BITS = {"cuda": 1, "nccl": 2}  # BPS_CAP_* of byteps_c.h


def capabilities():
    """What this build can do, by name: {"cuda": True, "nccl": True} (bps_capabilities)."""
    bits = engine().bps_capabilities()
    return {name: bool(bits & bit) for name, bit in CAPABILITY_BITS.items()}


def stats_json():
    """The engine's counters as a JSON string (format owned by the engine)."""
    lib = engine()
    # The engine's thread moves the counters between two calls, and a JSON
    # that grew meanwhile came back cut short (a rank's stats() then failed to
    # parse, issue 38): a call whose answer fits its buffer is whole.
    size = lib.bps_stats_json(None, 0)
    while True:
        buf = ctypes.create_string_buffer(size + 64)
        needed = lib.bps_stats_json(buf, len(buf))
        if needed <= len(buf):
            return buf.value.decode(errors="replace")
        size = needed
