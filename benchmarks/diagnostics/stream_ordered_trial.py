"""Where the stream-ordered GPU completion (BYTEPS_GPU_STREAM_ORDERED=1) goes
wrong: tests/gpu's torch worker at 2 machines x 1 GPU, with each worker's
Python stacks dumped after --dump-after seconds. With one GPU, both machines
share it, each with its own NCCL_HOSTID (enough to see a hang or a wrong
result; not for speed).

    python benchmarks/diagnostics/stream_ordered_trial.py collectives ddp [--env K=V ...]
"""
import argparse
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

import torch  # noqa: E402

from tests.support.jobs import torchrun  # noqa: E402

WORKER = os.path.join(REPO, "tests", "gpu", "workers", "torch_gpu_worker.py")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("modes", nargs="+")
    p.add_argument("--env", action="append", default=[], help="K=V for every worker")
    p.add_argument("--dump-after", type=float, default=40)
    p.add_argument("--timeout", type=float, default=70)
    args = p.parse_args()
    gpus = torch.cuda.device_count()
    env = {"BYTEPS_PARTITION_BYTES": "262144", "NCCL_NVLS_ENABLE": "0", "BYTEPS_GPU_STREAM_ORDERED": "1",
           "BYTEPS_TIMEOUT": "30", "FAULT_DUMP_AFTER": str(args.dump_after)}
    env.update(kv.split("=", 1) for kv in args.env)
    for mode in args.modes:
        with tempfile.TemporaryDirectory() as tmp:
            job = torchrun(WORKER, [mode, tmp], nproc=1, machines=2, result_dir=tmp, timeout=args.timeout, gpus=True,
                           env=env, pythonpath=[os.path.join(REPO, "benchmarks", "diagnostics")],
                           # Two machines on one GPU: NCCL (the torch worker's delegate) takes
                           # them for separate hosts only with a host id each.
                           machine_env=lambda m: {"GPU_OFFSET": str(m if gpus > 1 else 0),
                                                  "NCCL_HOSTID": f"trial-machine-{m}"})
            print(f"=== {mode} {' '.join(args.env)}: exit {job.returncode}, timed out {job.timed_out}, "
                  f"ranks reported {sorted(job.results)}", flush=True)
            for rank, r in sorted(job.results.items()):
                fails = r.get("failures", [])
                print(f"rank {rank}: {len(fails)} failures" + "".join(f"\n    {f[:300]}" for f in fails[:6]))
            if job.returncode != 0 or job.timed_out:
                print(job.output[-12000:], flush=True)


if __name__ == "__main__":
    main()
