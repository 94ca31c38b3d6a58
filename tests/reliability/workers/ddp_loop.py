"""Plain torch DDP over init_process_group('byteps'): the store-host fault
trials' job (rank 0 hosts the TCPStore and machine 0's colocated server),
started directly (no agent) or by torchrun. Usage: ddp_loop.py [steps]
(0 = until something fails).

Env: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE; RANK_LOG_DIR (optional): write stdout and stderr, the
engine's included, to RANK_LOG_DIR/rank_<RANK>.log instead (under torchrun,
whose agent would interleave every rank's lines). Prints READY, STEP <n>
every 20 steps; an error prints BYTEPS_ERROR <type>: <message> and exits 3; a
wrong gradient exits 4.
"""
import datetime
import os
import sys
import time

if os.environ.get("RANK_LOG_DIR"):
    _log = os.open(os.path.join(os.environ["RANK_LOG_DIR"], f"rank_{os.environ['RANK']}.log"),
                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_log, 1)
    os.dup2(_log, 2)

import torch
import torch.distributed as dist

import byteps_native.torch  # noqa: F401  (registers the backend)

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 0
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
step = 0
try:
    dist.init_process_group("byteps", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(os.environ.get("BYTEPS_TIMEOUT", "30"))))
    model = torch.nn.Linear(64, 8, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    print(f"READY rank {rank} of {world} pid {os.getpid()}", flush=True)
    while steps == 0 or step < steps:
        ddp.zero_grad()
        # d(sum(W x))/dW = x for every row: the averaged gradient is the mean of the ranks' x.
        x = torch.full((1, 64), float(rank + 1 + step % 5))
        ddp(x).sum().backward()
        want = sum(r + 1 + step % 5 for r in range(world)) / world
        if not torch.allclose(model.weight.grad, torch.full_like(model.weight.grad, want)):
            print(f"WRONG SUM at step {step}: {model.weight.grad[0, 0].item()} want {want}", flush=True)
            sys.exit(4)
        step += 1
        if step % 20 == 0:
            print(f"STEP {step}", flush=True)
        time.sleep(0.002)
except Exception as e:  # noqa: BLE001  (whatever the failure, say it and leave)
    print(f"BYTEPS_ERROR {type(e).__name__} after {step} steps: {e}", flush=True)
    sys.exit(3)
dist.destroy_process_group()
print(f"DONE {step}", flush=True)
