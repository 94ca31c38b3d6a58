"""One rank of test_gpu_failures.py (torchrun, one machine, 2 local ranks).

Rank 1 never submits 'lonely'; rank 0's stream-ordered all_reduce of it
returns at once (its Future completes before the result exists). Once the
engine gives up on it (BYTEPS_TIMEOUT), rank 0's next all_reduce must raise
with that cause instead of running on."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import byteps_native.torch  # noqa: F401  (registers the backend)

out_dir = sys.argv[1]
dist.init_process_group("byteps")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
result = {}
if rank == 0:
    x = torch.ones(1000, device=device)
    work = dist.all_reduce(x, async_op=True)
    work.wait()  # stream-ordered: returns before the NCCL kernel can finish
    time.sleep(float(os.environ["BYTEPS_TIMEOUT"]) + 5)
    try:
        dist.all_reduce(torch.ones(10, device=device))
        result["next"] = "ok"
    except Exception as e:  # noqa: BLE001
        result["next"] = str(e)
else:
    time.sleep(float(os.environ["BYTEPS_TIMEOUT"]) + 10)
with open(os.path.join(out_dir, f"result.{rank}.json"), "w") as f:
    json.dump(result, f)
os._exit(0)  # rank 0's NCCL kernel is stuck on a peer that never came
