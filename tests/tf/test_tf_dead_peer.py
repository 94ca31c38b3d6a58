"""A dead peer fails the TF op with an error within BYTEPS_TIMEOUT instead of hanging."""
from tests.support.jobs import describe
from tests.tf import run_job

TIMEOUT_S = 5


def test_dead_peer_fails_the_op():
    outcomes = run_job("dead_peer_worker.py", num_workers=2,
                       env={"BYTEPS_TIMEOUT": str(TIMEOUT_S)}, timeout=90)
    survivor = outcomes[0]
    assert survivor.returncode == 0, "rank 0 crashed or hung:\n" + describe(outcomes)
    r = survivor.result
    assert r["first"] == [2.0] * 4
    assert r["error"] is not None, "push_pull with a dead peer succeeded"
    assert r["error"] in ("UnavailableError", "DeadlineExceededError", "AbortedError"), r
    assert r["message"], "the error must carry the engine's message"
    assert r["seconds_to_fail"] < 3 * TIMEOUT_S + 5, r
