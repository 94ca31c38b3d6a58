"""What compression costs per step for a GPU tensor: the codecs on the GPU
(issue 39) against the host codecs (BYTEPS_GPU_COMPRESS_ON_DEVICE=0, the path
before it: the full-size staged copy encoded and decoded by CPU threads) and
against the same tensor in host memory (NumPy), side by side in one run.

    python benchmarks/gpu_compression_cost.py                      # 25.6M floats (ResNet-50's gradient)
    python benchmarks/gpu_compression_cost.py --elements 4194304 --steps 10 --specs none onebit

Two machines of one GPU each (they may share one GPU: core API, CuPy) and two
dedicated servers, on loopback: the wire is fast here, so a step's time is
mostly what the codecs and copies cost. Each (spec, path) is its own job. The
table gives ms per push_pull of the whole tensor, the bytes each machine
pushed per step, and host / device.
"""
import argparse
import json
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
from tests.support.jobs import bpslaunch_source  # noqa: E402

WORKER = """
import os, time
import numpy as np
import byteps_native.core as bps

arrays, spec = os.environ["COST_ARRAYS"], os.environ["COST_SPEC"]
n, steps = int(os.environ["COST_ELEMENTS"]), int(os.environ["COST_STEPS"])
on_gpu = arrays == "cupy"
if on_gpu:
    import cupy as cp
    cp.cuda.Device(0).use()
bps.init()
values = np.random.RandomState(bps.rank()).standard_normal(n).astype(np.float32)
x = cp.asarray(values) if on_gpu else values
if spec != "none":
    bps.declare_compression("grad", spec)

def sync():
    if on_gpu:
        cp.cuda.runtime.deviceSynchronize()

for _ in range(3):
    bps.push_pull(x, "grad", average=True)
sync()
before = bps.stats()
start = time.perf_counter()
for _ in range(steps):
    bps.push_pull(x, "grad", average=True)
sync()
elapsed = time.perf_counter() - start
after = bps.stats()
report({"ms_per_step": 1000 * elapsed / steps,
        "bytes_pushed_per_step": (after["bytes_pushed"] - before["bytes_pushed"]) / steps,
        "compressed_on_device": after.get("pushes_compressed_on_reducer", 0) - before.get("pushes_compressed_on_reducer", 0)})
bps.shutdown()
"""

# (label, arrays, environment)
PATHS = [("GPU, device codecs", "cupy", {}),
         ("GPU, host codecs", "cupy", {"BYTEPS_GPU_COMPRESS_ON_DEVICE": "0"}),
         ("host memory", "numpy", {})]


def run(spec, arrays, env, args, workdir):
    where = tempfile.mkdtemp(dir=workdir)
    job = bpslaunch_source(where, WORKER, local_workers=1, machines=2, servers=2, timeout=args.timeout, gpus=True,
                           env=dict(env, COST_ARRAYS=arrays, COST_SPEC=spec, COST_ELEMENTS=str(args.elements),
                                    COST_STEPS=str(args.steps)))
    results = job.results
    return {"ms_per_step": max(r["ms_per_step"] for r in results.values()),
            "bytes_pushed_per_step": results[0]["bytes_pushed_per_step"],
            "compressed_on_device": sum(r["compressed_on_device"] for r in results.values())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=25_557_032, help="float32 elements (ResNet-50: 25.6M)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--specs", nargs="+", default=["none", "onebit", "topk:ratio=0.01", "randomk:ratio=0.01"])
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rows = []
    workdir = tempfile.mkdtemp(prefix="gpu_compression_cost_")
    print(f"{args.elements} float32 elements ({4 * args.elements / 1e6:.1f} MB), 2 machines x 1 GPU, 2 servers, "
          f"loopback; {args.steps} timed steps", flush=True)
    print(f"{'spec':<22} {'path':<20} {'ms/step':>9} {'MB pushed/step':>15} {'on device':>10}", flush=True)
    for spec in args.specs:
        timings = {}
        for label, arrays, env in PATHS:
            if spec == "none" and env:
                continue  # nothing to encode: the same path as the device codecs'
            r = run(spec, arrays, env, args, workdir)
            timings[label] = r["ms_per_step"]
            rows.append(dict(r, spec=spec, path=label, elements=args.elements, steps=args.steps))
            print(f"{spec:<22} {label:<20} {r['ms_per_step']:>9.1f} {r['bytes_pushed_per_step'] / 1e6:>15.2f} "
                  f"{r['compressed_on_device']:>10}", flush=True)
        device = timings.get("GPU, device codecs")
        if device and "GPU, host codecs" in timings:
            print(f"{'':<22} host codecs / device codecs: {timings['GPU, host codecs'] / device:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
