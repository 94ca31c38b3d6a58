"""A GPU training loop of push_pulls with exact checks: the victim and
survivors of test_gpu_fault_trials.py (dedicated servers and scheduler,
DMLC_* environment, this process on cuda:$BPS_TEST_GPU).

Prints READY, then STEP <n> after every step; on an error of the engine
(init included) prints BYTEPS_ERROR <message> and exits 3; on a wrong sum
prints WRONG SUM and exits 4.
"""
import os
import sys

import torch

import byteps_native.torch as bps

# "cpu": the same loop on host tensors (a dry run of the harness without GPUs).
gpu = os.environ["BPS_TEST_GPU"]
if gpu == "cpu":
    device = torch.device("cpu")
else:
    torch.cuda.set_device(int(gpu))
    device = torch.device("cuda", int(gpu))
try:
    bps.init()
except Exception as e:  # a fault during start-up: named like one during training
    print(f"BYTEPS_ERROR in init: {type(e).__name__}: {e}", flush=True)
    sys.exit(3)
rank, size = bps.rank(), bps.size()
print(f"READY rank {rank} of {size} pid {os.getpid()} {device}", flush=True)
# Several partitions, padded slices, one below the local ranks' slice count,
# an integer tensor: every kind of device partition is in flight.
SHAPES = {"grad.big": 2_000_003, "grad.mid": 262_144, "grad.odd": 3001, "grad.tiny": 3}
total = size * (size + 1) // 2
step = 0
try:
    while True:
        handles = []
        for name, n in SHAPES.items():
            t = torch.full((n,), float(rank + 1 + step % 7), device=device)
            handles.append((name, t, bps.push_pull_async_inplace(t, average=False, name=name)))
        ints = torch.arange(50_000, device=device, dtype=torch.int32) * (rank + 1)
        handles.append(("grad.int", ints, bps.push_pull_async_inplace(ints, average=False, name="grad.int")))
        for name, t, h in handles:
            bps.synchronize(h)
        want = float(total + size * (step % 7))
        for name, t, _ in handles[:-1]:
            if not bool(torch.all(t == want)):
                print(f"WRONG SUM at step {step}: {name}[0]={t[0].item()} want {want}", flush=True)
                sys.exit(4)
        if not torch.equal(ints, torch.arange(50_000, device=device, dtype=torch.int32) * total):
            print(f"WRONG SUM at step {step}: grad.int", flush=True)
            sys.exit(4)
        step += 1
        print(f"STEP {step}", flush=True)
except Exception as e:
    print(f"BYTEPS_ERROR after {step} steps: {type(e).__name__}: {e}", flush=True)
    sys.exit(3)
