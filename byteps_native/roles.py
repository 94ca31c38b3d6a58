"""Entry points of the non-worker roles (dedicated server, scheduler)."""
import os
import sys

from byteps_native._runtime import config, library
from byteps_native._runtime.c_store import CStore
from byteps_native._runtime.errors import EngineError


def _run_server_on_torch_store():
    """A dedicated server of a torchrun job: rendezvous through its TCPStore."""
    import torch.distributed as dist

    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=config.rendezvous_timeout())
    adapter = CStore(store)
    library.check(library.engine().bps_run_server_with_store(adapter.pointer()))


def _run_server():
    library.check(library.engine().bps_run_server())


def _run_scheduler():
    library.check(library.engine().bps_run_scheduler())


_RUNNERS = {"server": _run_server, "scheduler": _run_scheduler}


def run(role):
    """Runs `role` until the job ends; returns a process exit code."""
    runner = _RUNNERS[role]
    if role == "server" and not os.environ.get("DMLC_PS_ROOT_URI") and os.environ.get("MASTER_ADDR"):
        runner = _run_server_on_torch_store  # joining a torchrun job
    try:
        runner()
    except EngineError as e:  # library.check without `what`: the engine's own words end the line
        print(f"byteps {role} failed: {e}", file=sys.stderr)
        return 1
    return 0
