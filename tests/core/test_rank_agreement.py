"""Issue 40: one rank-agreement check with one hash. The engine owns the row
layout, the hash of the operation kind and the comparison
(csrc/core/rank_agreement.h); torch (byteps_native/torch/ops.py) and TF
(csrc/tf/ranks_agree_op.cc) build their rows and raise their errors through it.
No engine needs to start: rows and comparison are pure."""
import os
import re
import zlib

import numpy as np
import pytest

from byteps_native._runtime import rank_agreement as agreement

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "grouped_allgather"]


def _table(*rows):
    return np.ascontiguousarray(np.array(rows, dtype=np.int64))


def _disagreement(kind, table, rank):
    return agreement.disagreement(kind, table.ctypes.data, table.shape[0], rank)


@pytest.mark.parametrize("kind", KINDS)
def test_the_kind_hash_is_crc32(kind):
    row = agreement.row(kind, "float32", [2, 3])
    assert row[0] == 1 + zlib.crc32(kind.encode()) % 1000
    assert len(row) == agreement.SLOTS == 16


def test_the_row_size_is_the_c_headers():
    with open(os.path.join(REPO, "csrc", "c_api", "byteps_c.h")) as f:
        assert f"#define BPS_AGREEMENT_SLOTS {agreement.SLOTS}\n" in f.read()


def test_agreeing_rows_pass_and_an_absent_rank_is_skipped():
    mine = agreement.row("allreduce", "float32", [2, 3], extra=1)
    assert _disagreement("allreduce", _table(mine, mine), 1) is None
    assert _disagreement("allreduce", _table(mine, [0] * 16, mine), 0) is None  # rank 1 joined


def test_a_shape_mismatch_names_every_rank_tensor_on_every_rank():
    a = agreement.row("allreduce", "float32", [2, 3], extra=1 + 1)
    b = agreement.row("allreduce", "float32", [2, 4], extra=1 + 1)
    table = _table(a, b)
    errors = {_disagreement("allreduce", table, r) for r in (0, 1)}
    assert len(errors) == 1, "every rank must raise the same error"
    error = errors.pop()
    assert error.startswith("allreduce: ranks disagree on the tensor's device, dtype or shape"), error
    assert "rank 0: float32 [2, 3] (1), rank 1: float32 [2, 4] (1)" in error, error


def test_device_dtype_gathers_and_groups_are_described():
    cpu = agreement.row("allgather", "float32", [5, 3], any_first_dim=True)
    gpu = agreement.row("allgather", "float32", [7, 3], on_device=True, any_first_dim=True)
    assert agreement.row("allgather", "float32", [9, 3], any_first_dim=True) == cpu  # first dim ignored
    error = _disagreement("allgather", _table(cpu, gpu), 0)
    assert "rank 0: float32 [*, 3], rank 1: non-CPU float32 [*, 3]" in error, error
    other = agreement.row("allgather", "bfloat16", [5, 3], any_first_dim=True)
    assert "rank 1: bfloat16 [*, 3]" in _disagreement("allgather", _table(cpu, other), 1)
    group = agreement.group_row("grouped_allgather", 3, 12345)
    assert "a group of 3 tensors" in _disagreement("grouped_allgather", _table(group, cpu), 0)


def test_torch_rows_are_the_engines():
    torch = pytest.importorskip("torch")
    from byteps_native.torch import ops
    src = open(os.path.join(REPO, "byteps_native", "torch", "ops.py")).read()
    assert "ord(c)" not in src and "crc32(kind" not in src, "torch must not hash the kind itself"
    assert ops._dtype_name(torch.float16) == "float16" and ops._dtype_name(torch.bfloat16) == "bfloat16"


def test_tf_rows_and_errors_are_the_engines():
    tf = pytest.importorskip("tensorflow")
    from byteps_native.tf._library import ops as raw
    src = open(os.path.join(REPO, "byteps_native", "tf", "collectives.py")).read()
    assert not re.search(r"crc32\(kind|ord\(c\)", src), "TF must not hash the kind itself"
    row = raw.byteps_agreement_row(tf.constant([5, 3], tf.int64), kind="allgather", dtype="float32",
                                   any_first_dim=True, extra=0)
    assert row.numpy().tolist() == agreement.row("allgather", "float32", [5, 3], any_first_dim=True)
    a = agreement.row("allreduce", "float32", [2, 3], extra=1)
    b = agreement.row("allreduce", "float64", [2, 3], extra=1)
    table = _table(a, b)
    with pytest.raises(tf.errors.FailedPreconditionError) as caught:
        raw.byteps_check_ranks_agree(tf.constant(table), kind="allreduce", rank=1)
    assert _disagreement("allreduce", table, 1) in caught.value.message  # eager TF adds the op's name around it
    assert int(raw.byteps_check_ranks_agree(tf.constant(_table(a, a)), kind="allreduce", rank=0)) == 0
