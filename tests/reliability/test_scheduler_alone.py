"""A scheduler that no job member ever reaches (every worker failed before
rendezvous, or they point elsewhere) ends after BYTEPS_RENDEZVOUS_TIMEOUT
with a message saying so, instead of serving an empty job forever."""
from cluster import Cluster


def test_scheduler_without_members_times_out(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_RENDEZVOUS_TIMEOUT=2) as c:
        scheduler = c.start_role("scheduler", "scheduler")
        rc = scheduler.wait(20)
        assert rc not in (None, 0), "scheduler still running with no job member:\n" + c.dump()
        out = scheduler.output()
        assert "no job member reached the scheduler" in out and "BYTEPS_RENDEZVOUS_TIMEOUT" in out, out
