"""One rank dies mid-training (os._exit); the others' Work and Futures must
fail with an error, not hang. Run as bare processes (torchrun would kill the
survivors itself). argv[1]: the rank that dies."""
import os
import sys
import time

import torch
import torch.distributed as dist

import byteps_native.torch as bps
from tests.support.results import report


def main():
    victim = int(sys.argv[1])
    dist.init_process_group("byteps")
    rank = dist.get_rank()
    t = torch.ones(1000)
    dist.all_reduce(t)  # everyone alive: this works
    dist.barrier()
    if rank == victim:
        os._exit(3)
    time.sleep(0.5)
    start = time.monotonic()
    errors = {}
    work = dist.all_reduce(torch.ones(1000), async_op=True)
    future = bps.push_pull_hook(None, _FakeBucket(torch.ones(500)))
    for name, wait in (("work", work.wait), ("hook_future", future.wait)):
        try:
            wait()
            errors[name] = None
        except Exception as error:  # the point of the test
            errors[name] = f"{type(error).__name__}: {error}"
    report({"errors": errors, "seconds": time.monotonic() - start}, rank)


class _FakeBucket:
    """Enough of dist.GradBucket for push_pull_hook."""

    def __init__(self, buffer):
        self._buffer = buffer

    def buffer(self):
        return self._buffer

    def index(self):
        return 0


if __name__ == "__main__":
    main()
