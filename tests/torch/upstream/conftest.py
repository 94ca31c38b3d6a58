"""The upstream suites here run only through run_conformance.py (which sets
CONFORMANCE_BACKEND and runs gloo beside byteps); collected by the plain
test run they would run gloo alone, hundreds of cases, for nothing."""
import os

if not os.environ.get("CONFORMANCE_BACKEND"):
    collect_ignore = ["test_distributed_suite.py", "pytorch"]
