"""DDP training throughput on GPUs: byteps backend + push_pull hook vs the NCCL backend.

    python benchmarks/gpu_ddp.py                          # 1 machine x all GPUs, both models
    python benchmarks/gpu_ddp.py --models bert_large --steps 10
    python benchmarks/gpu_ddp.py --machines 2             # 2 emulated machines on one host
    python benchmarks/gpu_ddp.py --models vgg16 --hook python   # the Python hook instead of the C++ one
    python benchmarks/gpu_ddp.py --machines 2 --compression none onebit topk:ratio=0.01 --powersgd-ranks 4

Models: torchvision ResNet-50 (224x224 images) and a BERT-large-sized
transformer encoder built from its config (24 layers, d=1024, 16 heads,
ff=4096, 30522-token vocabulary; no weights needed), and torchvision VGG-16
(communication-heavy), all under bf16 autocast
with fp32 parameters and gradients (mixed precision). Each (model, backend)
is its own torchrun job; backends alternate, so drift hits both alike. The
table gives samples/s and byteps / nccl.

--machines 2 splits the GPUs into two groups, each its own torchrun "node"
(own LOCAL_WORLD_SIZE, so byteps runs reduce-scatter -> servers -> all-gather
with one colocated server per group), and tells NCCL they are separate hosts
(NCCL_HOSTID per group), so it uses NVLink inside a group and its socket
transport between groups, as on two real machines.

--shaped RATE (with --machines M, as root) puts each machine in its own
network namespace on a bridge (tests/support/netns.py), with M dedicated CPU
server hosts and a scheduler host, every link shaped to RATE each way (tc
tbf; "none" for namespaces without shaping). byteps: reduce-scatter over
NVLink, slices to the servers over the shaped links, all-gather. NCCL: told
the machines are separate hosts (NCCL_HOSTID per machine, NCCL_SOCKET_IFNAME
the namespace's link), so NVLink inside a machine and sockets between them.
The GPU machine has no iproute2: scripts/gpu_netns_tools.sh unpacks the
carried Debian packages and puts `ip` and `tc` on PATH.

    sudo python benchmarks/gpu_ddp.py --machines 2 --shaped 25gbit --models bert_large

--compression SPEC... runs byteps once per compressor (issue 39: "none",
"onebit", "topk:ratio=0.01", "randomk:ratio=0.01", ...; the DDP hook
compresses each bucket, on the GPU), and --powersgd-ranks R... adds torch's
PowerSGD hook on the NCCL backend at each matrix rank R (the peer a PyTorch
user with a slow link would pick), each its own run beside NCCL's variants.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
from tests.support.ports import free_port  # noqa: E402


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
    if model_name in ("resnet50", "vgg16"):
        import torchvision
        model = getattr(torchvision.models, model_name)()
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


# VGG-16: 138M parameters (553 MB of fp32 gradients, 74% of them in the first
# fully connected layer) for little compute: a steady communication-heavy case.
DEFAULT_BATCH = {"resnet50": 128, "bert_large": 8, "vgg16": 64}


class GpuStepMarks:
    """Where a step's time goes on the GPU's own clock (CUDA events on the
    compute stream), not the host's: NCCL's host runs ahead of its GPU while
    byteps's host waits for the hook's futures, so host timestamps compare
    unlike things (issue 38). Per step: forward (zero_grad to the loss),
    backward compute (the loss to the first parameter's gradient, the last
    one autograd makes), the communication tail (that gradient to the end of
    backward(), where DDP's finalize makes the stream wait for every bucket),
    the update, and the gap to the next step's first kernel (the host's
    launch latency after a wait)."""

    def __init__(self, module, enabled):
        import torch
        self.torch = torch
        self.enabled = enabled
        self.steps = []
        first = next(p for p in module.parameters() if p.requires_grad)
        first.register_post_accumulate_grad_hook(lambda p: self.mark("last_grad"))

    def mark(self, what):
        if not self.enabled:
            return
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        if what == "start":
            if self.steps:
                self.steps[-1]["next"] = event
            self.steps.append({})
        if self.steps:
            self.steps[-1][what] = event

    def summary(self):
        import statistics
        spans = {"forward": ("start", "forward"), "backward_compute": ("forward", "last_grad"),
                 "comm_tail": ("last_grad", "backward"), "update": ("backward", "update"),
                 "gap": ("update", "next"), "step": ("start", "next")}
        out = {}
        for name, (a, b) in spans.items():
            values = [s[a].elapsed_time(s[b]) for s in self.steps if a in s and b in s]
            out[name + "_ms"] = round(statistics.median(values), 2) if values else None
        return out


def worker(args):
    """One rank of one configuration (run by torchrun)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local = int(os.environ["LOCAL_RANK"])
    # Modulo: --gpus above the device count puts several processes on one GPU
    # (byteps only: NCCL refuses two ranks on one device).
    gpu = (int(os.environ.get("BENCH_GPU_OFFSET", "0")) + local) % torch.cuda.device_count()
    torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu)
    if args.backend == "byteps":
        import byteps_native.torch as bps
        if os.environ.get("DMLC_ROLE") == "worker":
            bps.init()  # dedicated servers: rendezvous at the scheduler (DMLC_* env)
        dist.init_process_group("byteps")
    else:
        dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    batch = args.batch or DEFAULT_BATCH[args.model]
    model, x, loss_fn = make(args.model, batch, device)
    model = DDP(model.to(device), device_ids=[gpu])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    if args.backend == "byteps" and args.cross_barrier:
        # DDP's own reduction off; each parameter updated as its sum arrives,
        # the next forward waiting per module (docs/cross_barrier.md).
        optimizer = bps.CrossBarrier(model, optimizer, num_steps=None)
    elif args.backend == "byteps" and args.hook == "cpp":
        # runs inside DDP's Reducer: no Python per bucket
        bps.register_push_pull_hook(model, compression=None if args.compress == "none" else args.compress)
    elif args.backend == "byteps":
        model.register_comm_hook(bps.PushPullHookState(compression=None if args.compress == "none" else args.compress),
                                 bps.push_pull_hook)
    elif args.powersgd_rank:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
        # Compression from step 2 on (the warm-up steps cover the switch),
        # with error feedback and warm start: torch's recommended settings.
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        model.register_comm_hook(state, powersgd.powerSGD_hook)
    marks = GpuStepMarks(model.module, enabled=False)

    def step():
        marks.mark("start")
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss = loss_fn(out.float())
        marks.mark("forward")
        loss.backward()
        marks.mark("backward")
        optimizer.step()
        marks.mark("update")

    for _ in range(args.warmup):
        step()
    if args.cross_barrier and os.environ.get("BENCH_FLAT_PRIORITY") == "1":
        # The benchmark's own knob (as cross_barrier.py's cb@flat): every
        # priority equal, so the window sends in submission order (issue 38,
        # item 3: priorities on and off under cross-barrier).
        for slot in optimizer._cb_slots.values():
            slot.priority = 0
    # Every backend starts and ends the window idle: cross-barrier's last
    # warm-up updates land before it, its last step's updates inside it (so
    # the window holds one fill and one drain of its pipeline, amortised over
    # --steps; the GPU clock's median step is the steady period).
    if hasattr(optimizer, "wait_for_updates"):
        optimizer.wait_for_updates()
    torch.cuda.synchronize()
    dist.barrier()
    marks.enabled = True
    engine_before = {}
    if args.backend == "byteps":
        import byteps_native.core as core
        engine_before = core.stats()
    window_start = time.monotonic()  # one clock in every namespace: the link sampler's window
    start = time.perf_counter()
    step_starts = []  # host clock at each step's start: where the link sat idle inside a step
    for _ in range(args.steps):
        step_starts.append(time.monotonic())
        step()
    if hasattr(optimizer, "wait_for_updates"):
        # Not synchronize(): after step() there is no gradient of the next
        # step to sum (it once pushed a round of zeros here, timed).
        optimizer.wait_for_updates()
    marks.mark("start")  # the next step's start closes the last one's gap
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    window_end = time.monotonic()
    step_starts.append(window_end)
    dist.barrier()
    stats, pacing = {}, {}
    if args.backend == "byteps":
        import byteps_native.core as core
        engine_after = core.stats()
        stats = engine_after.get("device", {})
        # Whether the credit window held ready pushes back (its stall per
        # step) and how long a push waited for its server's receipt.
        receipts = engine_after.get("receipts", 0) - engine_before.get("receipts", 0)
        pacing = {"credit_stall_ms_per_step": 1000 * (engine_after.get("credit_stall_seconds", 0) -
                                                      engine_before.get("credit_stall_seconds", 0)) / args.steps,
                  "receipt_ms_mean": 1000 * (engine_after.get("receipt_seconds", 0) -
                                             engine_before.get("receipt_seconds", 0)) / max(receipts, 1)}
    if dist.get_rank() == 0 or args.backend == "byteps":  # every byteps rank: staging per machine
        params = sum(p.numel() for p in model.parameters())
        sys.stdout.write("RESULT " + json.dumps({
            "rank": dist.get_rank(), "samples_per_s": args.steps * batch * dist.get_world_size() / elapsed,
            "step_ms": 1000 * elapsed / args.steps, "params": params, "batch": batch,
            "gradient_bytes": params * 4, "pinned_staging_bytes": stats.get("pinned_staging_bytes", 0),
            "window": [window_start, window_end], "step_starts": step_starts,
            "gpu_clock": marks.summary(), "pacing": pacing}) + "\n")
        sys.stdout.flush()  # one write per line: ranks share the pipe
    dist.destroy_process_group()
    if args.backend == "byteps" and os.environ.get("DMLC_ROLE") == "worker":
        bps.shutdown()  # an orderly goodbye to the dedicated servers



def engine_timeout():
    """The engine's failure clock for the runs: BYTEPS_TIMEOUT when set (the
    device runs use 30 s), else 120 s."""
    return int(float(os.environ.get("BYTEPS_TIMEOUT") or 120))


# Every worker process: NVLink multicast off (shared hosts), the repo importable.
WORKER_ENV = {"OMP_NUM_THREADS": "4", "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
              "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1",
              "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}


# NCCL's socket transport tuned for fast links (issue 14's "NCCL tuned"):
# more threads and sockets per peer than its defaults.
NCCL_TUNED_ENV = {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}
# The strongest peer decides (issue 26): NCCL's variants, each its own run;
# byteps is reported against the best of them. At two machines the tree is a
# hierarchical all-reduce moving the parameter servers' bytes per machine.
NCCL_VARIANTS = {
    "default": {},
    "tuned": NCCL_TUNED_ENV,
    "tree": {"NCCL_ALGO": "allreduce:tree"},
    "ring": {"NCCL_ALGO": "allreduce:ring"},
    "tree_tuned": dict(NCCL_TUNED_ENV, NCCL_ALGO="allreduce:tree"),
}


def is_byteps(backend):
    """"byteps" or "byteps:SPEC" (a compressed run)."""
    return backend.split(":", 1)[0] == "byteps"


def _backend_env(backend, args):
    """Extra environment of one run: an NCCL variant's variables, or --byteps-env."""
    if backend.startswith("nccl:"):
        return dict(NCCL_VARIANTS[backend[len("nccl:"):]])
    if is_byteps(backend):
        return dict(kv.split("=", 1) for kv in args.byteps_env)
    return {}


def _worker_args(model, backend, args):
    extra = ["--cross-barrier"] if args.cross_barrier else []
    if is_byteps(backend):
        extra += ["--compress", backend.split(":", 1)[1] if ":" in backend else "none"]
        backend = "byteps"
    elif backend.startswith("powersgd:"):
        extra += ["--powersgd-rank", backend.split(":", 1)[1]]
        backend = "nccl"
    backend = "nccl" if backend.startswith("nccl") else backend
    return [os.path.abspath(__file__), "--worker", "--model", model, "--backend", backend,
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch),
            "--hook", args.hook] + extra


def _summarize(outputs, machines, per_machine_gpus):
    """Rank 0's RESULT line, plus the pinned staging summed per machine over every rank's line."""
    results = []
    for out in outputs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                try:
                    results.append(json.loads(line[len("RESULT "):]))
                except ValueError:
                    pass  # a line garbled by another rank's output
    head = next((r for r in results if r["rank"] == 0), None)
    if head is None:
        return None
    per_machine = [0] * machines
    for r in results:
        per_machine[r["rank"] // per_machine_gpus] += r["pinned_staging_bytes"]
    head["pinned_staging_bytes_per_machine"] = per_machine
    return head


def run_config(model, backend, args, gpus):
    env = dict(os.environ, **WORKER_ENV)
    per_machine = gpus // args.machines
    port = free_port()
    procs = []
    for m in range(args.machines):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.machines), "--node_rank", str(m),
               "--nproc_per_node", str(per_machine), "--master_addr", "127.0.0.1", "--master_port", str(port),
               *_worker_args(model, backend, args)]
        menv = dict(env, BENCH_GPU_OFFSET=str(m * per_machine), **_backend_env(backend, args))
        if args.machines > 1:
            menv["NCCL_HOSTID"] = f"bench-machine-{m}"
        procs.append(subprocess.Popen(cmd, env=menv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs, errors = [], []
    for p in procs:
        try:
            out, err = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        outputs.append(out)
        if p.returncode != 0:
            errors.append(err[-4000:])
    head = _summarize(outputs, args.machines, per_machine)
    if errors or head is None:
        raise RuntimeError(f"{backend} {model} failed:\n" + "\n".join(errors))
    return head


def run_config_shaped(cluster, model, backend, args, gpus):
    """One (model, backend) on emulated machines: hosts 0..M-1 machines, M..2M-1 servers, 2M the scheduler."""
    import secrets
    M, L = args.machines, gpus // args.machines
    machines, servers, sched = cluster.hosts[:M], cluster.hosts[M:2 * M], cluster.hosts[2 * M]
    port = 21000 + run_config_shaped.jobs
    run_config_shaped.jobs += 1
    dmlc = dict(WORKER_ENV, DMLC_PS_ROOT_URI=sched.address, DMLC_PS_ROOT_PORT=port, DMLC_NUM_WORKER=M,
                DMLC_NUM_SERVER=M, DMLC_INTERFACE="eth0", BYTEPS_JOB_TOKEN=secrets.token_hex(16),
                BYTEPS_JOB_ID=f"{cluster.tag}-{port}", BYTEPS_TIMEOUT=engine_timeout())
    others, workers = [], []
    if is_byteps(backend):
        others.append(cluster.start(sched, f"{port}-scheduler", [sys.executable, "-m", "byteps_native.scheduler"],
                                    dict(dmlc, DMLC_ROLE="scheduler")))
        for s, host in enumerate(servers):
            others.append(cluster.start(host, f"{port}-server{s}", [sys.executable, "-m", "byteps_native.server"],
                                        dict(dmlc, DMLC_ROLE="server", **_backend_env(backend, args))))
    for m, host in enumerate(machines):
        for local in range(L):
            env = dict(WORKER_ENV, RANK=m * L + local, WORLD_SIZE=M * L, LOCAL_RANK=local, LOCAL_WORLD_SIZE=L,
                       MASTER_ADDR=machines[0].address, MASTER_PORT=port + 1000, BENCH_GPU_OFFSET=m * L)
            # Each machine is its own namespace with its own loopback: every
            # socket between machines must use eth0. NCCL (the NCCL backend,
            # and the byteps backend's NCCL delegate for DDP's broadcasts)
            # must also know the machines are separate hosts, else it tries
            # shared-memory paths across namespaces; the byteps backend's gloo
            # delegate would otherwise bind to 127.0.0.1 (connection refused).
            env.update(NCCL_HOSTID=f"bench-machine-{m}", NCCL_SOCKET_IFNAME="eth0", NCCL_IB_DISABLE=1,
                       GLOO_SOCKET_IFNAME="eth0")
            if is_byteps(backend):
                env.update(dmlc, DMLC_ROLE="worker", DMLC_WORKER_ID=m, BYTEPS_LOCAL_RANK=local,
                           BYTEPS_LOCAL_SIZE=L)
            env.update(_backend_env(backend, args))
            workers.append(cluster.start(host, f"{port}-{backend.replace(':', '_')}-m{m}g{local}",
                                         [sys.executable, *_worker_args(model, backend, args)], env))
    before = cluster.link_stats()
    samples = cluster.sample_links(0.005)
    try:
        cluster.wait(workers, timeout=args.timeout, watch=others)
        cluster.wait(others, timeout=60)
    finally:
        for p in workers + others:
            p.stop()
        samples.stop()
    after = cluster.link_stats()
    head = _summarize([p.output() for p in workers], M, L)
    if head is None:
        raise RuntimeError(f"{backend} {model} printed no result:\n" + workers[0].output()[-4000:])
    # Bytes each machine's link carried per timed+warmup step, each way: the arithmetic's S vs 1.5 S.
    steps = args.steps + args.warmup
    head["machine_tx_bytes_per_step"] = [(after[h.name][0] - before[h.name][0]) / steps for h in machines]
    head["machine_rx_bytes_per_step"] = [(after[h.name][1] - before[h.name][1]) / steps for h in machines]
    # How busy each machine's link was over rank 0's timed steps (issue 26):
    # utilisation and the share of 5 ms intervals below 5% of the rate.
    window = head.get("window") or [None, None]
    links = samples.summary(window[0], window[1])
    head["machine_links"] = {h.name: links.get(h.name) for h in machines}
    # Inside each step (rank 0's step boundaries): when the link started and
    # stopped carrying bytes, i.e. what the forward pass, the backward's first
    # buckets and the tail after the last answer cost.
    head["machine_step_profile"] = {h.name: samples.step_profile(h.name, head.get("step_starts") or [])
                                    for h in machines}
    return head


run_config_shaped.jobs = 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=["resnet50", "bert_large", "vgg16"],
                        default=["resnet50", "bert_large"])
    parser.add_argument("--hook", choices=["cpp", "python"], default="cpp",
                        help="byteps DDP hook: register_push_pull_hook (C++) or the Python push_pull_hook")
    parser.add_argument("--gpus", type=int, default=0, help="default: all visible")
    parser.add_argument("--cross-barrier", action="store_true",
                        help="byteps trains with CrossBarrier(DDP model) instead of the DDP hook (issue 38)")
    parser.add_argument("--machines", type=int, default=1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--batch", type=int, default=0, help="per GPU; default 128 (ResNet-50), 8 x 512 tokens (BERT)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating nccl/byteps runs per model")
    parser.add_argument("--byteps-only", action="store_true", help="skip the NCCL runs (e.g. GPUs shared)")
    parser.add_argument("--nccl-variants", default="default",
                        help="comma-separated NCCL runs per repeat, each its own job: " + ", ".join(
                            f"{k} ({' '.join(f'{a}={b}' for a, b in v.items()) or 'no variables'})"
                            for k, v in NCCL_VARIANTS.items()) + "; byteps is compared with the best")
    parser.add_argument("--nccl-tuned", action="store_true", help="shorthand for --nccl-variants default,tuned")
    parser.add_argument("--ceiling", action="store_true", help="with --shaped: measure the path's own ceiling "
                        "(4 plain TCP flows machine 0 -> server host 0) before the runs")
    parser.add_argument("--byteps-env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment for the byteps workers and servers (repeatable)")
    parser.add_argument("--shaped", metavar="RATE", help="emulated machines in network namespaces, links "
                        "shaped to RATE (tc syntax, e.g. 25gbit; 'none' = namespaces, no shaping); needs root")
    parser.add_argument("--burst", default="32mbit", help="tbf bucket with --shaped (>= rate/1000)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds one (model, backend) run may take; default 600, or 4 x BYTEPS_TIMEOUT "
                             "(at least 120) when that is set, so a hang costs what the engine's own clock says")
    parser.add_argument("--logdir", help="with --shaped: keep every process's log here (default: only on failure)")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--compression", nargs="+", default=["none"], metavar="SPEC",
                        help="byteps runs, one per compressor (issue 39): none, onebit, topk:ratio=0.01, ...")
    parser.add_argument("--powersgd-ranks", nargs="*", type=int, default=[], metavar="R",
                        help="torch's PowerSGD hook on NCCL at these matrix ranks, each its own run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compress", default="none", help=argparse.SUPPRESS)
    parser.add_argument("--powersgd-rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.timeout is None:
        args.timeout = max(120, 4 * engine_timeout()) if os.environ.get("BYTEPS_TIMEOUT") else 600
    if args.worker:
        return worker(args)

    import torch
    gpus = args.gpus or torch.cuda.device_count()
    print(f"DDP on {gpus} x {torch.cuda.get_device_name(0)} as {args.machines} machine(s), bf16 autocast, "
          f"{args.steps} timed steps after {args.warmup}, {args.hook} hook; torch {torch.__version__}, NCCL "
          f"{'.'.join(map(str, torch.cuda.nccl.version()))}", flush=True)
    print(f"{'model':<11} {'params':>8} {'batch/GPU':>9} {'nccl samples/s':>15} {'byteps samples/s':>17} "
          f"{'byteps/nccl':>11} {'pinned MB/machine':>17}", flush=True)
    rows = []
    cluster = None
    if args.shaped:
        from tests.support.netns import Cluster, install_sigterm_handler, remove_stale_namespaces
        install_sigterm_handler()
        remove_stale_namespaces()
        rate = None if args.shaped == "none" else args.shaped
        cluster = Cluster(hosts=2 * args.machines + 1, rate=rate, burst=args.burst, logdir=args.logdir,
                          keep_logs=True if args.logdir else None)
        cluster.setup()
        print(f"shaped: {args.machines} machine namespaces + {args.machines} server hosts, every link "
              f"{args.shaped} each way (tbf burst {args.burst})", flush=True)
    variants = [v for v in args.nccl_variants.split(",") if v]
    if args.nccl_tuned and "tuned" not in variants:
        variants.append("tuned")
    unknown = [v for v in variants if v not in NCCL_VARIANTS]
    if unknown:
        parser.error(f"unknown NCCL variant(s) {unknown}; known: {sorted(NCCL_VARIANTS)}")
    if args.byteps_only:
        variants = []
    try:
        if cluster and args.ceiling:
            ceiling = cluster.tcp_ceiling(cluster.hosts[0], cluster.hosts[args.machines], flows=4)
            print(f"path ceiling (4 TCP flows, machine 0 -> server host 0): {ceiling:.2f} GB/s", flush=True)
            rows.append({"path_ceiling_gb_s": ceiling, "flows": 4})
        for model in args.models:
            for rep in range(args.repeats):
                run = (lambda b: run_config_shaped(cluster, model, b, args, gpus)) if cluster else \
                    (lambda b: run_config(model, b, args, gpus))
                nccl = {}
                for v in variants:  # each printed at once: a failing byteps run must not lose it
                    nccl[v] = run("nccl:" + v)
                    print(f"{'':<11} nccl {v}: {nccl[v]['samples_per_s']:.1f} samples/s", flush=True)
                powersgd = {}
                for r in args.powersgd_ranks:
                    powersgd[r] = run(f"powersgd:{r}")
                    print(f"{'':<11} nccl + PowerSGD rank {r}: {powersgd[r]['samples_per_s']:.1f} samples/s", flush=True)
                compressed = {}
                for spec in args.compression:
                    compressed[spec] = run("byteps" if spec == "none" else f"byteps:{spec}")
                byteps = compressed[args.compression[0]]
                best = max(nccl, key=lambda v: nccl[v]["samples_per_s"]) if nccl else None
                if len(compressed) > 1 or powersgd:
                    best_powersgd = max(powersgd.values(), key=lambda r: r["samples_per_s"]) if powersgd else None
                    for spec, r in compressed.items():
                        vs = [f"NCCL best {r['samples_per_s'] / nccl[best]['samples_per_s']:.3f}"] if best else []
                        if best_powersgd:
                            vs.append(f"PowerSGD best {r['samples_per_s'] / best_powersgd['samples_per_s']:.3f}")
                        print(f"{'':<11} byteps {spec}: {r['samples_per_s']:.1f} samples/s"
                              + (f" ({', '.join(vs)})" if vs else ""), flush=True)
                ratio = byteps["samples_per_s"] / nccl[best]["samples_per_s"] if best else float("nan")
                pinned = max(byteps["pinned_staging_bytes_per_machine"]) / 1e6
                print(f"{model:<11} {byteps['params'] / 1e6:>7.1f}M {byteps['batch']:>9} "
                      f"{nccl[best]['samples_per_s'] if best else float('nan'):>15.1f} "
                      f"{byteps['samples_per_s']:>17.1f} {ratio:>11.3f} {pinned:>17.1f}", flush=True)
                if best:
                    print(f"{'':<11} byteps / nccl: " + ", ".join(
                        f"{v} {byteps['samples_per_s'] / r['samples_per_s']:.3f}" for v, r in nccl.items())
                        + f"; best NCCL variant: {best}", flush=True)
                runs = dict({f"nccl {v}": r for v, r in nccl.items()},
                            **{f"nccl powersgd {k}": r for k, r in powersgd.items()},
                            **{("byteps" if s == args.compression[0] else f"byteps {s}"): r
                               for s, r in compressed.items()})
                if cluster:
                    # Per machine, each way: link bytes per step x steps per second.
                    def rate(r):
                        return max(r["machine_tx_bytes_per_step"]) / r["step_ms"] / 1e6
                    print(f"{'':<11} link GB/s per machine (tx): " +
                          ", ".join(f"{k} {rate(r):.2f}" for k, r in runs.items()), flush=True)
                    print(f"{'':<11} link GB/step per machine (tx, rx): " + "; ".join(
                        f"{k} {max(r['machine_tx_bytes_per_step']) / 1e9:.3f}, "
                        f"{max(r['machine_rx_bytes_per_step']) / 1e9:.3f}" for k, r in runs.items())
                        + f"; gradient {byteps['gradient_bytes'] / 1e9:.3f} GB", flush=True)

                    def busy(r):  # the busiest machine's upload over the timed steps
                        links = [v["upload"] for v in r.get("machine_links", {}).values() if v]
                        if not links or links[0]["utilisation"] is None:
                            return "n/a"
                        top = max(links, key=lambda u: u["utilisation"])
                        return f"{top['utilisation']:.0%} used, {top['idle_share']:.0%} of 5 ms idle"
                    print(f"{'':<11} link upload (busiest machine): " +
                          "; ".join(f"{k} {busy(r)}" for k, r in runs.items()), flush=True)

                    def inside(r):  # machine 0's median step: idle before the first and after the last bytes
                        prof = next(iter(r.get("machine_step_profile", {}).values()), None)
                        if not prof:
                            return "n/a"
                        up, down = prof["upload"], prof["download"]
                        return (f"step {r['step_ms']:.0f} ms: upload {up['utilisation']:.0%}, idle "
                                f"{1000 * up['lead_idle_s']:.0f} ms before its first bytes; last answer to step "
                                f"end {1000 * down['tail_idle_s']:.0f} ms")
                    for k, r in runs.items():
                        print(f"{'':<11} inside a step, {k}: {inside(r)}", flush=True)
                for k, r in dict({f"nccl {v}": r for v, r in nccl.items()}, byteps=byteps).items():
                    g = r.get("gpu_clock") or {}
                    print(f"{'':<11} GPU clock, {k} (median ms): " + ", ".join(
                        f"{n[:-3]} {g[n]}" for n in ("forward_ms", "backward_compute_ms", "comm_tail_ms",
                                                      "update_ms", "gap_ms", "step_ms") if g.get(n) is not None),
                          flush=True)

                def steady(r):  # samples/s at the GPU clock's median step: no pipeline fill or drain
                    g = r.get("gpu_clock") or {}
                    return r["samples_per_s"] * r["step_ms"] / g["step_ms"] if g.get("step_ms") else None
                steadies = {k: steady(r) for k, r in dict({f"nccl {v}": r for v, r in nccl.items()},
                                                          byteps=byteps).items()}
                if all(steadies.values()):
                    best_steady = max((s for k, s in steadies.items() if k != "byteps"), default=None)
                    print(f"{'':<11} steady samples/s (GPU clock's median step): " +
                          ", ".join(f"{k} {s:.1f}" for k, s in steadies.items()) +
                          (f"; byteps / NCCL best {steadies['byteps'] / best_steady:.3f}" if best_steady else ""),
                          flush=True)
                    byteps["steady_samples_per_s"] = steadies["byteps"]
                    for v in nccl:
                        nccl[v]["steady_samples_per_s"] = steadies[f"nccl {v}"]
                pacing = byteps.get("pacing") or {}
                if pacing:
                    print(f"{'':<11} byteps pacing (rank 0): credit window stalled "
                          f"{pacing['credit_stall_ms_per_step']:.1f} ms a step; receipt "
                          f"{pacing['receipt_ms_mean']:.2f} ms after admission (mean)", flush=True)
                print(f"{'':<11} pinned staging per machine {pinned:.1f} MB = "
                      f"{pinned * 1e6 / (byteps['gradient_bytes'] or 1):.3f} x the gradient bytes", flush=True)
                rows.append({"model": model, "repeat": rep, "hook": args.hook, "gpus": gpus, "machines": args.machines,
                             "shaped": args.shaped, "nccl": nccl, "best_nccl": best, "byteps": byteps, "ratio": ratio,
                             "byteps_env": args.byteps_env, "compressed": compressed, "powersgd": powersgd})
    finally:
        if cluster:
            cluster.teardown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
