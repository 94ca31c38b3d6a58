"""DDP training throughput on CPU: byteps backend + push_pull hook vs gloo.

    python benchmarks/ddp.py                       # 2 and 4 processes, both models
    python benchmarks/ddp.py --procs 2 --models mlp --steps 10

For each (processes, model) both backends run the same model, batch and step
count in the same invocation, one after the other; the table gives samples/s
and byteps / gloo. Each configuration is its own torchrun job.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ResidualBlock(nn.Module):
    def __init__(self, channels_in, channels_out, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels_in, channels_out, 3, stride, 1, bias=False), nn.BatchNorm2d(channels_out),
            nn.ReLU(), nn.Conv2d(channels_out, channels_out, 3, 1, 1, bias=False),
            nn.BatchNorm2d(channels_out))
        self.skip = (nn.Identity() if stride == 1 and channels_in == channels_out else
                     nn.Sequential(nn.Conv2d(channels_in, channels_out, 1, stride, bias=False),
                                   nn.BatchNorm2d(channels_out)))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet():
    """ResNet-style, ~2.8M parameters, 3x32x32 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        ResidualBlock(32, 64, 2), ResidualBlock(64, 128, 2), ResidualBlock(128, 256, 2),
        ResidualBlock(256, 256, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))


class TransformerMLP(nn.Module):
    """Two transformer encoder blocks (d=512, ff=2048, ~6.3M parameters) and a head."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.encoder(x).mean(1))


MODELS = {
    "resnet": (resnet, lambda batch: torch.randn(batch, 3, 32, 32)),
    "transformer": (TransformerMLP, lambda batch: torch.randn(batch, 32, 512)),
}


def worker(args):
    """One rank of one configuration (run by torchrun)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import byteps_native.torch as bps

    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    make_model, make_input = MODELS[args.model]
    torch.manual_seed(0)
    model = DDP(make_model())
    if args.backend == "byteps":
        model.register_comm_hook(None, bps.push_pull_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = make_input(args.batch), torch.randint(0, 10, (args.batch,))

    def step():
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if dist.get_rank() == 0:
        params = sum(p.numel() for p in model.parameters())
        print("RESULT " + json.dumps({
            "samples_per_s": args.steps * args.batch * dist.get_world_size() / elapsed,
            "step_ms": 1000 * elapsed / args.steps, "params": params}), flush=True)
    dist.destroy_process_group()


def run_config(procs, model, backend, args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs),
           os.path.abspath(__file__), "--worker", "--model", model, "--backend", backend,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{backend} {model} x{procs} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="per process")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    print(f"DDP on CPU, {os.cpu_count()} cores, batch {args.batch}/process, {args.steps} timed steps "
          f"after {args.warmup} warm-up; torch {torch.__version__}")
    print(f"{'procs':>5} {'model':<12} {'params':>8} {'gloo samples/s':>15} {'byteps samples/s':>17} "
          f"{'byteps/gloo':>11}")
    for procs in args.procs:
        for model in args.models:
            gloo = run_config(procs, model, "gloo", args)
            byteps = run_config(procs, model, "byteps", args)
            print(f"{procs:>5} {model:<12} {gloo['params'] / 1e6:>7.2f}M {gloo['samples_per_s']:>15.1f} "
                  f"{byteps['samples_per_s']:>17.1f} {byteps['samples_per_s'] / gloo['samples_per_s']:>11.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
