"""The core module builds where pybind11 is not installed but torch is (a
CUDA image without network): its headers then come from torch's copy."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Hides the pybind11 package from the import system, as in an image without it.
HIDE_PYBIND11 = "import sys; sys.modules['pybind11'] = None; "


def _include_dir(prelude):
    code = (prelude + f"sys.path.insert(0, {REPO!r}); "
            "from build_tools import frameworks; print(frameworks.pybind11_include())")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_headers_of_the_pybind11_package_when_installed():
    pybind11 = pytest.importorskip("pybind11")
    proc = _include_dir("import sys; ")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == pybind11.get_include()


def test_headers_of_torch_when_pybind11_is_missing():
    torch_dir = pytest.importorskip("torch").__path__[0]
    proc = _include_dir(HIDE_PYBIND11)
    assert proc.returncode == 0, proc.stderr
    include = proc.stdout.strip()
    assert include == os.path.join(torch_dir, "include")
    assert os.path.isfile(os.path.join(include, "pybind11", "pybind11.h"))


def test_neither_names_the_fix():
    # torch hidden too: the build must stop with the command that fixes it.
    proc = _include_dir(HIDE_PYBIND11 + "import importlib.util as u; "
                        "find = u.find_spec; u.find_spec = lambda n, *a: None if n == 'torch' else find(n, *a); ")
    assert proc.returncode != 0
    assert "pip install pybind11" in proc.stderr
