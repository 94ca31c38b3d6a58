"""hvd.elastic over torchrun restarts: a worker killed mid-run; both workers
restart from the last commit and end with exactly the weights of a run that
was never interrupted."""
import os

import numpy as np

from tests.support.jobs import torchrun
from tests.compat import WORKERS

WORKER = os.path.join(WORKERS, "elastic_train.py")


def test_killed_worker_resumes_from_last_commit(tmp_path):
    clean_dir, killed_dir = tmp_path / "clean", tmp_path / "killed"
    clean_dir.mkdir()
    killed_dir.mkdir()
    env = {"BYTEPS_TIMEOUT": "20", "BYTEPS_ELASTIC_DIR": str(tmp_path / "commits-clean")}
    clean = torchrun(WORKER, args=["--steps", "12"], result_dir=clean_dir, env=env)
    assert clean.returncode == 0, clean.output[-4000:]
    env["BYTEPS_ELASTIC_DIR"] = str(tmp_path / "commits-killed")
    killed_job = torchrun(WORKER, args=["--steps", "12", "--kill-at-step", "7"], result_dir=killed_dir, env=env,
                          run_args=["--max-restarts", "1"])
    assert killed_job.returncode == 0, killed_job.output[-4000:]
    clean, killed = clean.results, killed_job.results
    assert sorted(killed) == [0, 1], killed_job.output[-4000:]
    for rank in (0, 1):
        assert killed[rank]["attempt"] == 1, "the job was not restarted"
        assert killed[rank]["resumed_at"] == [6], killed[rank]  # last commit before step 7
        assert killed[rank]["step"] == 12
        np.testing.assert_array_equal(killed[rank]["weights"], clean[rank]["weights"])
    np.testing.assert_array_equal(killed[0]["weights"], killed[1]["weights"])
    assert not os.path.exists(tmp_path / "commits-killed" / "commit.pt"), "commit left behind after success"
