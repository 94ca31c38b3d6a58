"""The README's main job and the Horovod-style example run and learn."""
import os
import re
import subprocess
import sys

from tests.support.jobs import job_env
from tests.support.paths import REPO


def run_example(tmp_path, script, *args, launcher=("-m", "torch.distributed.run", "--standalone",
                                                  "--nproc_per_node", "2")):
    cmd = [sys.executable, *launcher, os.path.join(REPO, "examples", "torch", script), *args]
    proc = subprocess.run(cmd, env=job_env(result_dir=tmp_path), cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return proc.stdout


def test_ddp_digits_learns(tmp_path):
    out = run_example(tmp_path, "ddp_digits.py", "--epochs", "3")
    match = re.search(r"test accuracy ([0-9.]+)", out)
    assert match, out
    assert float(match.group(1)) > 0.9, out


def test_horovod_style_learns_under_torchrun(tmp_path):
    out = run_example(tmp_path, "horovod_style.py", "--epochs", "3")
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", out)]
    assert len(losses) == 3, out
    assert losses[-1] < 0.5 * losses[0], out
