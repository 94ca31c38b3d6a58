"""Build byteps-native.

Four artefacts, in this order:
  1. byteps_native/lib/libbyteps_engine.so   the framework-free C++17 engine
     (csrc/{common,store,transport,core,local,server,c_api}); exports only the C
     ABI of csrc/c_api/byteps_c.h.
  2. byteps_native/core/_core*.so            pybind11 module over that C ABI.
  3. byteps_native/torch/_c10d*.so           c10d backend, built with
     torch.utils.cpp_extension against the installed torch (its own pybind11 and
     C++ ABI) -- only when torch is importable.
  4. byteps_native/tf/libbyteps_tf_ops.so    TensorFlow custom ops, compiled with
     tf.sysconfig flags -- only when TensorFlow is importable.
Every adapter links the one engine library through an $ORIGIN rpath, so a
process that loads torch and TF adapters side by side still has one engine.

Install with `pip install --no-build-isolation -e .` so the build sees the
installed torch/TensorFlow rather than an isolated copy. BYTEPS_WITH_PYTORCH=0 /
BYTEPS_WITH_TENSORFLOW=0 skip an adapter (a quick engine-only rebuild).

GPU build: when a CUDA toolkit (BYTEPS_CUDA_HOME, else `nvcc` on PATH) and
NCCL (BYTEPS_NCCL_HOME, else the headers and library of the installed
`nvidia-nccl-cu*` Python package, the NCCL torch uses) are both found, csrc/gpu
is compiled into the same engine library with -DBPS_WITH_CUDA and linked to
cudart and NCCL. BYTEPS_WITH_CUDA=0 forces the CPU-only build, =1 makes a
missing toolkit or NCCL an error.
"""
import concurrent.futures
import glob
import os
import shlex
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
ENGINE_DIRS = ["common", "store", "transport", "transport/tcp", "core", "local", "server", "c_api"]
CXX = os.environ.get("CXX", "g++")
OPT = ["-O3", "-g1"] if os.environ.get("BYTEPS_DEBUG_BUILD") != "1" else ["-O0", "-g"]
ENGINE_FLAGS = ["-std=c++17", "-fPIC", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra",
                "-Wno-unused-parameter", "-march=x86-64-v2", "-I" + os.path.join(ROOT, "csrc")] + OPT
ENGINE_LIBS = ["-pthread", "-lrt"]


def _find_cuda_home():
    if os.environ.get("BYTEPS_CUDA_HOME"):
        homes = [os.environ["BYTEPS_CUDA_HOME"]]
    else:
        import shutil
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


def _find_nccl():
    """(include dir, lib dir, library file) of NCCL, or Nones."""
    candidates = []
    if os.environ.get("BYTEPS_NCCL_HOME"):
        candidates.append(os.environ["BYTEPS_NCCL_HOME"])
    else:
        # The nvidia-nccl-cu* wheel (a namespace package: nvidia/nccl/{include,lib}).
        for entry in sys.path:
            candidates.append(os.path.join(entry or ".", "nvidia", "nccl"))
    for home in candidates:
        header = os.path.join(home, "include", "nccl.h")
        libs = sorted(glob.glob(os.path.join(home, "lib", "libnccl.so*")))
        if os.path.exists(header) and libs:
            plain = os.path.join(home, "lib", "libnccl.so")
            return os.path.dirname(header), os.path.dirname(libs[0]), plain if plain in libs else libs[0]
    return None, None, None


def _cuda_config():
    """Compile and link flags of the GPU build, or None for CPU-only."""
    wanted = os.environ.get("BYTEPS_WITH_CUDA", "auto")
    if wanted == "0":
        return None
    cuda_home, cuda_lib = _find_cuda_home()
    nccl_inc, nccl_lib, nccl_file = _find_nccl()
    if not (cuda_home and nccl_inc):
        missing = "a CUDA toolkit (set BYTEPS_CUDA_HOME or put nvcc on PATH)" if not cuda_home else \
            "NCCL (set BYTEPS_NCCL_HOME or pip install the nvidia-nccl-cu* package torch uses)"
        if wanted == "1":
            raise RuntimeError(f"BYTEPS_WITH_CUDA=1 but {missing} was not found")
        print(f"byteps-native: building CPU-only: no {missing}", flush=True)
        return None
    print(f"byteps-native: building with CUDA ({cuda_home}) and NCCL ({nccl_file})", flush=True)
    return {
        "cflags": ["-DBPS_WITH_CUDA", "-I" + os.path.join(cuda_home, "include"), "-I" + nccl_inc],
        "libs": ["-L" + cuda_lib, "-lcudart", "-Wl,-rpath," + cuda_lib,
                 # By file name: the wheel ships only libnccl.so.2, no dev symlink.
                 "-L" + nccl_lib, "-l:" + os.path.basename(nccl_file), "-Wl,-rpath," + nccl_lib],
    }


def _importable_cuda_torch():
    """torch built with CUDA (its c10_cuda library and headers exist)."""
    try:
        import torch
        return torch.version.cuda is not None
    except Exception:
        return False


def _sources(subdir):
    return sorted(glob.glob(os.path.join(ROOT, "csrc", subdir, "*.cc")))


def _importable(module):
    try:
        __import__(module)
        return True
    except Exception:  # a broken framework install must not break the engine build
        return False


def _compile_objects(sources, flags, build_dir):
    """Compile in parallel, skipping objects newer than their source and headers."""
    os.makedirs(build_dir, exist_ok=True)
    headers = glob.glob(os.path.join(ROOT, "csrc", "**", "*.h"), recursive=True)
    newest_header = max((os.path.getmtime(h) for h in headers), default=0)

    def one(src):
        rel = os.path.relpath(src, os.path.join(ROOT, "csrc")).replace(os.sep, "_")
        obj = os.path.join(build_dir, rel + ".o")
        if os.path.exists(obj) and os.path.getmtime(obj) > max(os.path.getmtime(src), newest_header):
            return obj
        cmd = [CXX] + flags + ["-c", src, "-o", obj]
        print(" ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.check_call(cmd)
        return obj

    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(one, sources))


class BuildEngineFirst(build_ext):
    """Build the engine library (and the TF ops) before the Python extensions."""

    def run(self):
        package_dir = os.path.dirname(self.get_ext_fullpath("byteps_native.core._core"))
        package_dir = os.path.dirname(package_dir)  # .../byteps_native
        lib_dir = os.path.join(package_dir, "lib")
        os.makedirs(lib_dir, exist_ok=True)
        build_dir = os.path.join(ROOT, "build", "objects")

        engine_sources = [s for d in ENGINE_DIRS for s in _sources(d)]
        cuda = _cuda_config()
        if cuda:
            # Same library, one engine per process; separate objects, since
            # -DBPS_WITH_CUDA changes c_api.cc.
            objects = _compile_objects(engine_sources + _sources("gpu"), ENGINE_FLAGS + cuda["cflags"],
                                       os.path.join(build_dir, "engine-cuda"))
            libs = ENGINE_LIBS + cuda["libs"]
        else:
            objects = _compile_objects(engine_sources, ENGINE_FLAGS, os.path.join(build_dir, "engine"))
            libs = ENGINE_LIBS
        engine_so = os.path.join(lib_dir, "libbyteps_engine.so")
        subprocess.check_call([CXX, "-shared", "-o", engine_so] + objects + libs +
                              ["-Wl,-soname,libbyteps_engine.so"])
        for ext in self.extensions:
            ext.library_dirs.append(lib_dir)
        if os.environ.get("BYTEPS_WITH_TENSORFLOW", "1") != "0" and _importable("tensorflow"):
            self._build_tf_ops(package_dir, lib_dir, build_dir)
        super().run()

    def _build_tf_ops(self, package_dir, lib_dir, build_dir):
        sources = _sources("tf")
        if not sources:
            return
        import tensorflow as tf
        flags = ["-std=c++17", "-fPIC", "-O2", "-I" + os.path.join(ROOT, "csrc")]
        flags += [f for f in tf.sysconfig.get_compile_flags() if not f.startswith("--std")]
        objects = _compile_objects(sources, flags, os.path.join(build_dir, "tf"))
        out = os.path.join(package_dir, "tf", "libbyteps_tf_ops.so")
        subprocess.check_call([CXX, "-shared", "-o", out] + objects + tf.sysconfig.get_link_flags() +
                              ["-L" + lib_dir, "-lbyteps_engine", "-Wl,-rpath,$ORIGIN/../lib"])


def _extensions():
    import pybind11
    exts = [Extension(
        "byteps_native.core._core",
        sources=_sources("python"),
        include_dirs=[pybind11.get_include(), os.path.join(ROOT, "csrc")],
        libraries=["byteps_engine"],
        extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden"],
        extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
        language="c++",
    )]
    cmdclass = {"build_ext": BuildEngineFirst}
    if os.environ.get("BYTEPS_WITH_PYTORCH", "1") != "0" and _importable("torch") and _sources("torch"):
        from torch.utils import cpp_extension
        cuda = _cuda_config() if _importable_cuda_torch() else None
        exts.append(cpp_extension.CppExtension(
            "byteps_native.torch._c10d",
            sources=_sources("torch"),
            include_dirs=[os.path.join(ROOT, "csrc")],
            # CUDA build: the adapter passes torch's current stream and completes
            # Futures of CUDA tensors device-aware (c10::cuda streams and events).
            libraries=["byteps_engine"] + (["c10_cuda"] if cuda else []),
            extra_compile_args=["-std=c++17", "-O2"] + (cuda["cflags"] if cuda else []),
            extra_link_args=["-Wl,-rpath,$ORIGIN/../lib"],
        ))

        class BuildAll(BuildEngineFirst, cpp_extension.BuildExtension):
            pass
        cmdclass["build_ext"] = BuildAll
    return exts, cmdclass


ext_modules, cmdclass = _extensions()

setup(
    name="byteps-native",
    version="0.1.0",
    description="BytePS-style parameter-server push-pull engine with native torch and TensorFlow integrations",
    packages=find_packages(include=["byteps_native", "byteps_native.*"]),
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    python_requires=">=3.9",
    install_requires=["numpy"],
    entry_points={"console_scripts": ["bpslaunch=byteps_native.launch:main"]},
    zip_safe=False,
)
