"""BytePS's DistributedDataParallel: torch's DDP interface over push_pull.

Root's parameters and buffers reach every rank at construction; each
gradient is averaged the moment autograd has accumulated it, and the end of
the backward pass waits for all of them (so `loss.backward(); opt.step()`
needs no extra call). For torch's own DDP, use
``torch.nn.parallel.DistributedDataParallel`` on a 'byteps' process group.
"""
from contextlib import contextmanager

import torch
from torch import nn

from byteps_native.torch.compression import Compression, wire_dtype_for, wire_name
from byteps_native.torch import join_protocol as _join
from byteps_native.torch import engine
from byteps_native.torch.functions import broadcast_parameters
from byteps_native.torch.ops import _require_init


class DistributedDataParallel(nn.Module):
    def __init__(self, module, device_ids=None, broadcast_buffers=True, compression=Compression.none):
        super().__init__()
        _require_init("DistributedDataParallel")
        if device_ids is not None and len(device_ids) != 1:
            raise ValueError(f"DistributedDataParallel drives one device per process; device_ids={device_ids} "
                             "must have exactly one entry (or be None for CPU)")
        self.module = module
        self.device_ids = list(device_ids) if device_ids else None
        self.broadcast_buffers = broadcast_buffers
        self._compression = compression
        self._require_backward_grad_sync = True
        self._futures = {}
        self._callback_queued = False
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._names = {p: n for n, p in named}
        self._priority = {p: -i for i, (_, p) in enumerate(named)}
        if module.state_dict():
            broadcast_parameters(module.state_dict(), root_rank=0, prefix="DistributedDataParallel.init")
        if engine.size() > 1:
            self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad_ready) for _, p in named]

    @contextmanager
    def no_sync(self):
        """Accumulate gradients locally; the first backward after the block averages them."""
        previous = self._require_backward_grad_sync
        self._require_backward_grad_sync = False
        try:
            yield
        finally:
            self._require_backward_grad_sync = previous

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and engine.size() > 1:
            buffers = list(self.module.named_buffers())
            if buffers:
                with torch.no_grad():
                    broadcast_parameters(buffers, root_rank=0, prefix="DistributedDataParallel.buffer")
        return self.module(*inputs, **kwargs)

    def _on_grad_ready(self, p):
        if not self._require_backward_grad_sync:
            return
        self._submit(p)
        if not self._callback_queued:
            # Runs when this backward pass ends: also covers parameters the
            # forward did not use (their gradient is pushed as zeros).
            torch.autograd.Variable._execution_engine.queue_callback(self.synchronize)
            self._callback_queued = True

    def _submit(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        wire_dtype = wire_dtype_for(self._compression, p.grad)
        name = wire_name(f"DistributedDataParallel.grad.{self._names[p]}", wire_dtype)
        self._futures[p] = _join.push_pull_async(p.grad, name, self._priority[p], True, wire_dtype)

    def synchronize(self):
        """Wait for every gradient's push_pull of this backward pass."""
        self._callback_queued = False
        for p in self._names:
            if p not in self._futures:
                self._submit(p)
        futures, self._futures = self._futures, {}
        for future in futures.values():
            future.wait()
