"""DDP on the 'byteps' backend: after K steps the parameters equal those of
single-process training on the concatenated batch; PyTorch's comm-hook
contract cases hold."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.torch import WORKERS

EXACT_TOLERANCE = 1e-5   # fp32 sums in another order
COMPRESSED_TOLERANCE = 2e-2  # gradients rounded to 16 bits on the wire


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    results = torchrun(os.path.join(WORKERS, "ddp.py"), nproc=2,
                       args=["none,push_pull,fp16,bf16,chained", "--contract"],
                       result_dir=tmp_path_factory.mktemp("ddp2")).check().results
    assert sorted(results) == [0, 1], results
    return results


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    results = torchrun(os.path.join(WORKERS, "ddp.py"), nproc=4, args=["none,push_pull"],
                       result_dir=tmp_path_factory.mktemp("ddp4")).check().results
    assert sorted(results) == [0, 1, 2, 3], results
    return results


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """2 "machines" x 2 ranks on this host: the engine's path with colocated servers."""
    results = torchrun(os.path.join(WORKERS, "ddp.py"), machines=2, nproc=2, args=["push_pull,fp16"],
                       env={"BYTEPS_TIMEOUT": "30"}, result_dir=tmp_path_factory.mktemp("ddp2x2")).check().results
    assert sorted(results) == [0, 1, 2, 3], results
    return results


@pytest.mark.parametrize("hook,tolerance", [("none", EXACT_TOLERANCE), ("push_pull", EXACT_TOLERANCE),
                                            ("chained", EXACT_TOLERANCE), ("fp16", COMPRESSED_TOLERANCE),
                                            ("bf16", COMPRESSED_TOLERANCE)])
def test_parity_two_ranks(two_ranks, hook, tolerance):
    for rank, result in two_ranks.items():
        assert result[hook] < tolerance, f"rank {rank}: max |param - reference| = {result[hook]}"


@pytest.mark.parametrize("hook", ["none", "push_pull"])
def test_parity_four_ranks(four_ranks, hook):
    for rank, result in four_ranks.items():
        assert result[hook] < EXACT_TOLERANCE, f"rank {rank}: max |param - reference| = {result[hook]}"


@pytest.mark.parametrize("case", ["not_callable", "invalid_return_type", "register_once"])
def test_comm_hook_contract(two_ranks, case):
    for rank, result in two_ranks.items():
        assert result["contract"][case] == "ok", f"rank {rank}: {result['contract'][case]}"


@pytest.mark.parametrize("hook,tolerance", [("push_pull", EXACT_TOLERANCE), ("fp16", COMPRESSED_TOLERANCE)])
def test_parity_two_machines(two_machines, hook, tolerance):
    for rank, result in two_machines.items():
        assert result[hook] < tolerance, f"rank {rank}: max |param - reference| = {result[hook]}"
