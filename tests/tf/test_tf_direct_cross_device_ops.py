"""BytePSOps' CrossDeviceOps methods called directly, as TensorFlow's own
cross-device tests call them, at 2 processes x 2 logical CPU devices (and 2 x 1
for the per-replica all-reduce it serves): every entry point gives the right
value for the global replicas or fails naming its limit -- never a wrong
number (issue 31: ``_all_reduce`` returned 1.0 / 2.0 where 2.0 / 4.0 was
right) -- and results of tf.function arguments are Mirrored on the local
devices, as TensorFlow's testInputsAreFunctionArgs expects."""
import numpy as np
import pytest

from tests.support.jobs import require_success
from tests.tf import run_job

PROCESSES = 2


@pytest.fixture(scope="module", params=[2, 1], ids=["2x2", "2x1"])
def job(request):
    outcomes = run_job("direct_ops_worker.py", num_workers=PROCESSES, args=[str(request.param)])
    require_success(outcomes)
    return request.param, outcomes


def test_per_replica_all_reduce_is_right_or_names_its_limit(job):
    local, outcomes = job
    replicas = PROCESSES * local
    for o in outcomes:
        for label in ("with_devices", "without_devices", "strategy"):
            got = o.result[f"all_reduce_sum_{label}"]
            if local == 1:
                assert got == ["ok", [[2.0, 4.0]]], f"rank {o.rank} {label}: {got}"
                continue
            # 2 local replicas: right would be [[4, 8]] * 2; a per-call sum over the processes gave [[2, 4]] * 2
            assert got[0] == "error", f"rank {o.rank} {label}: returned {got[1]}, expected [[{replicas}, " \
                                      f"{2 * replicas}]] * {local} or an error"
            assert got[1] == "NotImplementedError" and "one local replica per process" in got[2], got
        mean = o.result["all_reduce_mean_with_devices"]
        assert mean[0] == ("ok" if local == 1 else "error"), f"rank {o.rank}: {mean}"
        if local == 1:
            assert mean[1] == [1.0], f"rank {o.rank}: {mean}"


def test_function_arguments_come_back_mirrored_on_the_local_devices(job):
    local, outcomes = job
    replicas = PROCESSES * local
    for o in outcomes:
        devices = o.result["devices"]
        for label in ("with_devices", "strategy"):
            got = o.result[f"function_args_{label}"]
            assert got[0] == "ok", f"rank {o.rank} {label}: {got}"
            r = got[1]
            assert r["input_devices"] == [""] * local
            assert r["values"] == [[float(replicas)] * local] * 2, f"rank {o.rank} {label}"
            # one device: the tensor itself, as TensorFlow's ops return it
            assert all(t == "Mirrored" if local > 1 else t.endswith("Tensor") for t in r["types"]), r["types"]
            assert r["devices"] == [devices, devices], f"rank {o.rank} {label}: {r['devices']}"
        got = o.result["function_args_without_devices"]
        if local > 1:  # no device anywhere: no guess, an error naming the fix
            assert got[0] == "error" and "BytePSOps(devices=" in got[2], f"rank {o.rank}: {got}"
        else:
            assert got[0] == "ok" and got[1]["values"] == [[2.0], [2.0]], f"rank {o.rank}: {got}"


def test_merge_call_entry_points_with_several_local_replicas(job):
    local, outcomes = job
    replicas = PROCESSES * local
    total = sum(1.0 + g for g in range(replicas))
    for o in outcomes:
        r = o.result
        for key in ("reduce_sum", "reduce_mean", "batch_reduce_sum", "broadcast", "gather"):
            assert r[key][0] == "ok", f"rank {o.rank} {key}: {r[key]}"
        np.testing.assert_allclose(r["reduce_sum"][1], [[total] * 3] * local)
        np.testing.assert_allclose(r["reduce_mean"][1], [[total / replicas] * 3] * local)
        np.testing.assert_allclose(r["batch_reduce_sum"][1], [[[total] * 3] * local] * 2)
        np.testing.assert_allclose(r["broadcast"][1], [[100.0] * 2] * local)
        np.testing.assert_allclose(r["gather"][1], [[[float(g)] * 2 for g in range(replicas)]] * local)
