"""The torch face of the engine's lifecycle and topology (byteps_native/_runtime).

The start-up policy is _runtime/lifecycle.py's; what is torch's own is *how*
each launch mode starts the engine: through the c10d backend, whose C++
bridges torch's store to the engine (csrc/torch/engine_init.cc).
"""
import torch.distributed as dist

from byteps_native._runtime import lifecycle
from byteps_native.torch.extension import _c10d
from byteps_native.torch.process_sets import add_process_set

_FACE = "torch"


class _C10dStarter(lifecycle.Starter):
    def from_environment(self):
        _c10d.init_from_env()

    def through_torchrun(self):
        if not dist.is_initialized():
            dist.init_process_group("byteps")
        if not lifecycle.initialized():  # the default group runs another backend: share its store
            store = dist.PrefixStore("byteps_native/", dist.distributed_c10d._get_default_store())
            _c10d.init_with_store(store, dist.get_rank(), dist.get_world_size())

    def alone(self):
        _c10d.init_with_store(dist.HashStore(), 0, 1)


def init(lazy=True, comm=None, process_sets=None):
    """Start the engine (idempotent), the way the launcher implies
    (_runtime/lifecycle.py); under torchrun through init_process_group('byteps'),
    or, when another backend already owns the default group, through its store.

    Accepts BytePS's ``lazy=`` (the engine always starts here; starting on the
    first push_pull instead would change nothing a script can observe but the
    moment of a rendezvous error) and Horovod's ``comm=`` / ``process_sets=``
    (``comm`` only when it asks for the default: all ranks).
    """
    lifecycle.check_init_arguments(_FACE, comm)
    if process_sets not in (None, [], ()):
        add_process_set(process_sets)
    lifecycle.start(_FACE, _C10dStarter())


def shutdown():
    """Stop the engine; pending operations fail with a shutdown error."""
    lifecycle.shutdown()


def _require_init(what):
    lifecycle.require(what, _FACE)


def is_initialized():
    return lifecycle.initialized()


rank, size, local_rank, local_size, cross_rank, cross_size, is_homogeneous = \
    lifecycle.Topology(_FACE).functions()
