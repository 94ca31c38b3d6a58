"""Train a small CNN on scikit-learn's handwritten digits with DDP over byteps.

    torchrun --nproc_per_node 2 -m byteps_native.examples.ddp_digits
    torchrun --nproc_per_node 8 -m byteps_native.examples.ddp_digits --device cuda   # one GPU per process

The one-line changes from a gloo DDP script: ``import byteps_native.torch``,
``init_process_group("byteps")`` and (optional, adds priorities) the comm hook.
The digits ship inside scikit-learn: nothing is downloaded.
"""
import argparse
import os

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
import byteps_native.torch as bps
from byteps_native.examples.progress import Progress

HOOKS = {"push_pull": bps.push_pull_hook, "fp16": bps.fp16_compress_push_pull_hook, "none": None}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hook", choices=sorted(HOOKS), default="push_pull",
                        help="DDP comm hook; 'none' lets DDP all-reduce through the backend")
    parser.add_argument("--backend", default="byteps", help="'gloo' for comparison")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="cuda: one GPU per process (LOCAL_RANK); auto: cuda when available")
    return parser.parse_args()


def digits():
    """8x8 images scaled to [0, 1], split 80/20 with a fixed seed (same on every rank)."""
    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(data.target, dtype=torch.long)
    train_idx, test_idx = train_test_split(range(len(labels)), test_size=0.2, random_state=0,
                                           stratify=labels.numpy())
    return (TensorDataset(images[train_idx], labels[train_idx]),
            TensorDataset(images[test_idx], labels[test_idx]))


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))


@torch.no_grad()
def accuracy(model, dataset, device):
    """Fraction correct over the whole test set; each rank scores its shard, counts are summed."""
    sampler = DistributedSampler(dataset, shuffle=False, drop_last=False)
    correct = total = 0
    model.eval()
    for x, y in DataLoader(dataset, batch_size=256, sampler=sampler):
        x, y = x.to(device), y.to(device)
        correct += (model(x).argmax(1) == y).sum().item()
        total += len(y)
    counts = torch.tensor([correct, total], dtype=torch.int64, device=device)
    dist.all_reduce(counts)
    model.train()
    return counts[0].item() / counts[1].item()


def pick_device(choice):
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)  # before init_process_group: the backend binds this GPU
    return device


def main():
    args = parse_args()
    device = pick_device(args.device)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    train_set, test_set = digits()
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = DDP(small_cnn().to(device), device_ids=[device.index] if device.type == "cuda" else None)
    if args.backend == "byteps" and HOOKS[args.hook] is not None:
        model.register_comm_hook(None, HOOKS[args.hook])
    # Linear scaling: the global batch grows with the number of processes.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * world, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    progress = Progress(args.epochs, len(loader), args.batch_size * world, enabled=rank == 0)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            progress.step(epoch, step, loss.item())
    test_accuracy = accuracy(model, test_set, device)
    if rank == 0:
        print(f"{world} processes ({device.type}), backend {args.backend}, hook {args.hook}: "
              f"test accuracy {test_accuracy:.4f} after {args.epochs} epochs")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
