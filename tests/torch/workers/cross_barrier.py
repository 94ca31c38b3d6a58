"""CrossBarrier against the same training without it, in one job: each case
trains a reference (DistributedOptimizer, or plain DDP) and a cross-barrier
twin from the same start on the same per-rank batches, and reports whether
parameters and optimizer state are bitwise equal. The timing case reports
when the first layer's forward pass ended in each step, for the test to set
against the engine's timeline (BYTEPS_TRACE_ON).

argv[1]: cpu or cuda (GPU_OFFSET + LOCAL_RANK picks the GPU)."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps
from tests.support.results import outcome, report

STEPS = 6
DEVICE = torch.device("cpu")


def small_model(norm=False):
    torch.manual_seed(0)
    layers = [nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32)]
    layers += [nn.BatchNorm1d(32)] if norm else []
    layers += [nn.Tanh(), nn.Linear(32, 5)]
    return nn.Sequential(*layers).to(DEVICE)


def batch(step, rank, width=12, out=5, rows=6):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(rows, width, generator=g).to(DEVICE), torch.randn(rows, out, generator=g).to(DEVICE)


def named(prefix, model):
    return [(f"{prefix}.{n}", p) for n, p in model.named_parameters()]


def make_optimizer(kind, model):
    """Two param groups, as real scripts have (no weight decay on biases)."""
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    groups = [{"params": weights, "weight_decay": 0.01}, {"params": biases, "lr": 0.02}]
    foreach = kind.endswith("_foreach")
    if kind.startswith("sgd"):
        return torch.optim.SGD(groups, lr=0.05, momentum=0.9, foreach=foreach)
    return torch.optim.AdamW(groups, lr=0.01, foreach=foreach)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b)) and len(a) == len(b)


def state_tensors(optimizer):
    sd = optimizer.state_dict()["state"]
    return [t.detach().clone() for k in sorted(sd) for _, t in sorted(sd[k].items()) if torch.is_tensor(t)]


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def train(model, optimizer, rank, cross, steps=STEPS, accumulate=1, probe=None):
    """The same loop for both; probe(step, model, optimizer) runs right after step()."""
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
    for step in range(steps):
        optimizer.zero_grad()
        for micro in range(accumulate):
            x, y = batch(step * accumulate + micro, rank)
            F.mse_loss(model(x), y).backward()
        optimizer.step()
        schedule.step()
        if probe is not None:
            probe(step, model, optimizer)


def exact_case(kind, rank, accumulate=1, sync_after_step=False):
    """Params and state after STEPS steps; mid-training state_dict()s and an
    evaluation under no_grad, each right after a step() (updates in flight).
    sync_after_step: rank 0 alone calls synchronize() after every step() of
    the cross-barrier run, where no gradient of the next step exists yet:
    nothing to sum, so the ranks still agree and the result is the same."""
    seen = {}

    def probe_for(which):
        def probe(step, model, optimizer):
            if which == "cb" and sync_after_step and rank == 0:
                optimizer.synchronize()
            if step == 2:
                seen[which, "optimizer_state"] = state_tensors(optimizer)
                seen[which, "model_state"] = [t.clone() for t in model.state_dict().values()]
            if step == 3:
                with torch.no_grad():
                    seen[which, "eval"] = [model(batch(99, rank)[0])]
        return probe

    ref = small_model()
    ref_opt = bps.DistributedOptimizer(make_optimizer(kind, ref), named_parameters=named(f"ref.{kind}", ref),
                                       backward_passes_per_step=accumulate)
    train(ref, ref_opt, rank, False, accumulate=accumulate, probe=probe_for("ref"))
    model = small_model()
    opt = bps.CrossBarrier(model, make_optimizer(kind, model), named_parameters=named(f"cb.{kind}", model),
                           backward_passes_per_step=accumulate, num_steps=STEPS)
    train(model, opt, rank, True, accumulate=accumulate, probe=probe_for("cb"))
    # num_steps=STEPS: the last step() applied every update before returning,
    # so the parameters are read here without any wait.
    result = {"params": same(params(ref), [p.detach().clone() for p in model.parameters()])}
    result["state"] = same(state_tensors(ref_opt), state_tensors(opt))
    for what in ("optimizer_state", "model_state", "eval"):
        result[what] = same(seen["ref", what], seen["cb", what])
    opt.close()
    return result


def ddp_case(rank):
    """Plain DDP (its own all-reduce through the 'byteps' backend) vs
    CrossBarrier(DDP(model)): BatchNorm buffers broadcast as DDP does, and
    no_sync() accumulating the first of two micro-batches."""
    out = {}
    for which in ("ref", "cb"):
        model = small_model(norm=True)
        ddp = DDP(model)
        opt = make_optimizer("sgd", ddp)
        if which == "cb":
            opt = bps.CrossBarrier(ddp, opt, num_steps=None)
        for step in range(STEPS):
            opt.zero_grad()
            x, y = batch(2 * step, rank)
            with ddp.no_sync():
                F.mse_loss(ddp(x), y).backward()
            x, y = batch(2 * step + 1, rank)
            F.mse_loss(ddp(x), y).backward()
            opt.step()
        # num_steps=None: model.state_dict() waits for the updates in flight.
        out[which] = [t.clone() for t in model.state_dict().values()]
        if which == "cb":
            opt.close()
    return {"state": same(out["ref"], out["cb"])}


def clip_and_scaler_case(rank):
    """clip_grad_norm_ and GradScaler need every sum: refused at once without
    synchronize(), exact with it (GradScaler skipping a step with inf too)."""
    result = {}
    runs = {}
    for which in ("ref", "cb"):
        model = small_model()
        inner = make_optimizer("sgd", model)
        if which == "ref":
            opt = bps.DistributedOptimizer(inner, named_parameters=named("clip.ref", model))
        else:
            opt = bps.CrossBarrier(model, inner, named_parameters=named("clip.cb", model))
        scaler = torch.amp.GradScaler(DEVICE.type, init_scale=2.0 ** 8, growth_interval=2)
        for step in range(STEPS):
            opt.zero_grad()
            x, y = batch(step, rank)
            loss = F.mse_loss(model(x), y) * (float("inf") if step == 2 else 1.0)
            scaler.scale(loss).backward()
            if which == "cb" and step == 0:
                result["clip_refused"] = outcome(lambda: nn.utils.clip_grad_norm_(model.parameters(), 0.5))
                result["scaler_refused"] = outcome(lambda: scaler.step(opt))
            opt.synchronize()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            with opt.skip_synchronize():
                scaler.step(opt)
            scaler.update()
        opt.zero_grad() if which == "ref" else opt.wait_for_updates()
        runs[which] = params(model)
        if which == "cb":
            opt.close()
    result["params"] = same(runs["ref"], runs["cb"])
    return result


def group_state_case(rank):
    """An optimizer that keeps state per group is refused at its first update."""
    class GroupCounting(torch.optim.SGD):
        def step(self, closure=None):
            for group in self.param_groups:
                group["count"] = group.get("count", 0) + 1
            return super().step(closure)

    model = small_model()
    opt = bps.CrossBarrier(model, GroupCounting(model.parameters(), lr=0.1), named_parameters=named("gs", model))
    x, y = batch(0, rank)
    F.mse_loss(model(x), y).backward()
    opt.step()
    error = outcome(lambda: opt.wait_for_updates(timeout=60))
    return {"refused": error}


def timing_case(rank):
    """A first layer small, a large one right behind it: the next forward's
    first layer runs before the large layer's sum arrives -- only if the
    barrier is really crossed. The reference (DistributedOptimizer) keeps it."""
    def model_():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2048), nn.ReLU(),
                             nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4)).to(DEVICE)

    out = {}
    for which in ("ref", "cb"):
        model = model_()
        inner = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        names = named(f"timing_{which}", model)
        opt = (bps.CrossBarrier(model, inner, named_parameters=names, num_steps=STEPS) if which == "cb"
               else bps.DistributedOptimizer(inner, named_parameters=names))
        ends = []
        model[0].register_forward_hook(lambda m, a, o: ends.append(_now_marker()))
        for step in range(STEPS):
            opt.zero_grad()
            x, y = batch(step, rank, width=64, out=4, rows=8)
            F.mse_loss(model(x), y).backward()
            opt.step()
        out[which] = _to_wall_clock(ends)
        if which == "cb":
            opt.close()
    return out


# On CUDA the forward pass runs on the GPU's clock: an event per mark, turned
# into wall-clock time (the timeline's clock) against one reference event.
_reference = {}


def _now_marker():
    if DEVICE.type != "cuda":
        return time.time()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _to_wall_clock(marks):
    if DEVICE.type != "cuda":
        return marks
    torch.cuda.synchronize()
    if "event" not in _reference:
        return []
    return [_reference["wall"] + _reference["event"].elapsed_time(m) / 1000.0 for m in marks]


def main():
    global DEVICE
    if sys.argv[1] == "cuda":
        index = int(os.environ.get("GPU_OFFSET", 0)) + int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(index)
        DEVICE = torch.device("cuda", index)
    dist.init_process_group("byteps")
    bps.init()
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
        _reference["event"] = torch.cuda.Event(enable_timing=True)
        _reference["event"].record()
        torch.cuda.synchronize()
        _reference["wall"] = time.time()
    rank = dist.get_rank()
    torch.backends.cudnn.deterministic = True
    result = {"exact": {}}
    started = time.monotonic()
    for kind in ("sgd", "sgd_foreach", "adamw", "adamw_foreach"):
        result["exact"][kind] = exact_case(kind, rank)
    result["exact"]["accumulate"] = exact_case("sgd", rank, accumulate=2)
    result["exact"]["sync_after_step"] = exact_case("sgd", rank, sync_after_step=True)
    result["ddp"] = ddp_case(rank)
    result["clip_and_scaler"] = clip_and_scaler_case(rank)
    result["group_state"] = group_state_case(rank)
    result["timing"] = timing_case(rank)
    result["seconds"] = time.monotonic() - started
    report(result, rank)
    bps.shutdown()  # writes the timeline
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
