"""DistributedOptimizer: Horovod's wrapper, with push_pull instead of allreduce.

Gradients travel in fixed groups: consecutive parameters of one dtype in host
memory, up to BYTEPS_FUSION_BYTES a group, formed from the last parameter
backwards with a small first group, as DDP forms its buckets. A group is submitted the moment autograd finishes
accumulating its last gradient (post-accumulate-grad hooks), in one engine
call that the engine fuses into one operation (csrc/core/fused_group.h), so
communication of late layers overlaps the backward pass of early ones and a
model of many small parameters costs a few operations a step, not one per
parameter. The groups are the same on every rank whatever order gradients
arrive in, so every rank packs the same buckets. Each gradient keeps its own
engine name, priority and compression (compressed ones share buckets of
their compression, a segment each); step() waits for all of them, then
steps. GPU gradients travel one by one.

op=Adasum follows Horovod: each rank steps locally and the parameter
*deltas* are combined with Adasum. With BYTEPS_ENABLE_ASYNC=1 it follows
BytePS: each rank steps locally, pushes its delta, and pulls the servers'
running weights (async_training.py).
"""
import warnings
from contextlib import contextmanager

import torch

from byteps_native._runtime import config
from byteps_native.compression import apply_to
from byteps_native.torch.compression import Compression, wire_dtype_for, wire_name
from byteps_native.torch import join_protocol as _join
from byteps_native.torch.async_training import AsyncParameterSync
from byteps_native.torch.collectives import allreduce_
from byteps_native.torch import engine
from byteps_native.torch.ops import _require_init, engine_name
from byteps_native.torch.process_sets import global_process_set
from byteps_native.torch.reduce_ops import Adasum, Average, Sum, resolve_op


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, sparse_as_dense, staleness, process_set=None):
        super(self.__class__, self).__init__(params)
        _require_init("DistributedOptimizer")
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        if gradient_predivide_factor <= 0:
            raise ValueError(f"gradient_predivide_factor must be > 0, got {gradient_predivide_factor}")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor is only valid with op=Average (as in Horovod)")
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self._backward_passes_per_step = backward_passes_per_step
        # A non-global process set: its members average over the set (through
        # its torch.distributed subgroup, in synchronize()); other ranks step alone.
        self._process_set = process_set
        self._should_sync = True
        self._synchronized = False  # synchronize() ran since the last step()
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._names = self._names_of(named_parameters, all_params)
        self._parameter_names = self._names  # Horovod's attribute: {parameter: name}
        # Forward order ~ parameter order: earlier parameters are needed first
        # by the next forward pass, so they get the higher priority.
        self._priority = {p: -i for i, p in enumerate(all_params)}
        self._delay = {p: backward_passes_per_step for p in all_params}
        self._futures = {}
        self._fusion_bytes = config.fusion_bytes()
        self._groups, self._group_of = self._fusion_groups(all_params, self._fusion_bytes)
        self._ready = set()  # gradients accumulated, waiting for the rest of their group
        self._sparse = set()  # parameters whose gradient arrived sparse this step
        self._async = None
        if config.asynchronous():
            self._async = AsyncParameterSync(all_params, self._names, staleness)
        elif staleness:
            raise ValueError(f"staleness={staleness} needs asynchronous training: set BYTEPS_ENABLE_ASYNC=1 "
                             "on every worker and server")
        if process_set is not None and (self._async is not None or op == Adasum):
            raise NotImplementedError("DistributedOptimizer(process_set=...) supports op=Average or Sum in "
                                      "synchronous training only")
        communicates_gradients = self._async is None and op != Adasum and process_set is None
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad_ready)
                       for p in all_params if p.requires_grad and communicates_gradients]

    @staticmethod
    def _names_of(named_parameters, all_params):
        if named_parameters is None:
            return {p: f"param.{i}" for i, p in enumerate(all_params)}
        named = list(named_parameters)
        if any(not isinstance(item, tuple) for item in named):
            raise ValueError("named_parameters should be a sequence of (name, parameter) tuples, "
                             "usually produced by model.named_parameters()")
        names = [name for name, _ in named]
        if len(set(names)) != len(names):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"DistributedOptimizer: parameter names are not unique: {duplicates}")
        by_param = {p: name for name, p in named}
        missing = [i for i, p in enumerate(all_params) if p not in by_param]
        if missing:
            raise ValueError(
                f"DistributedOptimizer: named_parameters lacks {len(missing)} optimizer parameters "
                f"(positions {missing[:5]}...); pass model.named_parameters() of the whole model")
        return {p: by_param[p] for p in all_params}

    # The group autograd finishes first is small, so communication starts
    # early in backward, and each later one may be twice the one before (up
    # to BYTEPS_FUSION_BYTES): a group goes only once its last gradient is
    # ready, so one large group would hold a small model's gradients until
    # backward ends (multihost.py --optimizer measured 0.92x unfused with a
    # 1 MiB first group and the rest in one).
    FIRST_GROUP_BYTES = 256 << 10

    @staticmethod
    def _fusion_groups(params, limit):
        """Consecutive host parameters of one dtype, up to `limit` bytes a group
        (a larger one, or a device one, alone), formed from the last parameter
        backwards as DDP forms its buckets: autograd finishes gradients roughly
        in that order, so each group is ready about when its own gradients are,
        and the first is at most FIRST_GROUP_BYTES. Fixed at construction, so
        they depend on the model only, never on the order gradients arrive in."""
        groups, current, current_bytes = [], [], 0
        for p in reversed(params):
            if not p.requires_grad:
                continue
            cap = min(limit, _DistributedOptimizer.FIRST_GROUP_BYTES << min(len(groups), 20))
            nbytes = p.numel() * p.element_size()
            alone = limit <= 0 or p.device.type != "cpu" or nbytes >= limit
            fits = current and current[0].dtype == p.dtype and current_bytes + nbytes <= cap
            if current and (alone or not fits):
                groups.append(current)
                current, current_bytes = [], 0
            if alone:
                groups.append([p])
                continue
            current.append(p)
            current_bytes += nbytes
        if current:
            groups.append(current)
        return groups, {p: k for k, group in enumerate(groups) for p in group}

    def _submit_group(self, group):
        """One engine call for the group (one push_pull when it has one member)."""
        if len(group) == 1:
            self._submit(group[0])
            return
        tensors, names, priorities, wire_dtypes = [], [], [], []
        for p in group:
            self._ready.discard(p)
            name, wire_dtype = self._prepare(p)
            tensors.append(p.grad)
            names.append(name)
            priorities.append(self._priority[p])
            wire_dtypes.append(wire_dtype)
        futures = _join.push_pull_group_async(tensors, names, priorities, self._average(), wire_dtypes,
                                              self._fusion_bytes)
        self._futures.update(zip(group, futures))

    def _average(self):
        # predivide: sum of grad/f, then times f/size -- Horovod's split of the average
        return self._op == Average and self._predivide == 1.0

    def _prepare(self, p):
        """The gradient as it travels; returns its engine name and wire dtype."""
        if p.grad is None:  # every rank must push every gradient, or the others wait
            p.grad = torch.zeros_like(p)
        if p.grad.is_sparse:
            # sparse_as_dense=False reduces sparse gradients densely too (Horovod
            # would allgather indices and values): same result, dense bytes.
            # The optimizer gets a sparse gradient back (SparseAdam needs one).
            p.grad = p.grad.to_dense()
            self._sparse.add(p)
        if self._predivide != 1.0:
            p.grad.div_(self._predivide)
        wire_dtype = wire_dtype_for(self._compression, p.grad)
        # engine_name: a later optimizer may reuse a parameter name with another shape
        name = wire_name(engine_name(f"DistributedOptimizer.grad.{self._names[p]}", p.grad), wire_dtype)
        apply_to(name, self._compression)  # the engine's compressors (onebit, topk, randomk)
        return name, wire_dtype

    def _submit(self, p):
        self._ready.discard(p)
        name, wire_dtype = self._prepare(p)
        self._futures[p] = _join.push_pull_async(p.grad, name, self._priority[p], self._average(), wire_dtype)

    def _mark_ready(self, p):
        self._ready.add(p)
        group = self._groups[self._group_of[p]]
        if all(q in self._ready for q in group):
            self._submit_group(group)

    def _on_grad_ready(self, p):
        if p in self._futures or p in self._ready:
            raise AssertionError(
                f"gradient of '{self._names[p]}' was computed again before its push_pull finished; "
                "call optimizer.step() or optimizer.synchronize() after each backward pass "
                "(or raise backward_passes_per_step)")
        self._synchronized = False
        self._delay[p] -= 1
        if self._delay[p] == 0:
            self._mark_ready(p)

    def synchronize(self):
        """Wait for every gradient's push_pull (submitting any not yet started)."""
        if self._async is not None or self._op == Adasum:
            return
        if self._process_set is not None:
            self._synchronize_process_set()
            return
        for group in self._groups:
            if any(p not in self._futures for p in group):
                self._submit_group([p for p in group if p not in self._futures])
        futures, self._futures = self._futures, {}
        for p, future in futures.items():
            future.wait()
            if self._op == Average and self._predivide != 1.0:
                p.grad.mul_(self._predivide / engine.size())
            if p in self._sparse:
                p.grad = p.grad.to_sparse()
            self._delay[p] = self._backward_passes_per_step
        self._synchronized = True
        self._sparse.clear()

    def _synchronize_process_set(self):
        if self._process_set.included():
            for p in self._params_with_grad():
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                sparse = p.grad.is_sparse
                grad = p.grad.to_dense() if sparse else p.grad
                allreduce_(grad, op=self._op, prescale_factor=1.0 / self._predivide,
                           postscale_factor=self._predivide, process_set=self._process_set)
                p.grad = grad.to_sparse() if sparse else grad
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """For `optimizer.synchronize(); clip(...); with optimizer.skip_synchronize(): optimizer.step()`."""
        if self._async is not None:
            raise AssertionError("skip_synchronize cannot be used in async training")
        self._should_sync = False
        try:
            yield
        finally:
            self._should_sync = True

    def set_backward_passes_per_step(self, passes):
        self._backward_passes_per_step = passes
        for p in self._delay:
            self._delay[p] = passes

    def _params_with_grad(self):
        return [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    def _adasum_step(self, closure):
        """Horovod's Adasum optimizer: local step, then Adasum of the deltas."""
        params = self._params_with_grad()
        start = [p.detach().clone() for p in params]
        loss = super(self.__class__, self).step(closure)
        for p, before in zip(params, start):
            delta = p.detach() - before
            allreduce_(delta, name=f"DistributedOptimizer.adasum.{self._names[p]}", op=Adasum)
            p.data.copy_(before + delta)
        return loss

    def step(self, closure=None):
        if self._async is not None:
            return self._async.step(lambda: super(self.__class__, self).step(closure))
        if self._op == Adasum:
            return self._adasum_step(closure)
        if self._should_sync:
            if self._synchronized:
                # Horovod's warning; the gradients are already reduced, so they
                # are not reduced again.
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            else:
                self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=True):
        if self._futures or self._ready:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before optimizer.step() "
                "or optimizer.synchronize(): the gradients are still being averaged")
        return super(self.__class__, self).zero_grad(set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=global_process_set,
                         staleness=0):
    """Wrap `optimizer` so step() uses gradients averaged over all ranks.

    Gradients are summed locally over `backward_passes_per_step` backward passes
    (not divided by it) before one push_pull; the result is an instance of the
    original optimizer class, as in Horovod. `num_groups`/`groups` (Horovod's
    fusion hints) are accepted; gradients travel in groups of up to
    BYTEPS_FUSION_BYTES that the engine fuses (see the module's docstring).
    `staleness` (async training only): how many steps a worker may run ahead
    of the weights it last pulled.
    """
    subset = None
    if process_set is not None and process_set is not global_process_set and process_set.ranks is not None:
        if process_set.process_set_id is None:
            raise ValueError(f"DistributedOptimizer: {process_set!r} is not registered; call "
                             "hvd.add_process_set(ranks) first on every rank")
        subset = process_set
    op = resolve_op(op, None, "DistributedOptimizer")
    if op not in (Average, Sum, Adasum):
        raise ValueError(f"DistributedOptimizer supports op=Average, Sum or Adasum, got {op!r}")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, sparse_as_dense, staleness, subset)
