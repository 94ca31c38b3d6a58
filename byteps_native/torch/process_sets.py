"""Horovod's process sets: only the global one exists here.

Collectives on a subset of ranks would need their own engine rendezvous; scripts
that use them get a clear error instead of a silently global reduction.
"""


class ProcessSet:
    def __init__(self, ranks=None):
        self.ranks = list(ranks) if ranks is not None else None
        self.process_set_id = 0 if ranks is None else None

    def included(self):
        return True

    def size(self):
        from byteps_native.torch import ops
        return ops.size()

    def rank(self):
        from byteps_native.torch import ops
        return ops.rank()

    def __repr__(self):
        return "ProcessSet(global)" if self.ranks is None else f"ProcessSet({self.ranks})"


global_process_set = ProcessSet()

_UNSUPPORTED = ("byteps_native supports only the global process set; run one job per subset, or use "
                "torch.distributed.new_group(ranks) with backend='byteps' for sub-group collectives")


def check_process_set(process_set):
    if process_set is not global_process_set and getattr(process_set, "ranks", None) is not None:
        raise NotImplementedError(f"process_set={process_set!r}: {_UNSUPPORTED}")


def add_process_set(process_set):
    raise NotImplementedError(f"add_process_set: {_UNSUPPORTED}")


def remove_process_set(process_set):
    raise NotImplementedError(f"remove_process_set: {_UNSUPPORTED}")
