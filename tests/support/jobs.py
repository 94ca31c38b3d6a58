"""The job launcher of the tests: real processes on this host, real sockets.

Four ways to start a job, one environment (`job_env`) and one result protocol
(tests.support.results) under all of them:

- `Job`: role by role -- a scheduler, S servers and machines x local workers,
  each its own LoggedProcess. Unlike bpslaunch (which stops the whole job as
  soon as one child fails) every process runs on its own, so a test can kill -9
  one and watch what each survivor does. Roles run the Python entry points
  (`python -m byteps_native.<role>`) or, with roles="engine", the engine's
  blocking C entry points only (tests that must depend on nothing but the engine).
- `bpslaunch` / `bpslaunch_source`: the project's own launcher.
- `torchrun`: torch's launcher, one agent per emulated machine (several agents on
  one host make the engine take its multi-machine path).
- `bare_ranks`: plain processes with torch's env:// variables, for ranks that
  must outlive a dead peer (torchrun would stop the job).

Emulated hosts (network namespaces) are tests.support.netns; its processes are
the same LoggedProcess, started with `netns=`.
"""
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from byteps_native.launch import remove_job_shared_memory
from tests.support.paths import ENGINE_LIB, REPO
from tests.support.ports import free_port
from tests.support.processes import LoggedProcess
from tests.support.results import collect


def job_env(extra=None, result_dir=None, pythonpath=(), gpus=False):
    """The environment of a job's processes: this one's, minus any DMLC_/BYTEPS_
    job settings it carries (each job is configured by its test alone), the
    repository importable (`tests.support` in the workers), one OpenMP thread a
    process (the CI host has 2 cores), GPUs hidden unless `gpus` or TEST_GPUS=1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in pythonpath] + [REPO] + (
        [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", BYTEPS_TIMEOUT="60")
    if not (gpus or os.environ.get("TEST_GPUS") == "1"):
        env["CUDA_VISIBLE_DEVICES"] = ""
    if result_dir is not None:
        env["RESULT_DIR"] = str(result_dir)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def _role_settings():
    """What a role-by-role job needs beyond job_env: a scheduler port, a fresh
    token and job id, the loopback interface, a short BYTEPS_TIMEOUT (5 s: the
    reliability tests watch how fast failures are seen)."""
    return {
        "DMLC_PS_ROOT_URI": "127.0.0.1",
        "DMLC_PS_ROOT_PORT": str(free_port()),
        "DMLC_INTERFACE": "lo",
        "BYTEPS_JOB_TOKEN": secrets.token_hex(16),
        "BYTEPS_JOB_ID": secrets.token_hex(4),
        "BYTEPS_TIMEOUT": "5",
    }


def role_env(**settings):
    """The environment of one process of a role-by-role job, outside a Job:
    job_env, a fresh scheduler port, token and job id, then `settings`."""
    return {**job_env(), **_role_settings(), **{k: str(v) for k, v in settings.items()}}


# The engine's blocking role entry points through its C ABI: argv[1] the library, argv[2] the role.
_ENGINE_ROLE_MAIN = (
    "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.bps_last_error.restype = ctypes.c_char_p; "
    "rc = getattr(lib, 'bps_run_' + sys.argv[2])(); "
    "rc and print('role failed:', lib.bps_last_error().decode(), file=sys.stderr); sys.exit(rc)"
)


def role_argv(role, roles="python"):
    """The command that runs `role` (scheduler or server): its Python entry
    point, or with roles="engine" the engine library's alone."""
    if roles == "engine":
        return [sys.executable, "-c", _ENGINE_ROLE_MAIN, ENGINE_LIB, role]
    return [sys.executable, "-m", f"byteps_native.{role}"]


HUNG = -999  # a WorkerOutcome's returncode when the worker ran past the test's timeout


@dataclass
class WorkerOutcome:
    rank: int
    returncode: int
    output: str
    result: dict


def describe(outcomes):
    """Worker logs, for assertion messages."""
    return "\n".join(f"--- worker {o.rank} rc={o.returncode} ---\n{o.output[-4000:]}" for o in outcomes)


def require_success(outcomes):
    for o in outcomes:
        assert o.returncode == 0, f"a worker failed (rc {HUNG} = hung past the timeout):\n" + describe(outcomes)


class Job:
    """Scheduler, S dedicated servers and machines x local workers, each its
    own process; use as a context manager (every process is stopped and the
    job's shared memory removed, also on an exception).

    workers_dir: where start_worker's scripts are (a suite's workers/ folder).
    roles: "python" or "engine" (see role_argv). gpus: see job_env.
    env: the job's settings (DMLC_*/BYTEPS_*), over role_env's."""

    def __init__(self, log_dir, machines=2, local_size=1, servers=1, workers_dir="", roles="python", gpus=False,
                 **env):
        self.log_dir = str(log_dir)
        self.machines = machines
        self.local_size = local_size
        self.servers = servers
        self.workers_dir = workers_dir
        self.roles = roles
        settings = dict(DMLC_NUM_WORKER=machines, DMLC_NUM_SERVER=servers, BYTEPS_LOCAL_SIZE=local_size, **env)
        self.env = {**job_env(result_dir=self.log_dir, gpus=gpus), **_role_settings(),
                    **{k: str(v) for k, v in settings.items()}}
        self.procs = {}

    def _start(self, name, argv, env):
        log_path = os.path.join(self.log_dir, name.replace(" ", "_") + ".log")
        self.procs[name] = LoggedProcess(name, argv, env, log_path)
        return self.procs[name]

    def start_role(self, role, name, **env):
        return self._start(name, role_argv(role, self.roles), dict(self.env, DMLC_ROLE=role, **env))

    def start_worker(self, machine, local_rank, script, *args, rank=None, local_size=None, **env):
        """Starts `script` (in workers_dir) as local rank `local_rank` of
        `machine`; rank and local_size for machines of different sizes."""
        local_size = self.local_size if local_size is None else local_size
        rank = machine * self.local_size + local_rank if rank is None else rank
        wenv = dict(self.env, DMLC_ROLE="worker", DMLC_WORKER_ID=str(machine), BYTEPS_LOCAL_RANK=str(local_rank),
                    BYTEPS_LOCAL_SIZE=str(local_size))
        wenv.update({k: str(v) for k, v in env.items()})
        argv = [sys.executable, os.path.join(self.workers_dir, script)] + [str(a) for a in args]
        return self._start(f"worker {rank}", argv, wenv)

    def start_servers(self):
        """The scheduler and the servers."""
        self.start_role("scheduler", "scheduler")
        for s in range(self.servers):
            self.start_role("server", f"server {s}")

    def start(self, script, *args, **worker_env):
        """Starts the whole job; returns the worker processes by rank."""
        self.start_servers()
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

    def finish_workers(self, timeout):
        """Waits up to `timeout` seconds for the workers; stops them (a hung
        one too) and returns a WorkerOutcome each, by rank, with what it
        reported to $RESULT_DIR (the log dir)."""
        deadline = time.monotonic() + timeout
        workers = sorted(((int(n.split()[1]), p) for n, p in self.procs.items() if n.startswith("worker ")))
        for _, p in workers:
            p.wait(max(0.0, deadline - time.monotonic()))
        reported = collect(self.log_dir)
        outcomes = []
        for rank, p in workers:
            hung = p.poll() is None
            p.stop(grace=5)
            outcomes.append(WorkerOutcome(rank, HUNG if hung else p.returncode, p.output(), reported.get(rank, {})))
        return outcomes

    def dump(self):
        return "\n".join(f"===== {n} (rc {p.poll()}) =====\n{p.output()[-4000:]}" for n, p in self.procs.items())

    def stop(self, grace=None):
        for p in self.procs.values():
            p.stop(grace)
        remove_job_shared_memory(self.env["BYTEPS_JOB_ID"])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@dataclass
class Finished:
    """A finished job: its exit code, its output (stdout and stderr, every
    agent's), and what each rank reported."""
    returncode: int
    output: str
    results: dict = field(default_factory=dict)
    timed_out: bool = False  # killed after the launcher's timeout

    def check(self, ranks=None):
        """Raises with the output's tail unless the job succeeded (and, given
        `ranks`, ranks 0..ranks-1 each reported); returns self."""
        if self.returncode != 0:
            raise AssertionError(f"job failed with exit code {self.returncode}:\n{self.output[-10000:]}")
        if ranks is not None and sorted(self.results) != list(range(ranks)):
            raise AssertionError(f"ranks {sorted(self.results)} reported, not 0..{ranks - 1}:\n{self.output[-10000:]}")
        return self


def _start_agents(commands, envs, cwd):
    """Starts commands side by side, each its own session, output piped."""
    return [subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
            for cmd, env in zip(commands, envs)]


def _finish_agents(agents, timeout):
    """[Finished] of each agent (no results); an agent still running after
    `timeout` seconds (from now, for all) is killed with its whole group."""
    deadline = time.monotonic() + timeout
    finished = []
    for agent in agents:
        timed_out = False
        try:
            out, _ = agent.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(agent.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = agent.communicate()
            out += f"\n[tests.support.jobs: killed after {timeout} s]"
        finished.append(Finished(agent.returncode, out, timed_out=timed_out))
    return finished


def _run_agents(commands, envs, cwd, timeout, result_dir):
    """Runs commands side by side; one Finished for all of them."""
    finished = _finish_agents(_start_agents(commands, envs, cwd), timeout)
    return Finished(next((f.returncode for f in finished if f.returncode != 0), 0), "".join(f.output for f in finished),
                    collect(result_dir) if result_dir is not None else {}, any(f.timed_out for f in finished))


def torchrun(script, args=(), nproc=2, machines=1, result_dir=None, env=None, timeout=300, cwd=REPO, run_args=(),
             gpus=False, pythonpath=(), machine_env=None):
    """`script args` under torchrun: `nproc` ranks on each of `machines` agents
    (a list: machines of different sizes); one agent is --standalone.
    machine_env(m): extra environment of machine m's agent. Returns Finished."""
    per_machine = list(nproc) if isinstance(nproc, (list, tuple)) else [nproc] * machines
    base = job_env(env, result_dir, pythonpath, gpus)
    launcher = [sys.executable, "-m", "torch.distributed.run"]
    tail = [*map(str, run_args), str(script), *map(str, args)]
    if len(per_machine) == 1 and machine_env is None:
        commands = [launcher + ["--standalone", "--nproc_per_node", str(per_machine[0])] + tail]
    else:
        port = free_port()
        commands = [launcher + ["--nnodes", str(len(per_machine)), "--node_rank", str(m), "--nproc_per_node",
                                str(n), "--master_addr", "127.0.0.1", "--master_port", str(port)] + tail
                    for m, n in enumerate(per_machine)]
    envs = [dict(base, **(machine_env(m) if machine_env else {})) for m in range(len(commands))]
    return _run_agents(commands, envs, cwd, timeout, result_dir)


def bpslaunch(script, args=(), local_workers=1, machines=1, servers=0, result_dir=None, env=None, timeout=240,
              force_distributed=False, gpus=False):
    """`python script args` on every worker of a bpslaunch job. Returns Finished."""
    cmd = [sys.executable, "-m", "byteps_native.launch", "--local-workers", str(local_workers), "--machines",
           str(machines), "--servers", str(servers)]
    if force_distributed:
        cmd.append("--force-distributed")
    cmd += ["--", sys.executable, str(script), *map(str, args)]
    # The warm staging pool at 8 MiB a local rank, not 128: these jobs' tensors
    # are small (larger ones still take the path past the pool), and a suite of
    # jobs need not back and map 128 MiB per rank each.
    base = job_env(dict({"BYTEPS_LOCAL_STAGING_RESERVE": str(8 << 20)}, **(env or {})), result_dir, gpus=gpus)
    return _run_agents([cmd], [base], REPO, timeout, result_dir)


def bpslaunch_source(result_dir, source, check=True, **kwargs):
    """bpslaunch of `source` (Python text, where `report(obj)` is
    tests.support.results.report), written to result_dir/worker.py."""
    path = os.path.join(str(result_dir), "worker.py")
    with open(path, "w") as f:
        f.write("from tests.support.results import report  # noqa: F401\n" + source)
    finished = bpslaunch(path, result_dir=result_dir, **kwargs)
    return finished.check() if check else finished


def bare_ranks(script, nproc, args=(), result_dir=None, env=None, timeout=240):
    """Each rank a plain process with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
    (rank 0 hosts the TCPStore). Returns ([Finished per rank], results)."""
    port = free_port()
    base = job_env(env, result_dir)
    envs = [dict(base, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)) for r in range(nproc)]
    agents = _start_agents([[sys.executable, str(script), *map(str, args)]] * nproc, envs, REPO)
    ranks = _finish_agents(agents, timeout)
    return ranks, collect(result_dir) if result_dir is not None else {}
