"""Runs the C++ test layer (tests/cpp, GoogleTest) from `pytest tests`.

Configures and builds tests/cpp with CMake into build/cpp (cached: a rebuild
compiles only what changed), then runs the gtest binary; a failure shows its
output. Needs cmake and libgtest-dev (scripts/install.sh installs both).
"""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(REPO, "tests", "cpp")
BUILD = os.path.join(REPO, "build", "cpp")
BINARY = os.path.join(BUILD, "bps_cpp_tests")


def _run(cmd, timeout):
    proc = subprocess.run(cmd, cwd=BUILD, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def gtest_binary():
    if shutil.which("cmake") is None:
        pytest.fail("cmake is missing: run scripts/install.sh (apt-get install cmake libgtest-dev)")
    os.makedirs(BUILD, exist_ok=True)
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        rc, out = _run(["cmake", "-S", SOURCE, "-B", BUILD, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], 300)
        assert rc == 0, "cmake configure failed (is libgtest-dev installed?):\n" + out[-6000:]
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    rc, out = _run(["cmake", "--build", BUILD, "--", "-j" + jobs], 900)
    assert rc == 0, "building the C++ tests failed:\n" + out[-8000:]
    return BINARY


def test_cpp_layer(gtest_binary):
    """Every GoogleTest case of tests/cpp (unit, server rounds, engine)."""
    rc, out = _run([gtest_binary, "--gtest_brief=1"], 600)
    assert rc == 0, "C++ tests failed:\n" + out[-12000:]
