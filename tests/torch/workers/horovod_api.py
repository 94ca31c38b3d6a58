"""The Horovod-style API: DistributedOptimizer parity with single-process
training (plain, fp16 compression, backward_passes_per_step=2), broadcasts and
push_pull handles. Runs under torchrun or bpslaunch (bps.init() picks)."""
import os
import sys

import torch
from torch import nn

import byteps_native.torch as bps
from models import global_batch, make_model, max_param_diff, reference_training
from tests.support.results import outcome, report

STEPS, PER_RANK = 5, 8


def train(rank, n, compression, passes):
    model = make_model(seed=rank + 100)  # differs per rank until broadcast
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (rank + 1), momentum=0.9)
    opt = bps.DistributedOptimizer(opt, model.named_parameters(), compression, passes)
    if rank == 0:
        model.load_state_dict(make_model().state_dict())
        for group in opt.param_groups:
            group["lr"] = 0.1
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(opt, root_rank=0)  # carries lr=0.1 to every rank
    for step in range(STEPS):
        x, y = global_batch(step, PER_RANK * n)
        mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        opt.zero_grad()
        for xs, ys in zip(x[mine].chunk(passes), y[mine].chunk(passes)):
            (nn.functional.cross_entropy(model(xs), ys) / passes).backward()
        opt.step()
    return model


def api_cases(rank, n):
    cases = {}

    def push_pull_values():
        t = torch.full((4,), float(rank + 1))
        out = bps.push_pull(t, average=False, name="api.sum")
        assert torch.equal(t, torch.full((4,), float(rank + 1))), "push_pull modified its input"
        assert torch.equal(out, torch.full((4,), float(n * (n + 1) / 2))), out
        avg = bps.push_pull(t, name="api.avg")
        assert torch.allclose(avg, torch.full((4,), (n + 1) / 2)), avg

    def handles():
        tensors = [torch.full((10,), float(i + rank)) for i in range(5)]
        hs = [bps.push_pull_async_inplace(t, average=False, name=f"api.h{i}") for i, t in enumerate(tensors)]
        for i, h in enumerate(hs):
            out = bps.synchronize(h)
            assert out is tensors[i]
            assert torch.equal(out, torch.full((10,), float(n * i + n * (n - 1) / 2))), out
            try:
                bps.poll(h)
            except ValueError:
                continue
            raise AssertionError("poll of a synchronized handle did not fail")

    def poll_until_done():
        h = bps.push_pull_async(torch.ones(3), name="api.poll")
        while not bps.poll(h):
            pass
        assert torch.equal(bps.synchronize(h), torch.ones(3))

    def broadcast_object():
        obj = {"rank": rank, "blob": list(range(3000))} if rank == 1 % n else None
        got = bps.broadcast_object(obj, root_rank=1 % n)
        assert got == {"rank": 1 % n, "blob": list(range(3000))}, got

    def topology():
        assert (bps.rank(), bps.size()) == (rank, n)
        assert 0 <= bps.local_rank() < bps.local_size() <= n

    for fn in (push_pull_values, handles, poll_until_done, broadcast_object, topology):
        cases[fn.__name__] = outcome(fn)
    return cases


def main():
    bps.init()
    rank, n = bps.rank(), bps.size()
    reference = reference_training(STEPS, PER_RANK * n)
    result = {
        "plain": max_param_diff(train(rank, n, bps.Compression.none, 1), reference),
        "fp16": max_param_diff(train(rank, n, bps.Compression.fp16, 1), reference),
        "two_passes": max_param_diff(train(rank, n, bps.Compression.none, 2), reference),
        "api": api_cases(rank, n),
        "launcher": "bpslaunch" if os.environ.get("DMLC_ROLE") else "torchrun",
    }
    report(result, rank)
    bps.shutdown()


if __name__ == "__main__":
    sys.exit(main())
