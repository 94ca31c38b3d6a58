"""One rank of an upstream suite: run pytest on the given tests inside this
torchrun worker and write a JUnit report per rank to $RESULT_DIR.

A failure that leaves the engine broken (a timeout or a dead peer: the error
names a BPS_ status) would fail every later test in the same way, so the
session stops there and run_upstream.py starts a fresh job for the rest. A
test that fails only because the engine was already broken when it started
(the engine *refused* its first operation) is not the culprit: it is listed
in carried.<rank> and runs again in the fresh job.

Between tests, process sets that a failed test left registered are removed,
so that the next test's add_process_set of the same ranks does not fail.

Each test's outcome is appended to outcomes.<rank>.jsonl as it ends, so that
a job that hangs still reports what it ran: a test that runs longer than
UPSTREAM_TEST_TIMEOUT seconds (default 300) is recorded as failed ('hung')
and the rank exits; the runner starts a fresh job for the rest."""
import json
import os
import sys
import threading

import pytest

from tests.support.paths import THIRD_PARTY

HERE = os.path.dirname(os.path.abspath(__file__))
# torch names the engine's status; TF's op says it in words.
FATAL_MARKERS = ("(BPS_TIMEOUT)", "(BPS_PEER_FAILURE)", "(BPS_SHUTDOWN)", "(BPS_INTERNAL)", "no progress for",
                 "a local rank failed", "engine is shut down")
REFUSED_MARKER = "byteps refused"


def _test_id(item):
    return [item.cls.__name__ if item.cls else "", item.name]


class StopAfterEngineFailure:
    def __init__(self):
        self.tests_run = 0
        self.watchdog = None
        self.timeout = float(os.environ.get("UPSTREAM_TEST_TIMEOUT", "300"))

    def _record(self, item, outcome, message):
        with open(os.path.join(os.environ["RESULT_DIR"], f"outcomes.{os.environ.get('RANK', '0')}.jsonl"), "a") as f:
            f.write(json.dumps({"test": _test_id(item), "outcome": outcome, "message": message[:300]}) + "\n")

    def _hung(self, item):
        self._record(item, "failed", f"hung: no result after {self.timeout:.0f} s (UPSTREAM_TEST_TIMEOUT)")
        self._write("restart", item.name)
        os._exit(3)

    def pytest_collection_modifyitems(self, config, items):
        """Leave out the tests an earlier job decided (UPSTREAM_DECIDED: a file
        of class::name lines). Exact names: pytest's --deselect matches by
        prefix, so deselecting test_x would drop test_x_grad as well."""
        path = os.environ.get("UPSTREAM_DECIDED")
        if not path:
            return
        with open(path) as f:
            decided = {line.strip() for line in f if line.strip()}
        keep = [item for item in items if "::".join(_test_id(item)) not in decided]
        dropped = [item for item in items if "::".join(_test_id(item)) in decided]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_runtest_setup(self, item):
        self.watchdog = threading.Timer(self.timeout, self._hung, [item])
        self.watchdog.daemon = True
        self.watchdog.start()

    def pytest_runtest_logfinish(self, nodeid, location):
        if self.watchdog is not None:
            self.watchdog.cancel()

    def _write(self, kind, text):
        with open(os.path.join(os.environ["RESULT_DIR"], f"{kind}.{os.environ.get('RANK', '0')}"), "a") as f:
            f.write(text + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call":
            self.tests_run += 1
        if call.when == "call" or (call.when == "setup" and not report.passed) or \
                (call.when == "teardown" and report.failed):
            kind = "skipped" if report.skipped else ("failed" if report.failed else "passed")
            if report.skipped and isinstance(report.longrepr, tuple):
                message = str(report.longrepr[2])
            else:
                lines = [line for line in str(report.longrepr or "").splitlines() if line.startswith("E ")]
                message = lines[0][1:].strip() if lines else str(report.longrepr or "").strip()[-200:]
            self._record(item, kind, message)
        if report.failed and any(marker in str(report.longrepr) for marker in FATAL_MARKERS):
            item.session.shouldstop = f"engine failure in {item.name}; the runner restarts the job"
            carried = REFUSED_MARKER in str(report.longrepr) and self.tests_run > 1
            self._write("carried" if carried else "restart", item.name)
            if carried:
                self._write("restart", item.name)

    def pytest_runtest_teardown(self, item):
        process_sets = sys.modules.get("byteps_native.torch.process_sets")
        if process_sets is None:
            return
        for ps in list(process_sets._added.values()):
            if ps is not process_sets.global_process_set:
                process_sets.remove_process_set(ps)


if __name__ == "__main__":
    rank = os.environ.get("RANK", "0")
    report = os.path.join(os.environ["RESULT_DIR"], f"junit.{rank}.xml")
    args = ["-q", "-p", "no:cacheprovider", "-rN", "--rootdir", THIRD_PARTY, "--junitxml", report, *sys.argv[1:]]
    sys.exit(pytest.main(args, plugins=[StopAfterEngineFailure()]))
