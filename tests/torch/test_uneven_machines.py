"""Machines of different sizes (issue 29) through torchrun: one agent per
"machine" on this host, each with its own --nproc_per_node, colocated servers.
Sizes and ranks as torch numbers them, and exact sums and averages."""
import os

import pytest

from tests.support.jobs import torchrun
from tests.torch import WORKERS


@pytest.mark.parametrize("layout", [(2, 1), (1, 3)], ids=["2+1", "1+3"])
def test_uneven_machines_sum_exactly_and_report_their_ranks(tmp_path, layout):
    results = torchrun(os.path.join(WORKERS, "uneven.py"), machines=len(layout), nproc=list(layout),
                       env={"BYTEPS_PARTITION_BYTES": "4096", "BYTEPS_TIMEOUT": "60"},
                       result_dir=tmp_path).check().results
    world = sum(layout)
    assert sorted(results) == list(range(world)), results
    first = 0
    for machine, local_size in enumerate(layout):
        for local_rank in range(local_size):
            r = results[first + local_rank]
            assert r["group_rank"] == machine, r
            assert (r["rank"], r["size"], r["bps_rank"], r["bps_size"]) == (first + local_rank, world) * 2, r
            assert (r["bps_local_rank"], r["bps_local_size"]) == (local_rank, local_size), r
            # Horovod's cross communicator: the machines that have this local rank
            assert r["cross_size"] == sum(1 for size in layout if size > local_rank), r
            assert r["cross_rank"] == sum(1 for size in layout[:machine] if size > local_rank), r
            assert r["homogeneous"] is False, r
            assert set(r["checks"].values()) == {"ok"}, r["checks"]
        first += local_size
