"""Two machines started with one DMLC_WORKER_ID (issue 20 item 9): refused at
rendezvous, on every process, with a message naming the rank and both
claimants -- not a job that runs with a rank missing."""
from tests.reliability import Cluster


def test_duplicate_worker_id_refused_at_rendezvous(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=5, BYTEPS_RENDEZVOUS_TIMEOUT=30) as c:
        c.start_role("scheduler", "scheduler")
        c.start_role("server", "server 0")
        first = c.start_worker(0, 0, "train_loop.py", 50)
        second = c.start_worker(1, 0, "train_loop.py", 50, DMLC_WORKER_ID=0)
        codes = c.wait_all(25)  # well before the 30 s rendezvous timeout
        assert all(rc not in (None, 0) for rc in codes.values()), "duplicate rank not refused:\n" + c.dump()
        for w in (first, second):
            out = w.output()
            assert "rank 0 (DMLC_WORKER_ID=0, BYTEPS_LOCAL_RANK=0) joined twice" in out, c.dump()
            assert "DONE" not in out and "WRONG SUM" not in out, c.dump()
