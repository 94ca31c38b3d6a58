"""BytePS asynchronous training (BYTEPS_ENABLE_ASYNC=1) of a softmax
regression on scikit-learn's digits: each worker steps on its own shard and
pushes its weight delta; the servers' running weights are what it pulls.
Reports the loss on the whole data set before and after."""
import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

import byteps_native.torch as bps
from tests.support.results import report

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--staleness", type=int, default=0)
args = parser.parse_args()

bps.init()
digits = load_digits()
x_all = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y_all = torch.tensor(digits.target)
x, y = x_all[bps.rank()::bps.size()], y_all[bps.rank()::bps.size()]

torch.manual_seed(bps.rank())  # differs per rank: the servers hold rank 0's start
model = nn.Linear(64, 10)
own_init = torch.cat([p.detach().flatten() for p in model.parameters()]).clone()
optimizer = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                     named_parameters=model.named_parameters(), staleness=args.staleness)
with torch.no_grad():
    start_loss = float(nn.functional.cross_entropy(model(x_all), y_all))
    start_weights = torch.cat([p.flatten() for p in model.parameters()]).clone()
rng = np.random.RandomState(bps.rank())
for step in range(args.steps):
    batch = torch.tensor(rng.choice(len(x), 64))
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
    optimizer.step()
optimizer._async.drain()
with torch.no_grad():
    end_loss = float(nn.functional.cross_entropy(model(x_all), y_all))
    accuracy = float((model(x_all).argmax(1) == y_all).float().mean())
report({"rank": bps.rank(), "start_loss": start_loss, "end_loss": end_loss, "accuracy": accuracy,
        "start_weights": start_weights.tolist(), "own_init": own_init.tolist()})
