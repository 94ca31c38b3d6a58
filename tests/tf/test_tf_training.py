"""Training across 2 processes x 1 or 2 logical CPU devices under
MirroredStrategy(BytePSOps), fed as the TensorFlow tutorials feed
MultiWorkerMirroredStrategy (whole dataset, global batch), equals one process
on the global batch."""
import numpy as np

from tests.support.jobs import require_success
from tests.tf import run_job

ATOL = 2e-5


def assert_same_weights(actual, expected, what):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-4, atol=ATOL,
                                   err_msg=f"{what}: weight {i}")


def check_training(outcomes, replicas):
    require_success(outcomes)
    for o in outcomes:
        r = o.result
        assert r["num_replicas_in_sync"] == replicas
        moved = max(np.abs(np.asarray(a) - np.asarray(b)).max()
                    for a, b in zip(r["weights"], r["initial_weights"]))
        assert moved > 1e-3, "training did not change the weights"
        assert_same_weights(r["weights"], r["reference_weights"], f"rank {o.rank} vs single process")
    assert_same_weights(outcomes[0].result["weights"], outcomes[1].result["weights"], "rank 0 vs rank 1")


def test_keras_fit_checkpoint_and_export_one_device_per_process():
    outcomes = run_job("training_worker.py", args=["fit", "1"])
    check_training(outcomes, 2)
    for o in outcomes:
        assert o.result["checks"] == {"checkpoint_restores_weights": True,
                                      "saved_model_serves_same_outputs": True}, f"rank {o.rank}"


def test_custom_training_loop_under_tf_function():
    outcomes = run_job("training_worker.py", args=["loop", "2"])
    check_training(outcomes, 4)
    for o in outcomes:  # strategy.reduce(SUM) of per-replica average losses = global mean loss
        np.testing.assert_allclose(o.result["losses"], o.result["reference_losses"], rtol=1e-4, atol=1e-5)


def test_sparse_embedding_gradients():
    outcomes = run_job("training_worker.py", args=["sparse", "1"])
    check_training(outcomes, 2)
