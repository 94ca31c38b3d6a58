"""run_conformance.py's cut-off: a run ended early (as --deadline ends it)
still reports every case that ended, names the one it cut, even when that
case ignores SIGINT as torch's shipped suite does, and leaves no process."""
import os
import time

from tests.torch.upstream import run_conformance

CASES = '''
import signal
import time


def test_quick():
    pass


def test_ignores_sigint_and_hangs():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    time.sleep(600)


def test_never_reached():
    pass
'''


def test_cut_off_run_reports_the_cases_that_ended(tmp_path):
    cases = tmp_path / "test_cases.py"
    cases.write_text(CASES)
    case_log = str(tmp_path / "cases.jsonl")
    with open(tmp_path / "out.txt", "w") as output:
        proc = run_conformance.start("gloo", [str(cases)], case_log, output, "fork", 2)
        # Cut it off once the hanging case has started (no timing guess).
        hang = "test_ignores_sigint_and_hangs"
        give_up = time.monotonic() + 120
        while not any(case.endswith(hang) for case in run_conformance.parse(case_log)):
            assert time.monotonic() < give_up, (tmp_path / "out.txt").read_text()
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()
            time.sleep(0.5)
        assert run_conformance.stop_at(time.monotonic(), [proc])
        proc.wait(timeout=30)
    try:
        os.killpg(proc.pid, 0)
        raise AssertionError("a process of the cut-off run is still alive")
    except ProcessLookupError:
        pass
    outcomes = {case.split("::")[-1]: outcome for case, outcome in run_conformance.parse(case_log).items()}
    assert outcomes == {"test_quick": "pass", hang: "cut"}, outcomes
