"""Entry points of the non-worker roles (dedicated server, scheduler)."""
import datetime
import os
import sys

from byteps_native.core import _core


def _run_server_on_torch_store():
    """A dedicated server of a torchrun job: rendezvous through its TCPStore."""
    import torch.distributed as dist

    from byteps_native.core.c_store import CStore, engine_library
    timeout = datetime.timedelta(seconds=float(os.environ.get("BYTEPS_RENDEZVOUS_TIMEOUT", "300")))
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timeout)
    adapter = CStore(store)
    lib = engine_library()
    if lib.bps_run_server_with_store(adapter.struct) != 0:
        raise _core.BytePSError(lib.bps_last_error().decode())


_RUNNERS = {"server": _core.run_server, "scheduler": _core.run_scheduler}


def run(role):
    """Runs `role` until the job ends; returns a process exit code."""
    runner = _RUNNERS[role]
    if role == "server" and not os.environ.get("DMLC_PS_ROOT_URI") and os.environ.get("MASTER_ADDR"):
        runner = _run_server_on_torch_store  # joining a torchrun job
    try:
        runner()
    except _core.BytePSError as e:
        print(f"byteps {role} failed: {e}", file=sys.stderr)
        return 1
    return 0
