"""One rank of an upstream suite: run pytest on the given tests inside this
torchrun worker and write a JUnit report per rank to $RESULT_DIR.

A failure that leaves the engine broken (a timeout or a dead peer: the error
names a BPS_ status) would fail every later test in the same way, so the
session stops there and run_upstream.py starts a fresh job for the rest."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FATAL_MARKERS = ("(BPS_TIMEOUT)", "(BPS_PEER_FAILURE)", "(BPS_SHUTDOWN)", "(BPS_INTERNAL)",
                 "(BPS_MISMATCH)")


class StopAfterEngineFailure:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed and any(marker in str(report.longrepr) for marker in FATAL_MARKERS):
            item.session.shouldstop = f"engine failure in {item.name}; the runner restarts the job"
            with open(os.path.join(os.environ["RESULT_DIR"], f"restart.{os.environ.get('RANK', '0')}"), "w") as f:
                f.write(item.name)


if __name__ == "__main__":
    os.environ["BYTEPS_COMPAT_UPSTREAM"] = "1"
    sys.path.insert(0, os.path.join(HERE, "utils"))
    rank = os.environ.get("RANK", "0")
    report = os.path.join(os.environ["RESULT_DIR"], f"junit.{rank}.xml")
    args = ["-q", "-p", "no:cacheprovider", "-rN", "--rootdir", HERE, "--junitxml", report, *sys.argv[1:]]
    sys.exit(pytest.main(args, plugins=[StopAfterEngineFailure()]))
