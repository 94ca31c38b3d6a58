"""BytePSOps on machines of different sizes (issue 29): two bpslaunch-style
machines of 2 and 1 processes (scheduler, one server): global ranks machine
by machine, Horovod cross ranks, and exact sums and means over 3 replicas."""
from tests.support.jobs import describe, require_success
from tests.tf import run_job

LAYOUT = [2, 1]


def test_bytepsops_on_machines_of_2_and_1_ranks():
    outcomes = run_job("uneven_worker.py", num_servers=1, local_sizes=LAYOUT, env={"BYTEPS_PARTITION_BYTES": "4096"})
    require_success(outcomes)
    world = sum(LAYOUT)
    expected_ranks = [(m, l) for m, size in enumerate(LAYOUT) for l in range(size)]
    by_rank = {o.result["rank"]: o.result for o in outcomes}
    assert sorted(by_rank) == list(range(world)), describe(outcomes)
    total = sum(r + 1 for r in range(world))
    for r, (machine, local_rank) in enumerate(expected_ranks):
        got = by_rank[r]
        assert (got["size"], got["replicas"]) == (world, world), got
        assert (got["local_rank"], got["local_size"]) == (local_rank, LAYOUT[machine]), got
        assert got["cross_size"] == sum(1 for size in LAYOUT if size > local_rank), got
        assert got["cross_rank"] == sum(1 for size in LAYOUT[:machine] if size > local_rank), got
        assert got["homogeneous"] is False, got
        assert got["sum"] == [float(total)], got
        assert got["mean"] == [total / world], got
