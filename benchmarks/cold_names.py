"""A new name's first calls vs the steady state: byteps's c10d backend vs gloo, same run.

    python benchmarks/cold_names.py                          # 2 ranks, 16MB and 64MB
    python benchmarks/cold_names.py --sizes 1MB,16MB --first 8 --json out.json
    python benchmarks/cold_names.py --repeat 5                # medians of 5 fresh jobs

What a user's short benchmark sees: `dist.all_reduce(x)` on a tensor of a size
not reduced before, timed call by call. The byteps backend names each call by
its signature and a rotating slot (csrc/torch/call_site_names.cc); a new
name's first call takes staging from the machine's warm pool or from names
gone idle (docs/architecture.md). Per size it prints, for
byteps and for gloo (a second process group of the same job, so the same
processes, the same machine load, the same moment):

  first     the very first call of the size
  first-N   mean of calls 1..N (N = --first, default 11: 3 warm-up + 8 timed)
  steady    mean of --steady calls after --skip calls (past every slot's first call)
  new name  median first call of --new-names more names of the size (numel + 1,
            + 2, ...: each a signature not seen before), each followed by
            --warm calls of it
  warm      median of those names' warm calls: interleaved in time with their
            first calls, so a busy machine weighs on both alike

and gloo's time over byteps's (above 1: byteps faster). Sizes run in turn
through both backends, byteps first, so gloo never pays for byteps's misses.
With --repeat R the job runs R times afresh (each first call is a real first
call) and every figure is the median of the R jobs: on a shared machine one
job's first call can land on a busy moment. Then, per size, byteps's new-name first call over its warm call (issue 27
asks at most 1.2), the job's very first call over its steady call, and the shared-memory staging the machine held after it: in slots,
and backed in all (slots plus the warm pool, csrc/local/staging_warmer.h).
"""
import argparse
import json
import os
import subprocess
import sys
import time

from push_pull import parse_size  # benchmarks/ is this script's folder, first on sys.path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # the repository's tests.support importable
    sys.path.insert(0, REPO)
from tests.support.ports import free_port  # noqa: E402


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def timed_calls(all_reduce, tensor, count, barrier):
    """Seconds of each of `count` calls, every rank starting each call together."""
    times = []
    for _ in range(count):
        barrier()
        start = time.perf_counter()
        all_reduce(tensor)
        times.append(time.perf_counter() - start)
    return times


def worker(args):
    import torch
    import torch.distributed as dist
    import byteps_native.torch  # registers the backend; stats() below

    dist.init_process_group("byteps")
    gloo = dist.new_group(backend="gloo")
    rank = dist.get_rank()

    def barrier():
        dist.barrier(group=gloo)

    def byteps_reduce(t):
        dist.all_reduce(t)

    def gloo_reduce(t):
        dist.all_reduce(t, group=gloo)

    total = args.skip + args.steady
    results = []
    for nbytes in [parse_size(s) for s in args.sizes.split(",")]:
        row = {"bytes": nbytes}
        for backend, reduce in (("byteps", byteps_reduce), ("gloo", gloo_reduce)):
            tensor = torch.ones(nbytes // 4, dtype=torch.float32)
            times = timed_calls(reduce, tensor, total, barrier)
            expected = float(dist.get_world_size()) ** total
            if not torch.allclose(tensor[:4], torch.full((4,), expected)):
                raise AssertionError(f"{backend} {nbytes} B: got {tensor[:4].tolist()}, want {expected}")
            row[backend] = {"first": times[0], "first_n": sum(times[: args.first]) / args.first,
                            "steady": sum(times[args.skip:]) / args.steady}
            firsts, warms = [], []
            for k in range(1, args.new_names + 1):
                fresh = torch.ones(nbytes // 4 + k, dtype=torch.float32)
                calls = timed_calls(reduce, fresh, 1 + args.warm, barrier)
                firsts.append(calls[0])
                warms.extend(calls[1:])
            row[backend]["new_name"] = median(firsts)
            row[backend]["warm"] = median(warms)
            if backend == "byteps":
                stats = byteps_native.torch.stats()
                row["staging_bytes"] = stats["staging_bytes"]
                row["staging_backed_bytes"] = stats.get("staging_backed_bytes", stats["staging_bytes"])
        results.append(row)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()



def run(args):
    out = args.json or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cold_names.{os.getpid()}.json")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.ranks),
               LOCAL_WORLD_SIZE=str(args.ranks))
    # One OpenMP thread per rank, as torchrun gives every process of a job
    # with several: else the threads of torch.ones() that made a new name's
    # tensor spin on after it (libgomp's wait policy) and take the cores from
    # the call timed next -- gloo's and byteps's alike (a new name measured
    # 1.4x (gloo) and 1.6x (byteps) its warm call on 2 cores, 1.0x with one
    # thread). OMP_NUM_THREADS from the caller wins.
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, os.path.abspath(__file__), "--role", "worker", "--out", out, "--sizes", args.sizes,
           "--first", str(args.first), "--skip", str(args.skip), "--steady", str(args.steady),
           "--new-names", str(args.new_names), "--warm", str(args.warm)]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(args.ranks)]
    codes = [p.wait(timeout=1800) for p in procs]
    if any(codes):
        sys.exit(f"a worker failed: exit codes {codes}")
    with open(out) as f:
        results = json.load(f)
    if not args.json:
        os.unlink(out)
    return results


def median_of(runs):
    """Per size, backend and column, the median over jobs (same layout as one job's results)."""
    merged = []
    for rows in zip(*runs):
        row = {"bytes": rows[0]["bytes"], "staging_bytes": rows[-1]["staging_bytes"],
               "staging_backed_bytes": rows[-1]["staging_backed_bytes"]}
        for backend in ("byteps", "gloo"):
            row[backend] = {c: median([r[backend][c] for r in rows]) for c in rows[0][backend]}
        row["byteps"]["cold_ratio"] = median([r["byteps"]["first"] / r["byteps"]["steady"] for r in rows])
        row["byteps"]["new_name_ratio"] = median([r["byteps"]["new_name"] / r["byteps"]["warm"] for r in rows])
        merged.append(row)
    return merged


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="16MB,64MB")
    p.add_argument("--first", type=int, default=11, help="calls in the first-N column")
    p.add_argument("--skip", type=int, default=40, help="calls before the steady-state column")
    p.add_argument("--steady", type=int, default=20, help="calls in the steady-state column")
    p.add_argument("--new-names", type=int, default=8, help="more new names per size (the new-name column)")
    p.add_argument("--warm", type=int, default=4, help="warm calls after each new name's first")
    p.add_argument("--repeat", type=int, default=1, help="fresh jobs to run; figures are their medians")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--role", choices=["driver", "worker"], default="driver", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "worker":
        worker(args)
        return
    if args.skip < args.first:
        p.error("--skip must be at least --first")
    json_path, args.json = args.json, None
    results = median_of([run(args) for _ in range(args.repeat)])
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f)
    jobs = f", median of {args.repeat} jobs" if args.repeat > 1 else ""
    print(f"{args.ranks} ranks, seconds per call{jobs}; ratio = gloo / byteps (above 1: byteps faster)")
    print(f"{'size':>6} {'column':>8} {'byteps':>9} {'gloo':>9} {'ratio':>6}")
    for row in results:
        for column, label in (("first", "first"), ("first_n", f"first-{args.first}"), ("steady", "steady"),
                              ("new_name", "new name"), ("warm", "warm")):
            b, g = row["byteps"][column], row["gloo"][column]
            print(f"{row['bytes'] >> 20:>4}MB {label:>8} {b:9.4f} {g:9.4f} {g / b:6.2f}")
    print("byteps: a new name's first call / its warm call; the job's first call / steady call; shared-memory")
    print("staging of the machine after the size (in slots, backed)")
    for row in results:
        b = row["byteps"]
        print(f"{row['bytes'] >> 20:>4}MB new name {b['new_name_ratio']:5.2f}x   first {b['cold_ratio']:5.2f}x   "
              f"{row['staging_bytes'] >> 20} MiB in slots, {row['staging_backed_bytes'] >> 20} MiB backed")


if __name__ == "__main__":
    main()
