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


def report(load=False):
    lines = [f"byteps-native {__import__('byteps_native').__version__} (python {sys.version.split()[0]}, "
             f"{install_facts.PACKAGE_DIR})"]
    try:
        from byteps_native.core import _core
        lines.append("engine: " + _core.build_info())
    except Exception as e:  # noqa: BLE001
        lines.append(f"engine: NOT BUILT ({e}); run: {install_facts.rebuild_command()}")
    for framework, module, subdir in FRAMEWORKS:
        lines.append(f"{framework} installed: {install_facts.installed_version(framework) or 'no'}")
    for framework, module, subdir in FRAMEWORKS:
        lines.append(_adapter_line(framework, module, subdir, load))
    lines.append(f"NUMA nodes: {_numa_nodes()}; CPUs: {os.cpu_count()}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m byteps_native.info", description=__doc__.splitlines()[0])
    parser.add_argument("--load", action="store_true", help="load each adapter into its framework (slow)")
    print(report(load=parser.parse_args(argv).load))


if __name__ == "__main__":
    main()
