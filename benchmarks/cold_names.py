"""A new name's first calls vs the steady state: byteps's c10d backend vs gloo, same run.

    python benchmarks/cold_names.py                          # 2 ranks, 16MB and 64MB
    python benchmarks/cold_names.py --sizes 1MB,16MB --first 8 --json out.json

What a user's short benchmark sees: `dist.all_reduce(x)` on a tensor of a size
not reduced before, timed call by call. The byteps backend names each call by
its signature and a rotating slot (csrc/torch/call_site_names.cc); a slot's
first call allocates and first-touches its staging. Per size it prints, for
byteps and for gloo (a second process group of the same job, so the same
processes, the same machine load, the same moment):

  first     the very first call of the size
  first-N   mean of calls 1..N (N = --first, default 11: 3 warm-up + 8 timed)
  steady    mean of --steady calls after --skip calls (past every slot's first call)

and gloo's time over byteps's (above 1: byteps faster). Sizes run in turn
through both backends, byteps first, so gloo never pays for byteps's misses.
Then, per size, byteps's first call over its steady call (issue 27 asks at
most 1.2) and the shared-memory staging the machine held after it: in slots,
and backed in all (slots plus the warm pool, csrc/local/staging_warmer.h).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

from push_pull import parse_size  # benchmarks/ is this script's folder, first on sys.path


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
            if backend == "byteps":
                stats = byteps_native.torch.stats()
                row["staging_bytes"] = stats["staging_bytes"]
                row["staging_backed_bytes"] = stats.get("staging_backed_bytes", stats["staging_bytes"])
        results.append(row)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args):
    out = args.json or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"cold_names.{os.getpid()}.json")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.ranks),
               LOCAL_WORLD_SIZE=str(args.ranks))
    cmd = [sys.executable, os.path.abspath(__file__), "--role", "worker", "--out", out, "--sizes", args.sizes,
           "--first", str(args.first), "--skip", str(args.skip), "--steady", str(args.steady)]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(args.ranks)]
    codes = [p.wait(timeout=1800) for p in procs]
    if any(codes):
        sys.exit(f"a worker failed: exit codes {codes}")
    with open(out) as f:
        results = json.load(f)
    if not args.json:
        os.unlink(out)
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="16MB,64MB")
    p.add_argument("--first", type=int, default=11, help="calls in the first-N column")
    p.add_argument("--skip", type=int, default=40, help="calls before the steady-state column")
    p.add_argument("--steady", type=int, default=20, help="calls in the steady-state column")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--role", choices=["driver", "worker"], default="driver", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role == "worker":
        worker(args)
        return
    if args.skip < args.first:
        p.error("--skip must be at least --first")
    results = run(args)
    print(f"{args.ranks} ranks, seconds per call; ratio = gloo / byteps (above 1: byteps faster)")
    print(f"{'size':>6} {'column':>8} {'byteps':>9} {'gloo':>9} {'ratio':>6}")
    for row in results:
        for column, label in (("first", "first"), ("first_n", f"first-{args.first}"), ("steady", "steady")):
            b, g = row["byteps"][column], row["gloo"][column]
            print(f"{row['bytes'] >> 20:>4}MB {label:>8} {b:9.4f} {g:9.4f} {g / b:6.2f}")
    print("byteps first call / steady call; shared-memory staging of the machine after the size (slots, backed)")
    for row in results:
        b = row["byteps"]
        print(f"{row['bytes'] >> 20:>4}MB {b['first'] / b['steady']:6.2f}x   {row['staging_bytes'] >> 20} MiB in slots, "
              f"{row['staging_backed_bytes'] >> 20} MiB backed")


if __name__ == "__main__":
    main()
