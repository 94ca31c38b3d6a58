"""The package as a user gets it: sdist -> wheel -> fresh virtualenv -> a
2-process job run from outside the source tree.

Before: the sdist had no csrc/ (a wheel built from it "succeeded" with an
empty engine), the wheel had no README/license/extras, the examples were not
in the package, every rebuild recompiled everything, and `import
byteps_native.torch` without its extension said "circular import".

CI runs the engine-only build (minutes on 2 cores). BYTEPS_PACKAGING_FULL=1
also runs `python -m build` with build isolation and both adapters (the torch
extension alone compiles for ~5 min), installs it and trains with torchrun.
"""
import glob
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FULL = os.environ.get("BYTEPS_PACKAGING_FULL") == "1"
ENGINE_ONLY = {"BYTEPS_WITH_PYTORCH": "0", "BYTEPS_WITH_TENSORFLOW": "0", "BYTEPS_WITH_CUDA": "0"}


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "BYTEPS_", "PYTHONPATH", "PIP_REQUIRE_VIRTUALENV", "VIRTUAL_ENV"))}
    env.update(extra)
    return env


def _run(cmd, timeout=900, check=True, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check:
        assert out.returncode == 0, f"{cmd}\n{out.stdout[-4000:]}\n{out.stderr[-6000:]}"
    return out


def _venv(path, system_site_packages=False):
    _run([sys.executable, "-m", "venv"] + (["--system-site-packages"] if system_site_packages else []) + [str(path)])
    return os.path.join(str(path), "bin", "python")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # cwd outside the tree: its build/ folder would shadow the `build` package.
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), REPO], env=_env(),
         cwd=str(out))
    (path,) = glob.glob(str(out / "*.tar.gz"))
    return path


@pytest.fixture(scope="module")
def unpacked_sdist(sdist, tmp_path_factory):
    dest = tmp_path_factory.mktemp("src")
    with tarfile.open(sdist) as tar:
        tar.extractall(dest)
    (root,) = glob.glob(str(dest / "byteps_native-*"))
    return root


@pytest.fixture(scope="module")
def engine_wheel(unpacked_sdist, tmp_path_factory):
    """(wheel path, first build log, second build log), built from the unpacked sdist twice."""
    out = tmp_path_factory.mktemp("wheels")
    logs = []
    for _ in range(2):
        for old in glob.glob(str(out / "*.whl")):
            os.remove(old)
        build = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(out),
                      unpacked_sdist], env=_env(**ENGINE_ONLY))
        logs.append(build.stdout + build.stderr)
    (wheel,) = glob.glob(str(out / "*.whl"))
    return wheel, logs[0], logs[1]


def test_sdist_has_everything_a_build_needs(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = _run(["git", "ls-files", "csrc"], cwd=REPO).stdout.split()
    missing = [p for p in tracked if p.endswith((".h", ".cc")) and p not in names]
    assert not missing, f"sdist lacks {missing[:10]}"
    for needed in ("setup.py", "pyproject.toml", "LICENSE", "README.md", "build_tools/frameworks.py",
                   "build_tools/cache.py", "byteps_native/examples/ddp_digits.py"):
        assert needed in names, needed
    assert not [n for n in names if n.endswith((".so", ".o"))], "sdist carries build outputs"


def test_wheel_from_sdist_has_engine_metadata_and_examples(engine_wheel):
    wheel, _, _ = engine_wheel
    with zipfile.ZipFile(wheel) as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
        (metadata_name,) = [n for n in sizes if n.endswith(".dist-info/METADATA")]
        metadata = z.read(metadata_name).decode()
    assert sizes.get("byteps_native/lib/libbyteps_engine.so", 0) > 100_000, "empty or missing engine"
    assert [n for n in sizes if re.match(r"byteps_native/core/_core.*\.so$", n)]
    assert "byteps_native/examples/ddp_digits.py" in sizes
    assert "byteps_native/_build_record.py" in sizes
    assert re.search(r"^License(-Expression)?: Apache-2\.0", metadata, re.M)
    assert "License-File: LICENSE" in metadata
    assert "Description-Content-Type: text/markdown" in metadata and "## Two commands" in metadata
    for extra in ("torch", "tf", "tf-cpu", "cuda", "examples"):
        assert f"Provides-Extra: {extra}" in metadata, extra
    assert re.search(r'Requires-Dist: torch==2\.\d+\.\d+; extra == "torch"', metadata), metadata


def test_second_build_of_an_unchanged_tree_compiles_nothing(engine_wheel):
    _, first, second = engine_wheel
    compile_line = re.compile(r"\s-c\s\S+\.cc\b")
    assert compile_line.search(first), "the first build compiled nothing: the test proves nothing"
    assert not compile_line.search(second), [line for line in second.splitlines() if compile_line.search(line)][:5]
    assert "byteps_native.core._core is up to date (cached build" in second


def test_incomplete_source_tree_fails_loudly(tmp_path):
    """A tree without csrc/ (the old sdist) must not build an empty engine."""
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        with open(os.path.join(REPO, name)) as src, open(tmp_path / name, "w") as dst:
            dst.write(src.read())
    _run(["cp", "-r", os.path.join(REPO, "build_tools"), os.path.join(REPO, "byteps_native"), str(tmp_path)])
    for built in glob.glob(str(tmp_path / "byteps_native" / "**" / "*.so"), recursive=True):
        os.remove(built)
    out = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(tmp_path / "w"),
                str(tmp_path)], env=_env(**ENGINE_ONLY), check=False)
    assert out.returncode != 0
    assert "no engine sources" in out.stdout + out.stderr and "csrc/ missing" in out.stdout + out.stderr


def test_fresh_virtualenv_runs_a_two_process_job_outside_the_tree(engine_wheel, tmp_path):
    wheel, _, _ = engine_wheel
    python = _venv(tmp_path / "venv")
    _run([python, "-m", "pip", "install", "-q", wheel], env=_env())
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    info = _run([python, "-m", "byteps_native.info"], cwd=str(outside), env=_env())
    assert "engine: byteps-native engine" in info.stdout and str(tmp_path / "venv") in info.stdout, info.stdout
    bpslaunch = os.path.join(os.path.dirname(python), "bpslaunch")
    job = _run([bpslaunch, "--local-workers", "2", "--", python, "-m", "byteps_native.examples.hello_push_pull"],
               cwd=str(outside), env=_env(BYTEPS_TIMEOUT="60"), timeout=180)
    assert job.stdout.count("(expected 3)") == 2, job.stdout + job.stderr
    # No torch in this virtualenv: the torch adapter says what to install.
    err = _run([python, "-c", "import byteps_native.torch"], cwd=str(outside), env=_env(), check=False).stderr
    assert "pip install 'torch==" in err and "circular import" not in err, err[-2000:]


def test_adapter_built_without_its_framework_says_how_to_rebuild(engine_wheel, tmp_path):
    """torch present at run time, absent from the build: name the cause and the command."""
    pytest.importorskip("torch")
    wheel, _, _ = engine_wheel
    python = _venv(tmp_path / "venv", system_site_packages=True)  # sees the installed torch
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel], env=_env())
    out = _run([python, "-c", "import byteps_native.torch"], cwd=str(tmp_path), env=_env(), check=False)
    assert out.returncode != 0
    assert "built without its torch adapter" in out.stderr and "pip install" in out.stderr, out.stderr[-2000:]
    assert "circular import" not in out.stderr


@pytest.mark.skipif(not FULL, reason="full build with both adapters: BYTEPS_PACKAGING_FULL=1 (~6-10 min)")
def test_isolated_build_compiles_both_adapters_and_trains(tmp_path):
    pytest.importorskip("torch")
    python = _venv(tmp_path / "venv", system_site_packages=True)  # the frameworks the user has
    dist = tmp_path / "dist"
    build = _run([python, "-m", "build", "--outdir", str(dist), REPO], env=_env(), timeout=1800, cwd=str(tmp_path))
    log = build.stdout + build.stderr
    assert "building the torch adapter against torch" in log, log[-3000:]
    (wheel,) = glob.glob(str(dist / "*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert [n for n in names if re.match(r"byteps_native/torch/_c10d.*\.so$", n)], "torch adapter missing"
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel], env=_env())
    info = _run([python, "-m", "byteps_native.info", "--load"], cwd=str(tmp_path), env=_env())
    assert "torch adapter: loads into torch" in info.stdout, info.stdout
    torchrun = [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                "-m", "byteps_native.examples.ddp_digits", "--epochs", "2"]
    job = _run(torchrun, cwd=str(tmp_path), env=_env(), timeout=300)
    assert re.search(r"test accuracy 0\.[5-9]", job.stdout), job.stdout[-3000:]
    assert "samples/s" in job.stdout and "ETA" in job.stdout
