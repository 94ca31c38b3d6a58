"""Cross-barrier vs plain DDP on emulated CPU hosts, priorities on and off (issue 38, item 3).

n worker hosts and n dedicated server hosts (network namespaces on a bridge
shaped to --rate each way, tests/support/netns.py, as benchmarks/multihost.py)
train the same MLP, interleaved per repetition:

  plain          DistributedDataParallel + byteps_native.torch.push_pull_hook: the
                 next forward waits for every bucket (DDP's barrier)
  cb             byteps_native.torch.CrossBarrier(ddp, optimizer): each parameter updated
                 when its own sum arrives, the next forward waiting per layer
  <mode>@nocredit  BYTEPS_SCHEDULING_CREDIT=0: no window, every partition on the
                 wire at once in submission order, so priorities cannot reorder
  cb@flat        cross-barrier with every priority equal (FIFO within the window)
  <mode>@c16     BYTEPS_SCHEDULING_CREDIT=16 (a window of 16 partitions, not 4)
  <mode>@p1m     BYTEPS_PARTITION_BYTES=1024000 (host tensors' default before session 6)

Step time is the time between consecutive step() returns (under cross-barrier
part of a step's wait moves into the next forward, so only the period is
comparable), median over the measured steps of the slowest worker; the
table gives samples/s of all workers and the link use of the worker hosts.
With --trace, also from worker 0's timeline: how long before the step's last
sum the first layer's sum arrived ("lead", ms) -- what cross-barrier can turn
into forward time; priorities are what make it positive.
Needs root (network namespaces).

    python benchmarks/cross_barrier.py --n 2 --reps 3 --json cb.json
"""
import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks.multihost import Job, _rate_gbit, build_mlp  # noqa: E402

MODES = ("plain", "cb")
VARIANTS = {"nocredit": {"BYTEPS_SCHEDULING_CREDIT": "0"}, "flat": {"BENCH_FLAT_PRIORITY": "1"},
            "c16": {"BYTEPS_SCHEDULING_CREDIT": "16"}, "p1m": {"BYTEPS_PARTITION_BYTES": "1024000"}}
DEFAULT_CELLS = ("plain", "cb", "plain@nocredit", "cb@nocredit", "cb@flat")


def worker(mode):
    import torch
    import torch.distributed as dist
    import byteps_native.torch as bps

    torch.set_num_threads(1)
    e = os.environ
    warmup, iters = int(e["BENCH_WARMUP"]), int(e["BENCH_ITERS"])
    width, depth, features, batch = (int(e[k]) for k in ("DDP_WIDTH", "DDP_DEPTH", "DDP_FEATURES", "DDP_BATCH"))
    bps.init()
    dist.init_process_group("byteps")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = build_mlp(torch, width, depth, features)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    if mode == "cb":
        opt = bps.CrossBarrier(ddp, opt, num_steps=warmup + iters)
    else:
        ddp.register_comm_hook(None, bps.push_pull_hook)
    gen = torch.Generator().manual_seed(1000 + rank)
    data = torch.randn(batch, features, generator=gen)
    target = torch.randint(0, 10, (batch,), generator=gen)
    times, last = [], time.perf_counter()
    for i in range(warmup + iters):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(data), target).backward()
        opt.step()
        if i == 0 and mode == "cb" and e.get("BENCH_FLAT_PRIORITY") == "1":
            for slot in opt._cb_slots.values():  # the benchmark's own knob: priorities all equal
                slot.priority = 0
        now = time.perf_counter()
        if i >= warmup:
            times.append(now - last)
        last = now
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    print("RESULT " + json.dumps({"rank": rank, "times": times, "checksum": checksum, "ok": True,
                                  "params": sum(p.numel() for p in model.parameters())}), flush=True)
    if mode == "cb":
        opt.close()
    dist.destroy_process_group()
    bps.shutdown()
    return 0


class TrainingJob(Job):
    worker_script = os.path.abspath(__file__)
    byteps_modes = MODES

    def byteps_env(self, role):
        env = super().byteps_env(role)
        if self.args.trace:  # one timeline directory per job (BYTEPS_TRACE_ON; the engine makes no parents)
            trace_dir = os.path.join(os.path.abspath(self.args.trace),
                                     f"n{self.n}-{self.mode}@{self.variant or 'default'}-{self.port}")
            os.makedirs(trace_dir, exist_ok=True)
            self.trace_dir = trace_dir
            env.update({"BYTEPS_TRACE_ON": "1", "BYTEPS_TRACE_DIR": trace_dir})
        return env

    def common_env(self):
        a = self.args
        return {"BENCH_WARMUP": a.warmup, "BENCH_ITERS": a.iters, "DDP_WIDTH": a.width, "DDP_DEPTH": a.depth,
                "DDP_FEATURES": a.features, "DDP_BATCH": a.batch, "OMP_NUM_THREADS": 1, "PYTHONUNBUFFERED": 1}


def first_layer_lead(trace_dir, mode):
    """From worker 0's timeline: per step, how long before the step's last
    sum the first layer's sum arrived (ms), and the step's communication span
    (first push to last pull, ms). The first layer is what the next forward
    needs first: under cross-barrier the lead is forward time gained."""
    with open(os.path.join(trace_dir, "rank0.json")) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if mode == "cb":
        grads = [e for e in events if e["args"]["tensor"].startswith("CrossBarrier.grad.")]
        first = "CrossBarrier.grad.module.0."
    else:
        grads = [e for e in events if e["args"]["tensor"].startswith("ddp.bucket")]
        # DDP's last bucket holds the first layers (after its rebuild in step 1).
        buckets = {e["args"]["tensor"].split(".")[1] for e in grads}
        first = "ddp." + max(buckets, key=lambda b: int(b[len("bucket"):])) + "."
    rounds = {}
    for e in grads:
        rounds.setdefault(e["args"]["tensor"], {}).setdefault(e["args"]["step"], []).append(e)
    steps = {}
    for by_round in rounds.values():
        for k, r in enumerate(sorted(by_round)):
            steps.setdefault(k, []).extend(by_round[r])
    lead, span = [], []
    for k in sorted(steps)[2:]:  # past DDP's bucket rebuild
        es = steps[k]
        last = max(e["ts"] + e["dur"] for e in es)
        mine = [e["ts"] + e["dur"] for e in es if e["args"]["tensor"].startswith(first)]
        if mine:
            lead.append((last - max(mine)) / 1000)
            span.append((last - min(e["ts"] for e in es)) / 1000)
    return lead, span


def measure(cluster, n, cell, args):
    before = cluster.link_stats()
    job = TrainingJob(cluster, n, cell, args)
    load = os.getloadavg()
    started = time.monotonic()
    job.start()
    results = job.finish(timeout=args.job_timeout)
    after = cluster.link_stats()
    per_step = [max(r["times"][i] for r in results) for i in range(len(results[0]["times"]))]
    sums = [r["checksum"] for r in results]
    seconds = statistics.median(per_step)
    wall = time.monotonic() - started
    tx = [after[h.name][0] - before[h.name][0] for h in job.worker_hosts()]
    steps = args.warmup + args.iters
    rate = _rate_gbit(args.rate)
    # Link use while stepping: bytes a worker host sent per step over what the link carries in a step.
    use = statistics.mean(t / steps * 8 / 1e9 / (seconds * rate) for t in tx) if rate else None
    record = {"n": n, "seconds": seconds, "steps_s": per_step, "samples_per_s": n * args.batch / seconds,
              "link_use": use, "checksums_equal": max(sums) - min(sums) <= 1e-6 * max(1.0, abs(sums[0])),
              "params": results[0]["params"], "wall": wall, "loadavg_1_5_15": list(load)}
    if args.trace:
        lead, span = first_layer_lead(job.trace_dir, job.mode)
        record.update(first_layer_lead_ms=lead, comm_span_ms=span)
    return record


def run(args):
    from tests.support.netns import measure_cells

    def describe(rec):
        use = f" link {rec['link_use']:.0%}" if rec.get("link_use") is not None else ""
        if rec.get("first_layer_lead_ms"):
            use += (f" first layer's sum {statistics.median(rec['first_layer_lead_ms']):.0f} ms before the last"
                    f" (span {statistics.median(rec['comm_span_ms']):.0f} ms)")
        return (f"n={rec['n']} rep={rec['rep']} {rec['cell']:14s} {rec['seconds'] * 1000:8.1f} ms/step "
                f"{rec['samples_per_s']:7.1f} samples/s{use} load {rec['loadavg_1_5_15'][0]:.1f}")

    groups = [(dict(hosts=2 * n + 1, rate=args.rate, burst=args.burst, logdir=args.logdir),
               [{"n": n, "rep": rep, "cell": cell} for rep in range(args.reps) for cell in args.cells])
              for n in args.n]
    records = measure_cells(groups, lambda cluster, c: measure(cluster, c["n"], c["cell"], args), describe)
    return {"config": {k: v for k, v in vars(args).items()}, "records": records}


def print_table(result):
    cfg = result["config"]
    print(f"\nMLP {cfg['features']}->{cfg['depth']}x{cfg['width']}->10, batch {cfg['batch']} per worker, "
          f"{cfg['rate']} per host; median of {cfg['reps']} runs (each the median of {cfg['iters']} steps)")
    print(f"{'n':>2} {'cell':14s} {'ms/step':>8} {'samples/s':>10} {'vs plain':>9} {'link':>5} {'lead':>5}  runs (ms)")
    for n in sorted({r["n"] for r in result["records"]}):
        rows = {}
        for cell in cfg["cells"]:
            recs = [r for r in result["records"] if r["n"] == n and r["cell"] == cell and "seconds" in r]
            if recs:
                leads = [x for r in recs for x in r.get("first_layer_lead_ms", [])]
                rows[cell] = (statistics.median(r["seconds"] for r in recs),
                              statistics.median(r["link_use"] for r in recs) if recs[0]["link_use"] else None,
                              [r["seconds"] for r in recs], statistics.median(leads) if leads else None)
        base = rows.get("plain", (None,))[0]
        for cell, (s, use, runs, lead) in rows.items():
            vs = f"{base / s:.3f}x" if base else ""
            use_s = f"{use:.0%}" if use is not None else ""
            lead_s = f"{lead:.0f}" if lead is not None else ""
            print(f"{n:>2} {cell:14s} {s * 1000:8.1f} {n * cfg['batch'] / s:10.1f} {vs:>9} {use_s:>5} {lead_s:>5}  "
                  + " ".join(f"{x * 1000:.0f}" for x in runs))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, nargs="+", default=[2], help="worker host counts (k = n dedicated servers)")
    p.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS),
                   help=f"mode[@variant] to run; modes {MODES}, variants {sorted(VARIANTS)}")
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--burst", default="1mbit")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--features", type=int, default=1024)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--job-timeout", type=float, default=300)
    p.add_argument("--logdir")
    p.add_argument("--trace", metavar="DIR", help="write each job's engine timelines under DIR")
    p.add_argument("--json")
    args = p.parse_args(argv)
    args.byteps_env = []
    args.variants = VARIANTS
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker(args.worker)
    from tests.support.netns import Cluster
    reason = Cluster.unavailable_reason()
    if reason:
        print(f"cross_barrier benchmark cannot run here: {reason}", file=sys.stderr)
        return 2
    result = run(args)
    print_table(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if all("error" not in r for r in result["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
