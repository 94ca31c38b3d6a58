"""A byteps-native job on this host, one real process per role, for the
reliability tests.

Unlike bpslaunch (which stops the whole job as soon as one child fails), every
process here runs on its own: a test can kill -9 one of them and then watch
what each survivor does by itself -- how it exits, how fast, and what it says.

Each process writes stdout+stderr to a log file under the test's tmp dir; a
process is its own session so cleanup can always reach it.
"""
import glob
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

from byteps_native.launch import remove_job_shared_memory

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


def job_processes(job_id, role=None):
    """Pids of this host's processes of the job (by BYTEPS_JOB_ID in their environment), of one DMLC_ROLE if
    given."""
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"BYTEPS_JOB_ID={job_id}".encode() in env and (role is None or f"DMLC_ROLE={role}".encode() in env):
            found.append(int(path.split("/")[2]))
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra):
    """Environment of a job: a fresh token, job id and scheduler port."""
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("DMLC_", "BYTEPS_")):
            del env[k]
    env.update({
        "DMLC_PS_ROOT_URI": "127.0.0.1",
        "DMLC_PS_ROOT_PORT": str(free_port()),
        "DMLC_INTERFACE": "lo",
        "BYTEPS_JOB_TOKEN": secrets.token_hex(16),
        "BYTEPS_JOB_ID": secrets.token_hex(4),
        "BYTEPS_TIMEOUT": "5",
        "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Proc:
    def __init__(self, name, argv, env, log_dir):
        self.name = name
        self.log_path = os.path.join(log_dir, name.replace(" ", "_") + ".log")
        self._log = open(self.log_path, "w")
        self.popen = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO,
                                      start_new_session=True)
        self.started = time.monotonic()
        self.ended = None

    @property
    def pid(self):
        return self.popen.pid

    def output(self):
        self._log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def poll(self):
        rc = self.popen.poll()
        if rc is not None and self.ended is None:
            self.ended = time.monotonic()
        return rc

    def wait(self, timeout):
        """Exit code, or None if still running after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.poll()
            if rc is not None:
                return rc
            time.sleep(0.02)
        return self.poll()

    def wait_for(self, text, timeout):
        """Waits until `text` appears in the output; False on timeout or exit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return True
            if self.poll() is not None:
                return text in self.output()
            time.sleep(0.05)
        return False

    def kill(self, sig=signal.SIGKILL):
        if self.poll() is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        self.kill(signal.SIGKILL)
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()

    def __repr__(self):
        return f"<{self.name} pid {self.pid} rc {self.popen.returncode}>"


class Cluster:
    """Scheduler, S dedicated servers and machines x local workers."""

    def __init__(self, log_dir, machines=2, local_size=1, servers=1, **env):
        self.log_dir = str(log_dir)
        self.machines = machines
        self.local_size = local_size
        self.servers = servers
        self.env = base_env(DMLC_NUM_WORKER=machines, DMLC_NUM_SERVER=servers, BYTEPS_LOCAL_SIZE=local_size,
                            **env)
        self.procs = {}

    def start_role(self, role, name, **env):
        argv = [sys.executable, "-m", f"byteps_native.{role}"]
        self.procs[name] = Proc(name, argv, dict(self.env, DMLC_ROLE=role, **env), self.log_dir)
        return self.procs[name]

    def start_worker(self, machine, local_rank, script, *args, **env):
        rank = machine * self.local_size + local_rank
        name = f"worker {rank}"
        wenv = dict(self.env, DMLC_ROLE="worker", DMLC_WORKER_ID=str(machine), BYTEPS_LOCAL_RANK=str(local_rank))
        wenv.update({k: str(v) for k, v in env.items()})
        argv = [sys.executable, os.path.join(WORKERS, script)] + [str(a) for a in args]
        self.procs[name] = Proc(name, argv, wenv, self.log_dir)
        return self.procs[name]

    def start(self, script, *args, **worker_env):
        """Starts the whole job; returns the worker Procs by rank."""
        self.start_role("scheduler", "scheduler")
        for s in range(self.servers):
            self.start_role("server", f"server {s}")
        return [self.start_worker(m, l, script, *args, **worker_env)
                for m in range(self.machines) for l in range(self.local_size)]

    def workers(self):
        return [p for n, p in sorted(self.procs.items()) if n.startswith("worker")]

    def wait_all(self, timeout):
        """Waits for every process; returns {name: rc or None (still running)}."""
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            p.wait(max(0.0, deadline - time.monotonic()))
        return {n: p.poll() for n, p in self.procs.items()}

    def dump(self):
        return "\n".join(f"===== {n} (rc {p.poll()}) =====\n{p.output()[-4000:]}" for n, p in self.procs.items())

    def stop(self):
        for p in self.procs.values():
            p.stop()
        remove_job_shared_memory(self.env["BYTEPS_JOB_ID"])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
