"""Entry points of the non-worker roles (dedicated server, scheduler)."""
import sys

from byteps_native.core import _core

_RUNNERS = {"server": _core.run_server, "scheduler": _core.run_scheduler}


def run(role):
    """Runs `role` until the job ends; returns a process exit code."""
    try:
        _RUNNERS[role]()
    except _core.BytePSError as e:
        print(f"byteps {role} failed: {e}", file=sys.stderr)
        return 1
    return 0
