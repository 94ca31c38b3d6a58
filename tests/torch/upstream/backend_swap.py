"""Runs PyTorch's own distributed tests on 'byteps' with only the backend
string changed.

The suites decide at import time, from the string "gloo", which cases apply
(`BACKEND != "gloo"` skips); so they are imported as for gloo, and with
CONFORMANCE_BACKEND=byteps every group they create asks for 'byteps' where
they asked for 'gloo' (init_process_group, new_group, new_subgroups, device
meshes). gloo is the reference: the same cases, unswapped, in the same run.
"""
import functools
import os

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

TARGET = os.environ.get("CONFORMANCE_BACKEND", "gloo")


def _swap(backend):
    if isinstance(backend, str) and "gloo" in backend.lower():
        return backend.lower().replace("gloo", TARGET)
    return backend


def _patch(module, name, backend_arg_index):
    original = getattr(module, name)
    if getattr(original, "_byteps_swapped", False):
        return

    @functools.wraps(original)
    def swapped(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = _swap(kwargs["backend"])
        elif len(args) > backend_arg_index:
            args = list(args)
            args[backend_arg_index] = _swap(args[backend_arg_index])
        return original(*args, **kwargs)

    swapped._byteps_swapped = True
    setattr(module, name, swapped)


def install():
    if TARGET == "gloo":
        return
    import byteps_native.torch  # noqa: F401  registers the backend

    for module in (dist, c10d):
        _patch(module, "init_process_group", 0)
        _patch(module, "new_group", 2)  # new_group(ranks, timeout, backend, ...)
        _patch(module, "new_subgroups", 3)  # new_subgroups(group_size, group, timeout, backend)
        _patch(module, "new_subgroups_by_enumeration", 2)
