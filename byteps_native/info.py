"""`python -m byteps_native.info`: what was built and what is installed."""
import glob
import importlib
import os
import sys


def _numa_nodes():
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return len(nodes) or 1


def _torch_adapter():
    try:
        from byteps_native.torch.extension import _c10d
    except Exception as e:  # report, never fail: this is a diagnostic
        return f"torch adapter: not available ({type(e).__name__}: {e})"
    return f"torch adapter: built against torch {_c10d.built_with_torch_version}"


def _tf_adapter():
    try:
        import ctypes

        from byteps_native.tf import _library
        lib = ctypes.CDLL(_library.OPS_PATH)
        return f"tensorflow adapter: built against graph-def version {lib.byteps_tf_graph_def_version()}"
    except Exception as e:  # noqa: BLE001
        return f"tensorflow adapter: not available ({type(e).__name__}: {e})"


def report():
    lines = [f"byteps-native {__import__('byteps_native').__version__} (python {sys.version.split()[0]})"]
    try:
        from byteps_native.core import _core
        lines.append("engine: " + _core.build_info())
    except Exception as e:
        lines.append(f"engine: NOT BUILT ({e}); run: pip install --no-build-isolation -e .")
    for name in ("torch", "tensorflow"):
        try:
            mod = importlib.import_module(name)
            extra = f" (graph-def version {mod.version.GRAPH_DEF_VERSION})" if name == "tensorflow" else ""
            lines.append(f"{name} installed: {mod.__version__}{extra}")
        except Exception:
            lines.append(f"{name} installed: no")
    lines.append(_torch_adapter())
    lines.append(_tf_adapter())
    lines.append(f"NUMA nodes: {_numa_nodes()}; CPUs: {os.cpu_count()}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
