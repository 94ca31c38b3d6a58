"""The arithmetic of compression through the servers, in one process, on the
time-to-accuracy task of benchmarks/compression_tta.py: which recipe keeps a
compressor within reach of uncompressed training (issue 29).

Two workers' gradients (the same model, each its own DistributedSampler
shard) are flattened as DDP buckets them (reverse parameter order, a first
bucket closed past 1 MiB, then 25 MiB), cut into BYTEPS_PARTITION_BYTES
slices (by default as the engine cuts them for 2 servers; --slice: fixed
slices), and each slice goes through what the engine does:
on the worker optional momentum (csrc/compression `momentum=`), error
feedback and the compressor; on the server the decompressed sum,
re-compressed (by default with no state, as csrc/server; "_sef" variants
keep server error feedback, server_ef=1; "_exact" the exact sum, as topk's
servers answer by default); the worker decompresses the answer and averages.
--per-tensor runs the codec per parameter inside each slice (onebit's scale
per tensor, as the engine does for declared segments), --mask adds DGC's
momentum factor masking, --seed changes the initial weights and batches.
No network, no engine: minutes on an idle CPU.

    python benchmarks/compression_sim.py --variants byteps onebit onebit_m
"""
import argparse
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, DistributedSampler


# name: (compressor, worker momentum mu, nesterov, optimizer momentum, server)
# server: "recompress" (csrc/server: the sum compressed again, no state),
# "ef" (the server keeps error feedback on the sum, as BytePS's servers with
# an ef_type), "exact" (the sum answered uncompressed: a bound, not a mode).
VARIANTS = {
    "byteps": (None, 0.0, False, 0.9, "exact"),
    "onebit": ("onebit", 0.0, False, 0.9, "recompress"),    # HEAD: EF, the optimizer's momentum
    "onebit_m": ("onebit", 0.9, True, 0.0, "recompress"),   # worker nesterov momentum before EF
    "onebit_mv": ("onebit", 0.9, False, 0.0, "recompress"),  # worker plain momentum before EF
    "onebit_m_sef": ("onebit", 0.9, True, 0.0, "ef"),
    "onebit_m_exact": ("onebit", 0.9, True, 0.0, "exact"),
    "topk": ("topk", 0.0, False, 0.9, "recompress"),
    "topk_m": ("topk", 0.9, True, 0.0, "recompress"),
    "topk_m_sef": ("topk", 0.9, True, 0.0, "ef"),
    "topk_m_exact": ("topk", 0.9, True, 0.0, "exact"),
}


def onebit(x, segments=None):
    if segments:
        return torch.cat([onebit(x[lo:hi]) for lo, hi in segments])
    scale = x.abs().double().mean().float()
    return torch.where(x < 0, -scale, scale)


def topk(x, segments=None, ratio=0.01):
    if segments:
        return torch.cat([topk(x[lo:hi], None, ratio) for lo, hi in segments])
    k = max(1, int(x.numel() * ratio))
    out = torch.zeros_like(x)
    idx = x.abs().topk(k, sorted=False).indices
    out[idx] = x[idx]
    return out


def slice_segments(bounds, lo, size):
    """The parameters' [start, end) inside slice [lo, lo + size), relative to lo."""
    cuts = sorted({0, size} | {b - lo for b in bounds if lo < b < lo + size})
    return list(zip(cuts[:-1], cuts[1:]))


class Worker:
    """One worker's per-slice state: error-feedback residual and momentum."""

    def __init__(self, codec, mu, nesterov, mask=False):
        self.codec, self.mu, self.nesterov, self.mask = codec, mu, nesterov, mask
        self.residual, self.momentum = {}, {}

    def compress(self, key, x, segments=None):
        if self.mu:
            m = self.momentum.setdefault(key, torch.zeros_like(x))
            m.mul_(self.mu).add_(x)
            x = x + self.mu * m if self.nesterov else m.clone()
        e = self.residual.setdefault(key, torch.zeros_like(x))
        c = x + e
        sent = self.codec(c, segments)
        self.residual[key] = c - sent
        if self.mask and self.mu:  # DGC's momentum factor masking
            self.momentum[key][sent != 0] = 0
        return sent


def buckets(params):
    """DDP's bucket assignment (reverse order, first cap 1 MiB, then 25 MiB)."""
    out, cur, size, cap = [], [], 0, 1 << 20
    for p in reversed(params):
        cur.append(p)
        size += p.numel() * 4
        if size >= cap:
            out.append(cur)
            cur, size, cap = [], 0, 25 << 20
    if cur:
        out.append(cur)
    return out


def run(name, args):
    sys.path.insert(0, ".")
    from benchmarks.compression_tta import digits_classifier
    from byteps_native.examples.ddp_digits import digits
    from tests.core.compression_reference import plan_partitions

    kind, mu, nesterov, opt_mom, server = VARIANTS[name]
    server_residual = {}
    codec = {"onebit": onebit, "topk": topk, None: None}[kind]
    torch.manual_seed(args.seed)
    model = digits_classifier(torch, args.width)
    params = list(model.parameters())
    bks = buckets(params)
    train_set, test_set = digits()
    loaders = []
    samplers = []
    for r in range(2):
        s = DistributedSampler(train_set, num_replicas=2, rank=r, shuffle=True, seed=args.seed)
        samplers.append(s)
        loaders.append(DataLoader(train_set, batch_size=args.batch, sampler=s, drop_last=True))
    workers = [Worker(codec, mu, nesterov, args.mask) for _ in range(2)]
    bounds = []
    for b in bks:
        ends, off = [], 0
        for p in b:
            off += p.numel()
            ends.append(off)
        bounds.append(ends)
    opt = torch.optim.SGD(params, lr=args.lr, momentum=opt_mom)
    loss_fn = torch.nn.CrossEntropyLoss()
    test_x, test_y = test_set.tensors
    evals, step = [], 0
    for epoch in range(args.epochs):
        for s in samplers:
            s.set_epoch(epoch)
        for (x0, y0), (x1, y1) in zip(*loaders):
            flats = []
            for x, y in ((x0, y0), (x1, y1)):
                model.zero_grad()
                loss_fn(model(x), y).backward()
                flats.append([torch.cat([p.grad.reshape(-1) for p in b]) for b in bks])
            for bi, b in enumerate(bks):
                n = flats[0][bi].numel()
                avg = torch.empty(n)
                if args.slice:
                    plan = [(lo, min(args.slice, n - lo)) for lo in range(0, n, args.slice)]
                else:
                    plan = plan_partitions(n, args.partition_bytes, 2)
                for lo, size in plan:
                    parts = [f[bi][lo:lo + size] for f in flats]
                    segs = slice_segments(bounds[bi], lo, size) if args.per_tensor else None
                    if codec is None:
                        total = parts[0] + parts[1]
                    else:
                        total = sum(w.compress((bi, lo), p, segs) for w, p in zip(workers, parts))
                        if server == "ef":
                            c = total + server_residual.get((bi, lo), 0)
                            total = codec(c, segs)
                            server_residual[(bi, lo)] = c - total
                        elif server == "recompress":
                            total = codec(total, segs)
                    avg[lo:lo + size] = total / 2
                off = 0
                for p in b:
                    p.grad.copy_(avg[off:off + p.numel()].view_as(p))
                    off += p.numel()
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                model.eval()
                with torch.no_grad():
                    acc = (model(test_x).argmax(1) == test_y).float().mean().item()
                model.train()
                evals.append((step, acc))
    first = next((s for s, a in evals if a >= args.target), None)
    return {"variant": name, "final": evals[-1][1], "steps_to_target": first, "evals": evals}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["byteps", "onebit", "onebit_m"])
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--partition-bytes", type=int, default=4096000, help="BYTEPS_PARTITION_BYTES")
    p.add_argument("--slice", type=int, default=0, help="fixed slices of this many floats instead")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--tag", default="", help="appended to the variant's name in the output")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=8)
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--json", help="append each result as a JSON line")
    p.add_argument("--per-tensor", action="store_true",
                   help="the codec per parameter inside a slice (onebit: a scale per tensor; topk: k per tensor)")
    p.add_argument("--mask", action="store_true", help="DGC's momentum factor masking: sent elements' momentum zeroed")
    p.add_argument("--seed", type=int, default=0, help="initial weights and sampler order")
    args = p.parse_args()
    torch.set_num_threads(1)
    for name in args.variants:
        t0 = time.time()
        r = run(name, args)
        print(f"{name + args.tag:10s} final {r['final']:.4f} steps to {args.target:.0%} {r['steps_to_target']} "
              f"({time.time() - t0:.0f} s)", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
