"""Keras 2 scripts, run as Horovod users on TensorFlow >= 2.16 run them: with
TF_USE_LEGACY_KERAS=1, so that tf.keras is Keras 2 (the tf_keras package).
Two processes under torchrun, as the other compatibility tests.

* a Horovod example ported by its import line (run length cut, 'ci-size:'),
  whose ranks must end with identical weights: Keras 2's model.fit through
  DistributedOptimizer and the callbacks (COMPAT_ALL_SCRIPTS=1: every script
  that passes under Keras 2);
* a subset of Horovod's own test_tensorflow2_keras.py (the whole file, 13 of
  13 passing: ``TF_USE_LEGACY_KERAS=1
  python3 -m tests.compat.upstream.run_upstream horovod/test_tensorflow2_keras.py -v``).

Skipped, saying so, where tf_keras is not installed.
"""
import importlib.util
import os

import pytest

from tests.compat.run_scripts import run_script
from tests.compat.scripts_table import LEGACY_KERAS_EXPECTED_TO_PASS
from tests.compat.upstream.run_upstream import run_suite

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None,
                                reason="Keras 2 is not installed: pip install tf_keras==2.21.0 (TensorFlow's version)")

# One per mechanism: reduce in _compute_gradients (tf_keras optimizer and
# legacy OptimizerV2 through model.fit), backward_passes_per_step by local
# accumulation, PartialDistributedOptimizer / local variables, and the
# broadcast callback's local variables.
CI_UPSTREAM_TESTS = ["test_gradient_aggregation_0", "test_legacy_optimizer",
                     "test_sparse_as_dense_with_grad_aggregation", "test_partial_distributed_optimizer",
                     "test_broadcast_global_variables_callback_with_local_vars"]


CI_SCRIPT = "keras2/horovod_tensorflow2_keras_mnist.py"
SCRIPTS = sorted(LEGACY_KERAS_EXPECTED_TO_PASS) if os.environ.get("COMPAT_ALL_SCRIPTS") == "1" else [CI_SCRIPT]


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_under_legacy_keras(name):
    passed, detail, _ = run_script(name, legacy_keras=True)
    assert passed, f"{name}: {detail}"


def test_horovod_keras_unit_tests_under_legacy_keras():
    merged, log = run_suite("horovod/test_tensorflow2_keras.py", timeout=300, env={"TF_USE_LEGACY_KERAS": "1"},
                            tests=[f"Tf2KerasTests::{name}" for name in CI_UPSTREAM_TESTS])
    assert merged is not None, log[-5000:]
    assert sorted(merged) == sorted(CI_UPSTREAM_TESTS), (sorted(merged), log[-3000:])
    failed = {name: outcome for name, outcome in merged.items() if outcome[0] != "passed"}
    assert not failed, failed
