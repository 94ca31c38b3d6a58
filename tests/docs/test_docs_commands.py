"""Every ```sh block of the docs runs on one CPU machine: run them all.

Blocks fenced as ```bash need several machines or a cluster and are only shown.
"""
import glob
import os
import re
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))) + [os.path.join(REPO, "README.md")]


def sh_blocks():
    for path in DOCS:
        with open(path) as f:
            text = f.read()
        for i, block in enumerate(re.findall(r"```sh\n(.*?)```", text, re.S)):
            yield pytest.param(block, id=f"{os.path.basename(path)}#{i}")


def test_docs_have_runnable_commands():
    assert len(list(sh_blocks())) >= 5


@pytest.mark.parametrize("block", list(sh_blocks()))
def test_docs_command_runs(block):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"{block}\nstdout:\n{out.stdout[-3000:]}\nstderr:\n{out.stderr[-3000:]}"
