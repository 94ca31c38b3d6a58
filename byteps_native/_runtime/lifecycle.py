"""The one start-up and shutdown policy of the engine, for every face.

``start()`` decides how the engine starts from how the process was launched:

- bpslaunch (DMLC_ROLE set): rendezvous at the scheduler from DMLC_*
  (docs/env.md); only workers train;
- torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): rendezvous through
  torchrun's store, one server per machine in-process;
- neither: a job of one process.

A face says *how* each case is done through a ``Starter`` (torch's goes
through its c10d backend, whose C++ bridges torch's store; the default here
reaches the engine through the C ABI); the policy, the checks and what
happens around a start and a stop live only here. What must run with the
engine (the join watchers) registers with ``on_init``; the engine is stopped
once at exit, whichever faces the process imported.
"""
import atexit
import os
import threading

from byteps_native._runtime import config, library
from byteps_native._runtime.c_store import CStore
from byteps_native._runtime.errors import EngineError
from byteps_native._runtime.orphaned_shm import remove_orphaned_segments

_lock = threading.RLock()
_start_hooks = []     # on_init(hook): run once per start of the engine
_stop_hooks = []      # on_init(..., stop=): run before the engine stops
_started_hooks = False
_torchrun_store = None  # (raw store, its C adapter, init options): the engine calls the store while it runs


def initialized():
    return bool(library.engine().bps_initialized())


def check_init_arguments(face, comm):
    """Horovod's ``comm=`` asks for MPI, which this package does not have."""
    if comm is not None:
        raise NotImplementedError(
            f"byteps_native.{face}.init(comm=...): byteps_native has no MPI; every process started by torchrun "
            "or bpslaunch joins one job. Drop comm= (start a separate job for a subset of ranks)")


class Starter:
    """How a face starts the engine in each launch mode. These defaults use
    the C ABI (and, under torchrun, a TCPStore through c_store.CStore)."""

    def from_environment(self):
        library.check(library.engine().bps_init(None), "bps_init")

    def through_torchrun(self):
        _init_through_torchrun_store()

    def alone(self):
        library.check(library.engine().bps_init(None), "bps_init")


def start(face, starter=None):
    """Start the engine the way the launcher implies (idempotent); then run
    the on_init hooks. `face` ('torch', 'tf', 'core') names the caller in errors."""
    starter = starter or Starter()
    with _lock:
        if not initialized():
            role = config.role()
            if role:
                if role in ("server", "scheduler"):  # any other value: the engine names what it accepts
                    raise EngineError(
                        f"byteps_native.{face}.init() runs in workers, but DMLC_ROLE={role!r}; servers and "
                        "schedulers are started by bpslaunch, not by training scripts")
                starter.from_environment()
            elif config.launched_by_torchrun():
                starter.through_torchrun()
            else:
                starter.alone()
    engine_started()


def engine_started():
    """Run the on_init hooks once for this start of the engine. start() calls
    it; so does a face that starts the engine another way (torch's
    init_process_group('byteps') starts it inside the c10d backend)."""
    global _started_hooks
    with _lock:
        if _started_hooks or not initialized():
            return
        _started_hooks = True
        hooks = list(_start_hooks)
    for hook in hooks:
        hook()


def on_init(hook, stop=None):
    """Run `hook()` whenever the engine starts (now, if it runs already), and
    `stop()` before it stops (shutdown() or process exit)."""
    with _lock:
        _start_hooks.append(hook)
        if stop is not None:
            _stop_hooks.append(stop)
        running = _started_hooks
    if running:
        hook()


def shutdown():
    """Stop what on_init started, then the engine; pending operations fail
    with a shutdown error. Idempotent."""
    global _started_hooks
    with _lock:
        # Every stop hook, also when the engine was started elsewhere (a
        # watcher may have started with the first operation): they are idempotent.
        stops = list(reversed(_stop_hooks))
        _started_hooks = False
    for stop in stops:
        stop()
    if initialized():
        library.check(library.engine().bps_shutdown(), "bps_shutdown")


@atexit.register
def _shutdown_at_exit():
    # A script that never calls shutdown() still leaves in order: servers and
    # the scheduler would otherwise report this process as dead. Registered at
    # the first import of this package, so it runs after every face's own
    # exit handlers (atexit is last in, first out).
    try:
        shutdown()
    except EngineError:
        pass
    remove_orphaned_segments(config.job_id())


def torchrun_store():
    """The TCPStore this process rendezvoused through under torchrun (the
    default Starter's), or None."""
    return None if _torchrun_store is None else _torchrun_store[0]


def _init_through_torchrun_store():
    """Rendezvous through the TCPStore torchrun (or a torch.distributed-style
    launcher) announces in MASTER_ADDR/MASTER_PORT, as the torch adapter does."""
    global _torchrun_store
    import ctypes
    try:
        import torch.distributed as dist
    except ImportError as e:
        raise EngineError(
            "this process was started by torchrun (RANK/WORLD_SIZE/MASTER_ADDR are set) but torch is not "
            "importable, so it cannot reach torchrun's rendezvous store; install torch, or launch with "
            "`bpslaunch --local-workers N -- python script.py`") from e
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    raw = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                        is_master=(rank == 0 and not agent_store), timeout=config.rendezvous_timeout(),
                        wait_for_workers=False)
    # A torchrun restart reuses the agent's store: keys of the failed attempt must not be seen.
    adapter = CStore(dist.PrefixStore(f"byteps_native_tf/{config.restart_count()}/", raw))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    options = library.InitOptions(ctypes.sizeof(library.InitOptions), rank, world, local_rank, local_size,
                                  adapter.pointer())
    _torchrun_store = (raw, adapter, options)
    library.check(library.engine().bps_init(ctypes.byref(options)), "bps_init (torchrun rendezvous)")


# ---------------------------------------------------------------- topology

def require(what, face):
    if not initialized():
        raise EngineError(f"byteps_native.{face}.{what}() needs the engine: call bps.init() first "
                          f"(import byteps_native.{face} as bps)")


class Topology:
    """The engine's topology, asked in the name of `face` (whose init() an
    error names when the engine is not running)."""

    def __init__(self, face):
        self._face = face

    def _ask(self, what):
        require(what, self._face)
        return getattr(library.engine(), "bps_" + what)()

    def rank(self):
        return self._ask("rank")

    def size(self):
        return self._ask("size")

    def local_rank(self):
        return self._ask("local_rank")

    def local_size(self):
        return self._ask("local_size")

    def cross_rank(self):
        return self._ask("cross_rank")

    def cross_size(self):
        return self._ask("cross_size")

    def is_homogeneous(self):
        return self._ask("is_homogeneous") == 1

    def functions(self):
        """(rank, size, local_rank, local_size, cross_rank, cross_size,
        is_homogeneous), for a face to export as its own."""
        return (self.rank, self.size, self.local_rank, self.local_size, self.cross_rank, self.cross_size,
                self.is_homogeneous)
