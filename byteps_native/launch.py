"""bpslaunch: start byteps-native roles, BytePS-style or all on this machine.

BytePS mode (one invocation per machine and role, configured by DMLC_* env):
    DMLC_ROLE=scheduler bpslaunch
    DMLC_ROLE=server    bpslaunch
    DMLC_ROLE=worker    bpslaunch -- python train.py     # BYTEPS_LOCAL_SIZE processes

Local mode (scheduler, servers and workers on this machine):
    bpslaunch --local-workers 2 -- python train.py
    bpslaunch --machines 2 --local-workers 2 --servers 2 -- python train.py  # emulated machines

A child that fails ends the job: the others are stopped and bpslaunch exits
with the failed child's code. Shared memory of the job is removed on exit.
"""
import argparse
import glob
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

REQUIRED = {
    "scheduler": ["DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT"],
    "server": ["DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER"],
    "worker": ["DMLC_NUM_WORKER", "DMLC_WORKER_ID"],
}


class LaunchError(Exception):
    pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_sets(local_size):
    """Cores per local rank when BYTEPS_NUMA_ON=1 (BytePS semantics)."""
    visible = os.environ.get("BYTEPS_VISIBLE_CPU_CORES")
    cores = sorted(int(c) for c in visible.split(",")) if visible else sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // local_size)
    return [cores[i * per:(i + 1) * per] or cores for i in range(local_size)]


def _check_int(env, name, minimum=0):
    value = env.get(name)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise LaunchError(f"{name}={value!r} is not an integer")
    if number < minimum:
        raise LaunchError(f"{name}={number} must be >= {minimum}")
    return number


def validate_role_env(env):
    role = env.get("DMLC_ROLE")
    if not role:
        raise LaunchError("DMLC_ROLE is not set: set DMLC_ROLE=scheduler, server or worker on each process of a "
                          "BytePS-style job, or run a single-machine job with --local-workers N")
    if role not in REQUIRED:
        raise LaunchError(f"DMLC_ROLE={role!r} must be one of scheduler, server, worker "
                          "(or use --local-workers for a single-machine job)")
    missing = [k for k in REQUIRED[role] if not env.get(k)]
    if role == "worker" and _int_or(env.get("DMLC_NUM_WORKER"), 1) > 1:
        missing += [k for k in ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT") if not env.get(k)]
    if missing:
        raise LaunchError(f"DMLC_ROLE={role} needs {', '.join(sorted(set(missing)))}")
    if env.get("DMLC_PS_ROOT_PORT"):
        port = _check_int(env, "DMLC_PS_ROOT_PORT", 1)
        if port > 65535:
            raise LaunchError(f"DMLC_PS_ROOT_PORT={port} is not a port number (1-65535)")
    for name in ("DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "DMLC_WORKER_ID", "BYTEPS_LOCAL_SIZE"):
        if env.get(name):
            _check_int(env, name, 1 if name in ("DMLC_NUM_WORKER", "BYTEPS_LOCAL_SIZE") else 0)
    return role


def _int_or(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class Job:
    """A set of child processes supervised together."""

    def __init__(self, job_id):
        self.job_id = job_id
        self.children = []  # (description, Popen, is_worker)

    def start(self, description, argv, env, is_worker, cpus=None):
        preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        try:
            proc = subprocess.Popen(argv, env=env, preexec_fn=preexec, start_new_session=False)
        except OSError as e:
            # The roles already started must not outlive us (a typo such as
            # `bpslaunch -- pyhton x.py` left the scheduler running for good).
            self.stop()
            self.cleanup_shared_memory()
            raise LaunchError(f"cannot start {description} ({' '.join(argv)}): {e.strerror or e}") from e
        self.children.append((description, proc, is_worker))
        return proc

    def supervise(self, drain_timeout=30.0):
        """Wait for the workers; any failure stops everything. Returns the exit code."""
        try:
            while True:
                for description, proc, _ in self.children:
                    code = proc.poll()
                    if code not in (None, 0):
                        print(f"bpslaunch: {description} exited with code {code}; stopping the job",
                              file=sys.stderr, flush=True)
                        self.stop()
                        return code if code > 0 else 128 - code
                workers = [p for _, p, w in self.children if w]
                if workers and all(p.poll() == 0 for p in workers):
                    break
                if not workers and all(p.poll() is not None for _, p, _ in self.children):
                    break
                time.sleep(0.05)
            # Workers are done: servers and the scheduler leave on their own.
            deadline = time.time() + drain_timeout
            for description, proc, _ in self.children:
                try:
                    code = proc.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    # Training succeeded; a role left waiting (e.g. no worker ever
                    # used byteps) is stopped without failing the job.
                    print(f"bpslaunch: {description} did not exit {drain_timeout:.0f} s after the workers "
                          "finished; stopping it", file=sys.stderr, flush=True)
                    self.stop()
                    return 0
                if code != 0:
                    print(f"bpslaunch: {description} exited with code {code}", file=sys.stderr, flush=True)
                    self.stop()
                    return code if code > 0 else 128 - code
            return 0
        except KeyboardInterrupt:
            self.stop()
            return 130
        finally:
            self.cleanup_shared_memory()

    def stop(self, grace=5.0):
        for _, proc, _ in self.children:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + grace
        for _, proc, _ in self.children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cleanup_shared_memory(self):
        remove_job_shared_memory(self.job_id)


def remove_job_shared_memory(job_id):
    """Unlink what a crashed job of `job_id` may have left in /dev/shm."""
    for path in glob.glob(f"/dev/shm/bpsn-{job_id}-*"):
        try:
            os.unlink(path)
        except OSError:
            pass


def _python_role(module):
    return [sys.executable, "-m", module]


def run_role_mode(command):
    env = dict(os.environ)
    role = validate_role_env(env)
    job = Job(env.setdefault("BYTEPS_JOB_ID", secrets.token_hex(4)))
    if role == "scheduler":
        job.start("scheduler", _python_role("byteps_native.scheduler"), env, is_worker=False)
    elif role == "server":
        job.start("server", _python_role("byteps_native.server"), env, is_worker=False)
    else:
        if not command:
            raise LaunchError("DMLC_ROLE=worker needs a command: bpslaunch -- python train.py")
        local_size = _int_or(env.get("BYTEPS_LOCAL_SIZE"), 1)
        env["BYTEPS_LOCAL_SIZE"] = str(local_size)
        cpu_sets = _cpu_sets(local_size) if env.get("BYTEPS_NUMA_ON") == "1" else [None] * local_size
        for local_rank in range(local_size):
            child_env = dict(env, BYTEPS_LOCAL_RANK=str(local_rank))
            job.start(f"worker local rank {local_rank}", command, child_env, True, cpu_sets[local_rank])
    return job.supervise()


def run_local_mode(args, command):
    if not command:
        raise LaunchError("local mode needs a command: bpslaunch --local-workers 2 -- python train.py")
    if args.local_workers < 1 or args.machines < 1 or args.servers < 0:
        raise LaunchError("--local-workers and --machines must be >= 1, --servers >= 0")
    distributed = args.machines > 1 or args.force_distributed
    if distributed and args.servers == 0:
        raise LaunchError(f"--machines {args.machines} needs --servers >= 1")
    if args.servers and not distributed:
        print(f"bpslaunch: --servers {args.servers} ignored: one machine reduces through shared memory and starts "
              "no server (--machines >= 2 or --force-distributed use them)", file=sys.stderr, flush=True)
    base = dict(os.environ)
    base.update({
        "DMLC_NUM_WORKER": str(args.machines),
        "DMLC_NUM_SERVER": str(args.servers if distributed else 0),
        "DMLC_PS_ROOT_URI": "127.0.0.1",
        "DMLC_PS_ROOT_PORT": str(args.port or _free_port()),
        "BYTEPS_LOCAL_SIZE": str(args.local_workers),
        "BYTEPS_JOB_TOKEN": base.get("BYTEPS_JOB_TOKEN") or secrets.token_hex(16),
        "BYTEPS_JOB_ID": base.get("BYTEPS_JOB_ID") or secrets.token_hex(4),
    })
    if args.force_distributed:
        base["BYTEPS_FORCE_DISTRIBUTED"] = "1"
    job = Job(base["BYTEPS_JOB_ID"])
    needs_scheduler = distributed or args.local_workers > 1
    if needs_scheduler:
        job.start("scheduler", _python_role("byteps_native.scheduler"), dict(base, DMLC_ROLE="scheduler"), False)
        if distributed:
            for s in range(args.servers):
                job.start(f"server {s}", _python_role("byteps_native.server"), dict(base, DMLC_ROLE="server"), False)
    cpu_sets = _cpu_sets(args.local_workers) if base.get("BYTEPS_NUMA_ON") == "1" else [None] * args.local_workers
    for machine in range(args.machines):
        for local_rank in range(args.local_workers):
            env = dict(base, DMLC_ROLE="worker", DMLC_WORKER_ID=str(machine), BYTEPS_LOCAL_RANK=str(local_rank))
            job.start(f"worker {machine * args.local_workers + local_rank}", command, env, True, cpu_sets[local_rank])
    return job.supervise()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="bpslaunch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local-workers", type=int, help="local mode: worker processes per machine")
    parser.add_argument("--machines", type=int, default=1, help="local mode: emulated machines (DMLC_NUM_WORKER)")
    parser.add_argument("--servers", type=int, default=0, help="local mode: dedicated server processes")
    parser.add_argument("--port", type=int, default=0, help="local mode: scheduler port (default: a free one)")
    parser.add_argument("--force-distributed", action="store_true", help="use servers even on one machine")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the worker command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if args.local_workers is not None:
            return run_local_mode(args, command)
        return run_role_mode(command)
    except LaunchError as e:
        print(f"bpslaunch: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
