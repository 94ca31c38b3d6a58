"""Small deterministic models and data shared by the parity workers."""
import torch
from torch import nn


def conv_net():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def make_model(seed=0):
    torch.manual_seed(seed)
    return conv_net()


def global_batch(step, size, seed=1):
    """The step's whole batch (every rank can build it; each trains on its slice)."""
    g = torch.Generator().manual_seed(seed * 10_000 + step)
    return torch.randn(size, 1, 8, 8, generator=g), torch.randint(0, 10, (size,), generator=g)


def reference_training(steps, batch, lr=0.1, momentum=0.9):
    """Single-process training on the concatenated batch: what DDP must reproduce."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for step in range(steps):
        x, y = global_batch(step, batch)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def max_param_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))
