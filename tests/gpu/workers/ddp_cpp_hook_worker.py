"""One rank of the C++ DDP hook test (started by torchrun from test_ddp_cpp_hook.py).

    ddp_cpp_hook_worker.py cpu|cuda OUT_DIR
DDP trained with byteps_native.torch.register_push_pull_hook must end with the
parameters of DDP on the framework's own backend (gloo on CPU, NCCL on GPUs);
the compressed C++ hook must match the compressed Python hook. Writes
OUT_DIR/result.<rank>.json: {"failures": [...]}.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps

STEPS, PER_RANK = 6, 16


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def train(device, rank, size, process_group=None, install=None):
    # Each rank starts from other weights: DDP must broadcast rank 0's.
    model = make_model(seed=100 + rank).to(device)
    ids = [device.index] if device.type == "cuda" else None
    # Small buckets: several per step, so bucket indices, priorities and the
    # rebuild after the first iteration are all exercised.
    net = DDP(model, device_ids=ids, bucket_cap_mb=0.05, process_group=process_group)
    if install:
        install(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(7)
    data = torch.randn(STEPS, size * PER_RANK, 32, device=device)
    target = torch.randint(0, 10, (STEPS, size * PER_RANK), device=device)
    mine = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
    for step in range(STEPS):
        opt.zero_grad()
        nn.functional.cross_entropy(net(data[step, mine]), target[step, mine]).backward()
        opt.step()
    return [p.detach().cpu() for p in net.module.parameters()]


def max_diff(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def main():
    kind, out_dir = sys.argv[1], sys.argv[2]
    local = int(os.environ["LOCAL_RANK"])
    if kind == "cuda":
        gpu = int(os.environ.get("GPU_OFFSET", "0")) + local
        torch.cuda.set_device(gpu)
        device = torch.device("cuda", gpu)
    else:
        device = torch.device("cpu")
    dist.init_process_group("byteps")
    rank, size = dist.get_rank(), dist.get_world_size()
    reference_group = dist.new_group(backend="nccl" if kind == "cuda" else "gloo")
    failures = []

    reference = train(device, rank, size, process_group=reference_group)
    cpp = train(device, rank, size, install=bps.register_push_pull_hook)
    if max_diff(cpp, reference) > 1e-5:
        failures.append(f"C++ hook vs {'NCCL' if kind == 'cuda' else 'gloo'}: max |param diff| = "
                        f"{max_diff(cpp, reference):.2e}")
    for compression, python_hook in (("fp16", bps.fp16_compress_push_pull_hook),
                                     ("bf16", bps.bf16_compress_push_pull_hook)):
        cpp_c = train(device, rank, size,
                      install=lambda net: bps.register_push_pull_hook(net, f"cpp.{compression}.", compression))
        py_c = train(device, rank, size,
                     install=lambda net: net.register_comm_hook(bps.PushPullHookState(f"py.{compression}."),
                                                                python_hook))
        if max_diff(cpp_c, py_c) > 1e-6:
            failures.append(f"C++ {compression} hook vs Python {compression} hook: max |param diff| = "
                            f"{max_diff(cpp_c, py_c):.2e}")
        if max_diff(cpp_c, reference) > 5e-2:
            failures.append(f"C++ {compression} hook drifted from the reference by {max_diff(cpp_c, reference):.2e}")

    # Contract: one hook per model, a DDP model only, known compressions.
    net = DDP(make_model(1).to(device), device_ids=[device.index] if kind == "cuda" else None)
    bps.register_push_pull_hook(net, "contract.")
    for call, error, text in (
            (lambda: bps.register_push_pull_hook(net, "again."), RuntimeError, "can only be called once"),
            (lambda: bps.register_push_pull_hook(make_model(1)), TypeError, "DistributedDataParallel"),
            (lambda: bps.register_push_pull_hook(net, compression="int8"), ValueError, "compression")):
        try:
            call()
            failures.append(f"accepted, expected {error.__name__} mentioning {text!r}")
        except error as e:
            if text not in str(e):
                failures.append(f"{error.__name__} without {text!r}: {e}")

    if kind == "cuda":
        torch.cuda.synchronize()
    with open(os.path.join(out_dir, f"result.{rank}.json"), "w") as f:
        json.dump({"failures": failures}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
