"""Horovod's ``SyncBatchNorm``: batch-norm statistics over every rank's batch.

torch.nn.SyncBatchNorm refuses CPU tensors, and byteps_native trains on CPUs
too, so the statistics are reduced here: one Sum allreduce per step of each
channel's sum, sum of squares and count. The allreduce is differentiable (its
gradient is the Sum allreduce of the gradients), so the backward pass is the
one of a BatchNorm over the concatenated batch."""
import itertools

import torch

from byteps_native.torch import ops
from byteps_native.torch.collectives import allreduce
from byteps_native.torch.reduce_ops import Sum

# Modules are built in the same order on every rank: the n-th one has the same
# engine name everywhere (an unnamed allreduce costs an agreement round).
_instances = itertools.count()


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._name = f"sync_batch_norm.{next(_instances)}"

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm expects at least 2-D input (batch, channels, ...), got {input.dim()}-D")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or ops.size() == 1:
            return super().forward(input)
        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        # Half-precision sums and counts overflow: statistics in float32.
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        count = torch.tensor([input.numel() // channels], dtype=x.dtype, device=input.device)
        local = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        total = allreduce(local, name=self._name, op=Sum)
        n = total[-1]
        mean = total[:channels] / n
        var = (total[channels:2 * channels] / n - mean * mean).clamp_min(0)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                unbiased = var * (n / (n - 1).clamp_min(1))
                self.running_mean.mul_(1 - momentum).add_(momentum * mean)
                self.running_var.mul_(1 - momentum).add_(momentum * unbiased)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out.to(input.dtype)
