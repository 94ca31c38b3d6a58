"""Broadcast helpers for the start of training (Horovod's names and semantics)."""
import io
import pickle

import torch

from byteps_native.torch import join_protocol as _join
from byteps_native.torch.extension import _c10d
from byteps_native.torch.ops import _require_init


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


def _padded_size(length):
    """Buffer sizes come from a short ladder of powers of two: each distinct name
    (and the size is part of it) costs engine memory for good."""
    size = 1024
    while size < length:
        size *= 2
    return size


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Root's `obj` (any picklable object) on every rank (of `process_set`)."""
    _require_init("broadcast_object")
    from byteps_native.torch.process_sets import subgroup_of
    ps = subgroup_of(process_set, "broadcast_object")
    if ps is not None:
        from byteps_native.torch.process_set_collectives import broadcast_object as subset_broadcast_object
        return subset_broadcast_object(obj, root_rank, ps)
    name = name or "broadcast_object"
    is_root = _c10d.rank() == root_rank
    payload = pickle.dumps(obj) if is_root else b""
    length = torch.tensor([len(payload)], dtype=torch.int64)
    _join.broadcast_async(length, root_rank, f"{name}.length").wait()
    buffer = torch.zeros(_padded_size(int(length)), dtype=torch.uint8)
    if is_root:
        buffer[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    _join.broadcast_async(buffer, root_rank, f"{name}.{buffer.numel()}").wait()
    return obj if is_root else pickle.load(io.BytesIO(buffer[:int(length)].numpy().tobytes()))


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Give every rank root's optimizer state (step counts, moments, hyper-parameters).
    As Horovod, parameters that require a gradient and have none get a zero one."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    state = broadcast_object(optimizer.state_dict(), root_rank, "broadcast_optimizer_state")
    if _c10d.rank() != root_rank:
        optimizer.load_state_dict(state)
