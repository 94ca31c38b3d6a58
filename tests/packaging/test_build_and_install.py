"""The package as a user gets it: a wheel of the source tree and an sdist ->
wheel, each installed into a fresh virtualenv, running a 2-process job from a
folder outside the source tree.

Before: the sdist had no csrc/ (a wheel built from it "succeeded" with an
empty engine), the wheel had no README/license/extras, the examples were not
in the package, every rebuild recompiled everything, and `import
byteps_native.torch` without its extension said "circular import".

CI (this file without flags, ~1-2 min on 2 cores) builds with the framework
adapters off (BYTEPS_WITH_PYTORCH=0 BYTEPS_WITH_TENSORFLOW=0): the engine and
the core module, the part every install needs.
  - `pip wheel <tree>`: reuses the build cache (~/.cache/byteps-native: the
    engine objects scripts/install.sh compiled), so it costs a core-module
    compile at most;
  - `python -m build --sdist`, then `pip wheel <unpacked sdist>` twice (-O0,
    the second must compile nothing);
  - each wheel into its own fresh virtualenv (the sdist's without system site
    packages, the tree's with them), then `bpslaunch --local-workers 2` runs
    byteps_native.examples.hello_push_pull from a temporary folder.
BYTEPS_PACKAGING_FULL=1 also runs the full variant: `python -m build` with
build isolation and both adapters (the torch extension alone compiles for
~5 min), installed, checked with `info --load` and trained with torchrun.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FULL = os.environ.get("BYTEPS_PACKAGING_FULL") == "1"
# -O0 (BYTEPS_DEBUG_BUILD): the packaging path is what is tested, and it halves the compile.
ADAPTERS_OFF = {"BYTEPS_WITH_PYTORCH": "0", "BYTEPS_WITH_TENSORFLOW": "0", "BYTEPS_WITH_CUDA": "0"}
ENGINE_ONLY = dict(ADAPTERS_OFF, BYTEPS_DEBUG_BUILD="1")


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
    (root,) = glob.glob(str(dest / "byteps[-_]native-*"))  # setuptools < 69.3 writes a dash
    return root


@pytest.fixture(scope="module")
def engine_wheel(unpacked_sdist, tmp_path_factory):
    """(wheel path, first build log, second build log): built from the unpacked
    sdist, then from a copy of it elsewhere (a fresh clone, as CI makes), both
    with one build cache (BYTEPS_BUILD_CACHE) that starts empty."""
    out = tmp_path_factory.mktemp("wheels")
    clone = str(tmp_path_factory.mktemp("clone") / "src")
    shutil.copytree(unpacked_sdist, clone, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    cache = str(tmp_path_factory.mktemp("build-cache"))  # empty: the first build must compile
    logs = []
    for tree in (unpacked_sdist, clone):
        for old in glob.glob(str(out / "*.whl")):
            os.remove(old)
        build = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(out),
                      tree], env=_env(BYTEPS_BUILD_CACHE=cache, **ENGINE_ONLY))
        logs.append(build.stdout + build.stderr)
    (wheel,) = glob.glob(str(out / "*.whl"))
    return wheel, logs[0], logs[1]


@pytest.fixture(scope="module")
def tree_wheel(tmp_path_factory):
    """`pip wheel` of the source tree itself, adapters off, optimised like
    install.sh's build: its engine objects come from the user's build cache."""
    out = tmp_path_factory.mktemp("tree-wheel")
    # An earlier build of the tree with the torch adapter left a copy in
    # build/lib.*/ (as `setup.py build_ext --inplace` does), which `pip wheel`
    # reuses: that stale adapter went into this adapter-less wheel.
    for built in glob.glob(os.path.join(REPO, "byteps_native", "torch", "_c10d*.so")):
        stale = os.path.join(REPO, "build", f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}",
                             "byteps_native", "torch")
        os.makedirs(stale, exist_ok=True)
        shutil.copy(built, stale)
    _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(out), REPO],
         env=_env(**ADAPTERS_OFF), cwd=str(out))
    (wheel,) = glob.glob(str(out / "*.whl"))
    return wheel


WHEELS = {"tree": "tree_wheel", "sdist": "engine_wheel"}


def _wheel(request, kind):
    built = request.getfixturevalue(WHEELS[kind])
    return built[0] if isinstance(built, tuple) else built


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


def test_second_build_of_the_same_sources_compiles_nothing(engine_wheel):
    """Before: every `pip install` recompiled everything (331 s for the installer on a built tree)."""
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
    # CXX names no compiler: BYTEPS_CXX overrides it, or the compiler check would fail first.
    out = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(tmp_path / "w"),
                str(tmp_path)], env=_env(CXX="/nonexistent/g++", BYTEPS_CXX="g++", **ENGINE_ONLY), check=False)
    assert out.returncode != 0
    assert "/nonexistent/g++" not in out.stdout + out.stderr
    assert "no engine sources" in out.stdout + out.stderr and "csrc/ missing" in out.stdout + out.stderr


def test_tree_wheel_has_the_engine_and_core_and_no_adapter(tree_wheel):
    with zipfile.ZipFile(tree_wheel) as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
        record = z.read("byteps_native/_build_record.py").decode()
    assert sizes.get("byteps_native/lib/libbyteps_engine.so", 0) > 100_000, "empty or missing engine"
    assert [n for n in sizes if re.match(r"byteps_native/core/_core.*\.so$", n)]
    assert "byteps_native/examples/hello_push_pull.py" in sizes
    # Adapters off: none in the wheel, and the build record does not claim one.
    assert not [n for n in sizes if re.match(r"byteps_native/(torch/_c10d.*|tf/libbyteps_tf_ops)\.so$", n)], sizes
    assert "'torch': None" in record and "'tensorflow': None" in record, record


@pytest.mark.parametrize("kind,system_site", [("sdist", False), ("tree", True)])
def test_fresh_virtualenv_runs_a_two_process_job_outside_the_tree(request, tmp_path, kind, system_site):
    wheel = _wheel(request, kind)
    python = _venv(tmp_path / "venv", system_site_packages=system_site)
    _run([python, "-m", "pip", "install", "-q", wheel], env=_env())
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    info = _run([python, "-m", "byteps_native.info"], cwd=str(outside), env=_env())
    assert "engine: byteps-native engine" in info.stdout and str(tmp_path / "venv") in info.stdout, info.stdout
    bpslaunch = os.path.join(os.path.dirname(python), "bpslaunch")
    job = _run([bpslaunch, "--local-workers", "2", "--", python, "-m", "byteps_native.examples.hello_push_pull"],
               cwd=str(outside), env=_env(BYTEPS_TIMEOUT="60"), timeout=180)
    assert job.stdout.count("of 2: sum 3 (expected 3)") == 2, job.stdout + job.stderr
    # The job ran the installed copy, not the source tree.
    where = _run([python, "-c", "import byteps_native; print(byteps_native.__file__)"], cwd=str(outside), env=_env())
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout
    if kind == "sdist":
        # Run inside the unpacked sdist, Python imports its unbuilt source tree: info says so, plainly.
        shadowed = _run([python, "-m", "byteps_native.info"], cwd=request.getfixturevalue("unpacked_sdist"),
                        env=_env()).stdout
        assert "engine: NOT BUILT (no compiled core module" in shadowed and "circular import" not in shadowed, shadowed
        assert f"ahead of the byteps-native installed in {tmp_path / 'venv'}" in shadowed, shadowed
    if not system_site:
        # No torch in this virtualenv: the plain, accurate error; info says what to install.
        err = _run([python, "-c", "import byteps_native.torch"], cwd=str(outside), env=_env(), check=False).stderr
        assert "No module named 'torch'" in err and "circular import" not in err, err[-2000:]
        assert "pip install 'torch==" in info.stdout, info.stdout


def test_adapter_built_without_its_framework_says_how_to_rebuild(tree_wheel, tmp_path):
    """torch present at run time, absent from the build: name the cause and the command."""
    pytest.importorskip("torch")
    python = _venv(tmp_path / "venv", system_site_packages=True)  # sees the installed torch
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", tree_wheel], env=_env())
    if _run([python, "-c", "import torch"], env=_env(), check=False).returncode != 0:
        pytest.skip("the base interpreter of this virtualenv has no torch")
    out = _run([python, "-c", "import byteps_native.torch"], cwd=str(tmp_path), env=_env(), check=False)
    assert out.returncode != 0
    assert "built without its torch adapter" in out.stderr and "pip install" in out.stderr, out.stderr[-2000:]
    assert "circular import" not in out.stderr


def _detached(cmd, env, tmp_path, timeout=300):
    """Runs `cmd` with no Python among its ancestors, as from a user's shell:
    the build looks for frameworks in its callers' interpreters, and this
    pytest's has torch. Returns (exit code, output)."""
    log, rc = tmp_path / "detached.log", tmp_path / "detached.rc"
    script = " ".join(f"'{c}'" for c in cmd) + f" > '{log}' 2>&1; echo $? > '{rc}'"
    subprocess.run(["setsid", "-f", "sh", "-c", script], env=env, check=True)
    deadline = time.monotonic() + timeout
    while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return int(rc.read_text()), log.read_text()


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A virtualenv without system site packages: no frameworks in it."""
    return _venv(tmp_path_factory.mktemp("bare") / "venv")


@pytest.mark.skipif(not shutil.which("setsid"), reason="needs setsid (util-linux)")
@pytest.mark.parametrize("variable,framework,fix", [
    ("BYTEPS_WITH_PYTORCH", "torch", "pip install torch=="),
    ("BYTEPS_WITH_TENSORFLOW", "TensorFlow", "pip install tensorflow-cpu==")])
def test_required_adapter_without_its_framework_fails_naming_the_fix(bare_venv, tmp_path, variable, framework,
                                                                     fix):
    """Before: `pip install .` exited 0 without the adapters. Asked for one
    (=1) in a Python without its framework, the install stops before
    compiling anything and says which command fixes it."""
    python = bare_venv
    env = _env(**{variable: "1"})
    rc, out = _detached([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", REPO], env, tmp_path)
    assert rc != 0, out[-3000:]
    assert f"{variable}=1 but {framework} is not installed in this Python ({python})" in out, out[-3000:]
    assert f"Fix: {fix}" in out and "and rebuild" in out, out[-3000:]


FIND_TORCH = ("import sys; sys.path.insert(0, {repo!r}); from build_tools import frameworks; "
              "t = frameworks.find_torch(); import torch; print('FOUND', t, t and t.isolated, torch.__version__)")


def test_build_finds_torch_hidden_by_pip_isolation():
    """pip's isolation hides the interpreter's site-packages (here: -S); the build still finds torch."""
    pytest.importorskip("torch")
    out = _run([sys.executable, "-S", "-c", FIND_TORCH.format(repo=REPO)], env=_env())
    assert "outside the isolated build environment" in out.stdout and "True" in out.stdout, out.stdout


def test_build_finds_torch_from_a_separate_build_virtualenv(tmp_path):
    """`python -m build` builds in a virtualenv of its own: torch is found through the calling interpreter."""
    pytest.importorskip("torch")
    isolated = _venv(tmp_path / "isolated")  # no system site packages: no torch in here
    assert _run([isolated, "-c", "import torch"], check=False).returncode != 0
    out = _run([isolated, "-c", FIND_TORCH.format(repo=REPO)], env=_env())
    assert "FOUND torch" in out.stdout and "True" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(not FULL, reason="full build with both adapters: BYTEPS_PACKAGING_FULL=1 (~6-10 min)")
def test_isolated_build_compiles_both_adapters_and_trains(tmp_path):
    pytest.importorskip("torch")
    python = _venv(tmp_path / "venv", system_site_packages=True)  # the frameworks the user has
    if _run([python, "-c", "import build.__main__"], check=False, cwd=str(tmp_path)).returncode != 0:
        # Made from CI's .venv, this virtualenv sees the base interpreter's packages only.
        _run([python, "-m", "pip", "install", "-q", "build"], env=_env())
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
    assert "samples/s" in job.stderr and "ETA" in job.stderr
