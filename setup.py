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
        objects = _compile_objects(engine_sources, ENGINE_FLAGS, os.path.join(build_dir, "engine"))
        engine_so = os.path.join(lib_dir, "libbyteps_engine.so")
        subprocess.check_call([CXX, "-shared", "-o", engine_so] + objects + ENGINE_LIBS +
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
        exts.append(cpp_extension.CppExtension(
            "byteps_native.torch._c10d",
            sources=_sources("torch"),
            include_dirs=[os.path.join(ROOT, "csrc")],
            libraries=["byteps_engine"],
            extra_compile_args=["-std=c++17", "-O2"],
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
