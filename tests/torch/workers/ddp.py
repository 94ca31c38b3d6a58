"""DDP with the 'byteps' backend: parameter parity with single-process training
for each hook, and PyTorch's comm-hook contract cases. Reports {case: result}."""
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps
from models import global_batch, make_model, max_param_diff, reference_training
from tests.support.results import outcome, report

STEPS, PER_RANK = 6, 8


def chained_hook(state, bucket):
    """Future passing: a hook may return a push_pull future continued with then()."""
    return bps.push_pull_hook(state, bucket).then(lambda fut: fut.value())


HOOKS = {
    "none": None,  # DDP's own allreduce per bucket, through the backend
    "push_pull": bps.push_pull_hook,
    "fp16": bps.fp16_compress_push_pull_hook,
    "bf16": bps.bf16_compress_push_pull_hook,
    "chained": chained_hook,
}


def train(hook_name, rank, n):
    model = make_model(seed=rank + 100)  # deliberately different: DDP must broadcast rank 0's
    torch.manual_seed(0)
    ref_init = make_model()
    if rank == 0:
        model.load_state_dict(ref_init.state_dict())
    # A small bucket cap gives several buckets, so priorities and the rebuild
    # after the first iteration are exercised.
    ddp = DDP(model, bucket_cap_mb=0.02)
    if HOOKS[hook_name] is not None:
        ddp.register_comm_hook(bps.PushPullHookState(f"{hook_name}."), HOOKS[hook_name])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = global_batch(step, PER_RANK * n)
        mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x[mine]), y[mine]).backward()
        opt.step()
    return model


def contract_cases(rank):
    cases = {}

    def not_callable():
        ddp = DDP(make_model())
        try:
            ddp.register_comm_hook(state=None, hook=1)
        except TypeError as error:
            assert "must be callable" in str(error), error
            return
        raise AssertionError("a non-callable hook was accepted")

    def invalid_return_type():
        ddp = DDP(make_model())

        def returns_int(state, bucket):
            return 1

        ddp.register_comm_hook(None, returns_int)
        try:
            x, y = global_batch(0, 4)
            nn.functional.cross_entropy(ddp(x), y).backward()
        except RuntimeError as error:
            assert "Future" in str(error), error
            return
        raise AssertionError("a hook returning int was accepted")

    def register_once():
        ddp = DDP(make_model())
        ddp.register_comm_hook(None, bps.push_pull_hook)
        try:
            ddp.register_comm_hook(None, bps.push_pull_hook)
        except RuntimeError as error:
            assert "can only be called once" in str(error), error
            return
        raise AssertionError("a second hook registration was accepted")

    for fn in (not_callable, invalid_return_type, register_once):
        cases[fn.__name__] = outcome(fn)
    return cases


def main():
    hook_names = sys.argv[1].split(",")
    dist.init_process_group("byteps")
    rank, n = dist.get_rank(), dist.get_world_size()
    reference = reference_training(STEPS, PER_RANK * n)
    result = {}
    for name in hook_names:
        result[name] = max_param_diff(train(name, rank, n), reference)
    if "--contract" in sys.argv:
        result["contract"] = contract_cases(rank)
    report(result, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
