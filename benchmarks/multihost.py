"""Multi-host benchmark on emulated hosts: byteps (dedicated or colocated servers) vs gloo.

Each of n worker hosts, n dedicated server hosts and one scheduler host is a
network namespace whose link is shaped to --rate in both directions (see
tests/support/netns.py). In the same run, for each n:

  gloo       torch.distributed all_reduce (backend gloo) of --size-mb on the n worker hosts
  dedicated  byteps push_pull of the same tensor, k = n servers on their own hosts
  colocated  byteps push_pull, one server process on each worker host (k = n)

and, with --ddp, DDP training of a large MLP: gloo (default allreduce) vs byteps
(backend 'byteps' + byteps_native.torch.push_pull_hook, dedicated servers).

With --optimizer, Horovod-style training through byteps_native.torch's
DistributedOptimizer of a deep MLP of many small parameters (--opt-width,
--opt-depth), dedicated servers: opt-fused (gradients in groups the engine
fuses, BYTEPS_FUSION_BYTES) vs opt-unfused (BYTEPS_FUSION_BYTES=0: one
push_pull per parameter, the optimizer before issue 40). Each records its
engine operations per step (stats()['ops_completed']).

A ring all-reduce moves 2(n-1)/n * S through every worker link; a PS worker
sends S and receives S (full duplex), so the ideal time ratio gloo/byteps is
2(n-1)/n. Modes are interleaved per repetition so machine noise hits all alike.

    sudo python benchmarks/multihost.py --n 2 4 6 --reps 3 --ddp \
        --json docs/multihost_results.json --plot docs/multihost_throughput.png
    python benchmarks/multihost.py --plot-only docs/multihost_results.json --plot docs/multihost_throughput.png

Workers of each mode are this file run with `--worker <mode>` inside a namespace.
"""
import argparse
import json
import os
import secrets
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

MODES = ("gloo", "dedicated", "colocated")
DDP_MODES = ("ddp-gloo", "ddp-byteps")
OPTIMIZER_MODES = ("opt-unfused", "opt-fused")


# ================================================================ workers (inside a namespace)

def _emit(payload):
    print("RESULT " + json.dumps(payload), flush=True)


def _bench_env():
    e = os.environ
    return int(e["BENCH_BYTES"]), int(e["BENCH_WARMUP"]), int(e["BENCH_ITERS"])


def worker_byteps():
    import numpy as np

    import byteps_native.core as bps

    nbytes, warmup, iters = _bench_env()
    # BENCH_DEVICE=cuda (a --variant on a GPU host): the tensor lives on the
    # GPU, so the same link carries the device path's partitions (their
    # copies to and from pinned staging) instead of the host path's.
    # BENCH_DEVICE_WORKERS=0,2: only those machines' tensors (on a host of one
    # GPU, one machine on it and the others in host memory: no two processes
    # share the GPU; set BYTEPS_PARTITION_BYTES, as host and device tensors
    # are cut differently by default).
    xp = np
    on_device = os.environ.get("BENCH_DEVICE") == "cuda"
    only = os.environ.get("BENCH_DEVICE_WORKERS")
    if on_device and only is not None:
        on_device = os.environ.get("DMLC_WORKER_ID", "0") in only.split(",")
    if on_device:
        import cupy as xp
        xp.cuda.Device(int(os.environ.get("DMLC_WORKER_ID", "0")) % xp.cuda.runtime.getDeviceCount()).use()
    bps.init()
    rank, n = bps.rank(), bps.size()
    x = xp.empty(nbytes // 4, xp.float32)
    token = np.zeros(1, np.float32)
    times = []
    for i in range(warmup + iters):
        x.fill(rank + 1)
        bps.push_pull(token, name="barrier", average=False)
        t0 = time.perf_counter()
        bps.push_pull(x, name="gradient", average=False)
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            times.append(elapsed)
    expected = n * (n + 1) / 2
    ok = bool(x[0] == expected and x[-1] == expected and xp.all(x == expected))
    _emit({"rank": rank, "times": times, "ok": ok, "stats": bps.stats()})
    bps.shutdown()
    return 0 if ok else 1


def _torch_setup():
    import torch
    torch.set_num_threads(1)
    return torch


def worker_gloo():
    torch = _torch_setup()
    import torch.distributed as dist

    nbytes, warmup, iters = _bench_env()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    x = torch.empty(nbytes // 4, dtype=torch.float32)
    times = []
    for i in range(warmup + iters):
        x.fill_(rank + 1)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        elapsed = time.perf_counter() - t0
        if i >= warmup:
            times.append(elapsed)
    expected = n * (n + 1) / 2
    ok = bool(torch.all(x == expected))
    _emit({"rank": rank, "times": times, "ok": ok})
    dist.destroy_process_group()
    return 0 if ok else 1


def build_mlp(torch, width, depth, features):
    layers, dim = [], features
    for _ in range(depth):
        layers += [torch.nn.Linear(dim, width), torch.nn.ReLU()]
        dim = width
    layers.append(torch.nn.Linear(dim, 10))
    return torch.nn.Sequential(*layers)


def worker_ddp(backend):
    torch = _torch_setup()
    import torch.distributed as dist

    _, warmup, iters = _bench_env()
    width, depth, features, batch = (int(os.environ[k]) for k in ("DDP_WIDTH", "DDP_DEPTH", "DDP_FEATURES",
                                                                   "DDP_BATCH"))
    if backend == "byteps":
        import byteps_native.torch as bps
        bps.init()  # rendezvous at the scheduler with the dedicated servers (DMLC_* env)
        dist.init_process_group("byteps")
    else:
        dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # identical initial weights on every rank
    model = build_mlp(torch, width, depth, features)
    params = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if backend == "byteps":
        ddp.register_comm_hook(None, bps.push_pull_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1000 + rank)
    data = torch.randn(batch, features, generator=gen)
    target = torch.randint(0, 10, (batch,), generator=gen)
    step_times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(ddp(data), target)
        loss.backward()  # the comm hook / allreduce runs during backward; DDP waits for it
        opt.step()
        if i >= warmup:
            step_times.append(time.perf_counter() - t0)
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    _emit({"rank": rank, "times": step_times, "params": params, "checksum": checksum, "loss": float(loss.detach()),
           "ok": True})
    dist.destroy_process_group()
    if backend == "byteps":
        bps.shutdown()  # an orderly goodbye: without it the servers see a broken connection and exit 1
    return 0


def worker_optimizer(fused):
    """DistributedOptimizer steps; ops per step from the engine's counters.
    opt-unfused sets BYTEPS_FUSION_BYTES=0 in its environment (Job.start)."""
    torch = _torch_setup()
    import byteps_native.torch as bps

    _, warmup, iters = _bench_env()
    width, depth, features, batch = (int(os.environ[k]) for k in ("OPT_WIDTH", "OPT_DEPTH", "DDP_FEATURES",
                                                                   "DDP_BATCH"))
    bps.init()  # rendezvous at the scheduler with the dedicated servers (DMLC_* env)
    rank, n = bps.rank(), bps.size()
    torch.manual_seed(0)  # identical initial weights on every rank
    model = build_mlp(torch, width, depth, features)
    params = sum(p.numel() for p in model.parameters())
    opt = bps.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    gen = torch.Generator().manual_seed(1000 + rank)
    data = torch.randn(batch, features, generator=gen)
    target = torch.randint(0, 10, (batch,), generator=gen)
    step_times, ops = [], []
    for i in range(warmup + iters):
        before = bps.stats()["ops_completed"]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()  # gradient groups go to the engine as their last gradient is ready
        opt.step()  # waits for every gradient
        if i >= warmup:
            step_times.append(time.perf_counter() - t0)
            ops.append(bps.stats()["ops_completed"] - before)
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    _emit({"rank": rank, "times": step_times, "params": params, "tensors": len(list(model.parameters())),
           "ops_per_step": statistics.median(ops), "fused": fused, "checksum": checksum,
           "loss": float(loss.detach()), "ok": True})
    bps.shutdown()
    return 0


def run_worker(mode):
    if mode == "dedicated" or mode == "colocated":
        return worker_byteps()
    if mode == "gloo":
        return worker_gloo()
    if mode == "ddp-gloo":
        return worker_ddp("gloo")
    if mode == "ddp-byteps":
        return worker_ddp("byteps")
    if mode in OPTIMIZER_MODES:
        return worker_optimizer(mode == "opt-fused")
    raise SystemExit(f"unknown worker mode {mode!r}")


# ================================================================ driver (as root, outside)

class Job:
    """One measurement: processes of a mode on a cluster of n worker hosts.
    Other benchmarks on emulated hosts subclass it (benchmarks/compression_tta.py):
    their own worker script and which of their modes run byteps servers."""

    _port = 20000
    worker_script = os.path.abspath(__file__)  # run as `<script> --worker <mode>` on each worker host
    byteps_modes = ("dedicated", "colocated", "ddp-byteps") + OPTIMIZER_MODES  # modes with a scheduler and servers
    colocated_modes = ("colocated",)  # byteps modes whose servers share the worker hosts

    def __init__(self, cluster, n, mode, args):
        # "dedicated@small" = mode dedicated with the byteps env of variant "small" (--variant).
        mode, _, self.variant = mode.partition("@")
        self.cluster, self.n, self.mode, self.args = cluster, n, mode, args
        Job._port += 1
        self.port = Job._port
        self.token = secrets.token_hex(16)
        self.workers, self.others = [], []

    def worker_hosts(self):
        return self.cluster.hosts[:self.n]

    def server_hosts(self):
        if self.mode in self.colocated_modes:
            return self.cluster.hosts[:self.n]
        return self.cluster.hosts[self.n:2 * self.n]

    def scheduler_host(self):
        return self.cluster.hosts[2 * self.n]

    def common_env(self):
        a = self.args
        return {"BENCH_BYTES": a.size_mb << 20, "BENCH_WARMUP": a.warmup, "BENCH_ITERS": a.iters,
                "DDP_WIDTH": a.ddp_width, "DDP_DEPTH": a.ddp_depth, "DDP_FEATURES": a.ddp_features,
                "DDP_BATCH": a.ddp_batch, "OPT_WIDTH": a.opt_width, "OPT_DEPTH": a.opt_depth,
                "OMP_NUM_THREADS": 1, "PYTHONUNBUFFERED": 1}

    def byteps_env(self, role):
        env = self.common_env()
        env.update(dict(self.args.byteps_env))
        env.update(self.args.variants.get(self.variant, {}))  # the variant's own settings win
        env.update({"DMLC_ROLE": role, "DMLC_PS_ROOT_URI": self.scheduler_host().address,
                    "DMLC_PS_ROOT_PORT": self.port, "DMLC_NUM_WORKER": self.n, "DMLC_NUM_SERVER": self.n,
                    "DMLC_INTERFACE": "eth0", "BYTEPS_JOB_TOKEN": self.token,
                    "BYTEPS_JOB_ID": f"{self.cluster.tag}-{self.port}", "BYTEPS_TIMEOUT": 120})
        if self.mode == "opt-unfused":
            env["BYTEPS_FUSION_BYTES"] = 0  # one push_pull per parameter: the optimizer before fusion
        return env

    def start(self):
        c, py, me = self.cluster, sys.executable, self.worker_script
        worker_mode = self.mode
        uses_byteps = self.mode in self.byteps_modes
        if uses_byteps:
            self.others.append(c.start(self.scheduler_host(), f"{self.port}-scheduler",
                                       [py, "-m", "byteps_native.scheduler"], self.byteps_env("scheduler")))
            for s, host in enumerate(self.server_hosts()):
                self.others.append(c.start(host, f"{self.port}-server{s}", [py, "-m", "byteps_native.server"],
                                           self.byteps_env("server")))
        for w, host in enumerate(self.worker_hosts()):
            if uses_byteps:
                env = self.byteps_env("worker")
                env.update({"DMLC_WORKER_ID": w, "BYTEPS_LOCAL_RANK": 0, "BYTEPS_LOCAL_SIZE": 1})
            else:
                env = self.common_env()
            # torch.distributed rendezvous (gloo, and the byteps process group of DDP).
            env.update({"MASTER_ADDR": self.worker_hosts()[0].address, "MASTER_PORT": self.port + 5000,
                        "RANK": w, "WORLD_SIZE": self.n, "LOCAL_RANK": 0, "LOCAL_WORLD_SIZE": 1,
                        "GLOO_SOCKET_IFNAME": "eth0"})
            self.workers.append(c.start(host, f"{self.port}-{self.mode}-w{w}", [py, me, "--worker", worker_mode],
                                        env))

    def finish(self, timeout):
        try:
            self.cluster.wait(self.workers, timeout=timeout, watch=self.others)
            self.cluster.wait(self.others, timeout=30)
        finally:
            for p in self.workers + self.others:
                p.stop()
        results = []
        for p in self.workers:
            lines = [l for l in p.output().splitlines() if l.startswith("RESULT ")]
            if not lines:
                raise RuntimeError(f"{p.name} printed no result:\n{p.output()[-3000:]}")
            results.append(json.loads(lines[-1][7:]))
        return results


def measure(cluster, n, mode, args):
    before, drops_before = cluster.link_stats(), cluster.qdisc_drops()
    job = Job(cluster, n, mode, args)
    load = os.getloadavg()  # the host is shared: record how busy it was when this job started
    started = time.monotonic()
    job.start()
    results = job.finish(timeout=args.job_timeout)
    after, drops_after = cluster.link_stats(), cluster.qdisc_drops()
    drops = {h: (drops_after[h][0] - drops_before[h][0], drops_after[h][1] - drops_before[h][1]) for h in after}
    if not all(r["ok"] for r in results):
        raise RuntimeError(f"{mode} n={n}: wrong result on ranks {[r['rank'] for r in results if not r['ok']]}")
    # Per iteration the slowest worker decides; report the median iteration.
    per_iter = [max(r["times"][i] for r in results) for i in range(len(results[0]["times"]))]
    out = {"n": n, "mode": mode, "seconds": statistics.median(per_iter), "iterations": per_iter,
           "wall": time.monotonic() - started, "loadavg_1_5_15": list(load)}
    delta = {h: (after[h][0] - before[h][0], after[h][1] - before[h][1]) for h in after}
    if job.mode in job.byteps_modes:
        out["server_rx_bytes"] = [delta[h.name][1] for h in job.server_hosts()]
        out["server_tx_bytes"] = [delta[h.name][0] for h in job.server_hosts()]
    out["worker_tx_bytes"] = [delta[h.name][0] for h in job.worker_hosts()]
    if all(r.get("stats") for r in results):
        # Each worker's engine counters over the whole job: where its engine
        # thread's time went (passes, device issue) and its credit window.
        out["worker_stats"] = [r["stats"] for r in results]
    # Shaper drops (upload, download) summed over hosts: incast losses show up here.
    out["shaper_drops"] = [sum(d[0] for d in drops.values()), sum(d[1] for d in drops.values())]
    if job.mode.startswith(("ddp", "opt")):
        sums = [r["checksum"] for r in results]
        out["params"] = results[0]["params"]
        out["checksums_equal"] = max(sums) - min(sums) <= 1e-6 * max(1.0, abs(sums[0]))
        out["samples_per_s"] = n * args.ddp_batch / out["seconds"]
    if job.mode.startswith("opt"):
        out["tensors"] = results[0]["tensors"]
        out["ops_per_step"] = results[0]["ops_per_step"]
        out["checksum"] = results[0]["checksum"]
    return out


def run_benchmark(args):
    from tests.support.netns import measure_cells

    modes = list(args.modes) + (list(DDP_MODES) if args.ddp else []) + (list(OPTIMIZER_MODES) if args.optimizer
                                                                         else [])
    modes += [f"{m}@{v}" for v in args.variants for m in ("dedicated", "colocated") if m in args.modes]

    def describe(rec):
        extra = (f" {rec['samples_per_s']:.1f} samples/s" if "samples_per_s" in rec else
                 f" {args.size_mb * 8 * 1.048576 / rec['seconds'] / 1000:.3f} Gbit/s algbw")
        if "ops_per_step" in rec:
            extra += f" {rec['ops_per_step']:g} engine ops/step ({rec['tensors']} tensors)"
        ops = args.warmup + args.iters
        servers = (" server-host rx MB/op " + ",".join(f"{b / ops / 1e6:.1f}" for b in rec["server_rx_bytes"])
                   if "server_rx_bytes" in rec else "")
        engine = ""
        if "worker_stats" in rec:
            # Per worker, over the job: engine busy seconds (longest pass, ms),
            # device issue seconds (longest, ms), credit stall seconds.
            engine = " engine " + " | ".join(
                f"{s.get('engine_pass_seconds', 0):.3f}s({s.get('engine_pass_max_seconds', 0) * 1e3:.1f}ms) "
                f"dev {s.get('device_issue_seconds', 0):.3f}s({s.get('device_issue_max_seconds', 0) * 1e3:.1f}ms) "
                f"stall {s.get('credit_stall_seconds', 0):.3f}s" for s in rec["worker_stats"])
        return (f"n={rec['n']} rep={rec['rep']} {rec['mode']:11s} {rec['seconds']:.3f} s{extra}{servers} "
                f"drops up/down {rec['shaper_drops'][0]}/{rec['shaper_drops'][1]} "
                f"load {rec['loadavg_1_5_15'][0]:.1f}{engine}")

    groups = [(dict(hosts=2 * n + 1, rate=args.rate, burst=args.burst, logdir=args.logdir),
               [{"n": n, "rep": rep, "mode": mode} for rep in range(args.reps) for mode in modes]) for n in args.n]
    records = measure_cells(groups, lambda cluster, cell: measure(cluster, cell["n"], cell["mode"], args), describe)
    return {"config": {k: v for k, v in vars(args).items() if k not in ("func",)}, "records": records,
            "summary": summarize(records, args)}


def summarize(records, args):
    """Median over repetitions per (n, mode), with ratios against gloo and the ideal 2(n-1)/n."""
    summary = {}
    for n in sorted({r["n"] for r in records}):
        row = {}
        for mode in dict.fromkeys(r["mode"] for r in records):
            secs = [r["seconds"] for r in records if r["n"] == n and r["mode"] == mode and "seconds" in r]
            if secs:
                row[mode] = {"median_s": statistics.median(secs), "runs": len(secs), "all_s": secs}
        ideal = 2 * (n - 1) / n
        for mode in row:
            if mode.startswith(("dedicated", "colocated")) and "gloo" in row:
                # Colocated (k = n): each host link carries (n-1)/n S of pushes plus (n-1)/n S of its
                # server's replies, the ring's 2(n-1)/n S: the ideal ratio is 1, not 2(n-1)/n.
                mode_ideal = ideal if mode.startswith("dedicated") else 1.0
                ratio = row["gloo"]["median_s"] / row[mode]["median_s"]
                row[mode].update({"ratio_vs_gloo": ratio, "ideal_ratio": mode_ideal,
                                  "fraction_of_ideal": ratio / mode_ideal})
        if "ddp-byteps" in row and "ddp-gloo" in row:
            row["ddp-byteps"]["speedup_vs_gloo"] = row["ddp-gloo"]["median_s"] / row["ddp-byteps"]["median_s"]
        for mode in ("opt-fused", "opt-unfused"):
            if mode in row:
                row[mode]["ops_per_step"] = statistics.median(
                    r["ops_per_step"] for r in records if r["n"] == n and r["mode"] == mode and "ops_per_step" in r)
        if "opt-fused" in row and "opt-unfused" in row:
            row["opt-fused"]["speedup_vs_unfused"] = row["opt-unfused"]["median_s"] / row["opt-fused"]["median_s"]
        row["ideal_ratio"] = ideal
        summary[str(n)] = row
    return summary


def print_summary(result):
    cfg = result["config"]
    print(f"\n{cfg['size_mb']} MiB push_pull / all_reduce at {cfg['rate']} per host; "
          f"median over {cfg['reps']} runs of the median of {cfg['iters']} iterations")
    print(f"{'n':>2} {'mode':24s} {'seconds':>8} {'Gbit/s':>7} {'vs gloo':>8} {'ideal':>6} {'of ideal':>8}  runs")
    gbits = cfg["size_mb"] * 8 * 1.048576e6 / 1e9
    for n, row in result["summary"].items():
        for mode, m in row.items():
            if not isinstance(m, dict):
                continue
            ratio = f"{m['ratio_vs_gloo']:.2f}x" if "ratio_vs_gloo" in m else (
                f"{m['speedup_vs_gloo']:.2f}x" if "speedup_vs_gloo" in m else (
                    f"{m['speedup_vs_unfused']:.2f}x unf" if "speedup_vs_unfused" in m else ""))
            if "ops_per_step" in m:
                ratio += f" {m['ops_per_step']:g} ops/step"
            frac = f"{m['fraction_of_ideal']:.0%}" if "fraction_of_ideal" in m else ""
            rate = "" if mode.startswith(("ddp", "opt")) else f"{gbits / m['median_s']:.3f}"
            ideal = f"{m['ideal_ratio']:.2f}x" if frac else ""
            runs = " ".join(f"{x:.3f}" for x in m["all_s"])
            print(f"{n:>2} {mode:24s} {m['median_s']:>8.3f} {rate:>7} {ratio:>8} {ideal:>6} {frac:>8}  {runs}")


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg, summary = result["config"], result["summary"]
    ns = sorted(int(n) for n in summary)
    gbits = cfg["size_mb"] * 8 * 1.048576e6 / 1e9
    rate_gbit = _rate_gbit(cfg["rate"])
    has_ddp = any("ddp-gloo" in summary[str(n)] for n in ns)
    fig, axes = plt.subplots(1, 2 if has_ddp else 1, figsize=(11 if has_ddp else 6, 4.2), squeeze=False)
    ax = axes[0][0]
    styles = {"gloo": ("gloo all_reduce (ring)", "o-", "tab:gray"),
              "dedicated": ("byteps, n dedicated servers", "s-", "tab:blue"),
              "colocated": ("byteps, colocated servers", "^-", "tab:orange")}
    for mode in dict.fromkeys(m for n in ns for m in summary[str(n)] if "@" in m):
        base, _, variant = mode.partition("@")
        if base in styles:
            label, marker, color = styles[base]
            styles[mode] = (f"{label} @{variant}", marker.replace("-", "--"), color)
    for mode, (label, marker, color) in styles.items():
        pts = [(n, gbits / summary[str(n)][mode]["median_s"]) for n in ns if mode in summary[str(n)]]
        if pts:
            ax.plot(*zip(*pts), marker, color=color, label=label)
    if rate_gbit:
        ax.plot(ns, [rate_gbit for _ in ns], "--", color="tab:blue", alpha=0.5, label="PS bound S/B")
        ax.plot(ns, [rate_gbit * n / (2 * (n - 1)) for n in ns], ":", color="tab:gray", alpha=0.7,
                label="ring bound S/(2(n-1)/n B)")
    ax.set_xlabel("worker hosts n (k = n servers)")
    ax.set_ylabel("algorithm bandwidth S/t (Gbit/s)")
    ax.set_title(f"{cfg['size_mb']} MiB push_pull vs all_reduce, {cfg['rate']} per host")
    ax.set_xticks(ns)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    if has_ddp:
        ax = axes[0][1]
        for mode, label, marker, color in (("ddp-gloo", "DDP gloo", "o-", "tab:gray"),
                                           ("ddp-byteps", "DDP byteps (push_pull_hook)", "s-", "tab:blue")):
            pts = [(n, n * cfg["ddp_batch"] / summary[str(n)][mode]["median_s"]) for n in ns
                   if mode in summary[str(n)]]
            if pts:
                ax.plot(*zip(*pts), marker, color=color, label=label)
        ax.set_xlabel("worker hosts n")
        ax.set_ylabel("training throughput (samples/s, all workers)")
        params = next((r.get("params") for r in result["records"] if r.get("params")), None)
        ax.set_title(f"DDP, MLP {params / 1e6:.1f}M params" if params else "DDP")
        ax.set_xticks(ns)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def _rate_gbit(rate):
    units = {"gbit": 1.0, "mbit": 1e-3, "kbit": 1e-6}
    for unit, scale in units.items():
        if rate and rate.lower().endswith(unit):
            return float(rate[:-len(unit)]) * scale
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=MODES + DDP_MODES + OPTIMIZER_MODES, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, nargs="+", default=[2, 4, 6], help="worker host counts (k = n servers)")
    p.add_argument("--modes", nargs="*", choices=MODES, default=list(MODES),
                   help="push_pull modes (none: only --ddp / --optimizer)")
    p.add_argument("--ddp", action="store_true", help="also DDP training, gloo vs byteps")
    p.add_argument("--rate", default="1gbit", help="per-host link rate each way (tc syntax)")
    p.add_argument("--burst", default="1mbit", help="tbf bucket (>= 1mbit)")
    p.add_argument("--size-mb", type=int, default=64, help="tensor size in MiB")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--reps", type=int, default=3, help="repetitions of every mode (interleaved)")
    p.add_argument("--optimizer", action="store_true",
                   help="also DistributedOptimizer training, fused vs one push_pull per parameter")
    p.add_argument("--opt-width", type=int, default=256, help="DistributedOptimizer MLP width")
    p.add_argument("--opt-depth", type=int, default=16, help="DistributedOptimizer MLP hidden layers")
    p.add_argument("--ddp-width", type=int, default=4096)
    p.add_argument("--ddp-depth", type=int, default=2, help="hidden layers of width --ddp-width")
    p.add_argument("--ddp-features", type=int, default=2048)
    p.add_argument("--ddp-batch", type=int, default=16)
    p.add_argument("--byteps-env", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="extra env for byteps processes, e.g. --byteps-env BYTEPS_PARTITION_BYTES 1024000")
    p.add_argument("--variant", nargs="+", action="append", default=[], metavar="LABEL K=V",
                   help="also run dedicated/colocated with these byteps env settings, labelled mode@LABEL, "
                        "e.g. --variant p1m BYTEPS_PARTITION_BYTES=1024000")
    p.add_argument("--job-timeout", type=float, default=240)
    p.add_argument("--logdir", help="keep process logs here")
    p.add_argument("--json", help="write all records and the summary here")
    p.add_argument("--plot", help="write the PNG plot here")
    p.add_argument("--plot-only", metavar="JSON", help="re-plot a --json file without measuring")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    args.variants = {v[0]: dict(kv.split("=", 1) for kv in v[1:]) for v in args.variant}
    if args.worker:
        return run_worker(args.worker)
    if args.plot_only:
        with open(args.plot_only) as f:
            result = json.load(f)
        print_summary(result)
        if args.plot:
            plot(result, args.plot)
        return 0
    from tests.support.netns import Cluster
    reason = Cluster.unavailable_reason()
    if reason:
        print(f"multihost benchmark cannot run here: {reason}", file=sys.stderr)
        return 2
    result = run_benchmark(args)
    print_summary(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)
    return 0 if all("error" not in r for r in result["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
