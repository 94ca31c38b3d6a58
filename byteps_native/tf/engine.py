"""The TF face of the engine's lifecycle and topology (byteps_native/_runtime).

The TF op library links the same ``byteps_native/lib/libbyteps_engine.so``, so
``init()`` here and the ops share one engine per process, as do the torch and
core faces; the start-up policy itself lives in _runtime/lifecycle.py.
"""
import json

from byteps_native._runtime import library, lifecycle
from byteps_native._runtime.errors import EngineError  # noqa: F401  (re-exported)

_FACE = "tf"


def init(lazy=True, comm=None, process_sets=None):
    """Initialise the engine (idempotent), the way the launcher implies
    (_runtime/lifecycle.py). ``lazy`` (BytePS) and ``comm``/``process_sets``
    (Horovod) are accepted when they ask for the default; the engine always
    starts here."""
    lifecycle.check_init_arguments(_FACE, comm)
    if process_sets not in (None, [], ()):
        raise NotImplementedError("init(process_sets=...): only the global process set exists in byteps_native.tf")
    lifecycle.start(_FACE)


def shutdown():
    """Stop the engine; pending ops fail with a shutdown error. Idempotent."""
    lifecycle.shutdown()


def is_initialized():
    return lifecycle.initialized()


rank, size, local_rank, local_size, cross_rank, cross_size, is_homogeneous = \
    lifecycle.Topology(_FACE).functions()


def stats_json():
    return library.stats_json()


def stats():
    """Engine counters of this process (bytes pushed/pulled, per server, per stage, queue depth)."""
    return json.loads(library.stats_json())
