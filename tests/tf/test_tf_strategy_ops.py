"""MirroredStrategy(cross_device_ops=BytePSOps()) across 2 processes x 1 and
x 2 logical CPU devices: every collective is global, eager and in tf.function,
replica ids are global and input is sharded, as under
MultiWorkerMirroredStrategy."""
import numpy as np
import pytest

from tests.support.jobs import describe, require_success
from tests.tf import run_job

PROCESSES = 2
MIXED = [("float32", [3, 4]), ("float64", [7]), ("float16", [2, 2]), ("bfloat16", [5]),
         ("int32", [6]), ("int64", []), ("uint8", [4]), ("float32", [1000])]


@pytest.fixture(scope="module", params=[1, 2], ids=["2x1", "2x2"])
def job(request):
    outcomes = run_job("strategy_ops_worker.py", num_workers=PROCESSES, args=[str(request.param)])
    require_success(outcomes)
    return Job(outcomes, request.param)


class Job(list):
    """Worker outcomes plus the layout: `local` devices per process."""

    def __init__(self, outcomes, local):
        super().__init__(outcomes)
        self.local = local
        self.replicas = PROCESSES * local
        # global replica g contributes 1 + g (see the worker)
        self.total = sum(1 + g for g in range(self.replicas))


@pytest.fixture(params=["eager", "graph"])
def mode(request):
    return request.param


def copies(job, value):
    """The per-device copies of a Mirrored result (a single device: the value itself)."""
    return value if job.local > 1 else [value]


def each_result(job, mode, key):
    for o in job:
        yield o.rank, o.result[mode][key]


def test_num_replicas_in_sync_is_global(job):
    for o in job:
        assert o.result["num_replicas_in_sync"] == job.replicas


def test_reduce_sum(job, mode):
    for rank, value in each_result(job, mode, "reduce_sum"):
        np.testing.assert_allclose(value, [job.total] * 3, err_msg=f"rank {rank}")


def test_reduce_mean(job, mode):
    for rank, value in each_result(job, mode, "reduce_mean"):
        np.testing.assert_allclose(value, [job.total / job.replicas] * 3, err_msg=f"rank {rank}")
    for rank, value in each_result(job, mode, "reduce_mean_axis0"):
        np.testing.assert_allclose(value, job.total / job.replicas, err_msg=f"rank {rank}")


def test_reduce_int32_is_global(job, mode):
    for rank, value in each_result(job, mode, "reduce_int32_sum"):
        assert value == [job.total, job.total], f"rank {rank}"


def test_batch_reduce_mixed_shapes_and_dtypes(job, mode):
    for rank, results in each_result(job, mode, "batch_sum"):
        assert len(results) == len(MIXED)
        for (dtype, shape), per_device in zip(MIXED, results):
            per_device = copies(job, per_device)
            assert len(per_device) == job.local, f"one copy per local device ({dtype}{shape})"
            for copy in per_device:
                np.testing.assert_allclose(np.asarray(copy), np.full(shape, job.total),
                                           err_msg=f"rank {rank} {dtype}{shape}")
    for rank, results in each_result(job, mode, "batch_mean"):
        for (dtype, shape), per_device in zip(MIXED, results):
            per_device = copies(job, per_device)
            expected = job.total // job.replicas if dtype.startswith(("int", "uint")) else job.total / job.replicas
            for copy in per_device:
                np.testing.assert_allclose(np.asarray(copy), np.full(shape, expected),
                                           err_msg=f"rank {rank} {dtype}{shape}")


def test_broadcast_takes_rank0_value(job, mode):
    for rank, per_device in each_result(job, mode, "broadcast"):
        per_device = copies(job, per_device)
        for copy in per_device:
            np.testing.assert_allclose(copy, [100.0] * 3, err_msg=f"rank {rank}")


def test_gather_orders_ranks_then_replicas(job, mode):
    expected = []
    for g in range(job.replicas):
        expected += [[float(g)] * 2] * (g // job.local + 1)
    for rank, value in each_result(job, mode, "gather"):
        copies = value if isinstance(value[0][0], list) else [value]
        for copy in copies:
            np.testing.assert_allclose(copy, expected, err_msg=f"rank {rank}")


def test_sparse_indexed_slices_sum(job, mode):
    expected = np.zeros([5, 3])
    for g in range(job.replicas):
        expected[[g // job.local, 3]] += 1.0 + g
    for rank, value in each_result(job, mode, "sparse_sum"):
        np.testing.assert_allclose(value, expected, err_msg=f"rank {rank}")


def test_graph_results_stable_when_rerun(job):
    for o in job:
        assert o.result["graph_again"] == o.result["graph"]


def test_engine_names_stable_over_steps(job):
    for o in job:
        assert o.result["names_added_later"] == [], (
            f"rank {o.rank} kept inventing engine names: {o.result['names_added_later'][:10]}")
    assert job[0].result["names_after_first"] == job[1].result["names_after_first"], \
        "processes must use identical engine names\n" + describe(job)


def test_gather_with_run_time_lengths(job):
    for o in job:
        for rows in (1, 3):
            expected = []
            for g in range(job.replicas):
                expected += [[float(g)] * 2] * (rows + g // job.local)
            np.testing.assert_allclose(o.result["gather_dynamic"][str(rows)], expected,
                                       err_msg=f"rank {o.rank} rows {rows}")


def test_replica_ids_are_global(job, mode):
    for o in job:
        r = o.result[f"global_{mode}"]
        assert [v[0] for v in r["local_replica_ids"]] == [o.rank * job.local + i for i in range(job.local)]
        assert np.asarray(r["gathered_replica_ids"]).ravel().tolist() == list(range(job.replicas))


def test_run_results_reduce_across_processes(job, mode):
    ids = list(range(job.replicas))
    for o in job:
        r = o.result[f"global_{mode}"]
        np.testing.assert_allclose(r["reduce_run_sum"], [sum(ids)], err_msg=f"rank {o.rank}")
        np.testing.assert_allclose(r["reduce_to_cpu_mean"], [sum(ids) / job.replicas], err_msg=f"rank {o.rank}")


def test_all_gather_and_its_gradient(job, mode):
    weights = np.arange(1, job.replicas + 1)
    for o in job:
        r = o.result[f"global_{mode}"]
        for local_id, (gathered, grad) in enumerate(zip(r["all_gather"], r["all_gather_grad"])):
            np.testing.assert_allclose(gathered, np.arange(1, job.replicas + 1), err_msg=f"rank {o.rank}")
            # every replica's loss uses x_g with weight g + 1; gradients of all replicas are summed
            g = o.rank * job.local + local_id
            np.testing.assert_allclose(grad, [job.replicas * weights[g]], err_msg=f"rank {o.rank} replica {g}")


def test_replica_context_assignments_aggregate_globally(job, mode):
    values = [1.0 + g for g in range(job.replicas)]
    for o in job:
        r = o.result[f"global_{mode}"]
        assert r["assign_sum"] == pytest.approx(sum(values)), f"rank {o.rank}"
        assert r["assign_mean"] == pytest.approx(sum(values) / job.replicas), f"rank {o.rank}"


def test_input_context_has_one_pipeline_per_process(job):
    for o in job:
        assert o.result["input_context"] == [PROCESSES, o.rank, 8]


def test_distribute_dataset_shards_and_rebatches(job):
    rows = 4 * job.replicas
    steps = [o.result["distributed_batches"] for o in job]
    assert len(steps[0]) == len(steps[1]) == 2
    for step in range(2):
        seen = []
        for per_process in steps:
            for batch in per_process[step]:
                assert len(batch) == 4, "per-replica batch = global batch / global replicas"
                seen += batch
        assert sorted(seen) == list(range(step * rows, (step + 1) * rows)), f"step {step}"


def test_uneven_shards_take_the_same_steps(job):
    expected = -(-(2 * PROCESSES + 1) // (2 * PROCESSES * job.local))
    for o in job:
        assert o.result["uneven_steps"] == expected, f"rank {o.rank}"


def test_merge_call_free_all_reduce(job):
    """_all_reduce called by every local replica on its own MirroredStrategy
    thread: each gets the sum over every replica of every process."""
    for o in job:
        dense, sparse, stayed_sparse = o.result["direct_all_reduce"]
        assert len(dense) == job.local, f"rank {o.rank}: one result per local replica"
        for replica in range(job.local):
            assert dense[replica] == [3.0 * job.local] * 2, f"rank {o.rank} replica {replica}"
            assert sparse[replica] == [[1.0 * job.local], [2.0 * job.local]], f"rank {o.rank} replica {replica}"
            assert stayed_sparse[replica], "IndexedSlices must stay sparse (gathered indices and values)"


def test_variables_start_from_rank0_initial_value(job):
    """As MWMS: a variable's initial value is rank 0's on every process and
    local replica, though each process's initialiser gives another value."""
    by_rank = {o.rank: o.result["initial_values"] for o in job}
    random_copies, int_copies, bool_copies = by_rank[0]
    assert int_copies == [[10, 10]] * job.local and bool_copies == [True] * job.local
    for rank, values in by_rank.items():
        assert values == by_rank[0], f"rank {rank}: {values} != rank 0's {by_rank[0]}"
        assert all(copy == random_copies[0] for copy in values[0]), f"rank {rank}: local copies differ"


def test_processes_with_different_local_replica_counts_fail_naming_the_tensor():
    """1 local replica on rank 0, 2 on rank 1: a MEAN would divide by 2 on one
    and by 4 on the other; instead the reduction fails on both, naming it,
    within BYTEPS_TIMEOUT (docs/tf.md, known limits)."""
    outcomes = run_job("replica_count_mismatch_worker.py", num_workers=PROCESSES, env={"BYTEPS_TIMEOUT": "5"},
                       timeout=120)
    require_success(outcomes)
    for o in outcomes:
        assert "reduce_mean" not in o.result, \
            f"rank {o.rank} returned {o.result['reduce_mean']}: {describe(outcomes)}"
        assert "mean" in o.result["error"], f"rank {o.rank}: the error names no reduction: {o.result['error']}"
