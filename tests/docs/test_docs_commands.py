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


# What each documented command must print when it did its job (not merely
# exit 0): every runnable block needs an entry here.
EXPECTED_OUTPUT = {
    "byteps_native.info": r"engine: byteps-native engine",
    "examples.hello_push_pull": r"sum (\d+) \(expected \1\)",
    "examples.ddp_digits": r"test accuracy 0\.[5-9]",
    "examples.horovod_style": r"epoch 1: loss [0-9.]+",
    "examples.mirrored_digits": r"accuracy 0\.[3-9]",
    "byteps_native.trace merge": r"[1-9]\d* events ->",
}


@pytest.mark.parametrize("block", list(sh_blocks()))
def test_docs_command_runs(block):
    expected = [pattern for command, pattern in EXPECTED_OUTPUT.items() if command in block]
    assert expected, f"no expected output registered for this docs block:\n{block}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"{block}\nstdout:\n{out.stdout[-3000:]}\nstderr:\n{out.stderr[-3000:]}"
    for pattern in expected:
        assert re.search(pattern, out.stdout + out.stderr), f"{block}\ndid not print /{pattern}/:\n{out.stdout[-3000:]}"
