"""One rank of a GPU torch test job (started by torchrun from test_torch_gpu.py).

    torch_gpu_worker.py collectives|ddp OUT_DIR
Writes OUT_DIR/result.<rank>.json: {"failures": [...], ...}.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

import byteps_native.torch as bps

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
SIZES = [1, 7, 1023, 65537, 1000003]


def expected(n, dtype, size, average):
    base = (torch.arange(n, dtype=torch.float64) % 5)
    total = sum(base + r + 1 for r in range(size))
    if average:
        total = torch.trunc(total / size) if not dtype.is_floating_point else total / size
    return total


def close(got, want, dtype):
    got = got.double().cpu()
    if not dtype.is_floating_point:
        return torch.equal(got, want)
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    return torch.allclose(got, want, rtol=tol, atol=tol)


def gathers_and_scatters(rank, size, device, failures):
    """The engine's gathers and reduce-scatters on device memory: many
    partitions (BYTEPS_PARTITION_BYTES is 256 KiB here), an input that is its
    own slot of the output (FSDP's way), the list forms, a bfloat16 payload
    (gathered as bytes), and the input left as it was."""
    n = 300_001  # odd, over four partitions of float32
    want = torch.cat([torch.arange(n, dtype=torch.float32) * (r + 1) for r in range(size)])
    out = torch.zeros(size * n, device=device)
    own = out.narrow(0, rank * n, n)
    own.copy_(torch.arange(n, device=device, dtype=torch.float32) * (rank + 1))
    dist.all_gather_into_tensor(out, own)
    if not torch.equal(out.cpu(), want):
        failures.append("all_gather_into_tensor, input aliasing its slot: wrong rows "
                        f"{(out.cpu() != want).nonzero()[:4].flatten().tolist()}")
    mine = (torch.arange(7, device=device) + 10 * rank).to(torch.bfloat16)
    parts = [torch.empty(7, device=device, dtype=torch.bfloat16) for _ in range(size)]
    dist.all_gather(parts, mine)
    got = [p.float().cpu().tolist() for p in parts]
    if got != [(torch.arange(7) + 10 * r).float().tolist() for r in range(size)]:
        failures.append(f"all_gather bfloat16: got {got}")
    full = torch.arange(size * n, device=device, dtype=torch.float32) + rank
    before = full.clone()
    rs = torch.empty(n, device=device)
    dist.reduce_scatter_tensor(rs, full)
    want = (torch.arange(rank * n, (rank + 1) * n, dtype=torch.float32) * size + sum(range(size)))
    if not torch.equal(rs.cpu(), want):
        failures.append(f"reduce_scatter_tensor of {size * n}: got {rs[:3].tolist()}")
    if not torch.equal(full, before):
        failures.append("reduce_scatter_tensor changed its input")
    chunks = [torch.full((5,), float(rank + q), device=device) for q in range(size)]
    out5 = torch.empty(5, device=device)
    dist.reduce_scatter(out5, chunks)
    if not torch.all(out5 == sum(r + rank for r in range(size))):
        failures.append(f"reduce_scatter (list): got {out5.tolist()}")


def collectives(rank, size, device, failures):
    side = torch.cuda.Stream(device)
    for dtype in DTYPES:
        for n in SIZES:
            for average in (False, True):
                op = dist.ReduceOp.AVG if average else dist.ReduceOp.SUM
                # Produced on a side stream and reduced there: the backend must
                # order its work after that stream, not the default one.
                with torch.cuda.stream(side):
                    x = ((torch.arange(n, device=device) % 5) + rank + 1).to(dtype)
                    dist.all_reduce(x, op=op)
                    got = x.cpu()
                if not close(got, expected(n, dtype, size, average), dtype):
                    failures.append(f"all_reduce {dtype} n={n} avg={average}: got {got[:4].tolist()}")
    # Non-contiguous CUDA tensor: staged contiguously and copied back.
    t = torch.ones(64, 32, device=device).t()
    dist.all_reduce(t)
    if not torch.all(t == size):
        failures.append("all_reduce of a transposed tensor")
    # Set-up collectives on CUDA tensors (DDP uses these): staged via host.
    b = torch.full((1000,), float(rank), device=device)
    dist.broadcast(b, src=size - 1)
    if not torch.all(b == size - 1):
        failures.append(f"broadcast: got {b[:3].tolist()}")
    parts = [torch.empty(3, device=device, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(parts, torch.full((3,), rank, device=device, dtype=torch.int64))
    if [int(p[0]) for p in parts] != list(range(size)):
        failures.append(f"all_gather: got {[p.tolist() for p in parts]}")
    out = torch.empty(size * 5, device=device)
    dist.all_gather_into_tensor(out, torch.full((5,), float(rank), device=device))
    if not torch.equal(out.cpu(), torch.arange(size).repeat_interleave(5).float()):
        failures.append(f"all_gather_into_tensor: got {out.tolist()}")
    rs = torch.empty(4, device=device)
    dist.reduce_scatter_tensor(rs, torch.ones(4 * size, device=device))
    if not torch.all(rs == size):
        failures.append(f"reduce_scatter_tensor: got {rs.tolist()}")
    gathers_and_scatters(rank, size, device, failures)
    # Direct push_pull futures (the DDP hook path), chained with then().
    futs = []
    tensors = [torch.full((100 + i,), float(rank + 1), device=device) for i in range(16)]
    for i, t in enumerate(tensors):
        futs.append(bps.push_pull_async_inplace(t, name=f"direct.{i}", average=False))
    for i, t in enumerate(tensors):
        bps.synchronize(futs[i])
        if not torch.all(t == size * (size + 1) / 2):
            failures.append(f"direct push_pull {i}: got {t[:3].tolist()}")


def ddp(rank, size, device, failures):
    """DDP with the byteps hook matches one process stepping on the whole batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))

    torch.manual_seed(2)
    data = torch.randn(size * 16, 32, device=device)
    target = torch.randint(0, 10, (size * 16,), device=device)
    shard = slice(rank * 16, (rank + 1) * 16)
    net = DDP(model().to(device), device_ids=[device.index], bucket_cap_mb=0.05)
    net.register_comm_hook(None, bps.push_pull_hook)
    ref = model().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for _ in range(8):
        opt.zero_grad()
        nn.functional.cross_entropy(net(data[shard]), target[shard]).backward()
        opt.step()
        ref_opt.zero_grad()
        nn.functional.cross_entropy(ref(data), target).backward()
        ref_opt.step()
    for (name, p), q in zip(net.module.named_parameters(), ref.parameters()):
        if not torch.allclose(p, q, rtol=1e-4, atol=1e-5):
            failures.append(f"DDP parameter {name} differs from the single-process reference by "
                            f"{(p - q).abs().max().item():.2e}")


def main():
    mode, out_dir = sys.argv[1], sys.argv[2]
    gpu = int(os.environ.get("GPU_OFFSET", "0")) + int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu)
    dist.init_process_group("byteps")
    rank, size = dist.get_rank(), dist.get_world_size()
    failures = []
    {"collectives": collectives, "ddp": ddp}[mode](rank, size, device, failures)
    import byteps_native.core as core
    # On one machine Futures complete stream-ordered, before the engine's
    # completion thread has seen the GPU finish (it polls lazily): let it
    # catch up, so the in_flight check means "nothing leaked".
    torch.cuda.synchronize()
    deadline = time.monotonic() + 10
    while core.stats()["queue_depth"] and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(os.path.join(out_dir, f"result.{rank}.json"), "w") as f:
        json.dump({"failures": failures, "stats": core.stats()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
