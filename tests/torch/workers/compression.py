"""Compression through the servers from torch's faces: the DDP hook
(PushPullHookState(compression=...)) and the Horovod-style
DistributedOptimizer(compression=...). Reports each step's gradient (hook)
and parameters (optimizer); the test compares them with the NumPy reference."""
import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps
from report import report

N, STEPS = 50000, 3


class Dot(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.zeros(N))

    def forward(self, x):
        return (self.p * x).sum()  # d/dp = x: the gradient is what we choose


def gradient(rank, step):
    return torch.from_numpy(np.random.default_rng(100 * step + rank).standard_normal(N).astype(np.float32))


def main():
    dist.init_process_group("byteps")
    rank = dist.get_rank()
    ddp = DDP(Dot())
    ddp.register_comm_hook(bps.PushPullHookState(compression="onebit"), bps.push_pull_hook)
    hook_grads = []
    for step in range(STEPS):
        ddp.zero_grad()
        ddp(gradient(rank, step)).backward()
        hook_grads.append(ddp.module.p.grad.tolist())
    model = Dot()
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), model.named_parameters(),
                                   compression=bps.Compression.topk(0.01))
    params = []
    for step in range(STEPS):
        opt.zero_grad()
        model(gradient(rank, step)).backward()
        opt.step()
        params.append(model.p.detach().tolist())
    report(rank, {"hook": hook_grads, "optimizer": params,
                  "compressed_pushes": bps.stats()["compressed_pushes"] if hasattr(bps, "stats") else None})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
