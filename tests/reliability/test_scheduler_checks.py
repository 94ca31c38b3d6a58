"""The scheduler ends a job that cannot start: workers that never come
(it used to wait forever), and workers that disagree on the job's size (one
got a clear error, the other hung until the timeout)."""
import time

from tests.reliability import Cluster


def test_scheduler_without_workers_times_out_naming_the_count(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_RENDEZVOUS_TIMEOUT=2, BYTEPS_TIMEOUT=5) as c:
        scheduler = c.start_role("scheduler", "scheduler")
        rc = scheduler.wait(30)
        assert rc not in (None, 0), c.dump()
        assert "rendezvous timed out after 2 s (BYTEPS_RENDEZVOUS_TIMEOUT): 0 of the expected workers arrived" \
            in scheduler.output(), scheduler.output()


def test_workers_that_disagree_on_the_job_size_all_fail_naming_both(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=20, BYTEPS_RENDEZVOUS_TIMEOUT=8) as c:
        c.start_role("scheduler", "scheduler")
        c.start_role("server", "server 0")
        w0 = c.start_worker(0, 0, "train_loop.py", 20)
        time.sleep(1.0)  # worker 0 publishes first
        w1 = c.start_worker(1, 0, "train_loop.py", 20, DMLC_NUM_WORKER=3)
        started = time.monotonic()
        codes = c.wait_all(40)
        assert all(rc not in (None, 0) for rc in codes.values()), c.dump()
        # Every process fails at once: worker 0's rendezvous ends with
        # worker 1's entry, then finds the scheduler's verdict. Before,
        # worker 1 hung until its own timeout and the scheduler never noticed.
        assert time.monotonic() - started < 8 + 10, c.dump()
        for name in ("worker 1", "server 0"):  # failed by the abort, not by a timeout of their own
            assert any(f"{how}: job aborted: processes disagree" in c.procs[name].output()
                       for how in ("failed", "BytePSError", "in init")), c.dump()
        for w in (w0, w1):
            out = w.output()
            # machines, not ranks: machines may run different numbers of ranks (issue 29)
            assert "processes disagree on the job's size" in out and "has 2 machines" in out and "has 3" in out, out


def test_scheduler_with_another_worker_count_fails_every_process(tmp_path):
    """Issue 19: the scheduler ignored its own DMLC_NUM_WORKER (it expected 3
    machines, 2 came with DMLC_NUM_WORKER=2, and the job ran). Now the first
    job size a worker publishes is checked against it: every process fails,
    naming both counts."""
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_TIMEOUT=20, BYTEPS_RENDEZVOUS_TIMEOUT=15) as c:
        c.start_role("scheduler", "scheduler", DMLC_NUM_WORKER="3")
        c.start_role("server", "server 0")
        c.start_worker(0, 0, "train_loop.py", 5)
        c.start_worker(1, 0, "train_loop.py", 5)
        started = time.monotonic()
        codes = c.wait_all(40)
        assert all(rc not in (None, 0) for rc in codes.values()), c.dump()
        assert time.monotonic() - started < 15, c.dump()  # by the check, not by a rendezvous timeout
        for name, proc in c.procs.items():
            out = proc.output()
            assert "the scheduler has DMLC_NUM_WORKER=3 but worker" in out and "has DMLC_NUM_WORKER=2" in out, \
                f"{name}:\n{c.dump()}"
