"""A Horovod training script on byteps: only the import line changed
(``import horovod.torch as hvd`` -> ``import byteps_native.torch as hvd``); Horovod's
names (allreduce, op=hvd.Sum, ...) and BytePS's (push_pull) both work. Runs under either launcher:

    torchrun --nproc_per_node 2 -m byteps_native.examples.horovod_style
    bpslaunch --local-workers 2 --servers 1 -- python -m byteps_native.examples.horovod_style
"""
import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler
import byteps_native.torch as hvd
from byteps_native.examples.progress import Progress


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--fp16-push-pull", action="store_true", help="compress gradients to fp16")
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(hvd.rank())  # different on purpose: broadcast_parameters aligns them

    data = load_digits()
    dataset = TensorDataset(torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0,
                            torch.tensor(data.target))
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank())
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    compression = hvd.Compression.fp16 if args.fp16_push_pull else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    progress = Progress(args.epochs, len(loader), args.batch_size * hvd.size(), enabled=hvd.rank() == 0)
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
        summed = hvd.allreduce(total, op=hvd.Sum, name="epoch_loss")
        if hvd.rank() == 0:
            print(f"epoch {epoch + 1}: loss {summed[0] / summed[1]:.4f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
