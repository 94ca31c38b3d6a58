"""Horovod's collectives restricted to a process set: torch.distributed calls
on the set's subgroup (process_sets.py). Results are computed at once; the
*_async forms hand back finished handles."""
import torch
import torch.distributed as dist

from byteps_native.reduce_ops import Adasum, Average, Max, Min, Product, Sum
from byteps_native.torch.reduce_ops import reduce_gathered


def _wire(tensor):
    """NCCL has no int16: GPU int16 tensors travel as int32."""
    if tensor.device.type == "cuda" and tensor.dtype == torch.int16:
        return tensor.to(torch.int32)
    return tensor


def _gather_equal(tensor, ps):
    wire = _wire(tensor.contiguous())
    parts = [torch.empty_like(wire) for _ in range(ps.size())]
    dist.all_gather(parts, wire, group=ps.group)
    return [part.to(tensor.dtype) for part in parts]


def _gather_rows(tensor, ps):
    """Every member's tensor, first dimensions may differ, in set-rank order."""
    tensor = tensor.detach().contiguous()
    scalar = tensor.dim() == 0
    if scalar:
        tensor = tensor.reshape(1)
    rows = torch.tensor([tensor.shape[0]], dtype=torch.int64)
    all_rows = [int(r) for r in _gather_equal(rows, ps)]
    padded = torch.zeros((max(all_rows), *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[:tensor.shape[0]] = tensor
    return [part[:n] for part, n in zip(_gather_equal(padded, ps), all_rows)]


def allreduce(tensor, op, prescale_factor, postscale_factor, ps, scale):
    out = tensor.detach().clone()
    scale(out, prescale_factor)
    if op in (Average, Sum):
        wire = _wire(out)
        dist.all_reduce(wire, op=dist.ReduceOp.SUM, group=ps.group)
        if wire is not out:
            out.copy_(wire)
        if op == Average:
            out.copy_(out.double().div(ps.size()).to(out.dtype) if not out.is_floating_point()
                      else out / ps.size())
    elif op in (Min, Max, Product, Adasum):
        out = reduce_gathered(op, _gather_equal(out, ps))
    return scale(out, postscale_factor)


def allgather(tensor, ps):
    pieces = _gather_rows(tensor, ps)
    return torch.cat(pieces) if tensor.dim() else torch.cat(pieces).reshape(ps.size())


def broadcast(tensor, root_rank, ps):
    """`root_rank` is a global rank, as in Horovod."""
    if root_rank not in ps.ranks:
        raise ValueError(f"broadcast: root_rank {root_rank} is not in {ps!r}")
    out = _wire(tensor.detach().clone().contiguous())
    dist.broadcast(out, src=root_rank, group=ps.group)
    return out.to(tensor.dtype)


def alltoall(tensor, splits, ps):
    n, me = ps.size(), ps.rank()
    rows = tensor.shape[0]
    splits_given = splits
    if splits is None:
        if rows % n:
            raise ValueError(f"alltoall without splits needs the first dimension ({rows}) to be a multiple of "
                             f"the process set's size ({n}); pass splits=")
        splits = [rows // n] * n
    splits = [int(s) for s in (splits.tolist() if torch.is_tensor(splits) else splits)]
    if len(splits) != n or sum(splits) != rows or any(s < 0 for s in splits):
        raise ValueError(f"alltoall splits {splits} must be {n} non-negative counts summing to {rows}")
    matrix = torch.stack(_gather_equal(torch.tensor(splits, dtype=torch.int64), ps))
    gathered = _gather_rows(tensor, ps)
    pieces = [gathered[src][int(matrix[src, :me].sum()):][:int(matrix[src, me])] for src in range(n)]
    counts_device = splits_given.device if torch.is_tensor(splits_given) else torch.device("cpu")
    return torch.cat(pieces), matrix[:, me].to(device=counts_device, dtype=torch.int32)


def reducescatter(tensor, op, prescale_factor, postscale_factor, ps, scale):
    reduced = allreduce(tensor, op, prescale_factor, postscale_factor, ps, scale)
    n, rows, me = ps.size(), tensor.shape[0], ps.rank()
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:me])
    return reduced[start:start + counts[me]].clone()


def barrier(ps):
    dist.all_reduce(torch.zeros(1, dtype=torch.int32), group=ps.group)


def allgather_object(obj, ps):
    gathered = [None] * ps.size()
    dist.all_gather_object(gathered, obj, group=ps.group)
    return gathered


def broadcast_object(obj, root_rank, ps):
    holder = [obj]
    dist.broadcast_object_list(holder, src=root_rank, group=ps.group)
    return holder[0]
