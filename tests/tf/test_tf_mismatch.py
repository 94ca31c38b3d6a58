"""Collectives the processes disagree on fail with an error naming the
collective, on every process, within CommunicationOptions.timeout_seconds
(shape mismatches at once), and no process hangs: 2 processes x 1 CPU
device, MirroredStrategy(BytePSOps). See workers/mismatch_worker.py."""
import pytest

from tests.support.jobs import describe
from tests.tf import run_job

DEFAULT_TIMEOUT, CALL_TIMEOUT = 4, 2
# Far above every scenario: an error that took this long came from the
# engine's watchdog, not from the mismatch check or the op's deadline.
ENGINE_TIMEOUT = 120


@pytest.fixture(scope="module")
def outcomes():
    result = run_job("mismatch_worker.py", num_workers=2, args=[str(DEFAULT_TIMEOUT), str(CALL_TIMEOUT)],
                     env={"BYTEPS_TIMEOUT": str(ENGINE_TIMEOUT)}, timeout=240)
    for o in result:
        assert o.returncode == 0, "a worker crashed or hung (rc -999):\n" + describe(result)
    return result


def scenario(outcomes, name):
    for o in outcomes:
        assert name in o.result, f"rank {o.rank} did not reach scenario {name!r}:\n" + describe(outcomes)
        yield o.rank, o.result[name]


def test_shape_mismatch_is_named_at_once_on_every_process(outcomes):
    for rank, r in scenario(outcomes, "shape"):
        assert r["error"] == "InvalidArgumentError", (rank, r)
        assert "shape_check" in r["message"], f"the error must name the tensor: {r}"
        assert "disagree" in r["message"] or "mismatch" in r["message"].lower(), r
        assert r["seconds"] < ENGINE_TIMEOUT / 2, r


def test_variable_created_with_different_shapes_is_named_at_once(outcomes):
    for rank, r in scenario(outcomes, "variable_shape"):
        assert r["error"] == "InvalidArgumentError", (rank, r)
        assert "bps.tf.initial_value" in r["message"] and "disagree" in r["message"], r
        assert r["seconds"] < ENGINE_TIMEOUT / 2, r


def test_per_call_timeout_fails_every_process_naming_its_collective(outcomes):
    # Rank 1's two tensors travel in one bucket of the engine's fusion: the
    # error names the user's tensor first, then the bucket.
    expected = {0: "bps.tf.reduce.sum/0.only_rank0", 1: "tensor 'bps.tf.batch_reduce.sum/0.only_rank1' (fused with 1 "}
    for rank, r in scenario(outcomes, "timeout"):
        assert r["error"] == "DeadlineExceededError", (rank, r)
        assert "Collective has timed out" in r["message"], r
        assert expected[rank] in r["message"], f"rank {rank} must name its collective: {r}"
        assert f"timeout_seconds={CALL_TIMEOUT}" in r["message"], r
        assert CALL_TIMEOUT * 0.9 <= r["seconds"] < ENGINE_TIMEOUT / 2, r


def test_uneven_steps_time_out_on_every_process(outcomes):
    for rank, r in scenario(outcomes, "uneven"):
        assert r["error"] == "DeadlineExceededError", (rank, r)
        assert f"timeout_seconds={DEFAULT_TIMEOUT}" in r["message"], "the constructor's options apply: " + str(r)
        named = "bps.tf.batch_reduce.sum/t0" if rank == 0 else "uneven_final"
        assert named in r["message"], f"rank {rank} must name the collective it waited in: {r}"
        assert r["seconds"] < ENGINE_TIMEOUT / 2, r


def test_evaluate_on_one_process_only_fails_every_process(outcomes):
    for rank, r in scenario(outcomes, "evaluate"):
        assert r["error"] in ("DeadlineExceededError", "InvalidArgumentError"), (rank, r)
        assert "bps.tf." in r["message"], f"the error must name the collective: {r}"
        assert r["seconds"] < ENGINE_TIMEOUT / 2, r
