"""Horovod-style elastic training (hvd.elastic.TorchState / commit / run)
under torchrun --max-restarts. With --kill-at-step S, rank 1 of the first
attempt kills itself (SIGKILL) at step S; torchrun restarts both workers and
training resumes from the last commit. Every rank reports its final weights."""
import argparse
import os
import signal

import torch
from torch import nn

import byteps_native.torch as hvd
from tests.support.results import report

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--commit-every", type=int, default=2)
parser.add_argument("--kill-at-step", type=int, default=-1)
args = parser.parse_args()

hvd.init()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters())
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
resumed_at = []


@hvd.elastic.run
def train(state):
    resumed_at.append(state.step)
    while state.step < args.steps:
        if attempt == 0 and hvd.rank() == 1 and state.step == args.kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(1000 * state.step + hvd.rank())
        x = torch.randn(16, 8, generator=g)
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        state.step += 1
        if state.step % args.commit_every == 0:
            state.commit()


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
train(state)
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
report({"attempt": attempt, "resumed_at": resumed_at, "step": state.step, "weights": weights.tolist()})
