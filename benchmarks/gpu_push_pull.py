"""push_pull bandwidth of GPU buffers: byteps (CuPy arrays, core API) vs NCCL all-reduce.

    python benchmarks/gpu_push_pull.py                  # 1 machine x all GPUs
    python benchmarks/gpu_push_pull.py --machines 2     # 2 emulated machines (servers over TCP)

Bus bandwidth as nccl-tests defines it: bytes * 2(N-1)/N / time, N ranks.
byteps runs under bpslaunch (local mode), NCCL under torchrun; each size is
reduced --iters times after a warm-up, one tensor at a time.
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
SIZES_MB = [1, 4, 16, 64, 256]


def worker_byteps(args):
    import cupy as cp
    import byteps_native.core as bps
    local = int(os.environ.get("BYTEPS_LOCAL_RANK", 0))
    local_size = int(os.environ.get("BYTEPS_LOCAL_SIZE", 1))
    machine = int(os.environ.get("DMLC_WORKER_ID", 0))
    cp.cuda.Device(machine * local_size + local).use()
    bps.init()
    out = {}
    for mb in SIZES_MB:
        x = cp.ones(mb * 2**20 // 4, cp.float32)
        for _ in range(3):
            bps.push_pull(x, f"bw.{mb}", average=True)
        cp.cuda.runtime.deviceSynchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            bps.push_pull(x, f"bw.{mb}", average=True)
        out[mb] = (time.perf_counter() - start) / args.iters
    if bps.rank() == 0:
        print("RESULT " + json.dumps({"times": out, "size": bps.size(), "stats": bps.stats().get("device")}), flush=True)
    bps.shutdown()


def worker_nccl(args):
    import torch
    import torch.distributed as dist
    gpu = int(os.environ.get("BENCH_GPU_OFFSET", 0)) + int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(gpu)
    dist.init_process_group("nccl", device_id=torch.device("cuda", gpu))
    out = {}
    for mb in SIZES_MB:
        x = torch.ones(mb * 2**20 // 4, device="cuda")
        for _ in range(3):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(x)
            torch.cuda.synchronize()
        out[mb] = (time.perf_counter() - start) / args.iters
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({"times": out, "size": dist.get_world_size()}), flush=True)
    dist.destroy_process_group()


def run(cmds, env):
    procs = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(cmds, env)]
    result = None
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(err[-4000:])
        for line in out.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--machines", type=int, default=1)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=["byteps", "nccl"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "byteps":
        return worker_byteps(args)
    if args.worker == "nccl":
        return worker_nccl(args)
    import torch
    gpus = args.gpus or torch.cuda.device_count()
    per = gpus // args.machines
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    me = [sys.executable, os.path.abspath(__file__), "--iters", str(args.iters)]
    byteps = run([[sys.executable, "-m", "byteps_native.launch", "--local-workers", str(per), "--machines",
                   str(args.machines), "--servers", str(args.machines if args.machines > 1 else 0), "--"]
                  + me + ["--worker", "byteps"]], [env])
    port = free_port()
    nccl = run([[sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.machines), "--node_rank", str(m),
                 "--nproc_per_node", str(per), "--master_addr", "127.0.0.1", "--master_port", str(port)]
                + me[1:] + ["--worker", "nccl"] for m in range(args.machines)],
               [dict(env, BENCH_GPU_OFFSET=str(m * per), NCCL_HOSTID=f"bench-machine-{m}") if args.machines > 1
                else env for m in range(args.machines)])
    n = gpus
    print(f"push_pull of fp32 GPU buffers, {args.machines} machine(s) x {per} GPUs; bus bandwidth GB/s")
    print(f"{'MB':>6} {'nccl':>8} {'byteps':>8} {'byteps/nccl':>11}")
    rows = []
    for mb in SIZES_MB:
        bus = lambda t: mb * 2**20 * 2 * (n - 1) / n / t / 1e9  # noqa: E731
        b, c = bus(byteps["times"][str(mb)]), bus(nccl["times"][str(mb)])
        print(f"{mb:>6} {c:>8.1f} {b:>8.1f} {b / c:>11.3f}", flush=True)
        rows.append({"mb": mb, "nccl_busbw": c, "byteps_busbw": b})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "byteps_gpu_stats": byteps.get("stats")}, f, indent=1)


if __name__ == "__main__":
    main()
