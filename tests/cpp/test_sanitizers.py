"""Runs scripts/sanitize.sh from `pytest tests` (issue 20: sanitizer builds
in CI): the C++ tests and a 4-process job (scheduler, server, 2 workers)
built with AddressSanitizer + UndefinedBehaviorSanitizer, and with
ThreadSanitizer. Any sanitizer report fails the test, with the findings.

Cost: most of it is compiling the engine and the tests instrumented, about
8 CPU-minutes per sanitizer (docs/reliability.md has the figures): both cold
would push CI past its 30 minutes. So CI always runs ASan+UBSan on every case;
TSan runs on TSAN_CI_FILTER (the cases that exercise the engine's threads
without short timeouts, which flake under TSan's slowdown on a loaded host)
when its build is cheap (build/tsan exists, or ccache holds the TSan objects
of an earlier clone: CI clones afresh on a machine whose caches persist) or
BYTEPS_CI_TSAN=1 asks for it, and is skipped with that reason otherwise. The full TSan run:
BYTEPS_TSAN_FULL=1 BYTEPS_CI_TSAN=1 python -m pytest tests/cpp/test_sanitizers.py,
or scripts/sanitize.sh tsan.

Also skipped, with the reason, when cmake or GoogleTest is missing.
"""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "sanitize.sh")

# In-process jobs over real sockets and shared memory, the reducer and
# transport conformance suites, cancellation, the server's rounds.
TSAN_CI_FILTER = ":".join([
    "Layouts/EngineInProcess*",
    "Reducers/LocalReducerConformance*",
    "EveryTransport/*",
    "EngineCancellation*",
    "EngineInProcessKeyTable*",
    "RoundAgreement*",
])


def _gtest_missing():
    if shutil.which("cmake") is None:
        return "cmake is missing (apt-get install cmake)"
    if shutil.which("g++") is None and shutil.which(os.environ.get("CXX", "c++")) is None:
        return "no C++ compiler"
    headers = ["/usr/include/gtest/gtest.h", "/usr/local/include/gtest/gtest.h"]
    if not any(os.path.exists(h) for h in headers):
        return "GoogleTest is missing (apt-get install libgtest-dev)"
    return None


def _sanitize(kind, gtest_filter=None):
    missing = _gtest_missing()
    if missing:
        pytest.skip(f"sanitizer builds need cmake and GoogleTest: {missing}")
    env = dict(os.environ, JOBS=os.environ.get("JOBS", "2"))
    env.pop("GTEST_FILTER", None)
    if gtest_filter:
        env["GTEST_FILTER"] = gtest_filter
    proc = subprocess.run(["bash", SCRIPT, kind], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"== {kind}: clean" in out, f"scripts/sanitize.sh {kind} found problems:\n" + out[-8000:]


def test_asan_ubsan():
    """Every C++ test case and the 4-process job under ASan + UBSan (and LSan)."""
    _sanitize("asan")


def _tsan_build_is_cheap():
    """build/tsan is there, or ccache holds a TSan build of an earlier clone
    (scripts/sanitize.sh leaves a stamp): then building it costs seconds."""
    if os.path.exists(os.path.join(REPO, "build", "tsan", "bps_cpp_tests")):
        return True
    cache = os.environ.get("BYTEPS_BUILD_CACHE", os.path.expanduser("~/.cache/byteps-native"))
    return shutil.which("ccache") is not None and os.path.exists(os.path.join(cache, "sanitizers", "tsan-in-ccache"))


def test_tsan():
    """TSan on TSAN_CI_FILTER and the 4-process job (everything with BYTEPS_TSAN_FULL=1)."""
    if not _tsan_build_is_cheap() and os.environ.get("BYTEPS_CI_TSAN") != "1":
        pytest.skip("TSan build is cold (no build/tsan, no TSan objects in ccache): compiling it (~8 CPU-minutes) "
                    "does not fit CI's budget beside ASan; set BYTEPS_CI_TSAN=1 or run scripts/sanitize.sh tsan")
    _sanitize("tsan", None if os.environ.get("BYTEPS_TSAN_FULL") == "1" else TSAN_CI_FILTER)
