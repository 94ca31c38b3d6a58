"""DDP training throughput on GPUs: byteps backend + push_pull hook vs the NCCL backend.

    python benchmarks/gpu_ddp.py                          # 1 machine x all GPUs, both models
    python benchmarks/gpu_ddp.py --models bert_large --steps 10
    python benchmarks/gpu_ddp.py --machines 2             # 2 emulated machines on one host

Models: torchvision ResNet-50 (224x224 images) and a BERT-large-sized
transformer encoder built from its config (24 layers, d=1024, 16 heads,
ff=4096, 30522-token vocabulary; no weights needed), both under bf16 autocast
with fp32 parameters and gradients (mixed precision). Each (model, backend)
is its own torchrun job; backends alternate, so drift hits both alike. The
table gives samples/s and byteps / nccl.

--machines 2 splits the GPUs into two groups, each its own torchrun "node"
(own LOCAL_WORLD_SIZE, so byteps runs reduce-scatter -> servers -> all-gather
with one colocated server per group), and tells NCCL they are separate hosts
(NCCL_HOSTID per group), so it uses NVLink inside a group and its socket
transport between groups, as on two real machines.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bert_large():
    import torch
    from torch import nn

    class BertLarge(nn.Module):
        def __init__(self, vocab=30522, d=1024, layers=24, heads=16, ff=4096, max_len=512):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(max_len, d)
            layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            return self.lm_head(self.norm(self.encoder(self.tok(ids) + self.pos(pos))))

    return BertLarge()


def make(model_name, batch, device):
    import torch
    if model_name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50()
        x = torch.randn(batch, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (batch,), device=device)
        loss = lambda out: torch.nn.functional.cross_entropy(out, y)  # noqa: E731
        return model, x, loss
    model = bert_large()
    seq = 512
    x = torch.randint(0, 30522, (batch, seq), device=device)
    y = torch.randint(0, 30522, (batch, seq), device=device)
    loss = lambda out: torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))  # noqa: E731
    return model, x, loss


DEFAULT_BATCH = {"resnet50": 128, "bert_large": 8}


def worker(args):
    """One rank of one configuration (run by torchrun)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local = int(os.environ["LOCAL_RANK"])
    gpu = int(os.environ.get("BENCH_GPU_OFFSET", "0")) + local
    torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu)
    if args.backend == "byteps":
        import byteps_native.torch as bps
        dist.init_process_group("byteps")
    else:
        dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    batch = args.batch or DEFAULT_BATCH[args.model]
    model, x, loss_fn = make(args.model, batch, device)
    model = DDP(model.to(device), device_ids=[gpu])
    if args.backend == "byteps":
        model.register_comm_hook(None, bps.push_pull_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss_fn(out.float()).backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    dist.barrier()
    stats = {}
    if args.backend == "byteps":
        import byteps_native.core as core
        stats = core.stats().get("gpu", {})
    if dist.get_rank() == 0 or args.backend == "byteps":  # every byteps rank: staging per machine
        params = sum(p.numel() for p in model.parameters())
        sys.stdout.write("RESULT " + json.dumps({
            "rank": dist.get_rank(), "samples_per_s": args.steps * batch * dist.get_world_size() / elapsed,
            "step_ms": 1000 * elapsed / args.steps, "params": params, "batch": batch,
            "gradient_bytes": params * 4, "pinned_staging_bytes": stats.get("pinned_staging_bytes", 0)}) + "\n")
        sys.stdout.flush()  # one write per line: ranks share the pipe
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_config(model, backend, args, gpus):
    env = dict(os.environ, OMP_NUM_THREADS="4", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    per_machine = gpus // args.machines
    port = _free_port()
    procs = []
    for m in range(args.machines):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.machines), "--node_rank", str(m),
               "--nproc_per_node", str(per_machine), "--master_addr", "127.0.0.1", "--master_port", str(port),
               os.path.abspath(__file__), "--worker", "--model", model, "--backend", backend,
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch)]
        menv = dict(env, BENCH_GPU_OFFSET=str(m * per_machine))
        if args.machines > 1:
            menv["NCCL_HOSTID"] = f"bench-machine-{m}"
        procs.append(subprocess.Popen(cmd, env=menv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results, errors = [], []
    for p in procs:
        try:
            out, err = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        for line in out.splitlines():
            if line.startswith("RESULT "):
                try:
                    results.append(json.loads(line[len("RESULT "):]))
                except ValueError:
                    pass  # a line garbled by another rank's output
        if p.returncode != 0:
            errors.append(err[-4000:])
    if errors or not results:
        raise RuntimeError(f"{backend} {model} failed:\n" + "\n".join(errors))
    head = next(r for r in results if r["rank"] == 0)
    per_machine = [0] * args.machines
    for r in results:
        per_machine[r["rank"] // (gpus // args.machines)] += r["pinned_staging_bytes"]
    head["pinned_staging_bytes_per_machine"] = per_machine
    return head


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=["resnet50", "bert_large"], default=["resnet50", "bert_large"])
    parser.add_argument("--gpus", type=int, default=0, help="default: all visible")
    parser.add_argument("--machines", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--batch", type=int, default=0, help="per GPU; default 128 (ResNet-50), 8 x 512 tokens (BERT)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating nccl/byteps runs per model")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    import torch
    gpus = args.gpus or torch.cuda.device_count()
    print(f"DDP on {gpus} x {torch.cuda.get_device_name(0)} as {args.machines} machine(s), bf16 autocast, "
          f"{args.steps} timed steps after {args.warmup}; torch {torch.__version__}, NCCL "
          f"{'.'.join(map(str, torch.cuda.nccl.version()))}", flush=True)
    print(f"{'model':<11} {'params':>8} {'batch/GPU':>9} {'nccl samples/s':>15} {'byteps samples/s':>17} "
          f"{'byteps/nccl':>11} {'pinned MB/machine':>17}", flush=True)
    rows = []
    for model in args.models:
        for rep in range(args.repeats):
            nccl = run_config(model, "nccl", args, gpus)
            byteps = run_config(model, "byteps", args, gpus)
            ratio = byteps["samples_per_s"] / nccl["samples_per_s"]
            pinned = max(byteps["pinned_staging_bytes_per_machine"]) / 1e6
            print(f"{model:<11} {nccl['params'] / 1e6:>7.1f}M {nccl['batch']:>9} {nccl['samples_per_s']:>15.1f} "
                  f"{byteps['samples_per_s']:>17.1f} {ratio:>11.3f} {pinned:>17.1f}", flush=True)
            rows.append({"model": model, "repeat": rep, "gpus": gpus, "machines": args.machines, "nccl": nccl,
                         "byteps": byteps, "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
