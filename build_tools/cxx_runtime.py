"""Every library of byteps-native must use the process's one shared C++ runtime.

A compiler that links libstdc++ statically (some CUDA images export
CC=/opt/gcc/bin/gcc CXX=/opt/gcc/bin/g++ built that way) gives the engine a
private copy of the C++ runtime beside the shared one numpy, torch and
TensorFlow load. Its iostreams are never initialised and the engine crashed
at its first `ostream << long` (`python -m byteps_native.info`: SIGSEGV). The
build refuses such a compiler before compiling anything, and checks every
library it links, naming the compiler and the fix.
"""
import os
import shutil
import subprocess
import sys
import tempfile

# The shared C++ runtimes a library may depend on (GCC's, LLVM's).
SHARED_RUNTIMES = ("libstdc++.so", "libc++.so")


def python_compiler(name):
    """Python's own compiler command (sysconfig CC or CXX), first word."""
    import sysconfig
    value = sysconfig.get_config_var(name) or ("gcc" if name == "CC" else "g++")
    return value.split()[0]


def fix_hint():
    return (f"build with Python's compilers instead: BYTEPS_CC={python_compiler('CC')} "
            f"BYTEPS_CXX={python_compiler('CXX')} (they override CC/CXX for this build), "
            "or unset CC and CXX")


def needed_libraries(path):
    """The DT_NEEDED entries of a shared library, through readelf; None when
    that cannot be read (no readelf, or no file where the build said)."""
    readelf = shutil.which("readelf")
    if readelf is None or not os.path.exists(path):
        return None
    out = subprocess.run([readelf, "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def links_shared_runtime(path):
    """True/False; None when it cannot be told (no readelf)."""
    needed = needed_libraries(path)
    if needed is None:
        return None
    return any(lib.startswith(SHARED_RUNTIMES) for lib in needed)


def require_shared_runtime(path, cxx):
    if links_shared_runtime(path) is False:
        raise SystemExit(f"byteps-native: {os.path.basename(path)} was linked without the shared C++ runtime "
                         f"(no libstdc++.so / libc++.so among its needed libraries): the compiler {cxx} links "
                         "libstdc++ statically, and a private C++ runtime beside the one torch/numpy load "
                         f"crashes at run time. Fix: {fix_hint()}.")


def probe_compiler(cxx, build_dir):
    """Links a one-line C++ shared library with `cxx` and checks it; the
    result is remembered per compiler (path and mtime) under build_dir."""
    resolved = shutil.which(cxx) or cxx
    try:
        stamp = f"{resolved} {os.path.getmtime(resolved)}"
    except OSError:
        stamp = resolved
    os.makedirs(build_dir, exist_ok=True)
    record = os.path.join(build_dir, "cxx_runtime_ok.txt")
    if os.path.exists(record) and stamp in open(record).read().splitlines():
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cc")
        with open(src, "w") as f:
            f.write('#include <sstream>\n#include <string>\n'
                    'extern "C" int bps_probe(long v) { std::ostringstream s; s << v; return (int)s.str().size(); }\n')
        lib = os.path.join(tmp, "libprobe.so")
        link = subprocess.run([cxx, "-shared", "-fPIC", "-o", lib, src], capture_output=True, text=True)
        if link.returncode != 0:
            raise SystemExit(f"byteps-native: the C++ compiler {cxx} cannot build a shared library:\n"
                             f"{link.stderr[-2000:]}")
        require_shared_runtime(lib, cxx)
    with open(record, "a") as f:
        f.write(stamp + "\n")


if __name__ == "__main__":  # python build_tools/cxx_runtime.py LIB... : check built libraries
    for lib_path in sys.argv[1:]:
        require_shared_runtime(lib_path, os.environ.get("CXX", "g++"))
        print(f"{lib_path}: links the shared C++ runtime")
