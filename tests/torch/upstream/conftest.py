"""The shipped suite here (and third_party/pytorch/test/, outside the test
paths) runs only through run_conformance.py (which sets CONFORMANCE_BACKEND
and runs gloo beside byteps); collected by the plain test run it would run
gloo alone, hundreds of cases, for nothing."""
import os

if not os.environ.get("CONFORMANCE_BACKEND"):
    collect_ignore = ["test_distributed_suite.py"]
