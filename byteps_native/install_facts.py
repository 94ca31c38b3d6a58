"""What this installation of byteps-native was built with, and the one command
that rebuilds it -- without importing any framework (fast, and safe to call
from an import error).

setup.py writes byteps_native/_build_record.py at build time; a source
checkout that was never built has none.
"""
import importlib.metadata
import importlib.util
import os
import shlex
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
PIP = f"{shlex.quote(sys.executable)} -m pip"
# The distribution names a framework may be installed under.
DISTRIBUTIONS = {"torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly")}
TESTED = {"torch": "torch==2.13.0", "tensorflow": "tensorflow-cpu==2.21.0"}


def build_record():
    """{'version', 'torch', 'tensorflow', 'cuda', 'source_tree'}, or {} if unknown."""
    try:
        from byteps_native._build_record import BUILD
    except ImportError:
        return {}
    return dict(BUILD)


def installed_version(framework):
    """Version of an installed framework from its metadata (no import), or None."""
    for dist in DISTRIBUTIONS[framework]:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    # Importable without metadata (a source build on PYTHONPATH).
    return "unknown version" if importlib.util.find_spec(framework) else None


def _source_tree():
    """The source tree this package is imported from (in-place or editable build), or None."""
    tree = os.path.dirname(PACKAGE_DIR)
    return tree if os.path.exists(os.path.join(tree, "setup.py")) else None


def rebuild_command():
    tree = _source_tree()
    if tree:
        return f"cd {shlex.quote(tree)} && {PIP} install --no-build-isolation -e ."
    recorded = build_record().get("source_tree")
    if recorded and os.path.exists(os.path.join(recorded, "setup.py")):
        return f"{PIP} install --force-reinstall --no-deps {shlex.quote(recorded)}"
    return (f"{PIP} install --force-reinstall --no-deps <the byteps-native source tree, sdist or git URL> "
            "(installed from a wheel: rebuild the wheel where the framework is installed)")


def missing_adapter_message(framework, error=None):
    """Why the `framework` adapter is unusable here, and what to run."""
    module = {"torch": "byteps_native.torch", "tensorflow": "byteps_native.tf"}[framework]
    version = installed_version(framework)
    if version is None:
        return f"{module} needs {framework}, which is not installed in {sys.executable}: {PIP} install '{TESTED[framework]}'"
    record = build_record()
    if record and record.get(framework) is None:
        return (f"{module}: this byteps-native was built without its {framework} adapter ({framework} was not "
                f"installed when it was built; {framework} {version} is now). Rebuild: {rebuild_command()}")
    detail = f" ({error})" if error else ""
    return (f"{module}: the compiled {framework} adapter could not be loaded{detail}. "
            f"Build it against the installed {framework} {version}: {rebuild_command()}")
