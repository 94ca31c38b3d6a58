"""Horovod's collectives (allreduce, allgather, broadcast, alltoall,
reducescatter, join, barrier) over the engine's two primitives, push_pull
(sum) and broadcast.

Gathers move raw bytes: each rank writes its bytes into its own slot of a
zeroed uint8 buffer and the buffer is summed, which is exact for every dtype
(x + 0 = x bytewise, no carries). Cost: every rank sends and receives the
whole gathered buffer, i.e. size() times what a ring allgather moves; see
docs/migration.md. Buffer lengths come from a power-of-two ladder, because
each distinct engine name (which includes the length) costs memory for good.
"""
import time

import torch

from byteps_native.torch import ops
from byteps_native.torch.compression import Compression
from byteps_native.torch.extension import _c10d
from byteps_native.torch.process_sets import check_process_set, global_process_set
from byteps_native.torch.reduce_ops import Average, Sum, reduce_gathered, resolve_op


class HorovodInternalError(RuntimeError):
    """A collective failed (a peer died or the engine stopped). Elastic jobs
    catch it to restore their last commit."""


def _padded(length):
    size = 1024
    while size < length:
        size *= 2
    return size


def _sum_now(tensor, name):
    try:
        return _c10d.push_pull_async(tensor, name, 0, False, None).wait()
    except RuntimeError as e:
        raise HorovodInternalError(str(e)) from e


def _gather_lengths(length, name):
    lengths = torch.zeros(ops.size(), dtype=torch.int64)
    lengths[ops.rank()] = length
    _sum_now(lengths, f"{name}.lengths.{ops.size()}")
    return [int(x) for x in lengths]


def gather_bytes(data, name):
    """Every rank's uint8 vector, in rank order."""
    lengths = _gather_lengths(data.numel(), name)
    total = sum(lengths)
    buffer = torch.zeros(_padded(total), dtype=torch.uint8)
    start = sum(lengths[:ops.rank()])
    buffer[start:start + data.numel()] = data
    _sum_now(buffer, f"{name}.bytes.{buffer.numel()}")
    pieces, offset = [], 0
    for length in lengths:
        pieces.append(buffer[offset:offset + length])
        offset += length
    return pieces


def _as_bytes(tensor):
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8) if tensor.numel() else \
        torch.zeros(0, dtype=torch.uint8)


def _from_bytes(data, dtype, shape):
    if data.numel() == 0:
        return torch.zeros(shape, dtype=dtype)
    return data.clone().view(dtype).reshape(shape)


def _gather_tensors(tensor, name):
    """Each rank's tensor (first dimensions may differ), in rank order."""
    pieces = gather_bytes(_as_bytes(tensor), name)
    row = tensor.shape[1:]
    row_bytes = max(1, int(torch.Size(row).numel()) * tensor.element_size())
    out = []
    for piece in pieces:
        rows = piece.numel() // row_bytes if tensor.dim() else 1
        out.append(_from_bytes(piece, tensor.dtype, (rows, *row) if tensor.dim() else ()))
    return out


def _name(prefix, tensor, name):
    return name or ops.default_name(prefix, tensor)


def _gather_name(prefix, tensor, name):
    """Unnamed gathers are named without the first dimension, which may differ per rank."""
    if name:
        return name
    row = "x".join(str(d) for d in tensor.shape[1:]) or "scalar"
    return f"{prefix}.noname.{str(tensor.dtype).replace('torch.', '')}.rows_of_{row}"


def _done(value):
    future = torch.futures.Future()
    future.set_result(value)
    return future


def _handle_of(value):
    return ops._handles.add(_done(value), lambda: value)


# -------------------------------------------------------------------- allreduce

def _allreduce_into(output, name, op, prescale_factor, postscale_factor, compression):
    """Reduce `output` in place; returns (future, finish)."""
    if prescale_factor != 1.0:
        output.mul_(prescale_factor)
    if op in (Average, Sum):
        future, finish = ops._submit(output, op == Average, name, 0, compression)
        if postscale_factor == 1.0:
            return future, finish
        return future, lambda: finish().mul_(postscale_factor)
    gathered = _gather_tensors(output, f"{name}.{op._name}")
    output.copy_(reduce_gathered(op, [g.reshape(output.shape) for g in gathered]))
    if postscale_factor != 1.0:
        output.mul_(postscale_factor)
    return _done(output), lambda: output


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set, compression=Compression.none):
    """In-place reduction of `tensor` across ranks; returns a handle."""
    check_process_set(process_set)
    op = resolve_op(op, average, "allreduce")
    name = _name("allreduce", tensor, name)
    return ops._handles.add(*_allreduce_into(tensor, name, op, prescale_factor, postscale_factor, compression))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set, compression=Compression.none):
    """Reduction of `tensor` across ranks into a new tensor; returns a handle."""
    return allreduce_async_(tensor.detach().clone(), average, name, op, prescale_factor, postscale_factor,
                            process_set, compression)


class _AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, compression):
        ctx.args = (op, prescale_factor, postscale_factor)
        handle = allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                 compression=compression)
        return ops.synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor = ctx.args
        grad = allreduce(grad_output, op=Average if op == Average else Sum, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Horovod's allreduce: the reduction (default: average) of `tensor` over
    all ranks, as a new tensor; differentiable."""
    check_process_set(process_set)
    op = resolve_op(op, average, "allreduce")
    name = _name("allreduce", tensor, name)
    if tensor.requires_grad:
        return _AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor, compression)
    return ops.synchronize(allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                           compression=compression))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    return ops.synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                                            process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """One handle for a list of reductions (each a separate engine name)."""
    name = name or "grouped_allreduce"
    handles = [allreduce_async(t, average, f"{name}.{i}.{ops.default_name('g', t)}", op, prescale_factor,
                               postscale_factor, process_set) for i, t in enumerate(tensors)]
    return ops._handles.add(_done(None), lambda: [ops.synchronize(h) for h in handles])


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    name = name or "grouped_allreduce_"
    handles = [allreduce_async_(t, average, f"{name}.{i}.{ops.default_name('g', t)}", op, prescale_factor,
                                postscale_factor, process_set) for i, t in enumerate(tensors)]
    return ops._handles.add(_done(None), lambda: [ops.synchronize(h) for h in handles])


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    return ops.synchronize(grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                                   postscale_factor, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return ops.synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                    postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse tensor's reduction, through an allgather of its indices and values."""
    check_process_set(process_set)
    op = resolve_op(op, None, "sparse_allreduce_async")
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async supports op=Average or Sum, got {op!r}")
    sparse = tensor.coalesce()
    indices = allgather(sparse.indices().t().contiguous(), name=f"{name}.indices").t()
    values = allgather(sparse.values().contiguous(), name=f"{name}.values")
    if op == Average:
        values = values / ops.size()
    result = torch.sparse_coo_tensor(indices, values, sparse.shape).coalesce()
    return _handle_of(result)


# -------------------------------------------------------------------- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    check_process_set(process_set)
    name = _gather_name("allgather", tensor, name)
    pieces = _gather_tensors(tensor, name)
    return _handle_of(torch.cat(pieces) if tensor.dim() else torch.stack(pieces))


class _AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() else 1
        return ops.synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Sum)
        rows = _gather_lengths(ctx.rows, "allgather.grad")
        start = sum(rows[:ops.rank()])
        return grad[start:start + ctx.rows], None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation along the first dimension of every rank's `tensor`
    (first dimensions may differ); differentiable."""
    check_process_set(process_set)
    name = _gather_name("allgather", tensor, name)
    if tensor.requires_grad:
        return _AllgatherFunction.apply(tensor, name)
    return ops.synchronize(allgather_async(tensor, name))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    name = name or "grouped_allgather"
    return _handle_of([allgather(t, f"{name}.{i}.{ops.default_name('g', t)}", process_set)
                       for i, t in enumerate(tensors)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return ops.synchronize(grouped_allgather_async(tensors, name, process_set))


def allgather_object(obj, name=None):
    """Every rank's picklable `obj`, as a list in rank order."""
    import pickle
    name = name or "allgather_object"
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    return [pickle.loads(p.numpy().tobytes()) for p in gather_bytes(payload, name)]


# -------------------------------------------------------------------- broadcast

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    check_process_set(process_set)
    ops._require_init("broadcast")
    name = _name("broadcast", tensor, name)
    future = _c10d.broadcast_async(tensor.detach(), root_rank, name)
    return ops._handles.add(future, lambda: tensor)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return broadcast_async_(tensor.detach().clone(), root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return ops.synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return ops.synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Sum)
        return (grad if ops.rank() == ctx.root_rank else torch.zeros_like(grad)), None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s `tensor` on every rank, as a new tensor; differentiable."""
    check_process_set(process_set)
    name = _name("broadcast", tensor, name)
    if tensor.requires_grad:
        return _BroadcastFunction.apply(tensor, root_rank, name)
    return ops.synchronize(broadcast_async(tensor, root_rank, name))


# -------------------------------------------------------------------- alltoall

def _split_rows(tensor, splits):
    n = ops.size()
    rows = tensor.shape[0] if tensor.dim() else 0
    if splits is None:
        if rows % n:
            raise ValueError(f"alltoall without splits needs the first dimension ({rows}) to be a multiple "
                             f"of size() ({n}); pass splits=")
        return [rows // n] * n
    splits = [int(s) for s in (splits.tolist() if torch.is_tensor(splits) else splits)]
    if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(f"alltoall splits {splits} must be {n} non-negative counts summing to the first "
                         f"dimension {rows}")
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    check_process_set(process_set)
    name = _gather_name("alltoall", tensor, name)
    my_splits = _split_rows(tensor, splits)
    n, me = ops.size(), ops.rank()
    matrix = torch.zeros(n * n, dtype=torch.int64)
    matrix[me * n:(me + 1) * n] = torch.tensor(my_splits, dtype=torch.int64)
    _sum_now(matrix, f"{name}.splits.{n}")
    matrix = matrix.reshape(n, n)
    gathered = _gather_tensors(tensor, name)  # every rank's rows, in rank order
    pieces = []
    for src in range(n):
        start = int(matrix[src, :me].sum())
        pieces.append(gathered[src][start:start + int(matrix[src, me])])
    received = matrix[:, me].to(torch.int32)
    return _handle_of((torch.cat(pieces), received))


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows `splits[j]` of `tensor` go to rank j; returns the rows received
    (and, when `splits` is given, how many came from each rank)."""
    output, received = ops.synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# -------------------------------------------------------------------- reducescatter

def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0, compression=Compression.none):
    check_process_set(process_set)
    op = resolve_op(op, None, "reducescatter")
    if op not in (Average, Sum):
        raise ValueError(f"reducescatter supports op=Average or Sum, got {op!r}")
    reduced = allreduce(tensor, name=_name("reducescatter", tensor, name), op=op, compression=compression,
                        prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    n, rows = ops.size(), tensor.shape[0]
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]  # Horovod: first ranks get the extra
    start = sum(counts[:ops.rank()])
    return _handle_of(reduced[start:start + counts[ops.rank()]].clone())


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    return ops.synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor,
                                               compression))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    name = name or "grouped_reducescatter"
    return [reducescatter(t, f"{name}.{i}.{ops.default_name('g', t)}", compression, op, process_set,
                          prescale_factor, postscale_factor) for i, t in enumerate(tensors)]


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    return _handle_of(grouped_reducescatter(tensors, name, Compression.none, op, process_set, prescale_factor,
                                            postscale_factor))


# -------------------------------------------------------------------- join, barrier

def join(device=-1):
    """Blocks until every rank has called join(); returns the rank that joined last.

    Subset of Horovod's semantics: ranks that joined do not stand in (with
    zeros) for collectives the others still issue, so every rank must issue
    the same collectives before joining (see docs/migration.md)."""
    ops._require_init("join")
    arrival = torch.zeros(ops.size(), dtype=torch.float64)
    arrival[ops.rank()] = time.time()
    _sum_now(arrival, f"join.{ops.size()}")
    return int(torch.argmax(arrival))


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier()."""
    check_process_set(process_set)
    ops._require_init("barrier")
    _sum_now(torch.zeros(1, dtype=torch.int32), "barrier")
