"""One process of a job, on its own: its own session (a kill reaches its
children, and a test can kill -9 one process and watch the others), its
output in a log file, optionally inside a network namespace (an emulated host)."""
import glob
import os
import signal
import subprocess
import time

from tests.support.paths import REPO


def read_log(path):
    """A process's log so far ("" before it wrote one)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


class LoggedProcess:
    def __init__(self, name, argv, env, log_path, cwd=REPO, netns=None, stop_grace=0.0):
        self.name = name
        self.stop_grace = stop_grace
        self.log_path = log_path
        self.netns = netns
        self.host = None  # the emulated host (netns.Host), where there is one
        self._log = open(log_path, "w")
        prefix = ["ip", "netns", "exec", netns] if netns else []
        self.popen = subprocess.Popen(prefix + [str(a) for a in argv], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.monotonic()
        self.ended = None

    @property
    def pid(self):
        return self.popen.pid

    @property
    def returncode(self):
        return self.poll()

    def output(self):
        if not self._log.closed:
            self._log.flush()
        return read_log(self.log_path)

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
        """Signals the process group while the process runs (once reaped, its
        pid and group id may belong to someone else)."""
        if self.poll() is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace=None):
        """SIGTERM and `grace` seconds (default: stop_grace) to leave, where
        grace > 0; then SIGKILL."""
        grace = self.stop_grace if grace is None else grace
        if grace > 0 and self.poll() is None:
            self.kill(signal.SIGTERM)
            self.wait(grace)
        self.kill(signal.SIGKILL)
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.poll()
        self._log.close()

    def __repr__(self):
        where = f" in {self.netns}" if self.netns else ""
        return f"<{self.name}{where} pid {self.pid} rc {self.popen.returncode}>"


def job_processes(job_id, role=None):
    """Pids of this host's processes of the job (BYTEPS_JOB_ID in their
    environment), of one DMLC_ROLE if given: what a fault left behind."""
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
