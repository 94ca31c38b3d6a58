"""DistributedOptimizer with the engine's tensor fusion (csrc/core/fused_group.h)
against the same training without it (BYTEPS_FUSION_BYTES=0: one push_pull per
parameter, the optimizer before issue 40) and against gloo: each case trains
from the same start on the same per-rank batches and reports whether the
parameters are bitwise equal, and how many engine operations a step took.
The mismatch case gives one parameter another shape on rank 1 and reports the
error each rank's step raised."""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import byteps_native.torch as bps
from tests.support.results import outcome, report

STEPS = 4
FUSION_BYTES = 4096  # small: the model below makes several groups, and one parameter travels alone


class Model(nn.Module):
    """Many small parameters, one past the fusion limit, a float64 one (its own
    group) and one the forward pass never uses (its gradient stays None)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Linear(12, 12) for _ in range(6)])
        self.wide = nn.Linear(12, 96)  # 4608 bytes of weight: past FUSION_BYTES
        self.head = nn.Linear(96, 5)
        self.scale = nn.Parameter(torch.ones(5, dtype=torch.float64))
        self.unused = nn.Parameter(torch.zeros(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(torch.relu(self.wide(x))) * self.scale.float()


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(6, 12, generator=g), torch.randn(6, 5, generator=g)


def ops_completed():
    return bps.stats()["ops_completed"]


def train_distributed(prefix, fusion_bytes, passes=1):
    """Returns (parameters, engine ops per step, the optimizer's groups)."""
    os.environ["BYTEPS_FUSION_BYTES"] = str(fusion_bytes)  # read when the optimizer is made
    model = Model()
    named = [(f"{prefix}.{n}", p) for n, p in model.named_parameters()]
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), named,
                                   backward_passes_per_step=passes)
    ops = []
    for step in range(STEPS):
        before = ops_completed()
        opt.zero_grad()
        x, y = batch(step, bps.rank())
        for xs, ys in zip(x.chunk(passes), y.chunk(passes)):
            F.mse_loss(model(xs), ys).backward()
        opt.step()
        ops.append(ops_completed() - before)
    return [p.detach().clone() for p in model.parameters()], ops, len(opt._groups)


def train_gloo(gloo):
    """The reference: each gradient summed by gloo, divided by the size (an average as the engine takes it)."""
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(step, dist.get_rank())
        F.mse_loss(model(x), y).backward()
        for p in model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad, group=gloo)
            p.grad /= dist.get_world_size()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def mismatch():
    """'odd' is [4, 5] on rank 0 and [5, 4] elsewhere: same bytes, so the same buckets."""
    os.environ["BYTEPS_FUSION_BYTES"] = str(FUSION_BYTES)
    torch.manual_seed(0)
    params = nn.ParameterDict({"a": nn.Parameter(torch.ones(3)),
                               "odd": nn.Parameter(torch.ones((4, 5) if bps.rank() == 0 else (5, 4))),
                               "b": nn.Parameter(torch.ones(2))})
    opt = bps.DistributedOptimizer(torch.optim.SGD(params.parameters(), lr=0.1),
                                   [(f"mismatch.{n}", p) for n, p in params.items()])
    sum(p.sum() for p in params.values()).backward()
    try:
        opt.step()
    except Exception as error:  # reported, asserted by the test
        return {"error": str(error), "groups": len(opt._groups)}
    return {"error": "", "groups": len(opt._groups)}


def join_case():
    """Rank 1 joins at once; rank 0 steps once, so rank 1's join stands in for
    rank 0's gradient groups with zeros: rank 0 gets half its own gradients."""
    os.environ["BYTEPS_FUSION_BYTES"] = str(FUSION_BYTES)
    model = Model()
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   [(f"join.{n}", p) for n, p in model.named_parameters()])
    if bps.rank() != 0:
        return {"last": bps.join()}
    alone = Model()
    x, y = batch(0, 0)
    F.mse_loss(alone(x), y).backward()
    own = [torch.zeros_like(p) if p.grad is None else p.grad / 2 for p in alone.parameters()]
    F.mse_loss(model(x), y).backward()
    opt.synchronize()
    halved = same([p.grad for p in model.parameters()], own)
    return {"last": bps.join(), "halved": halved}


def main():
    dist.init_process_group("byteps")
    bps.init()
    gloo = dist.new_group(backend="gloo")
    result = {}
    fused, fused_ops, groups = train_distributed("fused", FUSION_BYTES)
    unfused, unfused_ops, tensors = train_distributed("unfused", 0)
    reference = train_gloo(gloo)
    fused2, fused2_ops, _ = train_distributed("fused2", FUSION_BYTES, passes=2)
    unfused2, _, _ = train_distributed("unfused2", 0, passes=2)
    result.update({"fused_as_unfused": same(fused, unfused), "fused_as_gloo": same(fused, reference),
                   "unfused_as_gloo": same(unfused, reference), "two_passes_fused_as_unfused": same(fused2, unfused2),
                   "fused_ops": fused_ops, "unfused_ops": unfused_ops, "fused2_ops": fused2_ops, "groups": groups,
                   "tensors": tensors})
    result["mismatch"] = mismatch()
    result["after_mismatch"] = outcome(lambda: train_distributed("after", FUSION_BYTES))
    result["join"] = join_case()
    report(result)
    bps.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
