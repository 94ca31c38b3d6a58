"""A rank dies mid-step under CrossBarrier (after its forward pass, before its
gradients are pushed); the survivor, whose next forward waits for updates
that can never come, must fail naming the dead rank, not hang. Bare
processes (torchrun would stop the survivor itself). argv[1]: the rank that dies."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import byteps_native.torch as bps
from tests.support.results import report

DIES_AT = 2


def main():
    victim = int(sys.argv[1])
    dist.init_process_group("byteps")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = bps.CrossBarrier(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    since, step = None, 0
    try:
        for step in range(10):
            opt.zero_grad()
            out = model(torch.randn(4, 8))
            if step == DIES_AT and rank == victim:
                os._exit(3)
            F.mse_loss(out, torch.zeros(4, 2)).backward()
            if step == DIES_AT:
                since = time.monotonic()
            opt.step()
        opt.wait_for_updates()
        report({"error": None, "step": step}, rank)
    except Exception as error:  # the point of the test
        report({"error": f"{type(error).__name__}: {error}", "step": step,
                "seconds": None if since is None else time.monotonic() - since}, rank)


if __name__ == "__main__":
    main()
