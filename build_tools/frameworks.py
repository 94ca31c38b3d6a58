"""Finds the frameworks and GPU libraries the adapters are compiled against.

Adapters must be compiled against the torch / TensorFlow that will run them
(their C++ ABI, their headers). Under pip's build isolation (`pip install .`,
`pip wheel .`, `python -m build`) the build runs in a throw-away environment
that hides the installed frameworks; installing a second copy there would mean
downloading gigabytes and, worse, compiling against a different build than the
one the user runs. So a framework that is not importable in the build
environment is looked up in the interpreter's own environment (`python -I`
skips the PYTHONPATH/sitecustomize pip uses to hide it) and used from there.
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

# What the adapters are tested against; the extras pin these when the build did
# not see a framework (see setup.py).
TESTED_TORCH = "2.13.0"
TESTED_TENSORFLOW = "2.21.0"


class Framework:
    def __init__(self, name, version, site_dir, isolated):
        self.name = name
        self.version = version
        self.release = version.split("+")[0]
        self.site_dir = site_dir  # the folder holding the package
        self.isolated = isolated  # found outside pip's build environment

    def __repr__(self):
        where = " (outside the isolated build environment)" if self.isolated else ""
        return f"{self.name} {self.version} from {self.site_dir}{where}"


_PROBE = ("import json, os, sys\n"
          "try:\n"
          "    import {module} as m\n"
          "except Exception as e:\n"
          "    print(json.dumps({{'error': f'{{type(e).__name__}}: {{e}}'}})); sys.exit(0)\n"
          "print(json.dumps({{'version': m.__version__, 'python': list(sys.version_info[:2]),"
          " 'site_dir': os.path.dirname(os.path.dirname(os.path.abspath(m.__file__))), {extra}}}))\n")


def _ancestor_pythons():
    """Interpreters of the processes that started this build, nearest first.

    `python -m build` builds in a virtualenv of its own, whose interpreter
    cannot see the environment the user ran it from; the process that ran it
    (a parent) can. argv[0], not /proc/PID/exe: exe resolves a virtualenv's
    python symlink to the base interpreter, losing the environment.
    """
    found, pid = [], os.getppid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode()
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if "python" in os.path.basename(argv0):
            path = argv0 if os.path.isabs(argv0) else shutil.which(argv0)
            if path and path not in found:
                found.append(path)
        if parent <= 1:
            break
        pid = parent
    return found


def _interpreters():
    """Where to look for a framework: this interpreter's own environment
    (hidden by pip's overlay; -I drops it), an explicit BYTEPS_FRAMEWORK_PYTHON,
    the callers' interpreters, an activated virtualenv."""
    candidates = [os.environ.get("BYTEPS_FRAMEWORK_PYTHON"), sys.executable] + _ancestor_pythons()
    if os.environ.get("VIRTUAL_ENV"):
        candidates.append(os.path.join(os.environ["VIRTUAL_ENV"], "bin", "python"))
    seen = []
    for path in candidates:
        if path and os.path.exists(path) and path not in seen:
            seen.append(path)
    return seen


def _probe(module, extra="", isolated=False):
    """Imports `module` in a child interpreter; returns its JSON facts or None."""
    if isolated:
        for python in _interpreters():
            facts = _probe_with(python, module, extra, ["-I"])
            if facts is not None:
                return facts
        return None
    return _probe_with(sys.executable, module, extra, [])


def _probe_with(python, module, extra, flags):
    code = _PROBE.format(module=module, extra=extra)
    cmd = [python] + flags + ["-c", code]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        return None
    facts = json.loads(lines[-1])
    if "error" in facts or facts["python"] != list(sys.version_info[:2]):
        return None  # another Python's framework cannot be compiled against for this one
    return facts


def _in_build_env(module):
    try:
        mod = __import__(module)
    except Exception:  # a broken framework install must not break the engine build
        return None
    return mod


def find_torch():
    """The torch to compile against, importable in this process afterwards, or None."""
    torch = _in_build_env("torch")
    if torch is not None:
        return Framework("torch", torch.__version__, os.path.dirname(os.path.dirname(torch.__file__)), False)
    facts = _probe("torch", isolated=True)
    if facts is None:
        return None
    # Appended, not prepended: the build environment's setuptools and pybind11
    # keep precedence; torch and its own dependencies come from its site dir.
    sys.path.append(facts["site_dir"])
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        del sys.modules[name]
    if _in_build_env("torch") is None:
        return None
    return Framework("torch", facts["version"], facts["site_dir"], True)


def torch_version():
    """The installed torch's version from its metadata (no import), also
    from outside an isolated build environment, or None."""
    import importlib.metadata
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pass
    code = "import importlib.metadata as m, sys; print(m.version('torch'), *sys.version_info[:2])"
    for python in _interpreters():
        out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True)
        fields = out.stdout.split()
        if out.returncode == 0 and len(fields) == 3 and fields[1:] == [str(v) for v in sys.version_info[:2]]:
            return fields[0]
    return None


def _tensorflow_install():
    """(version, site dir) of the installed TensorFlow from package metadata
    (milliseconds; importing TensorFlow takes seconds), or None."""
    code = ("import importlib.metadata as m, sys\n"
            "for name in ('tensorflow', 'tensorflow-cpu', 'tf-nightly'):\n"
            "    try:\n"
            "        d = m.distribution(name)\n"
            "    except m.PackageNotFoundError:\n"
            "        continue\n"
            "    print(d.version, d.locate_file(''), *sys.version_info[:2]); break\n")
    for python, flags in [(sys.executable, [])] + [(p, ["-I"]) for p in _interpreters()]:
        out = subprocess.run([python] + flags + ["-c", code], capture_output=True, text=True)
        fields = out.stdout.split()
        if out.returncode == 0 and len(fields) == 4 and fields[2:] == [str(v) for v in sys.version_info[:2]]:
            return fields[0], fields[1]
    return None


def tensorflow_version():
    """The installed TensorFlow's version from its metadata (no import), also
    from outside an isolated build environment, or None."""
    installed = _tensorflow_install()
    return installed and installed[0]


def find_tensorflow(cache_dir):
    """(Framework, compile flags, link flags) of the TensorFlow to compile against, or None.

    The flags come from tf.sysconfig in a child interpreter (importing
    TensorFlow here costs seconds and gigabytes, and it may need another numpy
    than the build environment has), cached in `cache_dir` by version and
    location: a rebuild does not import TensorFlow again.
    """
    installed = _tensorflow_install()
    if installed is None:
        return None
    version, site_dir = installed
    cache_file = os.path.join(cache_dir, "tensorflow-%s-%s.json" % (
        version, hashlib.sha256(site_dir.encode()).hexdigest()[:12]))
    if os.path.exists(cache_file):
        with open(cache_file) as f:
            facts = json.load(f)
    else:
        extra = "'compile_flags': m.sysconfig.get_compile_flags(), 'link_flags': m.sysconfig.get_link_flags()"
        facts = _probe("tensorflow", extra=extra) or _probe("tensorflow", extra=extra, isolated=True)
        if facts is None:
            return None
        os.makedirs(cache_dir, exist_ok=True)
        with open(cache_file, "w") as f:
            json.dump(facts, f)
    framework = Framework("tensorflow", facts["version"], facts["site_dir"], False)
    return framework, facts["compile_flags"], facts["link_flags"]


def find_cuda_home():
    """(toolkit root, library dir) of a CUDA toolkit, or (None, None)."""
    if os.environ.get("BYTEPS_CUDA_HOME"):
        homes = [os.environ["BYTEPS_CUDA_HOME"]]
    else:
        nvcc = shutil.which("nvcc")
        if not nvcc:
            return None, None
        # nvcc may be a wrapper script outside the toolkit (/usr/local/bin/nvcc).
        homes = [os.path.dirname(os.path.dirname(nvcc)), os.path.dirname(os.path.dirname(os.path.realpath(nvcc))),
                 "/usr/local/cuda"]
    for home in homes:
        if not os.path.exists(os.path.join(home, "include", "cuda_runtime_api.h")):
            continue
        for lib in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            if glob.glob(os.path.join(home, lib, "libcudart.so*")):
                return home, os.path.join(home, lib)
    return None, None


def find_nccl(extra_site_dirs=()):
    """(include dir, lib dir, library file) of NCCL, or Nones."""
    candidates = []
    if os.environ.get("BYTEPS_NCCL_HOME"):
        candidates.append(os.environ["BYTEPS_NCCL_HOME"])
    else:
        # The nvidia-nccl-cu* wheel torch depends on (nvidia/nccl/{include,lib}).
        for entry in list(sys.path) + list(extra_site_dirs):
            candidates.append(os.path.join(entry or ".", "nvidia", "nccl"))
    for home in candidates:
        header = os.path.join(home, "include", "nccl.h")
        libs = sorted(glob.glob(os.path.join(home, "lib", "libnccl.so*")))
        if os.path.exists(header) and libs:
            plain = os.path.join(home, "lib", "libnccl.so")
            return os.path.dirname(header), os.path.dirname(libs[0]), plain if plain in libs else libs[0]
    return None, None, None


def cuda_config(extra_site_dirs=()):
    """Compile and link flags of the GPU build, or None for CPU-only.

    BYTEPS_WITH_CUDA=0 forces CPU-only, =1 makes a missing toolkit or NCCL an
    error, unset builds with CUDA when both are found.
    """
    wanted = os.environ.get("BYTEPS_WITH_CUDA", "auto")
    if wanted == "0":
        return None
    cuda_home, cuda_lib = find_cuda_home()
    nccl_inc, nccl_lib, nccl_file = find_nccl(extra_site_dirs)
    if not (cuda_home and nccl_inc):
        missing = ("a CUDA toolkit (set BYTEPS_CUDA_HOME or put nvcc on PATH)" if not cuda_home else
                   "NCCL (set BYTEPS_NCCL_HOME, or install the nvidia-nccl-cu* package your torch uses: "
                   "pip install 'byteps-native[cuda]')")
        if wanted == "1":
            raise SystemExit(f"byteps-native: BYTEPS_WITH_CUDA=1 but {missing} was not found")
        print(f"byteps-native: building CPU-only: no {missing}", flush=True)
        return None
    print(f"byteps-native: building with CUDA ({cuda_home}) and NCCL ({nccl_file})", flush=True)
    return {
        "home": cuda_home,
        "nvcc": os.path.join(cuda_home, "bin", "nvcc"),
        "cflags": ["-DBPS_WITH_CUDA", "-I" + os.path.join(cuda_home, "include"), "-I" + nccl_inc],
        "libs": ["-L" + cuda_lib, "-lcudart", "-Wl,-rpath," + cuda_lib,
                 # By file name: the wheel ships only libnccl.so.2, no dev symlink.
                 "-L" + nccl_lib, "-l:" + os.path.basename(nccl_file), "-Wl,-rpath," + nccl_lib],
    }


# The GPUs the kernels are built for: Ampere and Hopper as machine code, and
# Hopper's PTX for later ones (the driver compiles it at load).
CUDA_ARCHS = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
              "-gencode=arch=compute_90,code=compute_90"]


def nvcc_flags(host_compiler, csrc):
    """nvcc's flags for the engine's kernels (csrc/gpu/*.cu), with the host
    compiler the rest of the engine is built with (one C++ runtime)."""
    return ["-std=c++17", "-O3", "-ccbin", host_compiler, "-Xcompiler", "-fPIC,-fvisibility=hidden",
            "-I" + csrc] + CUDA_ARCHS


def pybind11_include():
    """pybind11's headers for the core module: the pybind11 package's, else
    the copy torch ships. CUDA images often hold torch but no pybind11 and
    have no network to fetch it; torch is located without being imported."""
    try:
        import pybind11
        return pybind11.get_include()
    except ImportError:
        pass
    import importlib.util
    spec = importlib.util.find_spec("torch")
    for location in (spec.submodule_search_locations or []) if spec else []:
        include = os.path.join(location, "include")
        if os.path.isfile(os.path.join(include, "pybind11", "pybind11.h")):
            return include
    sys.exit("byteps-native needs pybind11's headers for its core module: "
             "`python -m pip install pybind11` (or install torch, which ships them)")
