"""`python -m byteps_native.info`: what was built and what is installed."""
import glob
import importlib
import os
import sys


def _numa_nodes():
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return len(nodes) or 1


def _framework(name, module, built_attr):
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # report, never fail: this is a diagnostic
        return f"{name}: adapter not available ({type(e).__name__}: {e})"
    built = getattr(mod, built_attr, None)
    return f"{name}: adapter built against {built() if callable(built) else built}"


def report():
    lines = [f"byteps-native {__import__('byteps_native').__version__} (python {sys.version.split()[0]})"]
    try:
        from byteps_native.core import _core
        lines.append("engine: " + _core.build_info())
    except Exception as e:
        lines.append(f"engine: NOT BUILT ({e}); run: pip install --no-build-isolation -e .")
    for name in ("torch", "tensorflow"):
        try:
            lines.append(f"{name} installed: {importlib.import_module(name).__version__}")
        except Exception:
            lines.append(f"{name} installed: no")
    lines.append(_framework("torch", "byteps_native.torch", "built_against"))
    lines.append(_framework("tensorflow", "byteps_native.tf", "built_against"))
    lines.append(f"NUMA nodes: {_numa_nodes()}; CPUs: {os.cpu_count()}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
