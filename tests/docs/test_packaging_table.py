"""docs/packaging.md maps each problem of issue 19 to its test: every test it
names must exist, so the table cannot point at a renamed or deleted one."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_test_named_in_the_packaging_table_exists():
    with open(os.path.join(REPO, "docs", "packaging.md")) as f:
        text = f.read()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) >= 30, named
    missing = []
    for path, test in named:
        full = os.path.join(REPO, path)
        if not os.path.exists(full):
            missing.append(path)
            continue
        with open(full) as f:
            source = f.read()
        if test and not re.search(rf"^def {test}\(", source, re.M):
            missing.append(f"{path}::{test}")
    assert not missing, f"docs/packaging.md names tests that do not exist: {missing}"
