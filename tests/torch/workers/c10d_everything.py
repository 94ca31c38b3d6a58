"""What torch.distributed offers beyond the engine's collectives, on 'byteps':
ops served by the group's delegate, subgroups, barrier as a fence, sequence
numbers, inference-mode tensors, DDP bucket names and priorities, and
PowerSGD (a hook that waits on a collective inside Future.then) against gloo.
Reports {check name: outcome}."""
import copy

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
from torch.nn.parallel import DistributedDataParallel as DDP

import byteps_native.torch  # noqa: F401  registers 'byteps'
from byteps_native.torch.extension import _c10d
from tests.support.results import outcome, report


def expect_equal(actual, expected):
    if not torch.equal(actual, expected):
        raise AssertionError(f"got {actual} expected {expected}")


def main():
    dist.init_process_group("byteps")
    rank, n = dist.get_rank(), dist.get_world_size()
    checks = {}

    def check(name, fn):
        checks[name] = outcome(fn)

    def reduce_ops():
        t = torch.tensor([rank + 2, rank + 2, 6 + rank, 3 - rank], dtype=torch.int64)
        for op, expected in [(dist.ReduceOp.PRODUCT, 6), (dist.ReduceOp.MIN, 2), (dist.ReduceOp.MAX, 3)]:
            x = torch.full((3,), rank + 2, dtype=torch.int64)
            dist.all_reduce(x, op=op)
            expect_equal(x, torch.full((3,), expected, dtype=torch.int64))
        for op, expected in [(dist.ReduceOp.BAND, 6 & 7), (dist.ReduceOp.BOR, 6 | 7), (dist.ReduceOp.BXOR, 6 ^ 7)]:
            x = torch.tensor([6 + rank])
            dist.all_reduce(x, op=op)
            expect_equal(x, torch.tensor([expected]))
        del t

    def small_dtypes():
        for dtype in (torch.int8, torch.int16):
            x = torch.full((4,), rank + 1, dtype=dtype)
            dist.all_reduce(x)
            expect_equal(x, torch.full((4,), 3, dtype=dtype))

    def gather_scatter():
        out = [torch.empty(3) for _ in range(n)] if rank == 0 else None
        dist.gather(torch.full((3,), float(rank)), out, dst=0)
        if rank == 0:
            for r in range(n):
                expect_equal(out[r], torch.full((3,), float(r)))
        got = torch.empty(2)
        dist.scatter(got, [torch.full((2,), 10.0 + r) for r in range(n)] if rank == 1 else None, src=1)
        expect_equal(got, torch.full((2,), 10.0 + rank))

    def all_to_all():
        out = torch.empty(n * 2)
        dist.all_to_all_single(out, torch.arange(n * 2, dtype=torch.float32) + 100 * rank)
        expect_equal(out, torch.cat([torch.tensor([2.0 * rank, 2.0 * rank + 1]) + 100 * r for r in range(n)]))
        outs = [torch.empty(1) for _ in range(n)]
        dist.all_to_all(outs, [torch.tensor([10.0 * rank + r]) for r in range(n)])
        for r in range(n):
            expect_equal(outs[r], torch.tensor([10.0 * r + rank]))

    def point_to_point():
        peer = 1 - rank
        if rank == 0:
            dist.send(torch.tensor([42.0]), dst=1)
        else:
            t = torch.empty(1)
            dist.recv(t, src=0)
            expect_equal(t, torch.tensor([42.0]))
        got = torch.empty(2)
        works = [dist.isend(torch.full((2,), float(rank)), peer), dist.irecv(got, peer)]
        for w in works:
            w.wait()
        expect_equal(got, torch.full((2,), float(peer)))
        got = torch.empty(3)
        ops = [dist.P2POp(dist.isend, torch.full((3,), rank + 5.0), peer), dist.P2POp(dist.irecv, got, peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        expect_equal(got, torch.full((3,), peer + 5.0))

    def sparse_allreduce():
        i = torch.tensor([[rank], [0]])
        s = torch.sparse_coo_tensor(i, torch.tensor([1.0 + rank]), (2, 2))
        dist.all_reduce(s)
        expect_equal(s.to_dense(), torch.tensor([[1.0, 0.0], [2.0, 0.0]]))

    def subgroups():
        solo = dist.new_group([0])
        if rank == 0:
            t = torch.ones(3)
            dist.all_reduce(t, group=solo)
            expect_equal(t, torch.ones(3))
        everyone = dist.new_group([0, 1])
        t = torch.full((5,), rank + 1.0)
        dist.all_reduce(t, group=everyone)
        expect_equal(t, torch.full((5,), 3.0))
        mine, _ = dist.new_subgroups(group_size=1)
        t = torch.full((2,), rank + 1.0)
        dist.all_reduce(t, group=mine)
        expect_equal(t, torch.full((2,), rank + 1.0))
        if dist.get_backend(everyone) != "byteps":
            raise AssertionError(f"subgroup backend {dist.get_backend(everyone)}")

    def objects():
        out = [None] * n if rank == 0 else None
        dist.gather_object({"rank": rank}, out, dst=0)
        if rank == 0 and out != [{"rank": r} for r in range(n)]:
            raise AssertionError(out)
        got = [None]
        dist.scatter_object_list(got, [f"to {r}" for r in range(n)] if rank == 0 else None, src=0)
        if got != [f"to {rank}"]:
            raise AssertionError(got)

    def barrier_is_fence():
        # Large async all_reduces (engine path), then barrier, then read the
        # tensors without waiting on their works.
        tensors = [torch.full((1 << 20,), float(rank + 1 + i)) for i in range(8)]
        for t in tensors:
            dist.all_reduce(t, async_op=True)
        dist.barrier()
        for i, t in enumerate(tensors):
            expect_equal(t, torch.full((1 << 20,), float(3 + 2 * i)))

    def sequence_numbers():
        pg = dist.group.WORLD._get_backend(torch.device("cpu"))
        before = pg._get_sequence_number_for_group()
        dist.all_reduce(torch.ones(1))
        dist.broadcast(torch.ones(1), src=0)
        after = pg._get_sequence_number_for_group()
        if after != before + 2:
            raise AssertionError(f"sequence number {before} -> {after}")
        numbers = [None] * n
        dist.all_gather_object(numbers, after)
        if len(set(numbers)) != 1:
            raise AssertionError(f"ranks disagree: {numbers}")

    def inference_mode():
        with torch.inference_mode():
            big = torch.full((1 << 15,), float(rank))  # 128 KiB: the engine's broadcast
            dist.broadcast(big, src=1)
            expect_equal(big, torch.full((1 << 15,), 1.0))
            out = [torch.empty(4) for _ in range(n)]
            dist.all_gather(out, torch.full((4,), float(rank)))
            for r in range(n):
                expect_equal(out[r], torch.full((4,), float(r)))

    def ddp_bucket_names_and_priorities():
        # Four equal layers in buckets of one layer each: equal-size buckets.
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(64, 64, bias=False) for _ in range(4)])
        ddp = DDP(model, bucket_cap_mb=64 * 64 * 4 / 2**20)
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        for _ in range(3):
            ddp(torch.randn(8, 64)).sum().backward()
        calls = [c for c in _c10d.recent_engine_calls(backend) if ".allreduce." in c[0]][-4:]
        names = [c[0] for c in calls]
        if len(set(names)) != 4:
            raise AssertionError(f"equal-size buckets share names: {calls}")
        priorities = [c[1] for c in calls]
        if priorities != sorted(priorities) or len(set(priorities)) != 4:
            raise AssertionError(f"later buckets (first layers) must go first: {calls}")

    def large_tensors_keep_one_name():
        # A slot's first call allocates its staging: a 16 MiB tensor cycling
        # through 32 names paid that 32 times and held 32 copies (issue 27).
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        big, small = torch.ones(4 << 20), torch.ones(4)
        for _ in range(3):
            dist.all_reduce(big)
            dist.all_reduce(small)
        calls = [c[0] for c in _c10d.recent_engine_calls(backend)[-6:]]
        big_names = {c for c in calls if f".{4 << 20}." in c}
        small_names = {c for c in calls if ".f32.4." in c}
        if len(big_names) != 1 or len(small_names) != 3:
            raise AssertionError(f"want one name for 16 MiB and three for 16 B: {calls}")

    def powersgd_matches_gloo():
        gloo = dist.new_group(backend="gloo")
        results = []
        for group in (dist.group.WORLD, gloo):
            torch.manual_seed(1)
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
            ddp = DDP(copy.deepcopy(model), process_group=group)
            state = powerSGD.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                           start_powerSGD_iter=2, min_compression_rate=0.5,
                                           use_error_feedback=True, warm_start=True, random_seed=0)
            ddp.register_comm_hook(state, powerSGD.powerSGD_hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            gen = torch.Generator().manual_seed(2 + rank)
            for _ in range(6):
                opt.zero_grad()
                ddp(torch.randn(16, 32, generator=gen)).square().mean().backward()
                opt.step()
            results.append([p.detach().clone() for p in ddp.parameters()])
        for a, b in zip(*results):
            if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
                raise AssertionError(f"byteps and gloo differ by {(a - b).abs().max().item()}")

    for fn in (reduce_ops, small_dtypes, gather_scatter, all_to_all, point_to_point, sparse_allreduce,
               subgroups, objects, barrier_is_fence, sequence_numbers, inference_mode,
               ddp_bucket_names_and_priorities, large_tensors_keep_one_name, powersgd_matches_gloo):
        check(fn.__name__, fn)

    report(checks, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
