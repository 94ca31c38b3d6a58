"""The Python package is layered (docs/architecture.md, "Python layers"):

    L0 runtime       byteps_native/_runtime, the compiled bindings, leaf helpers
    L1 naming/ops    each face's engine lifecycle, names and push_pull
    L2 collectives   algorithms, fusion, join, collectives, gradients, process sets
    L3 faces         api, keras, cross-device ops, elastic, package __init__s, tools

Every import inside byteps_native -- at module level and inside functions,
read from the source with ast, so an import hidden in a function counts --
must go to its own layer or below, and the imports must form no cycle.
Importing a submodule runs its package's __init__ first; that is Python's
doing, not an import the module makes, so `from byteps_native.tf import ops`
counts as an import of byteps_native.tf.ops only.
"""
import ast
import os

import pytest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "byteps_native")

# Longest matching prefix wins. A module that matches none fails the test: place it.
LAYERS = {
    0: ["byteps_native._runtime", "byteps_native._build_record", "byteps_native.install_facts",
        "byteps_native.join_protocol", "byteps_native.reduce_ops", "byteps_native.compression",
        "byteps_native.horovod_basics", "byteps_native.elastic_state", "byteps_native.trace",
        "byteps_native.core._core", "byteps_native.torch._c10d", "byteps_native.torch.extension",
        "byteps_native.tf._library"],
    1: ["byteps_native.core", "byteps_native.core.api",
        "byteps_native.torch.engine", "byteps_native.torch.ops", "byteps_native.torch.join_protocol",
        "byteps_native.torch.process_sets", "byteps_native.torch.compression", "byteps_native.torch.reduce_ops",
        "byteps_native.tf.engine", "byteps_native.tf.naming", "byteps_native.tf.ops", "byteps_native.tf.compression",
        "byteps_native.tf.reduce_ops", "byteps_native.tf.util"],
    2: ["byteps_native.algorithms",
        "byteps_native.torch.framework", "byteps_native.torch.collectives",
        "byteps_native.torch.process_set_collectives", "byteps_native.torch.functions",
        "byteps_native.torch.optimizer", "byteps_native.torch.async_training", "byteps_native.torch.ddp_hooks",
        "byteps_native.torch.sync_batch_norm", "byteps_native.torch.backend",
        "byteps_native.tf.framework", "byteps_native.tf.fusion", "byteps_native.tf.join_protocol",
        "byteps_native.tf.collectives", "byteps_native.tf.cluster", "byteps_native.tf.keras_flavor",
        "byteps_native.tf.local_rounds"],
    3: ["byteps_native", "byteps_native.torch", "byteps_native.tf", "byteps_native.tf.keras",
        "byteps_native.torch.elastic", "byteps_native.torch.parallel", "byteps_native.torch.missing_names",
        "byteps_native.torch.basics", "byteps_native.tf.api", "byteps_native.tf.optimizer",
        "byteps_native.tf.cross_device_ops", "byteps_native.tf.mirrored_routing", "byteps_native.tf.keras_gather",
        "byteps_native.tf.elastic", "byteps_native.tf.hooks", "byteps_native.tf.missing_names",
        "byteps_native.tf.basics", "byteps_native.info", "byteps_native.launch", "byteps_native.roles",
        "byteps_native.scheduler", "byteps_native.server", "byteps_native.torch_autoload",
        "byteps_native.examples"],
}
# Compiled modules (no .py source) that Python code imports.
EXTENSIONS = {"byteps_native.core._core", "byteps_native.torch._c10d", "byteps_native._build_record"}


def layer_of(module):
    best, best_layer = "", None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, best_layer = prefix, layer
    return best_layer


def source_modules():
    """{module name: (path, is_package)} of every .py file in byteps_native."""
    modules = {}
    root = os.path.dirname(PACKAGE_DIR)
    for folder, _, files in os.walk(PACKAGE_DIR):
        for file in files:
            if not file.endswith(".py"):
                continue
            path = os.path.join(folder, file)
            name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            is_package = file == "__init__.py"
            modules[name[:-len(".__init__")] if is_package else name] = (path, is_package)
    return modules


def imports_of(module, path, is_package, known):
    """(imported module, line) for every byteps_native import in the file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.append((submodule if submodule in known else source, node.lineno))
    return [(target, line) for target, line in found if target == "byteps_native" or
            target.startswith("byteps_native.")]


def import_graph():
    modules = source_modules()
    known = set(modules) | EXTENSIONS
    return {module: imports_of(module, path, is_package, known)
            for module, (path, is_package) in modules.items()}


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in source_modules() if layer_of(m) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS here and to docs/architecture.md): {unplaced}"


def test_no_import_goes_up_a_layer():
    upward = []
    for module, targets in import_graph().items():
        mine = layer_of(module)
        for target, line in targets:
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"{module} (L{mine}) line {line} imports {target} (L{theirs})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_imports_form_no_cycle():
    graph = {m: sorted({t for t, _ in targets if t != m}) for m, targets in import_graph().items()}
    cycles, state = [], {}

    def visit(module, path):
        state[module] = "open"
        for target in graph.get(module, []):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("source, expected", [
    ("from byteps_native.tf import naming\n", "byteps_native.tf.naming"),
    ("from byteps_native.tf.ops import after\n", "byteps_native.tf.ops"),
    ("def f():\n    from byteps_native.tf.api import init\n", "byteps_native.tf.api"),
    ("import byteps_native.tf as bps\n", "byteps_native.tf"),
])
def test_the_walk_sees_function_level_and_from_imports(tmp_path, source, expected):
    # The checks above are only as good as this reading of import statements.
    path = tmp_path / "probe.py"
    path.write_text(source)
    known = set(source_modules())
    assert [t for t, _ in imports_of("byteps_native.tf.probe", str(path), False, known)] == [expected]
