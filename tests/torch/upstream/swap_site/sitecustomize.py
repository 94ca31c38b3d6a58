"""On the path only for conformance runs (run_conformance.py puts it there):
every Python process of the run, including the ranks the suites spawn,
swaps 'gloo' for CONFORMANCE_BACKEND before any test code runs."""
import os
import sys

if os.environ.get("CONFORMANCE_BACKEND", "gloo") != "gloo":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import backend_swap

    backend_swap.install()
