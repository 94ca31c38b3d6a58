"""Bad input is rejected clearly, on every rank, and does not take the job
down: after a rejected tensor, another tensor still reduces correctly."""
import os
import subprocess
import sys
import textwrap

import pytest

from tests.reliability import Cluster
from tests.support.jobs import role_env
from tests.support.paths import REPO

JOB_TIMEOUT = 40


def _run_case(tmp_path, case, machines, local_size, servers, env=None):
    with Cluster(tmp_path, machines=machines, local_size=local_size, servers=servers, BYTEPS_TIMEOUT=5,
                 **(env or {})) as c:
        c.start("bad_input.py", case)
        codes = c.wait_all(JOB_TIMEOUT)
        assert None not in codes.values(), "job hung:\n" + c.dump()
        return c, codes, {w.name: w.output() for w in c.workers()}


def _line(out, prefix):
    for line in out.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):]
    raise AssertionError(f"no '{prefix}' line in:\n{out}")


TOPOLOGIES = {
    "servers": dict(machines=2, local_size=1, servers=1),   # mismatch seen by the server
    "one_machine": dict(machines=1, local_size=2, servers=0),  # seen in shared memory
    "both": dict(machines=2, local_size=2, servers=1),  # seen in shared memory, told to the other machine
}

# (case, topology, words every rank's error must contain). Every rank's
# message also names the tensor and its own dtype and shape.
MISMATCH_CASES = [
    ("shape", "servers", ["'fc1.weight'", "50 elements (200 bytes", "60 elements (240 bytes", "rank 0", "rank 1"]),
    ("shape", "one_machine", ["'fc1.weight'", "[10, 5]", "[10, 6]"]),
    ("dtype", "servers", ["'fc1.weight'", "float32", "float64"]),
    ("dtype", "one_machine", ["'fc1.weight'", "float32", "float64"]),
    ("same_bytes_other_shape", "servers", ["'fc1.weight'", "same 24 elements in different shapes"]),
    ("same_bytes_other_shape", "one_machine", ["'fc1.weight'", "[4, 6]", "[6, 4]"]),
    # Issue 20 item 9: average on one rank, sum on the others.
    ("average", "servers", ["'fc1.weight'", "rank 0 averages it (average=True)", "rank 1 sums it (average=False)"]),
    ("average", "one_machine", ["'fc1.weight'", "(average) on rank 0", "(sum) on rank 1"]),
    # Plans with different partition counts: rounds drift apart on the
    # partitions only one rank has (the name must still be reusable).
    ("partitions", "servers", ["'fc1.weight'", "3000 elements", "5000 elements"]),
    ("partitions", "one_machine", ["'fc1.weight'", "[3000]", "[5000]"]),
    ("partitions", "both", ["'fc1.weight'", "00] (average) on rank"]),
    # Issue 20 item 7: only machine 0 disagrees inside; machine 1 learns it
    # through the server instead of timing out naming something else.
    ("local_only", "both", ["'fc1.weight'", "[10, 5] (average) on rank 0", "[10, 6] (average) on rank 1"]),
]


@pytest.mark.parametrize("case,topology,words", MISMATCH_CASES)
def test_mismatch_fails_every_rank_clearly(tmp_path, case, topology, words):
    env = {"BYTEPS_PARTITION_BYTES": 4096} if case == "partitions" else {}
    c, codes, outs = _run_case(tmp_path, case, **TOPOLOGIES[topology], env=env)
    for name, out in outs.items():
        result = _line(out, "RESULT ")
        assert result.startswith("error 2 "), f"{name}: expected a mismatch error (code 2), got: {result}\n{out}"
        for w in words:
            assert w in result, f"{name}: error does not mention {w}: {result}"
        assert "no progress" not in result, f"{name}: named by a timeout, not the mismatch: {result}"
        # Issue 20 item 6: the rejected name works again once ranks agree.
        assert _line(out, "REUSE ") == "ok", f"{name}: the name is not reusable after the mismatch:\n{out}"
        assert _line(out, "AFTER ") == "ok", f"{name}: the job did not survive the rejected tensor:\n{out}"
    assert all(rc == 0 for rc in codes.values()), c.dump()


def _run_with_role_env(tmp_path, role_env, worker_env):
    """2 machines, 1 server; role_env for the server, worker_env[rank] per worker."""
    with Cluster(tmp_path, machines=2, local_size=1, servers=1, BYTEPS_TIMEOUT=5) as c:
        c.start_role("scheduler", "scheduler")
        c.start_role("server", "server 0", **role_env)
        for m in range(2):
            c.start_worker(m, 0, "bad_input.py", "plain", **worker_env.get(m, {}))
        codes = c.wait_all(JOB_TIMEOUT)
        assert None not in codes.values(), "job hung:\n" + c.dump()
        return c, codes, {w.name: w.output() for w in c.workers()}


def test_async_on_servers_only_is_named(tmp_path):
    """Issue 20 item 9: BYTEPS_ENABLE_ASYNC=1 on the server only used to hand
    running sums to synchronous workers, silently."""
    c, codes, outs = _run_with_role_env(tmp_path, {"BYTEPS_ENABLE_ASYNC": "1"}, {})
    for name, out in outs.items():
        for prefix in ("RESULT ", "AFTER "):
            result = _line(out, prefix)
            assert result.startswith("error 2 ") and "runs asynchronous rounds (BYTEPS_ENABLE_ASYNC=1)" in result \
                and "BYTEPS_ENABLE_ASYNC=0" in result, f"{name}: {result}\n{out}"


def test_worker_settings_that_disagree_are_named_at_start(tmp_path):
    """Issue 20 item 12: a partition-size mismatch used to be reported per
    tensor with two identical sizes (across machines) or as a shape mismatch
    (inside one machine). Now every worker refuses at rendezvous, naming both
    values; the same for BYTEPS_ENABLE_ASYNC between workers. Issue 38: a
    rank that sets the host tensors' default (256000) still cuts device
    tensors otherwise than one that sets nothing (1024000): refused too."""
    for case, (variable, value, words) in enumerate([
            ("BYTEPS_PARTITION_BYTES", "8192", ["BYTEPS_PARTITION_BYTES=", "256000 (device tensors 1024000)", "8192"]),
            ("BYTEPS_PARTITION_BYTES", "256000", ["BYTEPS_PARTITION_BYTES=256000", "(device tensors 1024000)",
                                                  "set it alike"]),
            ("BYTEPS_ENABLE_ASYNC", "1", ["BYTEPS_ENABLE_ASYNC=", "set it alike"])]):
        (tmp_path / str(case)).mkdir()
        with Cluster(tmp_path / str(case), machines=1, local_size=2, servers=1, BYTEPS_TIMEOUT=5,
                     BYTEPS_FORCE_DISTRIBUTED=1) as c:
            c.start_role("scheduler", "scheduler")
            c.start_role("server", "server 0")
            c.start_worker(0, 0, "bad_input.py", "plain")
            c.start_worker(0, 1, "bad_input.py", "plain", **{variable: value})
            codes = c.wait_all(JOB_TIMEOUT)
            assert None not in codes.values(), "job hung:\n" + c.dump()
            for w in c.workers():
                out = w.output()
                assert w.poll() != 0 and "RESULT" not in out, f"{w.name} ran with {variable} differing:\n{out}"
                for word in words:
                    assert word in out, f"{w.name} does not name {word}:\n{out}"
