"""Import-time checks and single-process use, without a launcher."""
import subprocess
import sys

import torch

from tests.support.jobs import job_env
from tests.support.paths import REPO


def python(tmp_path, code):
    return subprocess.run([sys.executable, "-c", code], env=job_env(result_dir=tmp_path), cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_torch_version_mismatch_names_the_rebuild_command(tmp_path):
    proc = python(tmp_path, "import torch; torch.__version__ = '9.9.9'; import byteps_native.torch")
    assert proc.returncode != 0
    assert "built against torch" in proc.stderr and "9.9.9" in proc.stderr, proc.stderr
    assert "pip install --no-build-isolation -e ." in proc.stderr, proc.stderr


def test_backend_registered_on_import():
    import torch.distributed as dist

    import byteps_native.torch  # noqa: F401
    assert "byteps" in dist.Backend.backend_list
    # CUDA only where a GPU is visible (ShardedTensor picks its device from this list).
    assert dist.Backend.backend_capability["byteps"] == (["cpu", "cuda"] if torch.cuda.device_count() else ["cpu"])


def test_use_before_init_says_what_to_call(tmp_path):
    proc = python(tmp_path, "import torch, byteps_native.torch as bps\n"
                            "bps.push_pull(torch.ones(2), name='x')")
    assert proc.returncode != 0
    assert "bps.init()" in proc.stderr, proc.stderr


def test_single_process_without_launcher(tmp_path):
    """bps.init() with no launcher variables is a job of one process."""
    proc = python(tmp_path, "import torch, byteps_native.torch as bps\n"
                            "bps.init(); assert (bps.rank(), bps.size()) == (0, 1)\n"
                            "out = bps.push_pull(torch.arange(4.), name='x')\n"
                            "assert torch.equal(out, torch.arange(4.)), out\n"
                            "print('ok')")
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


def test_unsupported_reduction_dtypes_are_named(tmp_path):
    """One process checks them all: each Python start costs seconds on 2 cores."""
    dtypes = [torch.int8, torch.int16, torch.bool, torch.complex64]
    proc = python(tmp_path, "import torch, byteps_native.torch as bps\n"
                            "bps.init()\n"
                            f"for dtype in {[str(d) for d in dtypes]}:\n"
                            "    try:\n"
                            "        bps.push_pull(torch.ones(2, dtype=eval(dtype)), name='x')\n"
                            "        print(dtype, 'accepted')\n"
                            "    except RuntimeError as error:\n"
                            "        print(dtype, 'named' if f'does not support dtype {dtype}' in str(error) else error)\n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for dtype in dtypes:
        assert f"{dtype} named" in proc.stdout, proc.stdout
