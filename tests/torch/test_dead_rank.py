"""A rank that dies makes the others' Work and Futures fail with an error
within BYTEPS_TIMEOUT instead of hanging."""
import os

import pytest

from tests.support.jobs import bare_ranks
from tests.torch import WORKERS

TIMEOUT_S = 5


@pytest.mark.parametrize("victim", [1, 0])
def test_survivor_gets_error(tmp_path, victim):
    procs, results = bare_ranks(os.path.join(WORKERS, "dead_rank.py"), nproc=2, args=[victim],
                                env={"BYTEPS_TIMEOUT": str(TIMEOUT_S)}, timeout=90, result_dir=tmp_path)
    survivor = 1 - victim
    assert procs[victim].returncode == 3, procs[victim].output[-3000:]
    assert survivor in results, f"survivor reported nothing:\n{procs[survivor].output[-5000:]}"
    result = results[survivor]
    for name, error in result["errors"].items():
        assert error is not None, f"{name} succeeded although rank {victim} is dead"
        assert "byteps" in error, error
    # A dead local rank is seen through its pid (zombies count as dead), well
    # before BYTEPS_TIMEOUT, and named.
    assert result["seconds"] < TIMEOUT_S, result
    assert any(f"local rank {victim}" in e and "died" in e for e in result["errors"].values()), result
