"""With CONFORMANCE_START=fork, torch's MultiProcessTestCase starts its ranks
by fork instead of spawn: each rank inherits the imported test module (and
the backend swap) instead of importing torch's test utilities again, which
takes ~40 s a case on the shared 2-core host against ~1 s. CPU-only runs
lose nothing by it (spawn is there for CUDA). gloo and byteps start alike,
so the comparison stays fair."""
import os


def install():
    if os.environ.get("CONFORMANCE_START", "spawn") != "fork":
        return
    import torch.multiprocessing
    from torch.testing._internal.common_distributed import MultiProcessTestCase

    def _fork_processes(self):
        self._start_processes(torch.multiprocessing.get_context("fork").Process)

    MultiProcessTestCase._spawn_processes = _fork_processes
