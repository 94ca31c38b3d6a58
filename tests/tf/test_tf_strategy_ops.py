"""MirroredStrategy(cross_device_ops=BytePSOps()) across 2 processes x 2
logical CPU devices: every collective is global, eager and in tf.function."""
import numpy as np
import pytest

from tf_cluster import describe, require_success, run_job

PROCESSES, REPLICAS = 2, 2
MIXED = [("float32", [3, 4]), ("float64", [7]), ("float16", [2, 2]), ("bfloat16", [5]),
         ("int32", [6]), ("int64", []), ("uint8", [4]), ("float32", [1000])]
# replica i of rank r contributes 1 + 4 r + i (see the worker)
CONTRIBUTIONS = [1 + 4 * r + i for r in range(PROCESSES) for i in range(REPLICAS)]
TOTAL = sum(CONTRIBUTIONS)  # 20


@pytest.fixture(scope="module")
def job():
    outcomes = run_job("strategy_ops_worker.py", num_workers=PROCESSES)
    require_success(outcomes)
    return outcomes


@pytest.fixture(params=["eager", "graph"])
def mode(request):
    return request.param


def each_result(job, mode, key):
    for o in job:
        yield o.rank, o.result[mode][key]


def test_num_replicas_in_sync_is_global(job):
    for o in job:
        assert o.result["num_replicas_in_sync"] == PROCESSES * REPLICAS


def test_reduce_sum(job, mode):
    for rank, value in each_result(job, mode, "reduce_sum"):
        np.testing.assert_allclose(value, [TOTAL] * 3, err_msg=f"rank {rank}")


def test_reduce_mean(job, mode):
    for rank, value in each_result(job, mode, "reduce_mean"):
        np.testing.assert_allclose(value, [TOTAL / 4] * 3, err_msg=f"rank {rank}")
    for rank, value in each_result(job, mode, "reduce_mean_axis0"):
        np.testing.assert_allclose(value, TOTAL / 4, err_msg=f"rank {rank}")


def test_reduce_int32_is_global(job, mode):
    for rank, value in each_result(job, mode, "reduce_int32_sum"):
        assert value == [TOTAL, TOTAL], f"rank {rank}"


def test_batch_reduce_mixed_shapes_and_dtypes(job, mode):
    for rank, results in each_result(job, mode, "batch_sum"):
        assert len(results) == len(MIXED)
        for (dtype, shape), per_device in zip(MIXED, results):
            assert len(per_device) == REPLICAS, f"one copy per local device ({dtype}{shape})"
            for copy in per_device:
                np.testing.assert_allclose(np.asarray(copy), np.full(shape, TOTAL),
                                           err_msg=f"rank {rank} {dtype}{shape}")
    for rank, results in each_result(job, mode, "batch_mean"):
        for (dtype, shape), per_device in zip(MIXED, results):
            expected = TOTAL // 4 if dtype.startswith(("int", "uint")) else TOTAL / 4
            for copy in per_device:
                np.testing.assert_allclose(np.asarray(copy), np.full(shape, expected),
                                           err_msg=f"rank {rank} {dtype}{shape}")


def test_broadcast_takes_rank0_value(job, mode):
    for rank, per_device in each_result(job, mode, "broadcast"):
        for copy in per_device:
            np.testing.assert_allclose(copy, [100.0] * 3, err_msg=f"rank {rank}")


def test_gather_orders_ranks_then_replicas(job, mode):
    expected = []
    for r in range(PROCESSES):
        for i in range(REPLICAS):
            expected += [[10.0 * r + i] * 2] * (r + 1)
    for rank, value in each_result(job, mode, "gather"):
        copies = value if isinstance(value[0][0], list) else [value]
        for copy in copies:
            np.testing.assert_allclose(copy, expected, err_msg=f"rank {rank}")


def test_sparse_indexed_slices_sum(job, mode):
    expected = np.zeros([5, 3])
    for r in range(PROCESSES):
        for i in range(REPLICAS):
            expected[[r, 3]] += 1.0 + 2 * r + i
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
            for r in range(PROCESSES):
                for i in range(REPLICAS):
                    expected += [[10.0 * r + i] * 2] * (rows + r)
            np.testing.assert_allclose(o.result["gather_dynamic"][str(rows)], expected,
                                       err_msg=f"rank {o.rank} rows {rows}")
