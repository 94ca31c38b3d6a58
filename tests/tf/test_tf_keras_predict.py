"""Keras predict across 2 processes under MirroredStrategy(BytePSOps) returns
every row on every process, in the input's order, as under
MultiWorkerMirroredStrategy (issue 31: each process used to get its own
shard's 32 of 64 rows), in Keras 3 and Keras 2 (tf_keras); evaluate gives the
whole input's loss and accuracy; the SavedModel export/reload round trip
serves the same predictions."""
import pytest

from tests.support.jobs import require_success
from tests.tf import run_job

ATOL = 1e-4


@pytest.mark.parametrize("flavor,local", [("keras3", 1), ("keras3", 2), ("keras2", 2)],
                         ids=["keras3-2x1", "keras3-2x2", "keras2-2x2"])
def test_predict_returns_every_row_on_every_process(flavor, local):
    env = {"TF_USE_LEGACY_KERAS": "1"} if flavor == "keras2" else {"TF_USE_LEGACY_KERAS": "0"}
    outcomes = run_job("keras_predict_worker.py", args=[flavor, str(local)], env=env)
    require_success(outcomes)
    for o in outcomes:
        r = o.result
        where = f"rank {o.rank} ({r['flavor']}, 2x{local})"
        assert (r["predict_rows"], r["uneven_rows"], r["dataset_rows"]) == (64, 40, 64), where
        assert r["predict_max_error"] < ATOL, f"{where}: rows out of order or wrong"
        assert r["uneven_max_error"] < ATOL, where
        assert r["dataset_max_error"] < ATOL, where
        assert r["evaluate"] == pytest.approx(r["expected_evaluate"], abs=ATOL), where
        assert r["saved_model_rows"] == 64, where
        assert r["saved_model_max_error"] < ATOL, where
