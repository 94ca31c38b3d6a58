"""Machines of different sizes (issue 29): what torch.distributed and the
Horovod-style API report, and exact all_reduce sums and averages over the
global rank count. Reports {check name: outcome}, plus the sizes seen."""
import os

import torch
import torch.distributed as dist

import byteps_native.torch as bps
from tests.support.results import outcome, report


def main():
    dist.init_process_group("byteps")
    rank, n = dist.get_rank(), dist.get_world_size()
    checks = {}

    def check(name, fn):
        checks[name] = outcome(fn)

    def expect(actual, expected):
        if not torch.equal(actual, expected):
            bad = (actual != expected).nonzero()
            raise AssertionError(f"{bad.numel()} wrong elements, first at {bad[0].tolist()}: "
                                 f"{actual.flatten()[bad[0]].tolist()} instead of {expected.flatten()[bad[0]].tolist()}")

    # Spans many partitions (BYTEPS_PARTITION_BYTES is small in the test) and
    # an odd tail, so every network slice of every machine's cut is used.
    count = 10007
    index = torch.arange(count, dtype=torch.float32) % 7 + 1
    total = sum(q + 1 for q in range(n))

    def sum_float():
        t = (rank + 1) * index
        dist.all_reduce(t)
        expect(t, total * index)

    def sum_int():
        t = ((rank + 1) * index).to(torch.int64)
        dist.all_reduce(t)
        expect(t, (total * index).to(torch.int64))

    def average():
        t = (rank + 1) * index * n  # the average is total * index exactly
        out = bps.push_pull(t, average=True, name="uneven.avg")
        expect(out, total * index)

    def small():
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t)
        expect(t, torch.full((3,), float(total)))

    for _ in range(2):
        check("sum_float32", sum_float)
        check("sum_int64", sum_int)
        check("average", average)
        check("small", small)
    report({"checks": checks, "rank": rank, "size": n, "bps_rank": bps.rank(), "bps_size": bps.size(),
            "bps_local_rank": bps.local_rank(), "bps_local_size": bps.local_size(),
            "cross_rank": bps.cross_rank(), "cross_size": bps.cross_size(),
            "homogeneous": bps.is_homogeneous(),
            "env_rank": int(os.environ["RANK"]), "group_rank": int(os.environ["GROUP_RANK"])}, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
