"""init_process_group('byteps') with nothing of byteps_native imported by this
script: the backend must come from torch's `torch.backends` entry-point
autoload. Also used with TORCH_DISTRIBUTED_DEBUG=DETAIL, which wraps every
group in a checking wrapper that needs sequence numbers. Reports outcomes."""
import sys

import torch
import torch.distributed as dist

from tests.support.results import outcome, report


def main():
    checks = {}
    checks["init"] = outcome(lambda: dist.init_process_group("byteps"))
    rank, n = dist.get_rank(), dist.get_world_size()

    def collectives():
        t = torch.full((1 << 16,), float(rank + 1))
        dist.all_reduce(t)
        if not torch.equal(t, torch.full((1 << 16,), float(n * (n + 1) // 2))):
            raise AssertionError(t[:4])
        b = torch.full((3,), float(rank))
        dist.broadcast(b, src=1)
        if not torch.equal(b, torch.ones(3)):
            raise AssertionError(b)
        group = dist.new_group([0, 1])
        dist.all_reduce(torch.ones(2), group=group)
        dist.barrier()

    checks["collectives"] = outcome(collectives)
    checks["backend"] = dist.get_backend()
    checks["byteps_loaded_by_torch"] = "byteps_native.torch" in sys.modules
    report(checks, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
