"""A TF script started the torchrun way never trains alone: without torch to
reach torchrun's store, init() fails on every rank, saying how to launch."""
import subprocess
import sys

from tests.support.jobs import job_env
from tests.support.paths import REPO
from tests.support.ports import free_port

SCRIPT = "import byteps_native.tf as hvd; hvd.init(); print('trained alone with size', hvd.size())"


def test_tf_under_torchrun_variables_without_torch_fails_with_advice(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('torch hidden by the test')\n")
    env = job_env(pythonpath=[tmp_path], extra={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                         "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0, proc.stdout
    assert "trained alone" not in proc.stdout
    assert "started by torchrun" in proc.stderr and "bpslaunch --local-workers" in proc.stderr, proc.stderr[-2000:]
