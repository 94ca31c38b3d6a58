"""The engine's lifecycle and topology, reached through its C ABI (ctypes).

The TF op library links the same ``byteps_native/lib/libbyteps_engine.so``, so
``init()`` here and the ops share one engine per process, as does
``byteps_native.core`` (``bps_init`` is idempotent). Going through the C ABI
rather than the pybind module keeps this adapter independent of the other
Python faces.
"""
import atexit
import ctypes
import os
import threading

_LIB_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "lib", "libbyteps_engine.so")
_lock = threading.Lock()
_lib = None
_shutdown_registered = False


class EngineError(RuntimeError):
    """A bps_* call failed; the message is the engine's own."""


def library():
    """The engine library, loaded once (the same handle the TF ops use)."""
    global _lib
    with _lock:
        if _lib is None:
            if not os.path.exists(_LIB_PATH):
                raise ImportError(
                    f"byteps-native engine library not found at {_LIB_PATH}; build it with: "
                    f"cd {_repo_root()} && pip install --no-build-isolation -e .")
            lib = ctypes.CDLL(_LIB_PATH, mode=ctypes.RTLD_GLOBAL)
            lib.bps_init.argtypes = [ctypes.c_void_p]
            lib.bps_last_error.restype = ctypes.c_char_p
            lib.bps_build_info.restype = ctypes.c_char_p
            lib.bps_stats_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.bps_stats_json.restype = ctypes.c_size_t
            _lib = lib
        return _lib


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _check(code, what):
    if code != 0:
        message = (library().bps_last_error() or b"").decode(errors="replace")
        raise EngineError(f"{what} failed (engine status {code}): {message}")


def init():
    """Initialise the engine from the BytePS environment variables (idempotent).

    Workers need DMLC_ROLE=worker, DMLC_NUM_WORKER, DMLC_WORKER_ID,
    DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT and DMLC_NUM_SERVER (see docs/env.md);
    ``bpslaunch`` sets them.
    """
    global _shutdown_registered
    _check(library().bps_init(None), "bps_init")
    with _lock:
        if not _shutdown_registered:
            atexit.register(shutdown)
            _shutdown_registered = True


def shutdown():
    """Stop the engine; pending ops fail with a shutdown error. Idempotent."""
    lib = library()
    if lib.bps_initialized():
        _check(lib.bps_shutdown(), "bps_shutdown")


def is_initialized():
    return bool(library().bps_initialized())


def _topology(fn_name):
    lib = library()
    if not lib.bps_initialized():
        raise EngineError(f"{fn_name}() needs an initialised engine: call byteps_native.tf.init() first")
    return getattr(lib, "bps_" + fn_name)()


def rank():
    return _topology("rank")


def size():
    return _topology("size")


def local_rank():
    return _topology("local_rank")


def local_size():
    return _topology("local_size")


def stats_json():
    """The engine's counters as a JSON string (format owned by the engine)."""
    lib = library()
    needed = lib.bps_stats_json(None, 0)
    buf = ctypes.create_string_buffer(needed + 1)
    lib.bps_stats_json(buf, len(buf))
    return buf.value.decode(errors="replace")


def stats():
    """Engine counters of this process (bytes pushed/pulled, per server, per stage, queue depth)."""
    import json
    return json.loads(stats_json())
