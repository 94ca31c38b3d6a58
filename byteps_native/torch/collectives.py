"""Horovod's collectives (allreduce, allgather, broadcast, alltoall,
reducescatter, join, barrier) for torch: handles, autograd and process sets
here; the algorithms beyond a sum (gathers as a length round and a byte sum,
alltoall, reducescatter's rows, objects, barrier) are byteps_native/algorithms,
run on torch through framework.py.
"""
import concurrent.futures

import torch

from byteps_native._runtime.errors import HorovodInternalError  # noqa: F401  (hvd.HorovodInternalError)
from byteps_native.algorithms import alltoall as alltoall_algorithm
from byteps_native.algorithms import gather, objects, reducescatter as reducescatter_algorithm, rounds
from byteps_native.torch import join_protocol as _join
from byteps_native.torch import ops
from byteps_native.torch.compression import Compression
from byteps_native.torch import process_set_collectives as subset
from byteps_native.torch.framework import TORCH, sum_now
from byteps_native.torch.process_sets import global_process_set, subgroup_of
from byteps_native.torch.reduce_ops import Average, Sum, reduce_gathered, resolve_op


def _gather_rows(tensor, name):
    """(every rank's rows of `tensor` in rank order, on the host; each rank's
    row count). A scalar counts as one row."""
    tensor = tensor.reshape(1) if tensor.dim() == 0 else tensor
    return gather.gather_rows(TORCH, tensor, tensor.dtype, tuple(tensor.shape[1:]), name, f"gather '{name}'")


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


# Gathers take several engine rounds; they run on one background thread, in
# submission order, so that *_async returns at once (as Horovod's do) and
# unnamed gathers of one shape keep their order on every rank.
_gather_thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="byteps-gather")


class _BackgroundResult:
    """poll()/synchronize() over a concurrent.futures.Future."""

    def __init__(self, future):
        self._future = future

    def done(self):
        return self._future.done()

    def wait(self):
        return self._future.result()


def _in_background(work, name=None):
    if name:
        ops._handles.claim(name)
    result = _BackgroundResult(_gather_thread.submit(work))
    return ops._handles.add(result, result.wait, name=name)


def _scale(tensor, factor):
    """In-place scaling as Horovod does it: integers in float64 (truncated back),
    half precision in float32 on the CPU and in half precision on GPUs (the
    factor rounded to it first)."""
    if factor == 1.0:
        return tensor
    if not tensor.is_floating_point():
        return tensor.copy_(tensor.double().mul_(factor).to(tensor.dtype))
    if tensor.dtype in (torch.float16, torch.bfloat16):
        if tensor.device.type == "cpu":
            return tensor.copy_(tensor.float().mul_(factor).to(tensor.dtype))
        return tensor.mul_(torch.tensor(factor, dtype=tensor.dtype, device=tensor.device))
    return tensor.mul_(factor)


# -------------------------------------------------------------------- allreduce

def _allreduce_into(output, name, op, prescale_factor, postscale_factor, compression):
    """Reduce `output` in place; returns (future, finish)."""
    _scale(output, prescale_factor)
    if op in (Average, Sum):
        future, finish = ops._submit(output, op == Average, name, 0, compression)
        if postscale_factor == 1.0:
            return future, finish
        return future, lambda: _scale(finish(), postscale_factor)
    rows, _ = _gather_rows(output, f"{name}.{op._name}")
    output.copy_(reduce_gathered(op, list(rows.reshape(ops.size(), *output.shape))))
    _scale(output, postscale_factor)
    return _done(output), lambda: output


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set, compression=Compression.none):
    """In-place reduction of `tensor` across ranks; returns a handle."""
    op = resolve_op(op, average, "allreduce")
    ps = subgroup_of(process_set, "allreduce")
    if ps is not None:
        return _handle_of(tensor.copy_(subset.allreduce(tensor, op, prescale_factor, postscale_factor, ps,
                                                        _scale)))
    if name:
        ops._handles.claim(name)
    else:
        ops.check_ranks_agree("allreduce", tensor, extra=1 + int(op))
    return ops._handles.add(*_allreduce_into(tensor, _name("allreduce", tensor, name), op, prescale_factor,
                                             postscale_factor, compression), name=name)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set, compression=Compression.none):
    """Reduction of `tensor` across ranks into a new tensor; returns a handle."""
    return allreduce_async_(tensor.detach().clone(), average, name, op, prescale_factor, postscale_factor,
                            process_set, compression)


class _AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, compression, process_set):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        handle = allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor, process_set,
                                 compression=compression)
        return ops.synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(grad_output, op=Average if op == Average else Sum, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Horovod's allreduce: the reduction (default: average) of `tensor` over
    all ranks, as a new tensor; differentiable."""
    op = resolve_op(op, average, "allreduce")
    if name is None and subgroup_of(process_set, "allreduce") is None:
        ops.check_ranks_agree("allreduce", tensor, extra=1 + int(op))
    name = _name("allreduce", tensor, name)
    if tensor.requires_grad:
        return _AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor, compression,
                                        process_set)
    return ops.synchronize(allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                           process_set, compression=compression))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    return ops.synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor,
                                            process_set))


def _check_one_device(kind, tensors):
    """Horovod fuses a group on one device: a group mixing devices (a CPU and
    a GPU tensor) is an error on the rank that submits it, before anything is
    submitted, so no rank waits for its parts."""
    devices = sorted({str(t.device) for t in tensors})
    if len(devices) > 1:
        raise RuntimeError(f"{kind}: the tensors of one group must be on one device, got {', '.join(devices)}; "
                           "call it once per device")


def _grouped_names(prefix, tensors, name):
    return [f"{name or prefix}.{i}.{ops.default_name('g', t)}" for i, t in enumerate(tensors)]


def _grouped_allreduce_handles(submit, prefix, tensors, average, name, op, prescale_factor, postscale_factor,
                               process_set):
    op = resolve_op(op, average, prefix)
    _check_one_device(prefix, tensors)
    if name is None and tensors and subgroup_of(process_set, prefix) is None:
        ops.check_ranks_agree(prefix, list(tensors), extra=1 + int(op))
    handles = [submit(t, None, n, op, prescale_factor, postscale_factor, process_set)
               for t, n in zip(tensors, _grouped_names(prefix, tensors, name))]
    return ops._handles.add(_done(None), lambda: [ops.synchronize(h) for h in handles])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """One handle for a list of reductions (each a separate engine name)."""
    return _grouped_allreduce_handles(allreduce_async, "grouped_allreduce", tensors, average, name, op,
                                      prescale_factor, postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return _grouped_allreduce_handles(allreduce_async_, "grouped_allreduce_", tensors, average, name, op,
                                      prescale_factor, postscale_factor, process_set)


class _GroupedAllreduceFunction(torch.autograd.Function):
    """As _AllreduceFunction, for a list: the gradient is the grouped
    reduction (Average stays Average, every other op sums) of the gradients."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return tuple(ops.synchronize(grouped_allreduce_async(list(tensors), None, name, op, prescale_factor,
                                                             postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = grouped_allreduce([g.contiguous() for g in grads], op=Average if op == Average else Sum,
                                  prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                                  process_set=process_set)
        return (None,) * 5 + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """The reductions of a list of tensors, as new tensors; differentiable."""
    if any(t.requires_grad for t in tensors):
        op = resolve_op(op, average, "grouped_allreduce")
        return list(_GroupedAllreduceFunction.apply(name, op, prescale_factor, postscale_factor, process_set,
                                                    *tensors))
    return ops.synchronize(grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                                   postscale_factor, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return ops.synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                    postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """A sparse tensor's reduction, through an allgather of its indices and values.
    Returns a function that waits for the result (as Horovod's does)."""
    if subgroup_of(process_set, "sparse_allreduce_async") is not None:
        dense = allreduce(tensor.to_dense(), name=name, op=op, process_set=process_set)
        return lambda: dense.to_sparse()
    op = resolve_op(op, None, "sparse_allreduce_async")
    if op not in (Average, Sum):
        raise ValueError(f"sparse_allreduce_async supports op=Average or Sum, got {op!r}")
    sparse = tensor.coalesce()
    indices = allgather(sparse.indices().t().contiguous(), name=f"{name}.indices").t()
    values = allgather(sparse.values().contiguous(), name=f"{name}.values")
    if op == Average:
        values = values / ops.size()
    result = torch.sparse_coo_tensor(indices, values, sparse.shape).coalesce()
    return lambda: result


# -------------------------------------------------------------------- allgather

def allgather_async(tensor, name=None, process_set=global_process_set):
    ps = subgroup_of(process_set, "allgather")
    if ps is not None:
        return _handle_of(subset.allgather(tensor, ps))
    claim = name
    if name is None:
        ops.check_ranks_agree("allgather", tensor, any_first_dim=True)
    name = _gather_name("allgather", tensor, name)
    tensor = tensor.detach()

    def gather():  # bytes travel through host memory; the result goes back to the input's device
        return _gather_rows(tensor, name)[0].to(tensor.device)
    return _in_background(gather, claim)


class _AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() else 1
        ctx.process_set = process_set
        return ops.synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = subgroup_of(ctx.process_set, "allgather")
        # Horovod averages the gathered gradient (each rank holds a full copy of the output).
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if ps is None:
            rows = [int(r) for r in gather.lengths_round(TORCH, ctx.rows, "allgather.grad", "allgather's gradient")]
            me = ops.rank()
        else:
            rows = [int(r) for r in subset.allgather(torch.tensor([ctx.rows]), ps)]
            me = ps.rank()
        start = sum(rows[:me])
        return grad[start:start + ctx.rows], None, None


def allgather(tensor, name=None, process_set=global_process_set, same_shape=True):
    """Concatenation along the first dimension of every rank's `tensor`
    (first dimensions may differ; BytePS's `same_shape=` hint is accepted and
    not needed); differentiable."""
    if tensor.requires_grad:
        return _AllgatherFunction.apply(tensor, name, process_set)
    return ops.synchronize(allgather_async(tensor, name, process_set))


def _grouped_gather_names(tensors, name):
    # Without the first dimension, which may differ per rank.
    return [f"{name or 'grouped_allgather'}.{i}.{_gather_name('g', t, None)}" for i, t in enumerate(tensors)]


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    _check_one_device("grouped_allgather", tensors)
    if name is None and tensors and subgroup_of(process_set, "grouped_allgather") is None:
        ops.check_ranks_agree("grouped_allgather", list(tensors), any_first_dim=True)
    handles = [allgather_async(t, n, process_set) for t, n in zip(tensors, _grouped_gather_names(tensors, name))]
    return ops._handles.add(_done(None), lambda: [ops.synchronize(h) for h in handles])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor; differentiable."""
    if any(t.requires_grad for t in tensors):
        _check_one_device("grouped_allgather", tensors)
        if name is None and tensors and subgroup_of(process_set, "grouped_allgather") is None:
            ops.check_ranks_agree("grouped_allgather", list(tensors), any_first_dim=True)
        return [allgather(t, n, process_set) for t, n in zip(tensors, _grouped_gather_names(tensors, name))]
    return ops.synchronize(grouped_allgather_async(tensors, name, process_set))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's picklable `obj`, as a list in rank order."""
    ps = subgroup_of(process_set, "allgather_object")
    if ps is not None:
        return subset.allgather_object(obj, ps)
    return objects.allgather_object(TORCH, obj, name or "allgather_object", _to_numpy)


def _to_numpy(tensors):
    return [t.numpy() for t in tensors]


# -------------------------------------------------------------------- broadcast

def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    ops._require_init("broadcast")
    ps = subgroup_of(process_set, "broadcast")
    if ps is not None:
        return _handle_of(tensor.copy_(subset.broadcast(tensor, root_rank, ps)))
    if name:
        ops._handles.claim(name)
        # The engine checks a named broadcast's shape; one small round in
        # flight beside it fails it after a join() (Horovod's rule), without
        # blocking here (another rank may still be elsewhere).
        joined = _joined_round("broadcast")
    else:
        ops.check_ranks_agree("broadcast", tensor, extra=1 + int(root_rank), fail_if_joined=True)
        joined = None
    engine_name = ops.engine_name(name, tensor) if name else _name("broadcast", tensor, None)
    future = _join.broadcast_async(tensor.detach(), root_rank, engine_name)

    def finish():
        if joined is not None:
            joined()
        return tensor
    return ops._handles.add(future, finish, name=name)


def _joined_round(kind):
    """Start a round in which a joined rank marks its slot; returns a function
    that waits for it and raises if some rank had joined."""
    marks = torch.zeros(ops.size(), dtype=torch.int64)
    future = _join.push_pull_async(marks, f"joined.{kind}.{ops.size()}", 0, False, None, 1)

    def check():
        try:
            future.wait()
        except RuntimeError as e:
            raise HorovodInternalError(str(e)) from e
        _join.check_not_joined(marks, kind)
    return check


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return broadcast_async_(tensor.detach().clone(), root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return ops.synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return ops.synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)  # as Horovod
        return (grad if ops.rank() == ctx.root_rank else torch.zeros_like(grad)), None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """`root_rank`'s `tensor` on every rank, as a new tensor; differentiable."""
    if tensor.requires_grad:
        return _BroadcastFunction.apply(tensor, root_rank, name, process_set)
    return ops.synchronize(broadcast_async(tensor, root_rank, name, process_set))


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
    ps = subgroup_of(process_set, "alltoall")
    if ps is not None:
        return _handle_of(subset.alltoall(tensor.detach(), splits, ps))
    claim = name
    my_splits = _split_rows(tensor, splits)
    if name is None:
        ops.check_ranks_agree("alltoall", tensor, any_first_dim=True)
    name = _gather_name("alltoall", tensor, name)
    tensor = tensor.detach()
    # Received counts come back where the splits were given (Horovod: a GPU splits tensor, GPU counts).
    counts_device = splits.device if torch.is_tensor(splits) else torch.device("cpu")
    return _in_background(lambda: _alltoall(tensor, my_splits, name, counts_device), claim)


def _alltoall(tensor, my_splits, name, counts_device):
    output, received = alltoall_algorithm.exchange_rows(TORCH, tensor, my_splits, tensor.dtype,
                                                        tuple(tensor.shape[1:]), name, f"alltoall '{name}'")
    return output.to(tensor.device), received.to(counts_device)


class _AlltoallFunction(torch.autograd.Function):
    """The gradient goes back the way the rows came: an alltoall of the
    output's gradient with the received counts as splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = ops.synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received, ctx.process_set = received, process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Rows `splits[j]` of `tensor` go to rank j; returns the rows received
    (and, when `splits` is given, how many came from each rank); differentiable."""
    if tensor.requires_grad:
        output, received = _AlltoallFunction.apply(tensor, splits, name, process_set)
    else:
        output, received = ops.synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# -------------------------------------------------------------------- reducescatter

def _check_reducescatter(tensor, op):
    op = resolve_op(op, None, "reducescatter")
    if op not in (Average, Sum):
        raise NotImplementedError(f"reducescatter supports op=Average or Sum, got {op!r} (as Horovod)")
    if tensor.dim() == 0:
        raise ValueError("reducescatter scatters along the first dimension: a scalar has none")
    return op


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0, compression=Compression.none):
    """Start reducing `tensor` (same shape on every rank) and keeping this
    rank's rows of the result; returns a handle. Computed as a full push_pull
    (docs/migration.md says what that costs)."""
    op = _check_reducescatter(tensor, op)
    ps = subgroup_of(process_set, "reducescatter")
    if ps is not None:
        return _handle_of(subset.reducescatter(tensor, op, prescale_factor, postscale_factor, ps, _scale))
    if name:
        ops._handles.claim(name)
    else:
        ops.check_ranks_agree("reducescatter", tensor, extra=1 + int(op))
    output = tensor.detach().clone()
    future, finish = _allreduce_into(output, _name("reducescatter", tensor, name), op, prescale_factor,
                                     postscale_factor, compression)
    rows = tensor.shape[0]
    return ops._handles.add(future, lambda: reducescatter_algorithm.kept_rows(TORCH, finish(), rows).clone(),
                            name=name)


class _ReducescatterFunction(torch.autograd.Function):
    """Horovod's gradient: the allgather of the rows' gradients, times the
    set's size for Sum (as allreduce's Sum gradient sums)."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set, compression):
        ctx.args = (op, prescale_factor * postscale_factor, process_set)
        return ops.synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                                   postscale_factor, compression))

    @staticmethod
    def backward(ctx, grad_output):
        op, scale, process_set = ctx.args
        grad = allgather(grad_output.contiguous(), process_set=process_set)
        size = process_set.size() if process_set is not None else ops.size()
        factor = scale * (size if op == Sum else 1)
        return (grad * factor if factor != 1 else grad), None, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Horovod's reducescatter: the reduction (default: average) of `tensor`
    over all ranks, split along the first dimension; this rank's part, as a new
    tensor; differentiable."""
    if tensor.requires_grad:
        op = _check_reducescatter(tensor, op)
        return _ReducescatterFunction.apply(tensor, name, op, prescale_factor, postscale_factor, process_set,
                                            compression)
    return ops.synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor,
                                               compression))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    _check_one_device("grouped_reducescatter", tensors)
    ops_checked = [_check_reducescatter(t, op) for t in tensors]
    op = ops_checked[0] if ops_checked else op
    if name is None and tensors and subgroup_of(process_set, "grouped_reducescatter") is None:
        ops.check_ranks_agree("grouped_reducescatter", list(tensors), extra=1 + int(op))
    handles = [reducescatter_async(t, n, op, process_set, prescale_factor, postscale_factor)
               for t, n in zip(tensors, _grouped_names("grouped_reducescatter", tensors, name))]
    return ops._handles.add(_done(None), lambda: [ops.synchronize(h) for h in handles])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor; differentiable."""
    if any(t.requires_grad for t in tensors):
        _check_one_device("grouped_reducescatter", tensors)
        names = _grouped_names("grouped_reducescatter", tensors, name)
        if name is None and subgroup_of(process_set, "grouped_reducescatter") is None:
            ops.check_ranks_agree("grouped_reducescatter", list(tensors), extra=1 + int(resolve_op(op, None, "")))
        return [reducescatter(t, n, compression, op, process_set, prescale_factor, postscale_factor)
                for t, n in zip(tensors, names)]
    return ops.synchronize(grouped_reducescatter_async(tensors, name, op, process_set, prescale_factor,
                                                       postscale_factor))


# -------------------------------------------------------------------- join, barrier

def join(device=-1):
    """Horovod's join: this rank has no more data; until every rank has joined it
    contributes zeros to the others' collectives. Returns the last rank to join
    (byteps_native/torch/join_protocol.py says how)."""
    ops._require_init("join")
    return _join.join(device)


def barrier(process_set=global_process_set):
    """Returns once every rank has called barrier()."""
    ops._require_init("barrier")
    ps = subgroup_of(process_set, "barrier")
    if ps is not None:
        return subset.barrier(ps)
    rounds.barrier(TORCH, "barrier")
