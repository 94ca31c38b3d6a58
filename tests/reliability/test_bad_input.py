"""Bad input is rejected clearly, on every rank, and does not take the job
down: after a rejected tensor, another tensor still reduces correctly."""
import os
import subprocess
import sys
import textwrap

import pytest

from cluster import REPO, Cluster, base_env

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


def test_partition_size_disagreement_is_named(tmp_path):
    """Issue 20 item 12: a partition-size mismatch used to be reported with
    two identical sizes."""
    c, codes, outs = _run_with_role_env(tmp_path, {}, {1: {"BYTEPS_PARTITION_BYTES": 8192}})
    for name, out in outs.items():
        result = _line(out, "RESULT ")
        assert result.startswith("error 2 ") and "partitions of" in result and "4096000 bytes" in result \
            and "8192 bytes" in result and "BYTEPS_PARTITION_BYTES" in result, f"{name}: {result}\n{out}"


@pytest.mark.parametrize("topology", [
    "servers",
    "one_machine",
])
def test_tensor_resized_between_steps(tmp_path, topology):
    """All ranks agree, but one name carries 16 then 300000 floats: either
    served correctly or refused clearly -- never a crash."""
    c, codes, outs = _run_case(tmp_path, "resize_between_steps", **TOPOLOGIES[topology])
    for name, code in codes.items():
        assert code is not None and code >= 0, f"{name} crashed (rc {code}):\n" + c.dump()
    for name, out in outs.items():
        result = _line(out, "RESULT ")
        assert result == "ok" or (result.startswith("error 2 ") and "'grown'" in result), f"{name}: {result}"
        assert _line(out, "AFTER ") == "ok", out


def _single_process(code, timeout=60):
    env = base_env(BYTEPS_TIMEOUT=5)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_unsupported_dtype_and_reduce_op_and_layout():
    r = _single_process("""
        import ctypes, os
        import numpy as np
        import byteps_native.core as bps
        from byteps_native.core import _core
        bps.init()
        for dt in (np.complex64, np.bool_, np.int16, object):
            try:
                bps.push_pull(np.zeros(4, dt), name="x")
                print("ACCEPTED", dt)
            except TypeError as e:
                assert "unsupported dtype" in str(e) and "float32" in str(e), e
        # The engine's own check, below the Python layer.
        try:
            _core.push_pull_async(np.zeros(4, np.float32), "y", True, 0, 99).wait()
            print("ACCEPTED code 99")
        except bps.BytePSError as e:
            code = getattr(e, "code", e.args[-1])
            assert code == 1 and "unsupported dtype code 99" in str(e), e.args
        try:
            bps.push_pull(np.zeros((4, 4), np.float32)[:, 1], name="strided")
            print("ACCEPTED strided")
        except ValueError as e:
            assert "not C-contiguous" in str(e), e
        # Reduce op through the C ABI (the Python API only offers sum/average).
        lib = ctypes.CDLL(os.path.join(os.path.dirname(bps.__file__), "..", "lib", "libbyteps_engine.so"))
        lib.bps_last_error.restype = ctypes.c_char_p
        class Tensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("num_elements", ctypes.c_int64), ("dtype", ctypes.c_int32),
                        ("device", ctypes.c_int32), ("ndim", ctypes.c_int32), ("shape", ctypes.c_void_p)]
        buf = np.zeros(4, np.float32)
        t = Tensor(buf.ctypes.data, 4, 0, -1, 0, None)
        DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
        cb = DONE(lambda *a: None)
        rc = lib.bps_push_pull_async(ctypes.byref(t), buf.ctypes.data_as(ctypes.c_void_p), b"z", 0, 7, cb, None)
        assert rc == 1, rc
        assert b"unsupported reduce op 7" in lib.bps_last_error(), lib.bps_last_error()
        # Still usable after all the rejections.
        ok = np.ones(8, np.float32)
        bps.push_pull(ok, name="fine")
        assert np.all(ok == 1)
        print("ALL REJECTED")
    """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ALL REJECTED" in r.stdout and "ACCEPTED" not in r.stdout.replace("ALL REJECTED", ""), r.stdout
