"""Broadcast helpers for the start of training (Horovod's names and semantics)."""
import torch

from byteps_native.algorithms import objects
from byteps_native.torch import join_protocol as _join
from byteps_native.torch import engine
from byteps_native.torch import process_set_collectives as subset
from byteps_native.torch.framework import TORCH
from byteps_native.torch.ops import _require_init
from byteps_native.torch.process_sets import subgroup_of


def _named_tensors(params):
    if isinstance(params, dict):
        items = list(params.items())
    else:
        items = list(params)
        if items and not isinstance(items[0], tuple):
            raise ValueError("broadcast_parameters takes a state_dict or model.named_parameters(); "
                             "got a list of bare tensors, which have no names to match across ranks")
    names = [name for name, _ in items]
    if len(set(names)) != len(names):
        raise ValueError("broadcast_parameters: parameter names must be unique")
    return items


def broadcast_parameters(params, root_rank=0, prefix="broadcast_parameters"):
    """Overwrite `params` (state_dict or named_parameters) on every rank with root's values."""
    _require_init("broadcast_parameters")
    futures = []
    for name, tensor in _named_tensors(params):
        if tensor is None:
            continue
        futures.append(_join.broadcast_async(tensor.detach(), root_rank, f"{prefix}.{name}"))
    for future in futures:
        future.wait()


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Root's `obj` (any picklable object) on every rank (of `process_set`)."""
    _require_init("broadcast_object")
    ps = subgroup_of(process_set, "broadcast_object")
    if ps is not None:
        return subset.broadcast_object(obj, root_rank, ps)
    return objects.broadcast_object(TORCH, obj, root_rank, name or "broadcast_object",
                                    lambda tensors: [t.numpy() for t in tensors])


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every rank root's optimizer state (step counts, moments, hyper-parameters).
    As Horovod, parameters that require a gradient and have none get a zero one."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    state = broadcast_object(optimizer.state_dict(), root_rank, "broadcast_optimizer_state")
    if engine.rank() != root_rank:
        optimizer.load_state_dict(state)
