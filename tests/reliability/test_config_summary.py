"""Issue 19 launch UX: the configuration summary logged at start."""
from tests.reliability import Cluster


def test_configuration_summary_on_rank_0_only(tmp_path):
    """Issue 19 launch UX: one configuration line at INFO, from rank 0."""
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_LOG_LEVEL="INFO", BYTEPS_TIMEOUT=15) as c:
        workers = c.start("train_loop.py", 10)
        codes = c.wait_all(90)
        assert all(rc == 0 for rc in codes.values()), c.dump()
        summary = [l for l in workers[0].output().splitlines() if "configuration: " in l]
        assert len(summary) == 1, c.dump()
        for part in ("partition 256000 B (device tensors 1024000 B)", "timeout 15 s", "interface lo", "2 machines x 1 local", "1 servers",
                     "token on"):
            assert part in summary[0], summary[0]
        assert "configuration: " not in workers[1].output(), c.dump()
