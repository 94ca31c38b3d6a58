"""Incremental builds: nothing unchanged is compiled twice.

pip builds wheels and editable installs in fresh temporary folders, so the
compilers' own up-to-date checks never fire and every `pip install` recompiled
the torch extension (minutes). Two caches survive, both keyed by content (never
by file times, so a fresh clone of the same sources hits them too):
objects (the engine, the TF ops) by their source, every engine header, the
flags and the compiler; whole extension modules by a digest of everything that
goes into them. They live in ~/.cache/byteps-native (or $BYTEPS_BUILD_CACHE),
so every clone and build of a user shares them: CI clones afresh each run, and
the torch extension alone compiles for minutes. Paths inside the source tree
enter a key relative to it.
"""
import concurrent.futures
import functools
import glob
import hashlib
import os
import shlex
import shutil
import subprocess
import sys

KEEP = 3  # cached builds kept per object or extension: bounded, a few variants side by side


def _headers(csrc):
    return sorted(glob.glob(os.path.join(csrc, "**", "*.h"), recursive=True))


def _file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def _portable(text, csrc):
    """`text` with the source tree's location taken out."""
    return str(text).replace(os.path.dirname(os.path.abspath(csrc)), "<source tree>")


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx):
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    except OSError:
        version = []
    return f"{shutil.which(cxx) or cxx} {' '.join(version)}"


def _prune(pattern):
    old = sorted(glob.glob(pattern), key=os.path.getmtime)
    for stale in old[:max(0, len(old) - KEEP)]:
        os.remove(stale)


def compile_objects(cxx, sources, flags, build_dir, csrc):
    """Compiles in parallel, skipping every object whose inputs were compiled before."""
    os.makedirs(build_dir, exist_ok=True)
    common = hashlib.sha256()
    common.update(_portable(shlex.join(flags), csrc).encode())
    common.update(_compiler_identity(cxx).encode())
    for header in _headers(csrc):
        common.update(os.path.relpath(header, csrc).encode())
        common.update(_file_digest(header))

    def one(src):
        rel = os.path.relpath(src, csrc).replace(os.sep, "_")
        key = common.copy()
        key.update(_file_digest(src))
        obj = os.path.join(build_dir, f"{rel}-{key.hexdigest()[:16]}.o")
        if os.path.exists(obj):
            return obj
        tmp = obj + f".{os.getpid()}.tmp"
        cmd = [cxx] + flags + ["-c", src, "-o", tmp]
        print(shlex.join(cmd), flush=True)
        subprocess.check_call(cmd)
        os.replace(tmp, obj)  # a killed build never leaves a truncated object under a valid key
        _prune(os.path.join(build_dir, f"{rel}-*.o"))
        return obj

    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(one, sources))


def extension_digest(ext, csrc, facts):
    """Digest of an extension's inputs: its sources, every engine header, its
    flags, and `facts` (framework version and location, python, compiler)."""
    digest = hashlib.sha256()
    for path in sorted(set(ext.sources) | set(_headers(csrc))):
        digest.update(os.path.relpath(path, csrc).encode())
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    for part in (ext.extra_compile_args, ext.extra_link_args, ext.include_dirs, ext.libraries,
                 [sys.version, sys.platform], facts):
        digest.update(_portable(repr(part), csrc).encode())
    return digest.hexdigest()[:20]


class ExtensionCache:
    """Built extension modules, by digest, under `folder`."""

    def __init__(self, folder):
        self.folder = folder

    def _path(self, name, digest):
        return os.path.join(self.folder, f"{name}-{digest}.so")

    def restore(self, name, digest, target):
        cached = self._path(name, digest)
        if not os.path.exists(cached):
            return False
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(cached, target)
        print(f"byteps-native: {name} is up to date (cached build {os.path.basename(cached)})", flush=True)
        return True

    def store(self, name, digest, built):
        os.makedirs(self.folder, exist_ok=True)
        tmp = self._path(name, digest) + f".{os.getpid()}.tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, self._path(name, digest))
        # A few builds per extension (the torch-enabled core and an engine-only
        # wheel's core differ in flags: one must not evict the other), never more.
        _prune(os.path.join(self.folder, f"{name}-*.so"))
