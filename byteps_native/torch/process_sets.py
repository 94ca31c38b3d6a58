"""Horovod's process sets over torch.distributed subgroups.

``add_process_set(ranks)`` is collective, as in Horovod: every rank calls it
with the same ranks, and it creates ``torch.distributed.new_group(ranks)`` on
the job's default backend ('byteps' under ``bps.init()``). Collectives given
``process_set=`` run on that group (process_set_collectives.py); the global
set keeps the engine's own path. Needs torch.distributed, i.e. torchrun.
"""
import torch.distributed as dist

from byteps_native._runtime import lifecycle

_TOPOLOGY = lifecycle.Topology("torch")


class ProcessSet:
    """A subset of the job's ranks (all of them for ``global_process_set``)."""

    def __init__(self, ranks=None):
        self.ranks = sorted(int(r) for r in ranks) if ranks is not None else None
        self.process_set_id = 0 if ranks is None else None
        self.group = None  # the torch.distributed group, once added

    def _global_rank(self):
        return _TOPOLOGY.rank()

    def included(self):
        return self.ranks is None or self._global_rank() in self.ranks

    def size(self):
        if self.ranks is None:
            return _TOPOLOGY.size()
        return len(self.ranks)

    def rank(self):
        """This process's rank within the set (-1 when not included, as Horovod)."""
        if self.ranks is None:
            return self._global_rank()
        return self.ranks.index(self._global_rank()) if self.included() else -1

    def __repr__(self):
        return "ProcessSet(global)" if self.ranks is None else f"ProcessSet(id={self.process_set_id}, {self.ranks})"


global_process_set = ProcessSet()
_added = {0: global_process_set}


def add_process_set(process_set):
    """Register a process set on every rank (collective); returns it."""
    lifecycle.require("add_process_set", "torch")
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps!r} is already registered")
    n = _TOPOLOGY.size()
    if not ps.ranks or len(set(ps.ranks)) != len(ps.ranks) or not all(0 <= r < n for r in ps.ranks):
        raise ValueError(f"add_process_set: ranks {ps.ranks} must be distinct ranks in [0, {n})")
    if any(existing.ranks == ps.ranks for existing in _added.values() if existing.ranks is not None):
        raise ValueError(f"add_process_set: a process set with ranks {ps.ranks} is already registered")
    if not dist.is_initialized():
        raise RuntimeError("process sets run on torch.distributed subgroups: start the job with torchrun "
                           "(bps.init() then joins the 'byteps' process group); under bpslaunch only the "
                           "global process set exists")
    ps.group = dist.new_group(ps.ranks)
    ps.process_set_id = max(_added) + 1
    _added[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set):
    """Unregister a process set (collective); returns True if it was registered."""
    if process_set is global_process_set or process_set.process_set_id not in _added:
        return False
    del _added[process_set.process_set_id]
    # The subgroup is dropped, not destroyed: destroying one group's backend
    # could stop the engine that the global group shares.
    process_set.group, process_set.process_set_id = None, None
    return True


def subgroup_of(process_set, what):
    """None for the global set (the engine's path), else the registered set."""
    if process_set is None or process_set is global_process_set or process_set.ranks is None:
        return None
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id not in _added:
        raise ValueError(f"{what}: {process_set!r} is not registered; call hvd.add_process_set(ranks) first "
                         "on every rank")
    if not process_set.included():
        raise ValueError(f"{what}: rank {process_set._global_rank()} is not in {process_set!r}")
    return process_set


def check_process_set(process_set):
    """Kept for callers that only accept the global set (DistributedOptimizer, async)."""
    if subgroup_of(process_set, "this call") is not None:
        raise NotImplementedError(f"process_set={process_set!r} is not supported here; only the global "
                                  "process set")
