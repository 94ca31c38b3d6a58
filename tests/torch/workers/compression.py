"""Compression through the servers from torch's faces. Usage: compression.py CASE

    exact     the Python DDP hook (PushPullHookState(compression=...)), the C++
              DDP hook (register_push_pull_hook(net, compression=...)), ranks
              mixing the two, and the Horovod-style DistributedOptimizer:
              each step's gradient (hooks) and parameters (optimizer), which
              the test compares with the NumPy reference
    disagree  ranks whose C++ hooks name different compressors (or none):
              the error every rank's backward raises, and a later agreeing
              model still trains
"""
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps
from byteps_native.compression import onebit
from tests.support.results import report

N, STEPS = 50000, 3


class Dot(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.zeros(N))

    def forward(self, x):
        return (self.p * x).sum()  # d/dp = x: the gradient is what we choose


class TwoLayers(nn.Module):
    """Two parameters in one DDP bucket whose gradients differ 1000-fold: a
    scale per parameter (the bucket's segments), not one for the bucket."""

    def __init__(self):
        super().__init__()
        # q first: DDP's first bucket lays the parameters out in reverse, [p, q],
        # the order their gradients become ready, so the rebuild after the first
        # step keeps that layout (a new layout starts onebit's state afresh).
        self.q = nn.Parameter(torch.zeros(SMALL))
        self.p = nn.Parameter(torch.zeros(N))

    def forward(self, x):
        return (self.p * x[:N]).sum() + (self.q * x[N:]).sum()


SMALL = 3001


def gradient(rank, step):
    return torch.from_numpy(np.random.default_rng(100 * step + rank).standard_normal(N).astype(np.float32))


def python_hook(prefix, compression):
    return lambda ddp: ddp.register_comm_hook(bps.PushPullHookState(prefix, compression=compression),
                                              bps.push_pull_hook)


def cpp_hook(prefix, compression):
    return lambda ddp: bps.register_push_pull_hook(ddp, prefix, compression=compression)


def hook_gradients(rank, install):
    """The averaged gradient DDP leaves in p.grad at each step (one bucket: the one parameter)."""
    ddp = DDP(Dot())
    install(ddp)
    grads = []
    for step in range(STEPS):
        ddp.zero_grad()
        ddp(gradient(rank, step)).backward()
        grads.append(ddp.module.p.grad.tolist())
    return grads


def layer_gradients(rank, install):
    """As hook_gradients for TwoLayers: each step's averaged p.grad and q.grad."""
    ddp = DDP(TwoLayers())
    install(ddp)
    grads = []
    for step in range(STEPS):
        ddp.zero_grad()
        small = torch.from_numpy(np.random.default_rng(100 * step + rank + 7).standard_normal(SMALL)
                                 .astype(np.float32)) * 1e-3
        ddp(torch.cat([gradient(rank, step), small])).backward()
        grads.append([ddp.module.p.grad.tolist(), ddp.module.q.grad.tolist()])
    return grads


def exact(rank):
    results = {
        "python_onebit": hook_gradients(rank, python_hook("", "onebit")),
        "cpp_onebit": hook_gradients(rank, cpp_hook("cpp.", bps.Compression.onebit)),
        # randomk's indices come from the bucket's name: the C++ hook must name
        # it as the Python hook does ("<prefix>ddp.bucket0.float32.50000").
        "cpp_randomk": hook_gradients(rank, cpp_hook("cppr.", "randomk:ratio=0.05,seed=3")),
        # One rank on each hook: same names, same declaration, one result.
        "mixed_topk": hook_gradients(rank, (cpp_hook if rank == 0 else python_hook)("mixed.", "topk:ratio=0.01")),
        # Worker momentum before error feedback, from the Python factory.
        "cpp_onebit_momentum": hook_gradients(rank, cpp_hook("cppm.", onebit(momentum=0.9))),
        # A bucket of two parameters: a scale per parameter from either hook.
        "cpp_onebit_layers": layer_gradients(rank, cpp_hook("cppl.", onebit(momentum=0.9))),
        "python_onebit_layers": layer_gradients(rank, python_hook("pyl.", onebit(momentum=0.9))),
    }
    model = Dot()
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0), model.named_parameters(),
                                   compression=bps.Compression.topk(0.01))
    params = []
    for step in range(STEPS):
        opt.zero_grad()
        model(gradient(rank, step)).backward()
        opt.step()
        params.append(model.p.detach().tolist())
    results["optimizer"] = params
    return results


def disagree(rank):
    outcomes = {}
    for case, specs in (("other_compressor", ["onebit", "topk:ratio=0.01"]), ("uncompressed", ["onebit", None]),
                        ("other_options", [onebit(momentum=0.9, server_error_feedback=True), onebit(momentum=0.9)])):
        ddp = DDP(Dot())
        bps.register_push_pull_hook(ddp, f"{case}.", compression=specs[rank])
        try:
            ddp(gradient(rank, 0)).backward()
            outcomes[case] = "no error"
        except RuntimeError as error:
            outcomes[case] = str(error)
    # The job survives the refused tensors: a model the ranks agree on trains.
    outcomes["after"] = hook_gradients(rank, cpp_hook("after.", "onebit"))[0][:4]
    return outcomes


def main():
    dist.init_process_group("byteps")
    rank = dist.get_rank()
    report({"exact": exact, "disagree": disagree}[sys.argv[1]](rank), rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
