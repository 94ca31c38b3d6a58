"""A worker that comes after its scheduler ended (the job failed or finished
without it) says that the scheduler at HOST:PORT is not reachable and why that
may be: in a warning after a second of refused connects, and in its error at
the end of BYTEPS_RENDEZVOUS_TIMEOUT, instead of a bare "cannot connect to
...: Connection refused" (issue 20, found by the fault campaign)."""
import subprocess
import sys

from tests.reliability import Cluster

INIT = [sys.executable, "-c", "import byteps_native.core as bps; bps.init()"]


def test_a_late_worker_whose_scheduler_is_gone_says_so(tmp_path):
    with Cluster(tmp_path, machines=2, local_size=1, servers=0, BYTEPS_FORCE_DISTRIBUTED=1,
                 BYTEPS_RENDEZVOUS_TIMEOUT=2) as c:
        c.env["DMLC_NUM_SERVER"] = "1"  # never reached: rendezvous fails first
        scheduler = c.start_role("scheduler", "scheduler")
        c.start_worker(0, 0, "resize.py", "agree")  # worker 1 never comes: the job fails and the scheduler ends
        assert scheduler.wait(30) is not None, "the scheduler did not end:\n" + c.dump()
        where = f"127.0.0.1:{c.env['DMLC_PS_ROOT_PORT']}"
        env = dict(c.env, DMLC_ROLE="worker", DMLC_WORKER_ID="1", BYTEPS_LOCAL_RANK="0", BYTEPS_RENDEZVOUS_TIMEOUT="3")
        late = subprocess.run(INIT, env=env, capture_output=True, text=True, timeout=60)
    assert late.returncode != 0, late.stderr
    lines = late.stderr.splitlines()
    warnings = [l for l in lines if "not reachable yet" in l]
    assert warnings, "no warning while it waited:\n" + late.stderr
    assert f"the scheduler at {where} is not reachable yet" in warnings[0], warnings[0]
    assert "already gone" in warnings[0] and "Connection refused" in warnings[0], warnings[0]
    error = late.stderr[late.stderr.rindex("BytePSError"):] if "BytePSError" in late.stderr else late.stderr
    assert f"the scheduler at {where} is not reachable: nothing listens there" in error, late.stderr
    assert "already gone" in error and "BYTEPS_RENDEZVOUS_TIMEOUT" in error, late.stderr
