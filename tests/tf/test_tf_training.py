"""Training across 2 processes x 2 logical CPU devices under
MirroredStrategy(BytePSOps) equals one process on the global batch."""
import numpy as np

from tf_cluster import require_success, run_job

ATOL = 2e-5


def assert_same_weights(actual, expected, what):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-4, atol=ATOL,
                                   err_msg=f"{what}: weight {i}")


def check_training(outcomes):
    require_success(outcomes)
    for o in outcomes:
        r = o.result
        assert r["num_replicas_in_sync"] == 4
        moved = max(np.abs(np.asarray(a) - np.asarray(b)).max()
                    for a, b in zip(r["weights"], r["initial_weights"]))
        assert moved > 1e-3, "training did not change the weights"
        assert_same_weights(r["weights"], r["reference_weights"], f"rank {o.rank} vs single process")
    assert_same_weights(outcomes[0].result["weights"], outcomes[1].result["weights"], "rank 0 vs rank 1")


def test_keras_fit_matches_single_process_global_batch():
    outcomes = run_job("training_worker.py", args=["fit"])
    check_training(outcomes)


def test_custom_training_loop_under_tf_function():
    outcomes = run_job("training_worker.py", args=["loop"])
    check_training(outcomes)
    for o in outcomes:  # strategy.reduce(SUM) of per-replica average losses = global mean loss
        np.testing.assert_allclose(o.result["losses"], o.result["reference_losses"], rtol=1e-4, atol=1e-5)


def test_sparse_embedding_gradients():
    outcomes = run_job("training_worker.py", args=["sparse"])
    check_training(outcomes)
