"""DistributedOptimizer: Horovod's wrapper, with push_pull instead of allreduce.

Each gradient is submitted the moment autograd finishes accumulating it (a
post-accumulate-grad hook), so communication of late layers overlaps the
backward pass of early ones; step() waits for all of them, then steps.
"""
import torch

from byteps_native.torch.compression import Compression, wire_dtype_for, wire_name
from byteps_native.torch.extension import _c10d
from byteps_native.torch.ops import _require_init


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        _require_init("DistributedOptimizer")
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        self._compression = compression
        self._backward_passes_per_step = backward_passes_per_step
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._names = self._parameter_names(named_parameters, all_params)
        # Forward order ~ parameter order: earlier parameters are needed first
        # by the next forward pass, so they get the higher priority.
        self._priority = {p: -i for i, p in enumerate(all_params)}
        self._delay = {p: backward_passes_per_step for p in all_params}
        self._futures = {}
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad_ready)
                       for p in all_params if p.requires_grad]

    @staticmethod
    def _parameter_names(named_parameters, all_params):
        if named_parameters is None:
            return {p: f"param.{i}" for i, p in enumerate(all_params)}
        named = list(named_parameters)
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

    def _submit(self, p):
        if p.grad is None:  # every rank must push every gradient, or the others wait
            p.grad = torch.zeros_like(p)
        wire_dtype = wire_dtype_for(self._compression, p.grad)
        name = wire_name(f"DistributedOptimizer.grad.{self._names[p]}", wire_dtype)
        self._futures[p] = _c10d.push_pull_async(p.grad, name, self._priority[p], True, wire_dtype)

    def _on_grad_ready(self, p):
        if p in self._futures:
            raise AssertionError(
                f"gradient of '{self._names[p]}' was computed again before its push_pull finished; "
                "call optimizer.step() or optimizer.synchronize() after each backward pass "
                "(or raise backward_passes_per_step)")
        self._delay[p] -= 1
        if self._delay[p] == 0:
            self._submit(p)

    def synchronize(self):
        """Wait for every gradient's push_pull (submitting any not yet started)."""
        for p in self._delay:
            if p.requires_grad and p not in self._futures:
                self._submit(p)
        futures, self._futures = self._futures, {}
        for p, future in futures.items():
            future.wait()
            self._delay[p] = self._backward_passes_per_step

    def step(self, closure=None):
        self.synchronize()
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=True):
        if self._futures:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before optimizer.step() "
                "or optimizer.synchronize(): the gradients are still being averaged")
        return super(self.__class__, self).zero_grad(set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1):
    """Wrap `optimizer` so step() uses gradients averaged over all ranks.

    Gradients are summed locally over `backward_passes_per_step` backward passes
    (not divided by it) before one push_pull; the result is an instance of the
    original optimizer class, as in Horovod.
    """
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
