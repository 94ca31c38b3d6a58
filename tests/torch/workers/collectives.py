"""Every c10d collective of the 'byteps' backend, for every dtype it accepts,
checked against values computed locally. Reports {check name: outcome}."""
import torch
import torch.distributed as dist

import byteps_native.torch  # noqa: F401  registers 'byteps'
from byteps_native.torch.extension import _c10d
from tests.support.results import outcome, report

REDUCE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
                 torch.uint8]
MOVE_ONLY_DTYPES = [torch.int8, torch.int16, torch.bool, torch.complex64]


def expect_equal(actual, expected):
    if not torch.equal(actual, expected):
        raise AssertionError(f"got {actual} expected {expected}")


def expect_error(fn, *fragments):
    try:
        fn()
    except Exception as error:
        text = str(error)
        missing = [f for f in fragments if f not in text]
        if missing:
            raise AssertionError(f"error lacks {missing}: {text}")
        return
    raise AssertionError("no error raised")


def main():
    dist.init_process_group("byteps")
    rank, n = dist.get_rank(), dist.get_world_size()
    checks = {}

    def check(name, fn):
        checks[name] = outcome(fn)

    for dtype in REDUCE_DTYPES:
        tag = str(dtype).replace("torch.", "")

        def allreduce_sum(dtype=dtype):
            t = torch.full((7, 3), rank + 1, dtype=dtype)
            dist.all_reduce(t)
            expect_equal(t, torch.full((7, 3), n * (n + 1) // 2, dtype=dtype))

        def allreduce_avg(dtype=dtype):
            t = torch.full((5,), 2 * (rank + 1), dtype=dtype)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            expect_equal(t, torch.full((5,), n + 1, dtype=dtype))

        def broadcast(dtype=dtype):
            t = torch.arange(10).to(dtype) if rank == n - 1 else torch.zeros(10, dtype=dtype)
            dist.broadcast(t, src=n - 1)
            expect_equal(t, torch.arange(10).to(dtype))

        def allgather(dtype=dtype):
            out = [torch.empty(4, dtype=dtype) for _ in range(n)]
            dist.all_gather(out, torch.full((4,), rank, dtype=dtype))
            for r in range(n):
                expect_equal(out[r], torch.full((4,), r, dtype=dtype))

        def allgather_into_tensor(dtype=dtype):
            out = torch.empty(3 * n, dtype=dtype)
            dist.all_gather_into_tensor(out, torch.full((3,), rank + 1, dtype=dtype))
            expect_equal(out, torch.arange(1, n + 1).repeat_interleave(3).to(dtype))

        def reduce_scatter_tensor(dtype=dtype):
            out = torch.empty(2, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.arange(2 * n).to(dtype))
            expect_equal(out, (torch.arange(2 * rank, 2 * rank + 2) * n).to(dtype))

        def reduce_scatter_list(dtype=dtype):
            out = torch.empty(3, dtype=dtype)
            dist.reduce_scatter(out, [torch.full((3,), r + 1, dtype=dtype) for r in range(n)])
            expect_equal(out, torch.full((3,), n * (rank + 1), dtype=dtype))

        def reduce(dtype=dtype):
            t = torch.full((4,), rank + 1, dtype=dtype)
            dist.reduce(t, dst=0)
            want = n * (n + 1) // 2 if rank == 0 else rank + 1
            expect_equal(t, torch.full((4,), want, dtype=dtype))

        def allreduce_coalesced(dtype=dtype):
            ts = [torch.full((3,), rank + 1, dtype=dtype), torch.full((2, 2), 1, dtype=dtype)]
            dist.all_reduce_coalesced(ts)
            expect_equal(ts[0], torch.full((3,), n * (n + 1) // 2, dtype=dtype))
            expect_equal(ts[1], torch.full((2, 2), n, dtype=dtype))

        for fn in (allreduce_sum, allreduce_avg, broadcast, allgather, allgather_into_tensor,
                   reduce_scatter_tensor, reduce_scatter_list, reduce, allreduce_coalesced):
            check(f"{fn.__name__}[{tag}]", fn)

    for dtype in MOVE_ONLY_DTYPES:
        tag = str(dtype).replace("torch.", "")

        def broadcast_any(dtype=dtype):
            data = (torch.arange(6) % 2).to(dtype)
            t = data.clone() if rank == 0 else torch.zeros(6, dtype=dtype)
            dist.broadcast(t, src=0)
            expect_equal(t, data)

        def allgather_any(dtype=dtype):
            out = [torch.zeros(2, dtype=dtype) for _ in range(n)]
            dist.all_gather(out, torch.full((2,), rank % 2, dtype=dtype))
            for r in range(n):
                expect_equal(out[r], torch.full((2,), r % 2, dtype=dtype))

        def allreduce_delegated(dtype=dtype):
            # Not an engine dtype: served by the group's gloo delegate.
            if dtype.is_complex:  # torch itself reduces complex tensors as real views
                t = torch.full((2,), 1 + 2j, dtype=dtype)
                dist.all_reduce(t)
                return expect_equal(t, torch.full((2,), n * (1 + 2j), dtype=dtype))
            if dtype == torch.bool:
                t = torch.tensor([rank == 0, False, True])
                dist.all_reduce(t)  # SUM of bools is OR
                return expect_equal(t, torch.tensor([True, False, True]))
            t = torch.full((2,), rank + 1, dtype=dtype)
            dist.all_reduce(t)
            expect_equal(t, torch.full((2,), n * (n + 1) // 2, dtype=dtype))

        for fn in (broadcast_any, allgather_any, allreduce_delegated):
            check(f"{fn.__name__}[{tag}]", fn)

    def non_contiguous():
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        t = (base * (rank + 1)).t()  # a transposed view
        dist.all_reduce(t)
        expect_equal(t, (base * (n * (n + 1) // 2)).t())

    def scalar_tensor():
        t = torch.tensor(float(rank))
        dist.all_reduce(t)
        expect_equal(t, torch.tensor(float(n * (n - 1) // 2)))

    def larger_than_a_partition():
        t = torch.full((1_500_000,), float(rank + 1))  # 6 MB > BYTEPS_PARTITION_BYTES
        dist.all_reduce(t)
        expect_equal(t, torch.full((1_500_000,), float(n * (n + 1) // 2)))

    def async_work_future():
        t = torch.full((3,), float(rank))
        work = dist.all_reduce(t, async_op=True)
        value = work.get_future().wait()
        if not work.is_completed() or not work.is_success():
            raise AssertionError("work not completed after its future")
        expect_equal(value[0], torch.full((3,), float(n * (n - 1) // 2)))

    def many_in_flight():
        tensors = [torch.full((100 + i,), float(i)) for i in range(20)]
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        for i, (t, w) in enumerate(zip(tensors, works)):
            w.wait()
            expect_equal(t, torch.full((100 + i,), float(i * n)))

    def max_delegated():
        t = torch.tensor([float(rank), -float(rank)])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        expect_equal(t, torch.tensor([float(n - 1), 0.0]))

    def allgather_from_own_slot():
        # The input is this rank's slot of the output (FSDP does this): the
        # engine's gather places it without a copy and zeroes around it.
        out = torch.full((3 * n,), 99.0)
        mine = out[3 * rank:3 * rank + 3]
        mine.fill_(rank + 1)
        dist.all_gather_into_tensor(out, mine)
        expect_equal(out, torch.arange(1, n + 1).repeat_interleave(3).to(torch.float32))

    def gather_bytes_refuses_bad_placement():
        expect_error(lambda: _c10d.gather_bytes_async(torch.ones(10, dtype=torch.uint8), 20, 25, "bad.placement"),
                     "BPS_INVALID_ARGUMENT", f"gather of 'bad.placement' on rank {rank}",
                     "10 bytes at offset 20 do not fit the 25 gathered bytes")

    def barrier():
        dist.barrier()

    def objects():
        gathered = [None] * n
        dist.all_gather_object(gathered, {"rank": rank})
        if gathered != [{"rank": r} for r in range(n)]:
            raise AssertionError(gathered)
        payload = [f"from {n - 1}" if rank == n - 1 else None]
        dist.broadcast_object_list(payload, src=n - 1)
        if payload != [f"from {n - 1}"]:
            raise AssertionError(payload)

    def backend_name():
        if dist.get_backend() != "byteps":
            raise AssertionError(dist.get_backend())

    for fn in (non_contiguous, scalar_tensor, larger_than_a_partition, async_work_future, many_in_flight,
               max_delegated, allgather_from_own_slot, gather_bytes_refuses_bad_placement, barrier, objects,
               backend_name):
        check(fn.__name__, fn)

    report(checks, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
