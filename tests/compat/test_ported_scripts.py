"""Upstream Horovod and BytePS example scripts, ported by the import line
only, run with 2 processes under torchrun (offline: bundled digits for MNIST)
and end with the same trained state on both ranks.

CI runs the subset marked in scripts_table.py; COMPAT_ALL_SCRIPTS=1 runs
every script that is expected to pass. `python3 -m tests.compat.run_scripts`
runs and reports all of them, including those that fail for reasons in the
scripts themselves (see docs/migration.md).
"""
import os

import pytest

from tests.compat.run_scripts import run_script
from tests.compat.scripts_table import EXPECTED_TO_PASS, TABLE

RUN_ALL = os.environ.get("COMPAT_ALL_SCRIPTS") == "1"
SELECTED = sorted(name for name in EXPECTED_TO_PASS if RUN_ALL or TABLE[name][1])


@pytest.mark.parametrize("name", SELECTED)
def test_ported_script(name):
    passed, detail, _ = run_script(name)
    assert passed, f"{name}: {detail}"
