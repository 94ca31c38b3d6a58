"""Elastic training: survive a worker crash under `torchrun --max-restarts`.

    torchrun --standalone --nproc_per_node 2 --max-restarts 2 \\
        -m byteps_native.examples.elastic_checkpoint --checkpoint /tmp/ckpt.pt --crash-at-step 40

When a worker dies, torchrun stops the group and starts it again; every
restart re-rendezvouses byteps through the c10d store (keys are scoped by
TORCHELASTIC_RESTART_COUNT, colocated servers restart with the workers) and
training resumes from the last checkpoint, written by rank 0 after each epoch.
"""
import argparse
import os

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch as bps


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--crash-at-step", type=int, default=-1, help="rank 1 dies here on the first attempt")
    args = p.parse_args()

    dist.init_process_group("byteps")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start_epoch = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
        print(f"rank {rank} attempt {attempt}: resumed from epoch {state['epoch']}", flush=True)
    ddp = DDP(model)
    ddp.register_comm_hook(None, bps.push_pull_hook)
    per_rank = len(x) // world
    step = 0
    for epoch in range(start_epoch, args.epochs):
        for i in range(0, per_rank, 32):
            idx = slice(rank * per_rank + i, rank * per_rank + min(i + 32, per_rank))
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x[idx]), y[idx]).backward()
            opt.step()
            step += 1
            if attempt == 0 and rank == 1 and step == args.crash_at_step:
                print(f"rank 1: simulated crash at step {step}", flush=True)
                os._exit(17)
        if rank == 0:
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}, tmp)
            os.replace(tmp, args.checkpoint)  # atomic: a crash never leaves half a checkpoint
        dist.barrier()
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    print(f"rank {rank} attempt {attempt}: finished {args.epochs} epochs, accuracy {accuracy:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
