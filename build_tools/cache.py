"""Incremental builds: nothing unchanged is compiled twice.

pip builds wheels and editable installs in fresh temporary folders, so the
compilers' own up-to-date checks never fire and every `pip install` recompiled
the torch extension (minutes). Two caches under <source tree>/build survive:
objects keyed by source and header mtimes (the engine, the TF ops), and whole
extension modules keyed by a digest of everything that goes into them.
"""
import concurrent.futures
import glob
import hashlib
import os
import shlex
import shutil
import subprocess
import sys


def _headers(csrc):
    return glob.glob(os.path.join(csrc, "**", "*.h"), recursive=True)


def compile_objects(cxx, sources, flags, build_dir, csrc):
    """Compiles in parallel, skipping objects newer than their source and every header."""
    os.makedirs(build_dir, exist_ok=True)
    newest_header = max((os.path.getmtime(h) for h in _headers(csrc)), default=0)
    flags_file = os.path.join(build_dir, "flags.txt")
    wanted_flags = shlex.join([cxx] + flags)
    same_flags = os.path.exists(flags_file) and open(flags_file).read() == wanted_flags

    def one(src):
        rel = os.path.relpath(src, csrc).replace(os.sep, "_")
        obj = os.path.join(build_dir, rel + ".o")
        if same_flags and os.path.exists(obj) and os.path.getmtime(obj) > max(os.path.getmtime(src), newest_header):
            return obj
        cmd = [cxx] + flags + ["-c", src, "-o", obj]
        print(shlex.join(cmd), flush=True)
        subprocess.check_call(cmd)
        return obj

    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        objects = list(pool.map(one, sources))
    with open(flags_file, "w") as f:
        f.write(wanted_flags)
    return objects


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
        digest.update(repr(part).encode())
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
        for stale in glob.glob(os.path.join(self.folder, f"{name}-*.so")):
            os.remove(stale)  # one build per extension: the cache must not grow without bound
        tmp = self._path(name, digest) + ".tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, self._path(name, digest))
