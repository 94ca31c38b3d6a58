"""`python -m byteps_native.info`: what was built and what is installed.

Fast by default: no framework is imported (TensorFlow alone takes seconds);
versions come from package metadata, adapters from the build record and their
files. `--load` also loads each adapter into its framework, the real check.
"""
import argparse
import glob
import os
import sys

from byteps_native import install_facts
from byteps_native._runtime import library

FRAMEWORKS = (("torch", "byteps_native.torch", "torch"), ("tensorflow", "byteps_native.tf", "tf"))


def _numa_nodes():
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return len(nodes) or 1


def _adapter_file(subdir):
    folder = os.path.join(install_facts.PACKAGE_DIR, subdir)
    return (glob.glob(os.path.join(folder, "_c10d*.so")) + glob.glob(os.path.join(folder, "libbyteps_tf_ops.so")) or
            [None])[0]


def _adapter_line(framework, module, subdir, load):
    built_with = install_facts.build_record().get(framework)
    path = _adapter_file(subdir)
    if path is None:
        return f"{framework} adapter: not built ({install_facts.missing_adapter_message(framework)})"
    if not load:
        against = f"built against {framework} {built_with}" if built_with else "built"
        return f"{framework} adapter: {against} ({os.path.basename(path)}; --load to load it)"
    try:
        __import__(module)
    except Exception as e:  # report, never fail: this is a diagnostic
        return f"{framework} adapter: NOT LOADABLE ({type(e).__name__}: {e})"
    return f"{framework} adapter: loads into {framework} {install_facts.installed_version(framework)}"


def _why_no_core(error):
    """Python says "partially initialized module ... circular import" for a
    missing extension module; say what is missing instead."""
    if not glob.glob(os.path.join(install_facts.PACKAGE_DIR, "core", "_core*.so")):
        return f"no compiled core module (_core*.so) in {os.path.join(install_facts.PACKAGE_DIR, 'core')}"
    return f"{type(error).__name__}: {error}"


def _shadowed_install():
    """Where an installed byteps-native lives when it is not the package running
    (the source tree's own egg-info may be found first: look at every one)."""
    try:
        from importlib import metadata
        found = [os.path.realpath(str(d.locate_file("byteps_native")))
                 for d in metadata.distributions(name="byteps-native")]
    except Exception:  # noqa: BLE001 (a broken install must not break a diagnostic)
        return None
    running = os.path.realpath(install_facts.PACKAGE_DIR)
    others = [path for path in found if path != running and os.path.isdir(path)]
    return os.path.dirname(others[0]) if others else None


def _c10d_names_line():
    """What one c10d call signature may hold (csrc/torch/call_site_names.cc
    reads the same variables): slot_bytes // tensor bytes names, 1 to slots."""
    slots = os.environ.get("BYTEPS_C10D_NAME_SLOTS") or "32"
    slot_bytes = os.environ.get("BYTEPS_C10D_SLOT_BYTES") or str(16 << 20)
    try:
        mib = int(slot_bytes) / (1 << 20)
    except ValueError:
        return f"c10d names: BYTEPS_C10D_SLOT_BYTES='{slot_bytes}' is not a positive integer"
    return (f"c10d names: up to {slots} per call signature, as many as fit {mib:g} MiB (BYTEPS_C10D_NAME_SLOTS, "
            f"BYTEPS_C10D_SLOT_BYTES): staging held per signature and local rank at most max(tensor, {mib:g} MiB)")


def _staging_pool_line():
    """The shared-memory staging pool (csrc/local/staging_warmer.h; the engine
    reads the same variable): reserve per local rank, capped by /dev/shm."""
    reserve = os.environ.get("BYTEPS_LOCAL_STAGING_RESERVE") or str(128 << 20)
    try:
        mib = int(reserve) / (1 << 20)
    except ValueError:
        return f"staging pool: BYTEPS_LOCAL_STAGING_RESERVE='{reserve}' is not an integer"
    try:
        st = os.statvfs("/dev/shm")
        shm = f"; /dev/shm has {st.f_bavail * st.f_frsize / (1 << 30):.1f} GiB free (the reserve takes at most a quarter)"
    except OSError:
        shm = ""
    return (f"staging pool: {mib:g} MiB per local rank kept warm ahead of new names (BYTEPS_LOCAL_STAGING_RESERVE); "
            f"a machine holds at most its peak staging plus the reserve (stats: staging_backed_bytes){shm}")


def _server_pool_line():
    """A server's buffer pool (csrc/server/buffer_pool.h; the server reads the
    same variable): what it keeps free between rounds."""
    keep = os.environ.get("BYTEPS_SERVER_BUFFER_POOL") or str(256 << 20)
    try:
        mib = int(keep) / (1 << 20)
    except ValueError:
        return f"server buffers: BYTEPS_SERVER_BUFFER_POOL='{keep}' is not an integer"
    return (f"server buffers: pooled by size for every key, at most {mib:g} MiB kept free (BYTEPS_SERVER_BUFFER_POOL); "
            f"a server holds its rounds in flight plus that (stats: colocated_server.buffer_pool)")


def report(load=False):
    lines = [f"byteps-native {__import__('byteps_native').__version__} (python {sys.version.split()[0]}, "
             f"{install_facts.PACKAGE_DIR})"]
    try:
        from byteps_native.core import _core  # noqa: F401  (the data path built, not just the library)
        lines.append("engine: " + library.build_info())
    except Exception as e:  # noqa: BLE001
        lines.append(f"engine: NOT BUILT ({_why_no_core(e)}); run: {install_facts.rebuild_command()}")
        shadowed = _shadowed_install()
        if shadowed:
            lines.append(f"note: this is the source tree in {os.path.dirname(install_facts.PACKAGE_DIR)}, which "
                         f"Python imports from the current folder ahead of the byteps-native installed in "
                         f"{shadowed}; run from another folder to use the installed one")
    for framework, module, subdir in FRAMEWORKS:
        lines.append(f"{framework} installed: {install_facts.installed_version(framework) or 'no'}")
    for framework, module, subdir in FRAMEWORKS:
        lines.append(_adapter_line(framework, module, subdir, load))
    lines.append(_c10d_names_line())
    lines.append(_staging_pool_line())
    lines.append(_server_pool_line())
    lines.append(f"NUMA nodes: {_numa_nodes()}; CPUs: {os.cpu_count()}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m byteps_native.info", description=__doc__.splitlines()[0])
    parser.add_argument("--load", action="store_true", help="load each adapter into its framework (slow)")
    print(report(load=parser.parse_args(argv).load))


if __name__ == "__main__":
    main()
