"""pytest plugin (`-p case_log`): one JSON line per case, written and flushed
as the case ends, to the file named by CONFORMANCE_CASE_LOG. A run cut off by
run_conformance.py's --deadline still leaves the outcome of every case that
ended, and a "started" line for the case that was running: torch's shipped
suite ignores SIGINT, so pytest never gets to write a junit report then."""
import json
import os

_PATH = os.environ.get("CONFORMANCE_CASE_LOG")


def _write(record):
    if not _PATH:
        return
    # Append per line: ranks forked from this process never write here, and
    # a line is whole before the next case starts.
    with open(_PATH, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


_ROOT = None


def pytest_configure(config):
    global _ROOT
    _ROOT = str(config.rootpath)


def _case(nodeid):
    """The case's id relative to the directory pytest runs in (pytest's
    own ids are relative to the rootdir), e.g. 'pytorch/x.py::C::test_y'."""
    path, _, rest = nodeid.partition("::")
    if _ROOT:
        path = os.path.relpath(os.path.join(_ROOT, path))
    return f"{path}::{rest}"


def pytest_runtest_logstart(nodeid, location):
    _write({"case": _case(nodeid), "outcome": "started"})


def pytest_runtest_logreport(report):
    # One outcome per case: the call's, or setup's when setup did not pass,
    # or teardown's when teardown failed after a passing call.
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        outcome = "skip" if report.skipped else ("pass" if report.passed else "fail")
        record = {"case": _case(report.nodeid), "outcome": outcome, "seconds": round(report.duration, 2)}
        if report.failed:
            record["error"] = str(report.longrepr)[-1500:]
        elif report.skipped and isinstance(report.longrepr, tuple):
            record["reason"] = str(report.longrepr[2])[:300]
        _write(record)
