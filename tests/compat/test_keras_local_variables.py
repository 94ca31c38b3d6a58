"""Horovod's PartialDistributedOptimizer (local layers keep their own
gradients, divided by size()) through model.fit, 2 processes under torchrun.
CI runs it under Keras 3; COMPAT_FULL=1 adds Keras 2 (TF_USE_LEGACY_KERAS=1),
which CI covers with Horovod's own test_partial_distributed_optimizer
(tests/compat/test_legacy_keras.py)."""
import importlib.util
import os

import pytest

from tests.support.jobs import torchrun
from tests.compat import WORKERS

FLAVORS = ["keras3"] + (["keras2"] if os.environ.get("COMPAT_FULL") == "1" else [])


@pytest.mark.parametrize("flavor", FLAVORS)
def test_partial_distributed_optimizer_fit(tmp_path, flavor):
    env = {}
    if flavor == "keras2":
        if importlib.util.find_spec("tf_keras") is None:
            pytest.skip("Keras 2 is not installed: pip install tf_keras==2.21.0 (TensorFlow's version)")
        env["TF_USE_LEGACY_KERAS"] = "1"
    found = torchrun(os.path.join(WORKERS, "keras_local_variables.py"), result_dir=tmp_path,
                     env=env).check(ranks=2).results
    for rank, result in found.items():
        assert result["keras"] == ("tf_keras" if flavor == "keras2" else "keras"), result
        assert result["local"] == [True, True, False, False], result
        assert max(result["errors"]) < 1e-5, (rank, result)
