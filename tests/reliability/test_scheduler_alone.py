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


def test_configuration_summary_on_rank_0_only(tmp_path):
    """Issue 19 launch UX: one configuration line at INFO, from rank 0."""
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_LOG_LEVEL="INFO", BYTEPS_TIMEOUT=15) as c:
        workers = c.start("train_loop.py", 10)
        codes = c.wait_all(90)
        assert all(rc == 0 for rc in codes.values()), c.dump()
        summary = [l for l in workers[0].output().splitlines() if "configuration: " in l]
        assert len(summary) == 1, c.dump()
        for part in ("partition 4096000 B", "timeout 15 s", "interface lo", "2 machines x 1 local", "1 servers",
                     "token on"):
            assert part in summary[0], summary[0]
        assert "configuration: " not in workers[1].output(), c.dump()
