"""A worker dies mid-training under torchrun --max-restarts: the job
re-rendezvouses and resumes from its last checkpoint."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_worker_crash_restarts_and_resumes_from_checkpoint(tmp_path):
    ckpt = os.path.join(str(tmp_path), "ckpt.pt")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env["BYTEPS_TIMEOUT"] = "30"
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "--max-restarts", "2",
         os.path.join(REPO, "examples/torch/elastic_checkpoint.py"), "--checkpoint", ckpt, "--epochs", "4",
         "--crash-at-step", "40"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-5000:]
    assert "simulated crash at step 40" in log
    # 898 samples per rank / 32 = 29 steps per epoch: step 40 is in epoch 1,
    # so the restart resumes after the checkpoint of epoch 0.
    assert "attempt 1: resumed from epoch 0" in log, log[-5000:]
    assert log.count("attempt 1: finished 4 epochs") == 2, log[-5000:]
