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
            lib.bps_init.argtypes = [ctypes.c_void_p]  # const bps_init_options* or NULL
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


class _InitOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_int32), ("rank", ctypes.c_int32), ("size", ctypes.c_int32),
                ("local_rank", ctypes.c_int32), ("local_size", ctypes.c_int32), ("store", ctypes.c_void_p)]


_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_torchrun_store = None  # the engine may call the store's callbacks as long as it runs


def _launched_by_torchrun():
    return all(k in os.environ for k in _TORCHRUN_VARS)


def _init_through_torchrun_store():
    """Rendezvous through the TCPStore torchrun (or a torch.distributed-style
    launcher) announces in MASTER_ADDR/MASTER_PORT, like the torch adapter does."""
    global _torchrun_store
    try:
        import datetime
        import torch.distributed as dist
    except ImportError as e:
        raise EngineError(
            "this process was started by torchrun (RANK/WORLD_SIZE/MASTER_ADDR are set) but torch is not "
            "importable, so it cannot reach torchrun's rendezvous store; install torch, or launch with "
            "`bpslaunch --local-workers N -- python script.py`") from e
    from byteps_native.core.c_store import CStore
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=float(os.environ.get("BYTEPS_RENDEZVOUS_TIMEOUT", "300")))
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    raw = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                        is_master=(rank == 0 and not agent_store), timeout=timeout,
                        wait_for_workers=False)
    # A torchrun restart reuses the agent's store: keys of the failed attempt must not be seen.
    prefix = f"byteps_native_tf/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
    adapter = CStore(dist.PrefixStore(prefix, raw))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    options = _InitOptions(ctypes.sizeof(_InitOptions), rank, world, local_rank, local_size,
                           ctypes.cast(ctypes.pointer(adapter.struct), ctypes.c_void_p))
    _torchrun_store = (raw, adapter, options)
    _check(library().bps_init(ctypes.byref(options)), "bps_init (torchrun rendezvous)")


def init(lazy=True, comm=None, process_sets=None):
    """Initialise the engine (idempotent), the way the launcher implies:

    - bpslaunch (DMLC_ROLE set): rendezvous at the scheduler from DMLC_*
      (see docs/env.md);
    - torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): rendezvous
      through torchrun's store, one server per machine in-process;
    - neither: a job of one process.

    ``lazy`` (BytePS) and ``comm``/``process_sets`` (Horovod) are accepted
    when they ask for the default; the engine always starts here.
    """
    global _shutdown_registered
    if comm is not None:
        raise NotImplementedError(
            "init(comm=...): byteps_native has no MPI; every process started by torchrun or bpslaunch "
            "joins one job. Drop comm=")
    if process_sets not in (None, [], ()):
        raise NotImplementedError("init(process_sets=...): only the global process set exists in byteps_native")
    if library().bps_initialized():
        return
    if os.environ.get("DMLC_ROLE"):
        if os.environ["DMLC_ROLE"] != "worker":
            raise EngineError(f"byteps_native.tf.init() runs in workers, but DMLC_ROLE={os.environ['DMLC_ROLE']!r}"
                              "; servers and schedulers are started by bpslaunch, not by training scripts")
        _check(library().bps_init(None), "bps_init")
    elif _launched_by_torchrun():
        _init_through_torchrun_store()
    else:
        _check(library().bps_init(None), "bps_init")
    with _lock:
        if not _shutdown_registered:
            atexit.register(shutdown)
            _shutdown_registered = True
    if _torchrun_store is not None:  # join() needs the store: see join_protocol.py
        from byteps_native.tf import join_protocol
        join_protocol.start_watcher()
        atexit.register(join_protocol.stop_watcher)  # runs before shutdown (atexit is LIFO)


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


def cross_rank():
    return _topology("cross_rank")


def cross_size():
    return _topology("cross_size")


def is_homogeneous():
    return _topology("is_homogeneous") == 1


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
