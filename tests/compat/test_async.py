"""BytePS asynchronous training converges: 2 machines (one worker and one
colocated server each), BYTEPS_ENABLE_ASYNC=1, with and without staleness."""
import os

import numpy as np
import pytest

from harness import WORKERS, results, torchrun


@pytest.mark.parametrize("staleness", [0, 2])
def test_async_training_converges(tmp_path, staleness):
    code, log = torchrun(os.path.join(WORKERS, "async_train.py"), args=["--staleness", staleness], nproc=1,
                         machines=2, result_dir=tmp_path, env={"BYTEPS_ENABLE_ASYNC": "1", "BYTEPS_TIMEOUT": "30"})
    assert code == 0, log[-4000:]
    found = results(tmp_path)
    assert sorted(found) == [0, 1], log[-4000:]
    # rank 1 starts from the servers' weights: rank 0's, plus whatever rank 0
    # already pushed (it does not wait), never its own random initialisation
    assert not np.allclose(found[1]["start_weights"], found[1]["own_init"])
    for rank, r in found.items():
        assert r["end_loss"] < 0.35 * found[0]["start_loss"], (rank, found[0]["start_loss"], r["end_loss"])
        assert r["accuracy"] > 0.85, (rank, r["accuracy"])


def test_staleness_needs_async(tmp_path):
    code, log = torchrun(os.path.join(WORKERS, "async_train.py"), args=["--staleness", 1, "--steps", 1],
                         result_dir=tmp_path)
    assert code != 0
    assert "staleness=1 needs asynchronous training: set BYTEPS_ENABLE_ASYNC=1" in log
