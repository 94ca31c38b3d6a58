"""On the path only for conformance runs (run_conformance.py puts it there):
every Python process of the run, including the ranks the suites start,
swaps 'gloo' for CONFORMANCE_BACKEND before any test code runs, and with
CONFORMANCE_START=fork the suites start their ranks by fork."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import backend_swap  # noqa: E402
import fork_start  # noqa: E402

backend_swap.install()
fork_start.install()
