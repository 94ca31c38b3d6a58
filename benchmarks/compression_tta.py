"""Time to accuracy with gradient compression on emulated 1 and 10 Gbit/s hosts.

A digit classifier (scikit-learn's bundled 8x8 digits: nothing is downloaded)
with a large fully connected head, so a step is communication-bound: two
worker hosts train it with DDP, side by side in one run, per link rate:

  byteps    the C++ DDP hook, uncompressed (register_push_pull_hook)
  onebit    the C++ DDP hook, compression="onebit:momentum=0.9" (momentum, then
            error feedback, on the worker; the optimizer without momentum)
  topk      the C++ DDP hook, compression="topk:ratio=0.01,momentum=0.9" (likewise;
            the servers answer the exact sum of the pushes)
  topk_servertopk  (optional) topk whose servers answer the top k of the sum
            with error feedback (server_topk=1,server_ef=1: the previous recipe)
  topk_noserveref  (optional) topk_servertopk without server error feedback
  onebit_sgdm, topk_sgdm  (optional) the same compressors without worker
            momentum, under the optimizer's SGD momentum (issue 29's first run)
  powersgd  torch's PowerSGD hook (rank --powersgd-rank, error feedback) over gloo
  gloo      (optional) DDP's own all-reduce over gloo

byteps modes run one server per worker host (colocated, k = n: the same two
hosts as gloo) or, with --servers dedicated, on hosts of their own. Hosts are
network namespaces shaped with tc (tests/support/netns.py, as benchmarks/multihost.py).

Reported per mode and rate: final test accuracy, wire bytes per step (what a
worker host's link sent during training, counted by the kernel: TCP/IP
included, and with colocated servers their answers too), median step time,
and training time (evaluations excluded) until the test accuracy first
reached --target. Per seed (--seeds), every mode starts from the same
weights and sees the same batches; the table gives each column's median over
the seeds and its range. Per rate, the seeds run one after another, each
running every mode side by side. Nothing is asserted: the numbers are for
docs/performance.md.

    sudo .venv/bin/python benchmarks/compression_tta.py --seeds 0 1 2 --json /tmp/tta.json
    python benchmarks/compression_tta.py --table-only /tmp/tta.json   # print the table again

Workers are this file run with `--worker <mode>` inside a namespace.
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

from benchmarks.multihost import Job  # noqa: E402

BYTEPS_MODES = {"byteps": None, "onebit": "onebit:momentum=0.9", "topk": "topk:ratio=0.01,momentum=0.9",
                "topk_servertopk": "topk:ratio=0.01,momentum=0.9,server_ef=1,server_topk=1",
                "topk_noserveref": "topk:ratio=0.01,momentum=0.9,server_topk=1",
                "onebit_sgdm": "onebit", "topk_sgdm": "topk:ratio=0.01"}
# A mode's own byteps settings (every process of its job), over --byteps-env.
# None: every mode runs the defaults (onebit keeps a scale per parameter of a
# DDP bucket, so the default 4 MB partitions need no change).
MODE_ENV = {}
MODES = tuple(BYTEPS_MODES) + ("powersgd", "gloo")
DEFAULT_MODES = ("byteps", "onebit", "topk", "powersgd")


# ================================================================ workers (inside a namespace)

def digits_classifier(torch, width):
    """The example's small CNN (byteps_native/examples/ddp_digits.py) with a
    head of two width x width layers: ~width^2 parameters to communicate."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Flatten(), nn.Linear(64 * 4 * 4, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


def _link_bytes():
    """Bytes this host's link sent and received so far (the worker runs in its namespace)."""
    def counter(name):
        with open(f"/sys/class/net/eth0/statistics/{name}") as f:
            return int(f.read())
    return counter("tx_bytes"), counter("rx_bytes")


def install_hook(torch, ddp, mode, args):
    if mode in BYTEPS_MODES and args.hook == "python":
        import byteps_native.torch as bps
        ddp.register_comm_hook(bps.PushPullHookState(compression=BYTEPS_MODES[mode]), bps.push_pull_hook)
    elif mode in BYTEPS_MODES:
        import byteps_native.torch as bps
        bps.register_push_pull_hook(ddp, compression=BYTEPS_MODES[mode])
    elif mode == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
        # start_powerSGD_iter: PowerSGD's own warm-up of uncompressed steps
        # (must be > 1 with error feedback); torch's default (1000) is the whole run here.
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)


def worker(mode):
    import faulthandler

    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    from byteps_native.examples.ddp_digits import digits

    torch.set_num_threads(1)
    args = argparse.Namespace(**json.loads(os.environ["TTA_ARGS"]))
    # A hung worker's stacks land in its log before the driver gives up on it.
    faulthandler.dump_traceback_later(max(10.0, args.job_timeout - 15), exit=False)
    if mode in BYTEPS_MODES:
        import byteps_native.torch as bps
        bps.init()  # rendezvous at the scheduler with the servers (DMLC_* env)
        dist.init_process_group("byteps")
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights in every mode
    model = digits_classifier(torch, args.width)
    params = sum(p.numel() for p in model.parameters())
    # torch's PowerSGD hook waits for an all-reduce inside a Future callback,
    # which runs on one of gloo's 2 worker threads: with 2 buckets in flight
    # both threads wait and no all-reduce is left to run them (a hang). One
    # bucket for PowerSGD (it loses backward overlap); DDP's default buckets otherwise.
    bucket_cap_mb = 4 * params / 2**20 + 1 if mode == "powersgd" else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    install_hook(torch, ddp, mode, args)
    train_set, test_set = digits()
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch, sampler=sampler, drop_last=True)
    test_x, test_y = test_set.tensors
    # With momentum inside the compressor (BytePS's momentum_type=nesterov) the
    # optimizer must not add its own: the same 0.9, in one place.
    worker_momentum = "momentum=" in (BYTEPS_MODES.get(mode) or "")
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.0 if worker_momentum else 0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def test_accuracy():
        # Every rank holds the same weights: each scores the whole test set, no communication.
        model.eval()
        with torch.no_grad():
            correct = (model(test_x).argmax(1) == test_y).sum().item()
        model.train()
        return correct / len(test_y)

    step_times, evals = [], []
    trained = 0.0
    tx0, rx0 = _link_bytes()
    cpu0 = time.process_time()  # every thread of this worker (the engine's included), evaluations too
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(ddp(x), y).backward()  # the hook / all-reduce runs here; DDP waits for it
            opt.step()
            step_times.append(time.perf_counter() - t0)
            trained += step_times[-1]
            if len(step_times) % args.eval_every == 0:
                evals.append((len(step_times), trained, test_accuracy()))
    tx1, rx1 = _link_bytes()
    cpu_s = time.process_time() - cpu0
    if not evals or evals[-1][0] != len(step_times):
        evals.append((len(step_times), trained, test_accuracy()))
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    result = {"rank": rank, "world": world, "params": params, "step_times": step_times, "evals": evals,
              "tx_bytes": tx1 - tx0, "rx_bytes": rx1 - rx0, "cpu_s": cpu_s, "checksum": checksum, "ok": True}
    if mode in BYTEPS_MODES:
        result["engine_stats"] = bps.stats()
    print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()
    if mode in BYTEPS_MODES:
        bps.shutdown()  # an orderly goodbye: without it the servers see a broken connection
    return 0


# ================================================================ driver (as root, outside)

class TrainingJob(Job):
    """benchmarks/multihost.py's Job, running this file's training workers."""
    worker_script = os.path.abspath(__file__)
    byteps_modes = tuple(BYTEPS_MODES)

    def __init__(self, cluster, n, mode, args):
        super().__init__(cluster, n, mode, args)
        self.colocated_modes = self.byteps_modes if args.servers == "colocated" else ()

    def byteps_env(self, role):
        env = super().byteps_env(role)
        env.update(MODE_ENV.get(self.mode, {}))
        return env

    def common_env(self):
        a = self.args
        knobs = {k: getattr(a, k) for k in ("width", "batch", "lr", "epochs", "eval_every", "powersgd_rank",
                                            "job_timeout", "seed", "hook")}
        return {"TTA_ARGS": json.dumps(knobs), "OMP_NUM_THREADS": 1, "PYTHONUNBUFFERED": 1}


def time_to_target(evals, target):
    """Training seconds (and steps) until the test accuracy first reached `target`, or (None, None)."""
    for step, seconds, acc in evals:
        if acc >= target:
            return seconds, step
    return None, None


def measure(cluster, rate, mode, args):
    job = TrainingJob(cluster, args.n, mode, args)
    if args.quiet_load:  # the 1-minute load average decays in about a minute after a job
        waited = time.monotonic()
        while os.getloadavg()[0] >= args.quiet_load and time.monotonic() - waited < args.quiet_wait:
            time.sleep(2)
    load_at_start = os.getloadavg()[0]  # the host is shared: how busy it was as the job began
    started = time.monotonic()
    job.start()
    results = job.finish(timeout=args.job_timeout)
    wall = time.monotonic() - started
    sums = [r["checksum"] for r in results]
    if max(sums) - min(sums) > 1e-6 * max(1.0, abs(sums[0])):
        raise RuntimeError(f"{mode}: the ranks ended with different weights (checksums {sums})")
    steps = len(results[0]["step_times"])
    # A step ends when the slowest rank's does: per step, the slowest rank.
    per_step = [max(r["step_times"][i] for r in results) for i in range(steps)]
    seconds, at_step = time_to_target(results[0]["evals"], args.target)
    return {"rate": rate, "mode": mode, "seed": args.seed, "params": results[0]["params"], "steps": steps,
            "final_accuracy": results[0]["evals"][-1][2], "evals": results[0]["evals"],
            "wire_bytes_per_step": statistics.mean(r["tx_bytes"] for r in results) / steps,
            "step_s": statistics.median(per_step), "train_s": sum(per_step),
            "time_to_target_s": seconds, "steps_to_target": at_step, "wall_s": wall,
            "loadavg_1": os.getloadavg()[0], "loadavg_1_at_start": load_at_start,
            "worker_cpu_s_per_step": statistics.mean(r["cpu_s"] for r in results) / steps,
            "engine_bytes_pushed_per_step": (statistics.mean(r["engine_stats"]["bytes_pushed"] for r in results) /
                                             steps if "engine_stats" in results[0] else None)}


def run_benchmark(args):
    from tests.support.netns import measure_cells

    def describe(rec):
        return (f"{rec['rate']} seed {rec['seed']} {rec['mode']:8s} acc {rec['final_accuracy']:.4f} "
                f"step {rec['step_s'] * 1e3:.0f} ms wire {rec['wire_bytes_per_step'] / 1e6:.2f} MB/step "
                f"cpu {rec.get('worker_cpu_s_per_step', float('nan')) * 1e3:.0f} ms/step per worker "
                f"to {args.target:.0%} {rec['time_to_target_s']} s (wall {rec['wall_s']:.0f} s, "
                f"load {rec.get('loadavg_1_at_start', float('nan')):.1f} at start, {rec['loadavg_1']:.1f} at end)")

    def measure_seeded(cluster, cell):
        args.seed = cell["seed"]
        return measure(cluster, cell["rate"], cell["mode"], args)

    def keep(records):  # after every job: a long run's records survive its interruption
        if args.json:
            _write_json(args, records)

    groups = [(dict(hosts=2 * args.n + 1, rate=rate, burst=args.burst, logdir=args.logdir),
               [{"rate": rate, "seed": seed, "mode": mode} for seed in args.seeds for mode in args.modes])
              for rate in args.rates]
    return _result(args, measure_cells(groups, measure_seeded, describe, after_each=keep))


def _result(args, records):
    config = {k: v for k, v in vars(args).items() if k not in ("variants", "seed")}
    config.update(compression=BYTEPS_MODES, mode_env=MODE_ENV)
    return {"config": config, "records": records}


def _write_json(args, records):
    with open(args.json, "w") as f:
        json.dump(_result(args, records), f, indent=1)


def merge_runs(paths):
    """One result of several --json files (e.g. one run per rate): the first's
    configuration, every run's rates and records."""
    merged = None
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        if merged is None:
            merged = result
            continue
        merged["config"]["rates"] += [r for r in result["config"]["rates"] if r not in merged["config"]["rates"]]
        merged["records"] += result["records"]
    return merged


def _median_range(values, fmt):
    """'median (min-max)' of the values, or the one value."""
    values = sorted(values)
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(values[0])}-{fmt(values[-1])})"


def print_table(result):
    cfg = result["config"]
    records = [dict(r, seed=r.get("seed", 0)) for r in result["records"] if "error" not in r]  # older runs: seed 0
    params = records[0]["params"] if records else 0
    seeds = cfg.get("seeds", [0])
    print(f"\n{params / 1e6:.1f}M-parameter digits classifier, {cfg['n']} worker hosts x batch {cfg['batch']}, "
          f"{cfg['epochs']} epochs, {cfg['servers']} servers; time to {cfg['target']:.0%} test accuracy "
          f"(training time, evaluations excluded); median (min-max) over seeds {seeds}\n")
    print("| link | mode | final accuracy | vs byteps (median of per-seed differences) | wire MB/step | smaller by | "
          f"step ms | worker CPU ms/step | time to {cfg['target']:.0%} | sooner than byteps by | "
          f"steps to {cfg['target']:.0%} | load at job start (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rate in cfg["rates"]:
        rows = [r for r in records if r["rate"] == rate]
        base = {r["seed"]: r for r in rows if r["mode"] == "byteps"}
        for mode in dict.fromkeys(r["mode"] for r in rows):
            runs = [r for r in rows if r["mode"] == mode]
            acc = _median_range([r["final_accuracy"] for r in runs], lambda v: f"{v:.2%}")
            paired = [(r, base[r["seed"]]) for r in runs if r["seed"] in base]
            delta = _median_range([(r["final_accuracy"] - b["final_accuracy"]) * 100 for r, b in paired],
                                  lambda v: f"{v:+.1f} pp") if paired and mode != "byteps" else ""
            wire = _median_range([r["wire_bytes_per_step"] / 1e6 for r in runs], lambda v: f"{v:.3f}")
            smaller = _median_range([b["wire_bytes_per_step"] / r["wire_bytes_per_step"] for r, b in paired],
                                    lambda v: f"{v:.1f}x") if paired else ""
            step = _median_range([r["step_s"] * 1e3 for r in runs], lambda v: f"{v:.0f}")
            reached = [r for r in runs if r["time_to_target_s"] is not None]
            tta = _median_range([r["time_to_target_s"] for r in reached], lambda v: f"{v:.1f} s") if reached else ""
            if len(reached) < len(runs):
                tta = f"{tta} ({len(runs) - len(reached)} of {len(runs)} not reached)".strip()
            steps = _median_range([r["steps_to_target"] for r in reached], lambda v: f"{v:.0f}") if reached else "-"
            cpu = _median_range([r["worker_cpu_s_per_step"] * 1e3 for r in runs if "worker_cpu_s_per_step" in r],
                                lambda v: f"{v:.0f}") if all("worker_cpu_s_per_step" in r for r in runs) else "-"
            both = [(r, b) for r, b in paired if r["time_to_target_s"] and b["time_to_target_s"]]
            sooner = _median_range([b["time_to_target_s"] / r["time_to_target_s"] for r, b in both],
                                   lambda v: f"{v:.2f}x") if both and mode != "byteps" else ""
            loads = [r["loadavg_1_at_start"] for r in runs if "loadavg_1_at_start" in r]
            load = f"{max(loads):.2f}" if loads else "-"
            print(f"| {rate} | {mode} | {acc} | {delta} | {wire} | {smaller} | {step} | {cpu} | {tta} | {sooner} | "
                  f"{steps} | {load} |")
    for r in result["records"]:
        if "error" in r:
            print(f"\n{r['rate']} {r['mode']} seed {r.get('seed')}: FAILED\n{r['error']}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(DEFAULT_MODES))
    p.add_argument("--rates", nargs="+", default=["1gbit", "10gbit"], help="per-host link rates (tc syntax)")
    p.add_argument("--burst", default="1mbit", help="tbf bucket (>= 1mbit)")
    p.add_argument("--n", type=int, default=2, help="worker hosts")
    p.add_argument("--servers", choices=["colocated", "dedicated"], default="colocated",
                   help="byteps servers on the worker hosts (k = n), or on n hosts of their own")
    p.add_argument("--width", type=int, default=2048, help="width of the two large hidden layers")
    p.add_argument("--batch", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=5, help="steps between test evaluations")
    p.add_argument("--target", type=float, default=0.95, help="test accuracy of the time-to-accuracy column")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--hook", choices=["cpp", "python"], default="cpp",
                   help="byteps modes' DDP hook: register_push_pull_hook (C++) or PushPullHookState + "
                        "push_pull_hook (Python); both declare the same names and segments")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="initial weights and sampler order; each seed runs every mode")
    p.add_argument("--byteps-env", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="extra env for byteps processes, e.g. --byteps-env BYTEPS_PARTITION_BYTES 1024000")
    p.add_argument("--job-timeout", type=float, default=600)
    p.add_argument("--quiet-load", type=float, default=0.0, metavar="L",
                   help="before each job wait (up to --quiet-wait s) until the 1-minute load average is below L "
                        "(issue 39's CPU figures ask for < 1.5); the table reports the load each job started at")
    p.add_argument("--quiet-wait", type=float, default=240)
    p.add_argument("--logdir", help="keep process logs here")
    p.add_argument("--json", help="write all records here")
    p.add_argument("--table-only", metavar="JSON", nargs="+",
                   help="print the table of --json files (runs of other rates merged) without measuring")
    args = p.parse_args(argv)
    args.variants = {}  # multihost.Job's per-variant byteps env: none here
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker(args.worker)
    if args.table_only:
        print_table(merge_runs(args.table_only))
        return 0
    from tests.support.netns import Cluster
    reason = Cluster.unavailable_reason()
    if reason:
        print(f"compression benchmark cannot run here: {reason}", file=sys.stderr)
        return 2
    result = run_benchmark(args)
    print_table(result)
    return 0 if all("error" not in r for r in result["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
