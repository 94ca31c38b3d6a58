"""torch's shipped DistributedTest suite (torch/testing/_internal/distributed/
distributed_test.py, from the installed wheel), 2 ranks over a FileStore, on
gloo or, with CONFORMANCE_BACKEND=byteps, on 'byteps' (see backend_swap.py).
Run through run_conformance.py, which runs both and compares."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# The suite reads these at import time.
os.environ["BACKEND"] = "gloo"
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="byteps_conformance_"))

import backend_swap  # noqa: E402

backend_swap.install()

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
