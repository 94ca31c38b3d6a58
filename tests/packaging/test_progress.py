"""The examples report throughput and an ETA as plain lines (no carriage
returns, no bars), readable in `kubectl logs` and Slurm output files."""
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")


def test_ddp_example_prints_throughput_and_eta_lines_when_not_a_tty(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env["BYTEPS_PROGRESS_INTERVAL"] = "0"  # a line per step: the test needs several
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "byteps_native.examples.ddp_digits", "--epochs", "2"]
    out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "\r" not in out.stderr and "\x1b[" not in out.stderr, "terminal control characters in a log"
    lines = re.findall(r"^epoch (\d+)/2 step (\d+)/(\d+) \| (\d+) samples/s \| loss [0-9.]+ \| "
                       r"elapsed \d+:\d\d:\d\d \| ETA (\d+):(\d\d):(\d\d)$", out.stderr, re.M)
    assert len(lines) >= 4, out.stderr[-3000:]
    assert all(int(rate) > 0 for _, _, _, rate, *_ in lines)
    last = lines[-1]
    assert last[0] == "2" and last[1] == last[2] and last[4:] == ("0", "00", "00"), last  # ETA 0 at the end
    assert re.search(r"test accuracy 0\.[5-9]", out.stdout), out.stdout
