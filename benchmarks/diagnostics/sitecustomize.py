"""Loaded by every Python process that has this folder on PYTHONPATH: with
FAULT_DUMP_AFTER=SECONDS set, each dumps every thread's Python stack to stderr
once after that long (a hung worker says where it waits; there is no gdb on
the GPU machines and cuda-gdb's batch attach stalled them)."""
import faulthandler
import os

_after = os.environ.get("FAULT_DUMP_AFTER")
if _after:
    faulthandler.dump_traceback_later(float(_after), repeat=False, exit=False)
