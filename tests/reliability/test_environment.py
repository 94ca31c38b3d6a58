"""Invalid environment: a clear message and a non-zero exit, both through
bpslaunch and through the core API's init() -- never a hang, never a
half-started job. And a worker count that never arrives times out with the
number of workers seen so far."""
import socket
import subprocess
import sys
import time

import pytest

from tests.reliability import Cluster
from tests.support.jobs import role_env
from tests.support.paths import REPO
from tests.support.ports import free_port

INIT = [sys.executable, "-c", "import byteps_native.core as bps; bps.init(); print('INIT OK')"]
LAUNCH = [sys.executable, "-m", "byteps_native.launch"]
RUN_TIMEOUT = 60


def _worker_env(**overrides):
    env = role_env(DMLC_ROLE="worker", DMLC_NUM_WORKER=2, DMLC_WORKER_ID=0, DMLC_NUM_SERVER=1,
                   BYTEPS_RENDEZVOUS_TIMEOUT=2, DMLC_PS_ROOT_PORT=free_port())
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def _run(argv, env):
    start = time.monotonic()
    r = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    return r, time.monotonic() - start


# (id, env overrides, what init() says, what bpslaunch says)
BAD_ENV = [
    ("port_out_of_range", dict(DMLC_PS_ROOT_PORT=70000),
     "DMLC_PS_ROOT_PORT=70000 is out of range", "DMLC_PS_ROOT_PORT=70000 is not a port number"),
    ("port_not_a_number", dict(DMLC_PS_ROOT_PORT="abc"),
     "DMLC_PS_ROOT_PORT='abc' is not an integer", "DMLC_PS_ROOT_PORT='abc' is not an integer"),
    ("unknown_role", dict(DMLC_ROLE="foo"),
     "DMLC_ROLE='foo' is not one of worker, server, scheduler", "DMLC_ROLE='foo' must be one of"),
    ("missing_root_uri", dict(DMLC_PS_ROOT_URI=None),
     "DMLC_PS_ROOT_URI", "needs DMLC_PS_ROOT_URI"),
    ("num_worker_not_integer", dict(DMLC_NUM_WORKER="two"),
     "DMLC_NUM_WORKER='two' is not an integer", "DMLC_NUM_WORKER='two' is not an integer"),
    ("num_server_negative", dict(DMLC_NUM_SERVER=-1),
     "DMLC_NUM_SERVER=-1 is out of range", "DMLC_NUM_SERVER=-1 must be >= 0"),
    ("local_size_zero", dict(BYTEPS_LOCAL_SIZE=0),
     "BYTEPS_LOCAL_SIZE=0 is out of range", "BYTEPS_LOCAL_SIZE=0 must be >= 1"),
    ("worker_id_too_big", dict(DMLC_WORKER_ID=2),
     "DMLC_WORKER_ID=2 must be < DMLC_NUM_WORKER=2", "DMLC_WORKER_ID=2 must be < DMLC_NUM_WORKER=2"),
    # bpslaunch does not parse these itself: the worker it starts says so and
    # bpslaunch passes its exit code on.
    ("timeout_not_a_number", dict(BYTEPS_TIMEOUT="soon"),
     "BYTEPS_TIMEOUT='soon' must be a number", "BYTEPS_TIMEOUT='soon' must be a number"),
    ("async_not_a_boolean", dict(BYTEPS_ENABLE_ASYNC="maybe"),
     "BYTEPS_ENABLE_ASYNC='maybe' is not a boolean", "BYTEPS_ENABLE_ASYNC='maybe' is not a boolean"),
    # Accepted before, then overflowed: "timed out after -2147483648 s".
    ("timeout_infinite", dict(BYTEPS_TIMEOUT="inf"),
     "BYTEPS_TIMEOUT='inf' must be a number of seconds in [0.1, 2.592e+06]",
     "BYTEPS_TIMEOUT='inf' must be a number of seconds in [0.1, 2.592e+06]"),
    ("timeout_overflows", dict(BYTEPS_TIMEOUT="1e300"),
     "BYTEPS_TIMEOUT='1e300' must be a number of seconds", "BYTEPS_TIMEOUT='1e300' must be a number of seconds"),
    ("rendezvous_timeout_nan", dict(BYTEPS_RENDEZVOUS_TIMEOUT="nan"),
     "BYTEPS_RENDEZVOUS_TIMEOUT='nan' must be a number", "BYTEPS_RENDEZVOUS_TIMEOUT='nan' must be a number"),
    # Silently ignored before.
    ("interface_missing", dict(DMLC_INTERFACE="nosuch0"),
     "DMLC_INTERFACE='nosuch0' has no IPv4 address on this host; interfaces here: lo (127.0.0.1)",
     "DMLC_INTERFACE='nosuch0' has no IPv4 address on this host; interfaces here: lo (127.0.0.1)"),
]


@pytest.mark.parametrize("overrides,init_says", [(c[1], c[2]) for c in BAD_ENV], ids=[c[0] for c in BAD_ENV])
def test_bad_environment_via_init(overrides, init_says):
    r, took = _run(INIT, _worker_env(**overrides))
    assert r.returncode != 0 and "INIT OK" not in r.stdout, r.stdout + r.stderr
    assert "BytePSError" in r.stderr and init_says in r.stderr, r.stderr
    assert took < 30


@pytest.mark.parametrize("overrides,launch_says", [(c[1], c[3]) for c in BAD_ENV], ids=[c[0] for c in BAD_ENV])
def test_bad_environment_via_bpslaunch(overrides, launch_says):
    r, took = _run(LAUNCH + ["--"] + INIT[:], _worker_env(**overrides))
    assert r.returncode != 0 and "INIT OK" not in r.stdout, r.stdout + r.stderr
    assert launch_says in r.stderr, r.stderr
    assert took < 30


def test_bpslaunch_local_mode_bad_arguments():
    env = role_env()
    for args, says in [(["--local-workers", "0"], "must be >= 1"),
                       (["--local-workers", "1", "--machines", "2"], "--machines 2 needs --servers >= 1"),
                       (["--local-workers", "1"], "local mode needs a command")]:
        r, _ = _run(LAUNCH + args + (["--"] + INIT if "command" not in says else []), env)
        assert r.returncode == 2 and says in r.stderr, (args, r.stderr)


def test_server_and_scheduler_roles_reject_bad_environment():
    r, _ = _run([sys.executable, "-m", "byteps_native.server"], _worker_env(DMLC_ROLE="server", DMLC_NUM_SERVER=0))
    assert r.returncode != 0 and "DMLC_NUM_SERVER=0" in r.stderr, r.stderr
    r, _ = _run([sys.executable, "-m", "byteps_native.scheduler"], _worker_env(DMLC_ROLE="scheduler",
                                                                                DMLC_PS_ROOT_URI=None))
    assert r.returncode != 0 and "DMLC_PS_ROOT_URI is not set" in r.stderr, r.stderr
    r, _ = _run(LAUNCH, _worker_env(DMLC_ROLE="server", DMLC_NUM_SERVER=None))
    assert r.returncode == 2 and "needs DMLC_NUM_SERVER" in r.stderr, r.stderr


def test_scheduler_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = _worker_env(DMLC_ROLE="scheduler", DMLC_PS_ROOT_PORT=taken.getsockname()[1])
        r, took = _run([sys.executable, "-m", "byteps_native.scheduler"], env)
    assert r.returncode != 0 and "Address already in use" in r.stderr, r.stderr
    assert took < 30


@pytest.mark.parametrize("uri,says", [("127.0.0.1", "Connection refused"),
                                      ("no.such.host.invalid", "cannot resolve host 'no.such.host.invalid'")])
def test_unreachable_scheduler(uri, says):
    r, took = _run(INIT, _worker_env(DMLC_PS_ROOT_URI=uri))
    assert r.returncode != 0 and "scheduler" in r.stderr and says in r.stderr, r.stderr
    assert took < 30  # BYTEPS_RENDEZVOUS_TIMEOUT=2 bounds the retries


def test_worker_count_never_arrives(tmp_path):
    """DMLC_NUM_WORKER=3 but two workers come: both time out naming the count."""
    with Cluster(tmp_path, machines=3, servers=0, BYTEPS_RENDEZVOUS_TIMEOUT=2, BYTEPS_FORCE_DISTRIBUTED=1) as c:
        # No servers are needed to fail rendezvous; DMLC_NUM_SERVER=1 keeps
        # init() from refusing the job up front.
        c.env["DMLC_NUM_SERVER"] = "1"
        c.start_role("scheduler", "scheduler")
        ws = [c.start_worker(m, 0, "train_loop.py", 10) for m in range(2)]
        for w in ws:
            assert w.wait(RUN_TIMEOUT) not in (None, 0), c.dump()
            out = w.output()
            # Its own rendezvous deadline or the scheduler's (same length): either names the count.
            assert "rendezvous timed out after 2 s" in out and "2 of 3 workers arrived" in out, out
        assert c.procs["scheduler"].wait(30) not in (None, 0), c.dump()
        # The scheduler's verdict counts the machines that met, though no rank
        # count was published (the third machine holds the others there).
        assert "2 of 3 workers arrived at the scheduler (machines missing: DMLC_WORKER_ID=2)" in \
            c.procs["scheduler"].output(), c.dump()


def test_worker_count_never_arrives_via_bpslaunch():
    env = _worker_env(DMLC_NUM_WORKER=2, DMLC_WORKER_ID=0)
    sched = subprocess.Popen([sys.executable, "-m", "byteps_native.launch"], env=dict(env, DMLC_ROLE="scheduler"),
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r, took = _run(LAUNCH + ["--"] + INIT, env)
    finally:
        sched.kill()
        sched.wait()
    assert r.returncode != 0 and "1 of 2 workers arrived" in r.stderr, r.stderr
    assert took < 30


def test_worker_count_never_arrives_servers_end_too(tmp_path):
    with Cluster(tmp_path, machines=2, servers=1, BYTEPS_RENDEZVOUS_TIMEOUT=2) as c:
        c.start_role("scheduler", "scheduler")
        c.start_role("server", "server 0")
        c.start_worker(0, 0, "train_loop.py", 10)
        codes = c.wait_all(12)
        assert None not in codes.values(), "still running after the rendezvous failed:\n" + c.dump()


def test_unknown_variables_draw_a_warning_naming_the_closest_known_one():
    env = role_env(BYTEPS_TIMOUT="5", DMLC_NUM_WORKERS="1", BYTEPS_ENABLE_IPC="1")
    r, _ = _run(INIT, env)
    assert r.returncode == 0 and "INIT OK" in r.stdout, r.stderr
    assert "BYTEPS_TIMOUT is not a byteps-native setting and is ignored; did you mean BYTEPS_TIMEOUT?" in r.stderr
    assert "DMLC_NUM_WORKERS is not a byteps-native setting and is ignored; did you mean DMLC_NUM_WORKER?" in r.stderr
    assert "BYTEPS_ENABLE_IPC is not a byteps-native setting" in r.stderr, r.stderr
    assert r.stderr.count("BYTEPS_TIMOUT") == 1, r.stderr  # once per process
    assert "DMLC_ROLE is not a" not in r.stderr and "BYTEPS_JOB_TOKEN is not a" not in r.stderr, r.stderr


STALLED = """
import byteps_native.core as bps, numpy as np
bps.init()
if bps.rank() == 0:
    try:
        bps.push_pull(np.ones(10, np.float32), name="only.rank0")
    except bps.BytePSError as e:
        print("ERROR", e, flush=True)
"""


def test_timeout_message_writes_seconds_as_set():
    env = role_env(BYTEPS_TIMEOUT="2.5")
    r, _ = _run(LAUNCH + ["--local-workers", "2", "--", sys.executable, "-c", STALLED], env)
    out = r.stdout + r.stderr
    assert "(BYTEPS_TIMEOUT=2.5)" in out, out
    assert "2.500000" not in out, out
