"""Runs a small BytePS job on this host for the TF tests: one scheduler, S
servers and N worker processes ("machines": DMLC_WORKER_ID 0..N-1,
BYTEPS_LOCAL_SIZE=1), all real processes talking over real sockets.

Scheduler and servers run the engine's blocking role entry points through its
C ABI, so these tests depend on nothing but the engine and the TF adapter.
Each worker writes its findings as JSON to $BPS_TF_TEST_OUT/rank<r>.json.
"""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")
ENGINE_LIB = os.path.join(REPO, "byteps_native", "lib", "libbyteps_engine.so")

_ROLE_MAIN = (
    "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.bps_last_error.restype = ctypes.c_char_p; "
    "rc = getattr(lib, 'bps_run_' + sys.argv[2])(); "
    "rc and print('role failed:', lib.bps_last_error().decode(), file=sys.stderr); sys.exit(rc)"
)


@dataclass
class WorkerOutcome:
    rank: int
    returncode: int
    output: str
    result: dict


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_env(num_workers, num_servers, extra=None):
    env = dict(os.environ)
    env.update({
        "DMLC_PS_ROOT_URI": "127.0.0.1",
        "DMLC_PS_ROOT_PORT": str(free_port()),
        "DMLC_NUM_WORKER": str(num_workers),
        "DMLC_NUM_SERVER": str(num_servers),
        "DMLC_INTERFACE": "lo",
        "BYTEPS_LOCAL_RANK": "0",
        "BYTEPS_LOCAL_SIZE": "1",
        "BYTEPS_TIMEOUT": env.get("BYTEPS_TIMEOUT", "60"),
        "BYTEPS_JOB_TOKEN": env.get("BYTEPS_JOB_TOKEN") or secrets.token_hex(16),  # role mode needs one
        # start-up on a loaded 2-core host can take longer than a small BYTEPS_TIMEOUT
        "BYTEPS_RENDEZVOUS_TIMEOUT": env.get("BYTEPS_RENDEZVOUS_TIMEOUT", "60"),
        "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra or {})
    return env


def _spawn(cmd, env, log_path):
    log = open(log_path, "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            start_new_session=True), log


def _stop(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def run_job(worker_script, num_workers=2, num_servers=1, args=(), env=None, timeout=240, local_sizes=None):
    """Run `workers/<worker_script>` on every worker; return WorkerOutcomes by
    process index. `local_sizes`: machine m runs local_sizes[m] processes
    (machines of different sizes, issue 29); default one per machine."""
    out_dir = tempfile.mkdtemp(prefix="bps_tf_test_")
    machines = len(local_sizes) if local_sizes else num_workers
    base = job_env(machines, num_servers, dict(env or {}, BPS_TF_TEST_OUT=out_dir))
    placement = [(m, l, size) for m, size in enumerate(local_sizes or [1] * num_workers) for l in range(size)]
    procs = []  # (kind, proc, log, log_path)
    try:
        for role, count in (("scheduler", 1), ("server", num_servers)):
            for i in range(count):
                path = os.path.join(out_dir, f"{role}{i}.log")
                proc, log = _spawn([sys.executable, "-c", _ROLE_MAIN, ENGINE_LIB, role],
                                   dict(base, DMLC_ROLE=role), path)
                procs.append((role, proc, log, path))
        workers = []
        for rank, (machine, local_rank, local_size) in enumerate(placement):
            path = os.path.join(out_dir, f"worker{rank}.log")
            proc, log = _spawn([sys.executable, os.path.join(WORKERS_DIR, worker_script), *args],
                               dict(base, DMLC_ROLE="worker", DMLC_WORKER_ID=str(machine),
                                    BYTEPS_LOCAL_RANK=str(local_rank), BYTEPS_LOCAL_SIZE=str(local_size)), path)
            procs.append(("worker", proc, log, path))
            workers.append((rank, proc, path))
        deadline = time.monotonic() + timeout
        for _, proc, _ in workers:
            try:
                proc.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        outcomes = []
        for rank, proc, path in workers:
            hung = proc.poll() is None
            _stop(proc)
            with open(path) as f:
                output = f.read()
            result_path = os.path.join(out_dir, f"rank{rank}.json")
            result = {}
            if os.path.exists(result_path):
                with open(result_path) as f:
                    result = json.load(f)
            code = -999 if hung else proc.returncode
            outcomes.append(WorkerOutcome(rank, code, output, result))
        return outcomes
    finally:
        for _, proc, log, _ in procs:
            _stop(proc)
            log.close()


def describe(outcomes):
    """Worker logs, for assertion messages."""
    return "\n".join(f"--- worker {o.rank} rc={o.returncode} ---\n{o.output[-4000:]}" for o in outcomes)


def require_success(outcomes):
    for o in outcomes:
        assert o.returncode == 0, "a worker failed (rc -999 = hung past the timeout):\n" + describe(outcomes)
