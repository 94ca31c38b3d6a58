"""A Horovod training script ported to byteps: ``hvd`` became ``bps`` and
``allreduce`` became ``push_pull``; nothing else changed. Runs under either launcher:

    torchrun --nproc_per_node 2 -m byteps_native.examples.horovod_style
    bpslaunch --local-workers 2 --servers 1 -- python -m byteps_native.examples.horovod_style
"""
import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
import byteps_native.torch as bps
from byteps_native.examples.progress import Progress


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--fp16-push-pull", action="store_true", help="compress gradients to fp16")
    args = parser.parse_args()

    bps.init()
    torch.manual_seed(bps.rank())  # different on purpose: broadcast_parameters aligns them

    data = load_digits()
    dataset = TensorDataset(torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0,
                            torch.tensor(data.target))
    sampler = DistributedSampler(dataset, num_replicas=bps.size(), rank=bps.rank())
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * bps.size(), momentum=0.9)
    compression = bps.Compression.fp16 if args.fp16_push_pull else bps.Compression.none
    optimizer = bps.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    bps.broadcast_parameters(model.state_dict(), root_rank=0)
    bps.broadcast_optimizer_state(optimizer, root_rank=0)

    progress = Progress(args.epochs, len(loader), args.batch_size * bps.size(), enabled=bps.rank() == 0)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(y), len(y)])
            progress.step(epoch, step, loss.item())
        # Average the epoch's loss over all workers, Horovod style.
        summed = bps.push_pull(total, average=False, name="epoch_loss")
        if bps.rank() == 0:
            print(f"epoch {epoch + 1}: loss {summed[0] / summed[1]:.4f}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
