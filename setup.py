"""Build byteps-native.

Four artefacts, in this order:
  1. byteps_native/lib/libbyteps_engine.so   the framework-free C++17 engine:
     every csrc/**/*.cc outside the adapter and tool folders (ADAPTER_DIRS);
     exports only the C ABI of csrc/c_api/byteps_c.h.
  2. byteps_native/core/_core*.so            pybind11 module over that C ABI.
  3. byteps_native/torch/_c10d*.so           c10d backend, built with
     torch.utils.cpp_extension against the installed torch.
  4. byteps_native/tf/libbyteps_tf_ops.so    TensorFlow custom ops, compiled with
     the installed TensorFlow's tf.sysconfig flags.
Every adapter links the one engine library through an $ORIGIN rpath, so a
process that loads torch and TF adapters side by side still has one engine.

Any of `pip install .`, `pip wheel .`, `python -m build` (sdist, then a wheel
from it) and `pip install --no-build-isolation -e .` builds every adapter whose
framework is installed -- also under pip's build isolation, which hides the
installed frameworks (build_tools/frameworks.py finds them anyway). A framework
that is installed but fails to build is an error, never a silent skip.
BYTEPS_WITH_PYTORCH / BYTEPS_WITH_TENSORFLOW: 0 skips an adapter (a quick
engine-only rebuild), 1 makes a missing framework an error.

Rebuilds are incremental (build_tools/cache.py): a second install of an
unchanged tree, or of a fresh clone of it, compiles nothing. The cache is
keyed by content: ~/.cache/byteps-native, or $BYTEPS_BUILD_CACHE.

GPU build: when a CUDA toolkit (BYTEPS_CUDA_HOME, else `nvcc` on PATH) and
NCCL (BYTEPS_NCCL_HOME, else the nvidia-nccl-cu* package torch uses) are both
found, csrc/gpu is compiled into the same engine library with -DBPS_WITH_CUDA.
BYTEPS_WITH_CUDA=0 forces the CPU-only build, =1 makes a missing toolkit or
NCCL an error.

Compilers: CC/CXX as usual; BYTEPS_CC/BYTEPS_CXX override them for this build
(engine and extensions). A compiler that links libstdc++ statically is refused
before anything compiles, and every linked library is checked for the shared
C++ runtime (build_tools/cxx_runtime.py says why).
"""
import glob
import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)  # build_tools/, also when a PEP 517 backend runs this file

from build_tools import cache, cxx_runtime, frameworks  # noqa: E402

CSRC = os.path.join(ROOT, "csrc")
# csrc/ folders that are not part of the engine library: adapters, the GPU
# engine part (added only in the CUDA build), fuzz drivers and C++ tests.
ADAPTER_DIRS = {"torch", "tf", "python", "gpu", "fuzz", "test", "tests"}
# BYTEPS_CC/BYTEPS_CXX win over an environment's CC/CXX (setuptools reads
# these for the Python extensions, the engine build reads CXX).
for _ours, _theirs in (("BYTEPS_CC", "CC"), ("BYTEPS_CXX", "CXX")):
    if os.environ.get(_ours):
        os.environ[_theirs] = os.environ[_ours]
CXX = os.environ.get("CXX", "g++")
OPT = ["-O3", "-g1"] if os.environ.get("BYTEPS_DEBUG_BUILD") != "1" else ["-O0", "-g"]
ENGINE_FLAGS = ["-std=c++17", "-fPIC", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra",
                "-Wno-unused-parameter", "-march=x86-64-v2", "-I" + CSRC] + OPT
ENGINE_LIBS = ["-pthread", "-lrt"]
# Build cache (build_tools/cache.py), keyed by content and shared by every
# clone and build of this user: $BYTEPS_BUILD_CACHE, else ~/.cache/byteps-native.
CACHE = os.environ.get("BYTEPS_BUILD_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "byteps-native")
VERSION = "0.1.0"


def _sources(subdir):
    return sorted(glob.glob(os.path.join(CSRC, subdir, "*.cc")))


def _cuda_sources():
    """The engine's kernels, compiled by nvcc: csrc/gpu/*.cu, and the codecs'
    device twins beside each codec (csrc/compression/*.cu, device_codec.h)."""
    return sorted(glob.glob(os.path.join(CSRC, "gpu", "*.cu")) + glob.glob(os.path.join(CSRC, "compression", "*.cu")))


def engine_sources():
    """Every .cc under csrc/ but the adapter and tool folders, at any depth."""
    found = []
    for path in glob.glob(os.path.join(CSRC, "**", "*.cc"), recursive=True):
        top = os.path.relpath(path, CSRC).split(os.sep)[0]
        if top not in ADAPTER_DIRS and not path.endswith("_test.cc"):
            found.append(path)
    if not found:
        raise SystemExit(f"byteps-native: no engine sources under {CSRC}: this source tree or sdist is "
                         "incomplete (csrc/ missing); build from a git clone or a complete sdist")
    return sorted(found)


def _wanted(variable):
    """'0': skip, '1': required, 'auto': build when the framework is found."""
    value = os.environ.get(variable, "auto")
    return value if value in ("0", "1") else "auto"


def _missing_framework(name, variable, install):
    raise SystemExit(f"byteps-native: {variable}=1 but {name} is not installed in this Python "
                     f"({sys.executable}). Fix: {install} and rebuild.")


# pip runs this file several times per install; only the runs that compile
# need torch imported (seconds each), the metadata runs need its version only.
COMPILING = bool({"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"} & set(sys.argv[1:]))
TORCH = None
TORCH_VERSION = None
if _wanted("BYTEPS_WITH_PYTORCH") != "0" and _sources("torch"):
    if COMPILING:
        TORCH = frameworks.find_torch()
        TORCH_VERSION = TORCH and TORCH.version
    else:
        TORCH_VERSION = frameworks.torch_version()
    if TORCH_VERSION is None and _wanted("BYTEPS_WITH_PYTORCH") == "1":
        _missing_framework("torch", "BYTEPS_WITH_PYTORCH", f"pip install torch=={frameworks.TESTED_TORCH}")
# A required TensorFlow adapter is checked here too, before minutes of compiling the engine.
if _wanted("BYTEPS_WITH_TENSORFLOW") == "1" and _sources("tf") and frameworks.tensorflow_version() is None:
    _missing_framework("TensorFlow", "BYTEPS_WITH_TENSORFLOW",
                       f"pip install tensorflow-cpu=={frameworks.TESTED_TENSORFLOW}")


class BuildAll(build_ext):
    """Engine library and TF ops first, then the Python extensions, each cached."""

    def run(self):
        package_dir = os.path.dirname(os.path.dirname(self.get_ext_fullpath("byteps_native.core._core")))
        lib_dir = os.path.join(package_dir, "lib")
        os.makedirs(lib_dir, exist_ok=True)
        if not self.inplace:
            self._remove_stale_adapters(package_dir)
        objects_dir = os.path.join(CACHE, "objects")
        cxx_runtime.probe_compiler(CXX, CACHE)  # seconds, before minutes of compiling

        sources = engine_sources()
        cuda = frameworks.cuda_config([TORCH.site_dir] if TORCH else [])
        if cuda:
            # -DBPS_WITH_CUDA changes c_api.cc: separate objects, same library.
            objects = cache.compile_objects(CXX, sources + _sources("gpu"), ENGINE_FLAGS + cuda["cflags"],
                                            os.path.join(objects_dir, "engine-cuda"), CSRC)
            objects += cache.compile_objects(cuda["nvcc"], _cuda_sources(), frameworks.nvcc_flags(CXX, CSRC),
                                             os.path.join(objects_dir, "engine-cuda-kernels"), CSRC)
            libs = ENGINE_LIBS + cuda["libs"]
        else:
            objects = cache.compile_objects(CXX, sources, ENGINE_FLAGS, os.path.join(objects_dir, "engine"), CSRC)
            libs = ENGINE_LIBS
        engine_so = os.path.join(lib_dir, "libbyteps_engine.so")
        subprocess.check_call([CXX, "-shared", "-o", engine_so] + objects + libs +
                              ["-Wl,-soname,libbyteps_engine.so"])
        cxx_runtime.require_shared_runtime(engine_so, CXX)
        for ext in self.extensions:
            ext.library_dirs.append(lib_dir)
            if ext.name == "byteps_native.torch._c10d" and cuda and TORCH_HAS_CUDA:
                # The adapter passes torch's current stream and completes Futures
                # of CUDA tensors device-aware (c10::cuda streams and events).
                ext.libraries.append("c10_cuda")
                ext.extra_compile_args.extend(cuda["cflags"])
        self._build_tf_ops(package_dir, lib_dir, objects_dir)
        self._write_build_record(package_dir, cuda)
        super().run()
        for ext in self.extensions:
            cxx_runtime.require_shared_runtime(self.get_ext_fullpath(ext.name), os.environ.get("CXX", CXX))

    def _remove_stale_adapters(self, package_dir):
        """`pip wheel <tree>` reuses the tree's build/ folder: an adapter an
        earlier build left there went into a wheel built without it (one
        compiled against whatever torch was there then, and a build record
        saying none)."""
        stale = []
        if not any(ext.name == "byteps_native.torch._c10d" for ext in self.extensions):
            stale += glob.glob(os.path.join(package_dir, "torch", "_c10d*.so"))
        # The TF ops are (re)built by _build_tf_ops when wanted and found.
        stale += glob.glob(os.path.join(package_dir, "tf", "libbyteps_tf_ops.so"))
        for path in stale:
            os.remove(path)

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        facts = [CXX, TORCH and (TORCH.version, TORCH.site_dir)] if "torch" in ext.name else [CXX]
        digest = cache.extension_digest(ext, CSRC, facts)
        store = cache.ExtensionCache(os.path.join(CACHE, "extensions"))
        if store.restore(ext.name, digest, target):
            return
        super().build_extension(ext)
        store.store(ext.name, digest, target)

    def _build_tf_ops(self, package_dir, lib_dir, objects_dir):
        wanted = _wanted("BYTEPS_WITH_TENSORFLOW")
        if wanted == "0" or not _sources("tf"):
            return
        found = frameworks.find_tensorflow(os.path.join(CACHE, "frameworks"))
        if found is None:
            if wanted == "1":
                _missing_framework("TensorFlow", "BYTEPS_WITH_TENSORFLOW",
                                   f"pip install tensorflow-cpu=={frameworks.TESTED_TENSORFLOW}")
            print("byteps-native: TensorFlow is not installed: building without the TensorFlow adapter",
                  flush=True)
            return
        tf, compile_flags, link_flags = found
        print(f"byteps-native: building the TensorFlow adapter against {tf}", flush=True)
        flags = ["-std=c++17", "-fPIC", "-O2", "-I" + CSRC] + [f for f in compile_flags if not f.startswith("--std")]
        objects = cache.compile_objects(CXX, _sources("tf"), flags, os.path.join(objects_dir, "tf"), CSRC)
        out = os.path.join(package_dir, "tf", "libbyteps_tf_ops.so")
        subprocess.check_call([CXX, "-shared", "-o", out] + objects + link_flags +
                              ["-L" + lib_dir, "-lbyteps_engine", "-Wl,-rpath,$ORIGIN/../lib"])
        cxx_runtime.require_shared_runtime(out, CXX)
        self._tf_version = tf.version

    def _write_build_record(self, package_dir, cuda):
        """What this build contains, for `byteps_native.info` and import errors."""
        path = os.path.join(package_dir, "_build_record.py")
        record = {"version": VERSION, "torch": TORCH.version if TORCH else None,
                  "tensorflow": getattr(self, "_tf_version", None), "cuda": bool(cuda), "source_tree": ROOT}
        previous = {}
        if os.path.exists(path):  # an adapter skipped with =0 keeps what an earlier build made
            scope = {}
            exec(open(path).read(), scope)
            previous = scope.get("BUILD", {})
        built = {"torch": glob.glob(os.path.join(package_dir, "torch", "_c10d*.so")),
                 "tensorflow": glob.glob(os.path.join(package_dir, "tf", "libbyteps_tf_ops.so"))}
        for adapter, variable in (("torch", "BYTEPS_WITH_PYTORCH"), ("tensorflow", "BYTEPS_WITH_TENSORFLOW")):
            # Only while that adapter's library is still there (an in-place
            # tree); a wheel's fresh build folder has none.
            if _wanted(variable) == "0" and built[adapter]:
                record[adapter] = previous.get(adapter)
        with open(path, "w") as f:
            f.write('"""Written by setup.py at build time."""\nBUILD = ' + repr(record) + "\n")


def _extensions():
    exts = [Extension(
        "byteps_native.core._core",
        sources=_sources("python"),
        include_dirs=[frameworks.pybind11_include(), CSRC],
        libraries=["byteps_engine"],
        extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden"],
        extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
        language="c++",
    )]
    cmdclass = {"build_ext": BuildAll}
    if TORCH is not None:
        print(f"byteps-native: building the torch adapter against {TORCH}", flush=True)
        from torch.utils import cpp_extension
        exts.append(cpp_extension.CppExtension(
            "byteps_native.torch._c10d",
            sources=_sources("torch"),
            include_dirs=[CSRC],
            libraries=["byteps_engine"],
            extra_compile_args=["-std=c++17", "-O2"],
            extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
        ))

        class BuildAllWithTorch(BuildAll, cpp_extension.BuildExtension):
            pass
        cmdclass["build_ext"] = BuildAllWithTorch
    elif _wanted("BYTEPS_WITH_PYTORCH") != "0" and TORCH_VERSION is None:
        print("byteps-native: torch is not installed: building without the torch adapter", flush=True)
    return exts, cmdclass


def _torch_has_cuda():
    try:
        import torch
        return TORCH is not None and torch.version.cuda is not None
    except Exception:
        return False


TORCH_HAS_CUDA = _torch_has_cuda()
ext_modules, cmdclass = _extensions()

with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    README = f.read()

# The adapters check at import that the running framework is the release they
# were compiled against; the extras pin that release (the tested one when the
# build did not see the framework).
TORCH_PIN = f"torch=={TORCH_VERSION.split('+')[0] if TORCH_VERSION else frameworks.TESTED_TORCH}"

setup(
    name="byteps-native",
    version=VERSION,
    description="BytePS-style parameter-server push-pull engine with native torch and TensorFlow integrations",
    long_description=README,
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: C++",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Topic :: System :: Distributed Computing",
    ],
    packages=find_packages(include=["byteps_native", "byteps_native.*"]),
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={
        "torch": [TORCH_PIN],
        # "tensorflow" is not satisfied by an installed tensorflow-cpu (and vice
        # versa): pick the extra that names the package you have.
        "tf": [f"tensorflow=={frameworks.TESTED_TENSORFLOW}"],
        "tf-cpu": [f"tensorflow-cpu=={frameworks.TESTED_TENSORFLOW}"],
        # GPU build: torch's CUDA wheel (PyPI's default on Linux) depends on the
        # nvidia-nccl-cu* package the engine's NCCL path is built against;
        # the CUDA toolkit (nvcc, cudart headers) comes from the system.
        "cuda": [TORCH_PIN],
        "examples": ["scikit-learn"],
    },
    entry_points={
        "console_scripts": ["bpslaunch=byteps_native.launch:main"],
        # torch imports this group's entries at `import torch`, so
        # init_process_group("byteps") works without importing byteps_native.torch.
        "torch.backends": ["byteps = byteps_native.torch_autoload:register"],
    },
    zip_safe=False,
)
