"""The op library in one process, no cluster: build/version check, errors
before init, argument checks."""
import subprocess
import sys

import pytest

from tests.support.jobs import role_env
from tests.support.paths import REPO
from tests.tf import JOB_SETTINGS


def run_snippet(code):
    env = role_env(DMLC_NUM_WORKER=1, DMLC_NUM_SERVER=1, BYTEPS_LOCAL_RANK=0, BYTEPS_LOCAL_SIZE=1, **JOB_SETTINGS)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_push_pull_before_init_is_a_clear_error():
    code, out = run_snippet(
        "import tensorflow as tf, byteps_native.tf as bps\n"
        "try:\n"
        "    bps.push_pull(tf.ones([2]), name='x')\n"
        "except tf.errors.FailedPreconditionError as e:\n"
        "    print('FAILED_PRECONDITION', e.message)\n")
    assert code == 0, out
    assert "FAILED_PRECONDITION" in out and "byteps_native.tf.init()" in out, out


def test_unsupported_dtype_is_rejected_with_the_fix():
    code, out = run_snippet(
        "import tensorflow as tf, byteps_native.tf as bps\n"
        "try:\n"
        "    bps.push_pull(tf.constant(['a']), name='s')\n"
        "except TypeError as e:\n"
        "    print('TYPEERROR', e)\n")
    assert code == 0, out
    assert "TYPEERROR" in out and "cast it first" in out, out


def test_torch_and_tf_adapters_load_side_by_side():
    pytest.importorskip("torch")
    code, out = run_snippet(
        "import torch, tensorflow as tf\n"
        "import byteps_native.tf as bps_tf\n"
        "try:\n"
        "    import byteps_native.torch\n"
        "except ImportError as e:\n"
        "    print('SKIP', e); raise SystemExit(0)\n"
        "print('BOTH_LOADED')\n")
    assert code == 0, out
    if "SKIP" in out:
        pytest.skip("torch adapter not built: " + out.strip().splitlines()[-1])
    assert "BOTH_LOADED" in out
