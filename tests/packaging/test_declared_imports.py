"""Every module the test suite imports is installed by the project's own files.

CI once passed only because the machine's base interpreter held packages no
project file installs (parameterized for Horovod's Keras tests; issue 27):
scripts/python_env.sh made its virtualenv with --system-site-packages, so a
fresh machine failed where ours passed. This walks the imports of tests/,
third_party/, benchmarks/ and byteps_native/ (what the tests run) and fails on a
third-party top-level module that no requirement file declares, directly or
through what a declared package requires. It reads only metadata and source:
no test module is imported.
"""
import ast
import importlib.metadata as metadata
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("tests", "third_party", "benchmarks", "byteps_native")
REQUIREMENT_FILES = ("requirements.txt", "requirements-gpu.txt", "requirements-nodeps.txt")

# Imported, but never by what CI runs; each says why it is not a requirement.
OPTIONAL = {
    "cupy": "tests/gpu only, which skip without a GPU; the GPU image installs it",
    "horovod": "the ported scripts' --backend horovod branch, for comparing by hand; the suite runs --backend byteps",
}


def _name(text):
    return re.sub(r"[-_.]+", "-", text).lower()


def _requirement_names(path, seen_files):
    """Distribution names in a requirements file, following -r."""
    if path in seen_files:
        return set()
    seen_files.add(path)
    names = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("-r"):
                names |= _requirement_names(os.path.join(os.path.dirname(path), line[2:].strip()), seen_files)
            elif line and not line.startswith("-"):
                names.add(_name(re.match(r"[A-Za-z0-9._-]+", line).group(0)))
    return names


def _declared_distributions():
    """The requirement files' distributions and, where installed, everything they require."""
    todo = set()
    for file in REQUIREMENT_FILES:
        todo |= _requirement_names(os.path.join(REPO, file), set())
    closure = set()
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # e.g. requirements-gpu.txt's on a CPU machine
        for req in requires:
            if "extra ==" in req.split(";", 1)[-1] and ";" in req:
                continue  # an optional extra of that package
            todo.add(_name(re.match(r"[A-Za-z0-9._-]+", req).group(0)))
    return closure


def _python_files():
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "build")]
            for file in files:
                if file.endswith(".py"):
                    yield os.path.join(folder, file)


def _local_modules():
    """Names the suite imports from its own folders (sys.path entries its runners add)."""
    local = set(os.listdir(REPO))
    for path in _python_files():
        local.add(os.path.basename(path)[:-3])
        local.update(os.path.relpath(os.path.dirname(path), REPO).split(os.sep))
    return {name[:-3] if name.endswith(".py") else name for name in local}


def _top_level_imports():
    found = {}
    for path in _python_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], os.path.relpath(path, REPO))
    return found


def test_every_third_party_import_is_declared():
    declared = _declared_distributions()
    providers = metadata.packages_distributions()
    local = _local_modules()
    undeclared = []
    for module, where in sorted(_top_level_imports().items()):
        if module in sys.stdlib_module_names or module in local or module in OPTIONAL or module == "__future__":
            continue
        dists = {_name(d) for d in providers.get(module, [])}
        if not dists:
            undeclared.append(f"{module} (imported by {where}): not installed by the requirement files")
        elif not dists & declared:
            undeclared.append(f"{module} (imported by {where}): installed ({', '.join(sorted(dists))}) but declared "
                              f"by no requirement file, nor required by a declared package")
    assert not undeclared, ("add these to requirements-dev.txt (or, if CI never imports them, to OPTIONAL here "
                            "with the reason):\n  " + "\n  ".join(undeclared))


def test_optional_modules_are_still_imported():
    """An OPTIONAL entry that nothing imports any more would hide a future undeclared one."""
    stale = sorted(set(OPTIONAL) - set(_top_level_imports()))
    assert not stale, f"remove from OPTIONAL, nothing imports them: {stale}"
