"""Horovod's torch collectives and optimizer options across ranks; each case
reports 'ok' or its error. Values are checked against what every rank can
compute locally from the (rank-dependent) inputs."""
import traceback

import torch
from torch import nn

import byteps_native.torch as hvd
from tests.support.results import report

hvd.init(lazy=False)
r, n = hvd.rank(), hvd.size()
cases = {}


def case(fn):
    try:
        fn()
        cases[fn.__name__] = "ok"
    except Exception:  # reported; the test asserts every case
        cases[fn.__name__] = traceback.format_exc(limit=3)
    return fn


def value(rank):
    return torch.arange(6, dtype=torch.float32).reshape(2, 3) + 10 * rank


@case
def allreduce_ops():
    every = [value(k) for k in range(n)]
    assert torch.allclose(hvd.allreduce(value(r)), sum(every) / n)
    assert torch.allclose(hvd.allreduce(value(r), op=hvd.Sum), sum(every))
    assert torch.allclose(hvd.allreduce(value(r), average=False), sum(every))
    assert torch.equal(hvd.allreduce(value(r), op=hvd.Max), torch.stack(every).max(0).values)
    assert torch.equal(hvd.allreduce(value(r), op=hvd.Min), torch.stack(every).min(0).values)
    assert torch.allclose(hvd.allreduce(value(r), op=hvd.Product), torch.stack(every).prod(0))
    assert torch.allclose(hvd.allreduce(value(r), op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5),
                          sum(every))
    t = value(r)
    hvd.allreduce_(t, op=hvd.Sum)
    assert torch.allclose(t, sum(every))
    h = hvd.allreduce_async(value(r), name="async.one")
    assert torch.allclose(hvd.synchronize(h), sum(every) / n)
    ints = hvd.allreduce(torch.tensor([r + 1, 2], dtype=torch.int64), op=hvd.Sum)
    assert ints.tolist() == [n * (n + 1) // 2, 2 * n], ints
    try:
        hvd.allreduce(value(r), average=True, op=hvd.Sum)
    except ValueError:
        pass
    else:
        raise AssertionError("average= and op= together must fail")


def adasum_reference(a, b):
    dot = float((a * b).sum())
    na, nb = float((a * a).sum()), float((b * b).sum())
    return (1 - dot / (2 * na)) * a + (1 - dot / (2 * nb)) * b


@case
def adasum():
    # Horovod's own test inputs: orthogonal vectors add, parallel ones average.
    mine = torch.tensor([1.0, 0.0]) if r == 0 else torch.tensor([0.0, 1.0])
    out = hvd.allreduce(mine, op=hvd.Adasum)
    assert torch.allclose(out, torch.tensor([1.0, 1.0])), out
    same = hvd.allreduce(torch.tensor([2.0, 4.0]), op=hvd.Adasum)
    assert torch.allclose(same, torch.tensor([2.0, 4.0])), same
    gen = [torch.Generator().manual_seed(k) for k in range(n)]
    every = [torch.randn(50, generator=g, dtype=torch.float64) for g in gen]
    level = every
    while len(level) > 1:
        level = [adasum_reference(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    assert torch.allclose(hvd.allreduce(every[r].clone(), op=hvd.Adasum), level[0])


@case
def allgather():
    mine = torch.full((r + 1, 2), float(r))  # first dimensions differ per rank
    out = hvd.allgather(mine)
    assert torch.equal(out, torch.cat([torch.full((k + 1, 2), float(k)) for k in range(n)])), out
    assert torch.equal(hvd.allgather(torch.tensor([r], dtype=torch.int8)),
                       torch.arange(n, dtype=torch.int8))
    assert hvd.allgather_object({"rank": r}) == [{"rank": k} for k in range(n)]
    x = torch.ones(2, requires_grad=True)
    (hvd.allgather(x) * torch.arange(2 * n, dtype=torch.float32)).sum().backward()
    # Horovod's gradient: the ranks' output gradients are averaged (not summed),
    # then this rank's rows are kept (Horovod's and BytePS's own tests expect that)
    assert torch.allclose(x.grad, torch.arange(2 * r, 2 * r + 2, dtype=torch.float32)), x.grad


@case
def broadcast():
    out = hvd.broadcast(torch.full((3,), float(r)), root_rank=n - 1)
    assert torch.equal(out, torch.full((3,), float(n - 1)))
    t = torch.full((2,), float(r) + 0.5)
    hvd.broadcast_(t, root_rank=0)
    assert torch.equal(t, torch.full((2,), 0.5))
    flags = hvd.broadcast(torch.tensor([r == 0, True]), root_rank=0)
    assert flags.tolist() == [True, True]


@case
def alltoall():
    # rank r sends k+1 rows of value 100*r + k to rank k
    splits = torch.tensor([k + 1 for k in range(n)], dtype=torch.int32)
    rows = torch.cat([torch.full((k + 1, 2), 100.0 * r + k) for k in range(n)])
    out, received = hvd.alltoall(rows, splits=splits)
    expected = torch.cat([torch.full((r + 1, 2), 100.0 * src + r) for src in range(n)])
    assert torch.equal(out, expected), out
    assert received.tolist() == [r + 1] * n
    even = hvd.alltoall(torch.arange(2 * n, dtype=torch.float32) + 10 * r)
    assert even.tolist() == [float(2 * r + j + 10 * src) for src in range(n) for j in range(2)], even


@case
def reducescatter():
    t = torch.arange(2 * n, dtype=torch.float32).reshape(n, 2) * (r + 1)
    out = hvd.reducescatter(t, op=hvd.Sum)
    assert torch.equal(out, torch.arange(2 * n, dtype=torch.float32).reshape(n, 2)[r:r + 1] * n * (n + 1) / 2)


@case
def join_and_barrier():
    hvd.barrier()
    last = hvd.join()
    assert 0 <= last < n


def batches_of(rank):
    """Uneven data: rank k has 3 + 2k batches."""
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(4, 3, generator=g), torch.randn(4, 1, generator=g)) for _ in range(3 + 2 * rank)]


@case
def join_uneven_batches():
    """A rank that runs out of data joins; the others keep training, the joined
    rank contributing zero gradients (Horovod's join), and join() returns the
    last rank to join."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    reference = nn.Linear(3, 1)
    reference.load_state_dict(model.state_dict())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Average)
    for x, y in batches_of(r):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    # Plain allreduces and a named in-place one also go on with zeros from joined ranks.
    extra = hvd.allreduce(torch.ones(5), name="after_data", op=hvd.Sum) if r == n - 1 else None
    last = hvd.join()
    assert last == n - 1, f"join() returned {last}; rank {n - 1} has the most batches and joins last"
    if extra is not None:
        assert torch.equal(extra, torch.ones(5)), extra
    # The same steps on one process: step i averages the gradients of the ranks
    # that still have batch i, zeros standing in for the others.
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    data = [batches_of(k) for k in range(n)]
    for i in range(3 + 2 * (n - 1)):
        ref_opt.zero_grad()
        grads = [torch.zeros_like(p) for p in reference.parameters()]
        for k in range(n):
            if i < len(data[k]):
                reference.zero_grad()
                nn.functional.mse_loss(reference(data[k][i][0]), data[k][i][1]).backward()
                grads = [g + p.grad for g, p in zip(grads, reference.parameters())]
        for p, g in zip(reference.parameters(), grads):
            p.grad = g / n
        ref_opt.step()
        if i + 1 == len(data[r]):  # a joined rank stops stepping (as under Horovod)
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                assert torch.allclose(p, q, atol=1e-6), f"{name} after {i + 1} steps: {p} vs reference {q}"
    try:
        if r == 0:
            hvd.join()
        else:
            hvd.allgather(torch.ones(2))
            raise AssertionError("allgather after a rank joined should fail, as in Horovod")
    except RuntimeError as e:
        assert "joined" in str(e), e
        hvd.join()
    hvd.barrier()


@case
def process_sets():
    """Collectives restricted to registered process sets (torch subgroups)."""
    singles = [hvd.add_process_set([k]) for k in range(n)]
    both = hvd.add_process_set(hvd.ProcessSet(list(range(n))))
    mine = singles[r]
    assert mine.included() and mine.size() == 1 and mine.rank() == 0 and not singles[1 - r].included()
    assert torch.equal(hvd.allreduce(value(r), op=hvd.Sum, process_set=mine), value(r))
    every = [value(k) for k in range(n)]
    assert torch.allclose(hvd.allreduce(value(r), process_set=both), sum(every) / n)
    assert torch.equal(hvd.allreduce(value(r), op=hvd.Max, process_set=both), torch.stack(every).max(0).values)
    ragged = torch.full((r + 1, 2), float(r))
    assert torch.equal(hvd.allgather(ragged, process_set=both),
                       torch.cat([torch.full((k + 1, 2), float(k)) for k in range(n)]))
    assert torch.equal(hvd.broadcast(value(r), n - 1, process_set=both), value(n - 1))
    assert hvd.allgather_object({"rank": r}, process_set=both) == [{"rank": k} for k in range(n)]
    hvd.barrier(process_set=mine)
    try:
        hvd.allreduce(value(r), process_set=singles[1 - r])
        raise AssertionError("a collective on a set without this rank should fail")
    except ValueError as e:
        assert "not in" in str(e), e
    try:
        hvd.allreduce(value(r), process_set=hvd.ProcessSet([0]))
        raise AssertionError("an unregistered set should fail")
    except ValueError as e:
        assert "add_process_set" in str(e), e
    assert all(hvd.remove_process_set(ps) for ps in singles + [both])


@case
def built_flags():
    assert hvd.nccl_built() in (0, False) and hvd.mpi_threads_supported() is False
    assert isinstance(hvd.cuda_built(), bool) and hvd.is_initialized()
    assert hvd.cross_size() * hvd.local_size() == n


def train(**options):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), **options)
    for step in range(3):
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step * n + r))
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@case
def optimizer_options():
    plain = train()
    predivided = train(gradient_predivide_factor=2.0)
    assert torch.allclose(plain, predivided, atol=1e-6), (plain, predivided)
    summed = train(op=hvd.Sum)
    adasum = train(op=hvd.Adasum)
    sparse = train(sparse_as_dense=True, num_groups=2)
    every = hvd.allgather(torch.stack([plain, summed, adasum, sparse]).unsqueeze(0))
    assert all(torch.equal(every[0], every[k]) for k in range(n)), "ranks disagree"
    assert not torch.allclose(plain, summed)
    try:
        train(op=hvd.Sum, gradient_predivide_factor=2.0)
    except ValueError:
        pass
    else:
        raise AssertionError("gradient_predivide_factor with op=Sum must fail")


@case
def staleness_needs_async():
    model = nn.Linear(2, 2)
    try:
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), staleness=1)
    except ValueError as e:
        assert "BYTEPS_ENABLE_ASYNC=1" in str(e), e
    else:
        raise AssertionError("staleness without async must fail")


@case
def distributed_data_parallel():
    from byteps_native.torch.parallel import DistributedDataParallel as DDP
    torch.manual_seed(r)  # differs per rank: DDP must broadcast rank 0's weights
    model = DDP(nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step * n + r))
        model(x).pow(2).mean().backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = hvd.allgather(flat.unsqueeze(0))
    assert all(torch.equal(every[0], every[k]) for k in range(n)), "DDP ranks disagree"


@case
def missing_name_says_what_instead():
    try:
        hvd.mpi_lib
    except AttributeError as e:
        assert "on purpose" in str(e) and "byteps_native.core" in str(e), e
    else:
        raise AssertionError("mpi_lib should be absent with advice")


@case
def sync_batch_norm():
    # Horovod's constructor; statistics over both ranks' samples, as one
    # BatchNorm1d over the whole batch computes them.
    torch.manual_seed(7)
    batch = torch.randn(2 * n, 4, 3)
    mine = batch[2 * r:2 * r + 2].clone().requires_grad_()
    whole = batch.clone().requires_grad_()
    sync_bn, bn = hvd.SyncBatchNorm(num_features=4), nn.BatchNorm1d(4)
    out, reference = sync_bn(mine), bn(whole)
    assert torch.allclose(out, reference[2 * r:2 * r + 2], atol=1e-5), (out, reference)
    assert torch.allclose(sync_bn.running_mean, bn.running_mean, atol=1e-6)
    assert torch.allclose(sync_bn.running_var, bn.running_var, atol=1e-5)
    out.sum().backward()
    reference.sum().backward()
    assert torch.allclose(mine.grad, whole.grad[2 * r:2 * r + 2], atol=1e-5)
    assert torch.allclose(hvd.allreduce(sync_bn.weight.grad, op=hvd.Sum, name="sbn.w"), bn.weight.grad, atol=1e-4)


@case
def mixed_devices_fail_on_every_rank():
    # Horovod fails a collective whose ranks mix CPU and GPU tensors. No GPU
    # here: the meta device stands for "not the CPU"; the check runs before
    # anything is submitted.
    tensor = torch.ones(3, device="meta" if r == 1 else "cpu")
    try:
        hvd.allreduce(tensor)
    except RuntimeError as e:
        assert "device" in str(e) and "non-CPU float32 [3]" in str(e) and "float32 [3]" in str(e), e
    else:
        raise AssertionError("a CPU/non-CPU mix must fail")


@case
def group_on_two_devices_fails_where_submitted():
    # Horovod fuses a group on one device; a group mixing devices fails on the
    # rank that submits it, before anything reaches the engine (the meta
    # device stands for a GPU here). Every grouped collective, with and without
    # autograd.
    mixed = [torch.ones(4), torch.ones(4, device="meta"), torch.ones(4)]
    calls = [lambda ts: hvd.grouped_allreduce(ts), lambda ts: hvd.grouped_allreduce_async(ts),
             lambda ts: hvd.grouped_allgather(ts), lambda ts: hvd.grouped_reducescatter(ts)]
    for grad in (False, True):
        for call in calls:
            tensors = [t.clone().requires_grad_(grad) for t in mixed]
            try:
                call(tensors)
            except RuntimeError as e:
                assert "one device" in str(e) and "cpu, meta" in str(e), e
            else:
                raise AssertionError("a group on two devices must fail")
    # and the engine is untouched: the next collective pairs normally
    assert torch.equal(hvd.allreduce(torch.ones(2) * (r + 1), op=hvd.Sum), torch.full((2,), 3.0))


@case
def duplicate_name_while_not_synchronized():
    # Horovod's rule, made independent of timing: rank 1's first 'dup' pairs
    # with rank 0's already submitted one and completes at once; a second
    # 'dup' right after it (nothing submitted in between) must still fail.
    import time
    t = torch.ones(5)
    first = hvd.allreduce_async(t, name="dup", op=hvd.Sum) if r == 0 else None
    hvd.barrier()
    if r == 1:
        first = hvd.allreduce_async(t, name="dup", op=hvd.Sum)
        time.sleep(0.3)  # long enough to complete
        assert hvd.poll(first)
        try:
            hvd.allreduce_async(t, name="dup", op=hvd.Sum)
        except ValueError as e:
            assert "already in flight" in str(e), e
        else:
            raise AssertionError("a second 'dup' before synchronize must fail")
    assert hvd.synchronize(first).tolist() == [float(n)] * 5
    # Synchronized: the name is free again, on every rank.
    assert hvd.allreduce(t, name="dup", op=hvd.Sum).tolist() == [float(n)] * 5


report({"rank": r, "size": n, "cases": cases})
