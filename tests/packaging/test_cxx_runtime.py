"""A compiler that links libstdc++ statically is refused before the build
compiles anything (GPU images that export CC/CXX for such a GCC gave an engine
that crashed with SIGSEGV in `python -m byteps_native.info`);
BYTEPS_CC/BYTEPS_CXX pick other compilers for the whole build."""
import os
import shutil
import stat
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from build_tools import cxx_runtime  # noqa: E402

pytestmark = pytest.mark.skipif(not (shutil.which("g++") and shutil.which("readelf")), reason="needs g++ and readelf")


def _static_gxx(folder):
    """A g++ that links libstdc++ into every library, like the GPU image's /opt/gcc."""
    path = os.path.join(str(folder), "static-g++")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec g++ -static-libstdc++ "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_probe_refuses_a_compiler_that_links_libstdcxx_statically(tmp_path):
    with pytest.raises(SystemExit) as refused:
        cxx_runtime.probe_compiler(_static_gxx(tmp_path), str(tmp_path / "build"))
    message = str(refused.value)
    assert "static-g++ links libstdc++ statically" in message and "BYTEPS_CXX=" in message, message
    cxx_runtime.probe_compiler("g++", str(tmp_path / "build"))  # the ordinary one passes
    assert "g++" in (tmp_path / "build" / "cxx_runtime_ok.txt").read_text()


def _copy_of_the_build_files(dest):
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(os.path.join(REPO, name), dest / name)
    shutil.copytree(os.path.join(REPO, "build_tools"), dest / "build_tools")
    shutil.copytree(os.path.join(REPO, "byteps_native"), dest / "byteps_native",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "_build_record.py"))


def _wheel(tree, **env_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYTEPS_", "PYTHONPATH", "CC", "CXX"))}
    env.update(BYTEPS_WITH_PYTORCH="0", BYTEPS_WITH_TENSORFLOW="0", BYTEPS_WITH_CUDA="0", **env_vars)
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                           str(tree / "w"), str(tree)], capture_output=True, text=True, env=env, timeout=300)


def test_build_stops_before_compiling(tmp_path):
    """The tree has no csrc/: a build that got past the compiler check would
    stop at once with "no engine sources". (BYTEPS_CXX overriding CXX:
    test_build_and_install.py::test_incomplete_source_tree_fails_loudly.)"""
    tree = tmp_path / "tree"
    tree.mkdir()
    _copy_of_the_build_files(tree)
    static = _static_gxx(tmp_path)
    refused = _wheel(tree, CXX=static)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "links libstdc++ statically" in out, out[-3000:]
    assert "no engine sources" not in out  # refused before it looked for anything to compile
