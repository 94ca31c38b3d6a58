"""The README's two commands on a fresh Debian machine: its system Python
refuses `pip install` (PEP 668, "externally-managed-environment"), so the
scripts make and use a virtualenv (scripts/python_env.sh); `$PYTHON` picks the
interpreter (pyenv, the system one, or one already in a virtualenv).

CI checks the environment selection (seconds). BYTEPS_PACKAGING_FULL=1 runs
`scripts/run_main_job.sh` end to end in a fresh clone with the system Python,
twice: the second run must compile nothing.
"""
import glob
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_PYTHON = "/usr/bin/python3"
FULL = os.environ.get("BYTEPS_PACKAGING_FULL") == "1"


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "BYTEPS_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


def _externally_managed(python):
    code = "import sysconfig, os; print(os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() == "True"


def _selected_python(python, venv_dir):
    """What scripts/python_env.sh picks for $PYTHON (creating the virtualenv if needed)."""
    script = f'source "{REPO}/scripts/python_env.sh" && echo "PY=$PY"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300,
                         env=_env(PYTHON=python, BYTEPS_VENV=str(venv_dir)))
    assert out.returncode == 0, out.stderr
    return re.search(r"^PY=(.*)$", out.stdout, re.M).group(1)


needs_system_python = pytest.mark.skipif(
    not (os.path.exists(SYSTEM_PYTHON) and _externally_managed(SYSTEM_PYTHON)),
    reason="no externally managed system Python here")


@needs_system_python
def test_system_python_refuses_pip_but_its_virtualenv_accepts(tmp_path):
    direct = subprocess.run([SYSTEM_PYTHON, "-m", "pip", "install", "--no-index", "six"], capture_output=True,
                            text=True, env=_env())
    assert "externally-managed-environment" in direct.stderr, direct.stderr  # the failure the scripts avoid
    python = _selected_python(SYSTEM_PYTHON, tmp_path / "venv")
    assert python == str(tmp_path / "venv" / "bin" / "python")
    inside = subprocess.run([python, "-m", "pip", "install", "--no-index", "six"], capture_output=True, text=True,
                            env=_env())
    assert "externally-managed-environment" not in inside.stderr, inside.stderr


def test_python_already_in_a_virtualenv_is_used_as_is(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "mine")], check=True)
    mine = str(tmp_path / "mine" / "bin" / "python")
    assert _selected_python(mine, tmp_path / "unused") == mine
    assert not (tmp_path / "unused").exists()


def _sees_numpy(python):
    return subprocess.run([python, "-c", "import numpy"], capture_output=True, env=_env()).returncode == 0


def test_pyenv_style_python_gets_a_virtualenv_that_sees_only_what_the_project_installs(tmp_path):
    # The base interpreter (CI runs the tests from .venv, made from it). Its
    # packages stay out of the virtualenv: CI passed on machines where they
    # held what no project file declares, and failed on a fresh one (issue 27).
    base = getattr(sys, "_base_executable", sys.executable)
    if not _sees_numpy(base):
        pytest.skip(f"{base} has no numpy that could leak into the virtualenv")
    python = _selected_python(base, tmp_path / "venv")
    assert python == str(tmp_path / "venv" / "bin" / "python")
    assert not _sees_numpy(python), "the virtualenv sees the base interpreter's packages"


def test_a_virtualenv_made_with_system_site_packages_is_isolated_in_place(tmp_path):
    base = getattr(sys, "_base_executable", sys.executable)
    if not _sees_numpy(base):
        pytest.skip(f"{base} has no numpy that could leak into the virtualenv")
    subprocess.run([base, "-m", "venv", "--system-site-packages", str(tmp_path / "old")], check=True)
    python = _selected_python(base, tmp_path / "old")
    assert python == str(tmp_path / "old" / "bin" / "python")
    assert not _sees_numpy(python), "the earlier virtualenv still sees the base interpreter's packages"


def test_scripts_run_everything_with_the_selected_python():
    for name in ("run_tests.sh", "run_main_job.sh"):
        with open(os.path.join(REPO, "scripts", name)) as f:
            text = f.read()
        assert "source scripts/python_env.sh" in text and '"$PY" -m' in text, name
        assert not re.search(r"^\s*(exec\s+)?(python3?|torchrun)\s", text, re.M), f"{name} runs a bare python"


@pytest.mark.skipif(not FULL, reason="full fresh-clone install (~10 min): BYTEPS_PACKAGING_FULL=1")
@needs_system_python
def test_main_job_command_in_a_fresh_clone_with_the_system_python(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", REPO, str(clone)], check=True)
    # Uncommitted work of this tree too, so the test checks what is here.
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=REPO, capture_output=True, check=True).stdout
    if diff:
        subprocess.run(["git", "apply", "-"], input=diff, cwd=str(clone), check=True)
    env = _env(PYTHON=SYSTEM_PYTHON)
    logs, built = [], []
    for _ in range(2):
        run = subprocess.run(["./scripts/run_main_job.sh", "--epochs", "2"], cwd=str(clone), env=env,
                             capture_output=True, text=True, timeout=3600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
        assert re.search(r"test accuracy 0\.[5-9]", run.stdout), run.stdout[-3000:]
        logs.append(run.stdout + run.stderr)
        built.append({p: os.path.getmtime(p) for p in glob.glob(str(clone / "byteps_native" / "**" / "*.so"),
                                                                  recursive=True)})
    assert (clone / ".venv" / "bin" / "python").exists()
    # install.sh runs pip quietly: the second run's extensions are the first run's
    # files (restored from the build cache with their times), not new compiles.
    torch_ext = [p for p in built[0] if "_c10d" in p]
    assert torch_ext and all(built[1].get(p) == built[0][p] for p in torch_ext), (built, logs[1][-3000:])
