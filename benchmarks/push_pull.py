"""push_pull throughput and latency: byteps-native vs torch.distributed gloo, same run.

    python benchmarks/push_pull.py --workers 2                       # one machine (shm path)
    python benchmarks/push_pull.py --workers 2 --machines 2 --servers 2
    python benchmarks/push_pull.py --workers 4 --sizes 1MB,16MB,64MB --json out.json

Per size it prints the algorithm bandwidth (bytes of the tensor / time of one
collective) of byteps push_pull and gloo all_reduce, their ratio, the
round-trip latency of a 4-byte tensor, a memory-bandwidth reference (a
numpy add of the same size, i.e. the floor of any reduce on this machine),
and the CPU cost: user + system seconds of every process of the job (workers,
and for byteps the servers and the scheduler; from /proc/<pid>/stat, summed
over the driver's descendants by rank 0 around the timed iterations) per GB
of tensor synchronised (tensor bytes x collectives).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "B": 1}


def parse_size(text):
    for unit, mult in UNITS.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * mult)
    return int(text)


def job_cpu_seconds(root_pid):
    """User + system CPU seconds of every live descendant of root_pid (all threads)."""
    parent, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        # After "pid (comm)": state ppid ... utime stime are fields 4 and 14, 15 of stat(5).
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, seconds in cpu.items():
        p = parent.get(pid)
        while p and p != root_pid:
            p = parent.get(p)
        if p == root_pid:
            total += seconds
    return total


def time_loop(fn, iterations, warmup, cpu_root=None):
    """Median seconds per call; with cpu_root, also the job's CPU seconds over the timed calls."""
    for _ in range(warmup):
        fn()
    times = []
    cpu0 = job_cpu_seconds(cpu_root) if cpu_root else 0.0
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    cpu = job_cpu_seconds(cpu_root) - cpu0 if cpu_root else 0.0
    return statistics.median(times), cpu


def iterations_for(nbytes):
    return max(5, min(200, (256 << 20) // max(nbytes, 1)))


# ---------------------------------------------------------------- workers ---

def cpu_root_for(rank):
    # Rank 0 measures the whole job: everything the driver started.
    return int(os.environ["BENCH_DRIVER_PID"]) if rank == 0 and "BENCH_DRIVER_PID" in os.environ else None


def byteps_worker(sizes, out_path):
    import byteps_native.core as bps
    bps.init()
    root = cpu_root_for(bps.rank())
    results = {}
    for nbytes in sizes:
        a = np.ones(max(1, nbytes // 4), np.float32)
        iters = iterations_for(nbytes)
        t, cpu = time_loop(lambda: bps.push_pull(a, name=f"bench{nbytes}", average=True), iters, 3, root)
        results[nbytes] = t
        results[f"cpu_s_per_gb_{nbytes}"] = cpu / (nbytes * iters / 1e9)
    lat = np.ones(1, np.float32)
    results["latency"] = time_loop(lambda: bps.push_pull(lat, name="latency"), 300, 20)[0]
    if bps.rank() == 0:
        with open(out_path, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)
    bps.shutdown()


def gloo_worker(rank, world, sizes, init_file, out_path):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    root = cpu_root_for(rank)
    results = {}
    for nbytes in sizes:
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        iters = iterations_for(nbytes)
        secs, cpu = time_loop(lambda: dist.all_reduce(t), iters, 3, root)
        results[nbytes] = secs
        results[f"cpu_s_per_gb_{nbytes}"] = cpu / (nbytes * iters / 1e9)
    lat = torch.ones(1)
    results["latency"] = time_loop(lambda: dist.all_reduce(lat), 300, 20)[0]
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f)
    dist.destroy_process_group()


# ----------------------------------------------------------------- driver ---

def run_byteps(args, sizes):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "byteps.json")
        cmd = [sys.executable, "-m", "byteps_native.launch", "--local-workers", str(args.workers),
               "--machines", str(args.machines), "--servers", str(args.servers), "--",
               sys.executable, os.path.abspath(__file__), "--role", "byteps", "--out", out,
               "--sizes", ",".join(map(str, sizes))]
        subprocess.run(cmd, check=True, timeout=1800)
        with open(out) as f:
            return json.load(f)


def run_gloo(args, sizes):
    import torch.multiprocessing as mp
    world = args.workers * args.machines
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "gloo.json")
        mp.start_processes(gloo_worker, args=(world, sizes, os.path.join(tmp, "init"), out), nprocs=world,
                           join=True, start_method="spawn")
        with open(out) as f:
            return json.load(f)


def memory_reference(nbytes):
    a = np.ones(max(1, nbytes // 4), np.float32)
    b = np.ones_like(a)
    t = time_loop(lambda: np.add(a, b, out=a), iterations_for(nbytes), 2)[0]
    return 3 * a.nbytes / t  # bytes touched per second (2 reads + 1 write)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2, help="worker processes per machine")
    p.add_argument("--machines", type=int, default=1)
    p.add_argument("--servers", type=int, default=0)
    p.add_argument("--sizes", default="1MB,4MB,16MB,64MB")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--role", choices=["driver", "byteps"], default="driver", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.role == "byteps":
        return byteps_worker(sizes, args.out)
    if args.machines > 1 and args.servers == 0:
        args.servers = args.machines

    os.environ["BENCH_DRIVER_PID"] = str(os.getpid())  # inherited by both jobs' processes
    byteps = run_byteps(args, sizes)
    gloo = run_gloo(args, sizes)
    rows = []
    print(f"\nworkers/machine={args.workers} machines={args.machines} servers={args.servers}")
    print(f"{'size':>8} {'byteps GB/s':>12} {'gloo GB/s':>10} {'ratio':>6} {'numpy add GB/s':>15} "
          f"{'CPU s/GB byteps':>16} {'gloo':>6}")
    for nbytes in sizes:
        tb, tg = byteps[str(nbytes)], gloo[str(nbytes)]
        mem = memory_reference(nbytes)
        row = {"bytes": nbytes, "byteps_s": tb, "gloo_s": tg, "byteps_GBps": nbytes / tb / 1e9,
               "gloo_GBps": nbytes / tg / 1e9, "ratio": tg / tb, "numpy_add_GBps": mem / 1e9,
               "byteps_cpu_s_per_GB": byteps[f"cpu_s_per_gb_{nbytes}"],
               "gloo_cpu_s_per_GB": gloo[f"cpu_s_per_gb_{nbytes}"]}
        rows.append(row)
        print(f"{nbytes / (1 << 20):>6.0f}MB {row['byteps_GBps']:>12.2f} {row['gloo_GBps']:>10.2f} "
              f"{row['ratio']:>5.2f}x {row['numpy_add_GBps']:>15.1f} {row['byteps_cpu_s_per_GB']:>16.2f} "
              f"{row['gloo_cpu_s_per_GB']:>6.2f}")
    print(f"4-byte round trip: byteps {byteps['latency'] * 1e6:.0f} us, gloo {gloo['latency'] * 1e6:.0f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "rows": rows, "latency_us": {
                "byteps": byteps["latency"] * 1e6, "gloo": gloo["latency"] * 1e6}}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
