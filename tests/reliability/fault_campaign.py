"""Fault campaign: randomized trials of one fault against one role of a
training job, and what every process did about it.

    python -m tests.reliability.fault_campaign --trials 20            # long profile
    python -m tests.reliability.fault_campaign --trials 1 --seed 7    # one of each
    python -m tests.reliability.fault_campaign --kinds startkill --roles worker,scheduler \
        --trials 100 --seed 3052 --only 82 --repeat 50                  # trial 082 of that run, 50 times

Each trial draws from its own generator, seeded by the campaign's seed and
the trial's index, so --only replays a trial of a run (the same cell, victim
and moment within the start-up window) without running the ones before it.
A start-up kill's moment is a fraction of the window, which follows the
host's load (launch to every worker's READY, as last measured; --window sets
its first value): a replay kills at the same fraction, the seconds may differ.

Each trial starts a real job on this host (scheduler, 1 dedicated server,
2 machines x 2 local ranks running tests/reliability/workers/train_loop.py,
so the shared-memory path is in play) and injects one fault into one randomly
chosen process of the target role at a random moment:

  kill9      SIGKILL
  sigstop    SIGSTOP (the process stays stopped until the trial ends)
  stranger   1-40 connections that send part of a hello and then nothing,
             held open until the job ends (server, scheduler: what listens)
  drip       60 connections sending one byte of hello every 0.3 s
  badconfig  the target starts with one bad setting (random from a list)
  startkill  SIGKILL at a random moment from launch to 1 s past the moment
             every worker was READY (importing, connecting, rendezvous,
             shared memory, servers, the first steps); each trial records
             the phase the kill landed in (see PHASES)
  storestop  SIGSTOP of the store host of a plain torch DDP job
             (init_process_group('byteps'), no agent, no scheduler): rank 0
             holds torch's TCPStore and machine 0's colocated server
  agentstop  the same under torchrun with its elastic agent: two torchrun
             invocations (2 emulated machines x 2 ranks, c10d rendezvous);
             in 3 of 4 trials TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, so that
             rank 0 hosts the workers' TCPStore, else torch's default (the
             agent hosts it); once the survivors are checked the stopped
             rank is killed and both agents must end

Checked per trial: no memory error (ASan/UBSan reports, SIGSEGV, SIGBUS,
aborts, uncaught exceptions in any log or exit status), no wrong sum (the
loop checks every result), no process left running once the job should be
over (BYTEPS_TIMEOUT + 15 s), no /dev/shm segment of the job left, every
survivor gone within BYTEPS_TIMEOUT + 5 s of the fault ("slow exits"), and, for
faults that end the job, the time from the fault to a named error on every
survivor (named: its output names the failed role, or the bad setting).
Faults that must not end the job (stranger, drip) must leave it finishing
with exact sums and exit status 0 everywhere.
"""
import argparse
import glob
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time

from tests.reliability import Cluster, WORKERS
from tests.support.jobs import role_env
from tests.support.ports import free_port
from tests.support.processes import LoggedProcess, read_log

ROLES = ("worker", "server", "scheduler")
KINDS = ("kill9", "sigstop", "stranger", "drip", "badconfig", "startkill", "storestop", "agentstop")
STORE_HOST_KINDS = ("storestop", "agentstop")
TIMEOUT = 4  # BYTEPS_TIMEOUT of every trial
GRACE = 15   # seconds after TIMEOUT by which every process must be gone
EXIT_WITHIN = TIMEOUT + 5  # every survivor must be gone this long after the fault (issue 30)

MEMORY_ERRORS = ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:", "SIGSEGV", "SIGBUS",
                 "Segmentation fault", "Bus error", "terminate called", "std::bad_alloc", "Aborted (core dumped)",
                 "double free", "heap-use-after-free")
ABNORMAL_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE)

# (role, variable, value, words the failing process must name)
BAD_CONFIGS = [
    ("worker", "BYTEPS_TIMEOUT", "inf", ["BYTEPS_TIMEOUT"]),
    ("worker", "BYTEPS_PARTITION_BYTES", "lots", ["BYTEPS_PARTITION_BYTES"]),
    ("worker", "DMLC_NUM_WORKER", "0", ["DMLC_NUM_WORKER"]),
    ("worker", "DMLC_INTERFACE", "nosuch0", ["nosuch0"]),
    ("worker", "BYTEPS_PARTITION_BYTES", "8192", ["BYTEPS_PARTITION_BYTES"]),  # valid alone: disagrees
    ("server", "BYTEPS_TIMEOUT", "1e300", ["BYTEPS_TIMEOUT"]),
    ("server", "BYTEPS_ENABLE_ASYNC", "1", ["BYTEPS_ENABLE_ASYNC"]),  # valid alone: disagrees
    ("server", "BYTEPS_TCP_CONNECTIONS", "-2", ["BYTEPS_TCP_CONNECTIONS"]),
    ("scheduler", "DMLC_PS_ROOT_PORT", "notaport", ["DMLC_PS_ROOT_PORT"]),
    ("scheduler", "BYTEPS_TIMEOUT", "-1", ["BYTEPS_TIMEOUT"]),
]


def applicable(role, kind):
    # Workers of a role-mode job listen on no port: nothing for a stranger.
    # The store host of a torch job is a worker (rank 0).
    if kind in STORE_HOST_KINDS:
        return role == "worker"
    return not (role == "worker" and kind in ("stranger", "drip"))


# Launch to every worker's READY, as last measured: start-up kills land
# anywhere in it (and a few just after, in the first steps).
_startup_seconds = [3.0]

# A process that never reached the scheduler cannot tell one that is not up
# yet from one that is gone: it gives up after BYTEPS_RENDEZVOUS_TIMEOUT of
# its own wait, saying so (docs/reliability.md, "A scheduler gone before a
# member reached it"). Its exit is held to that wait, which begins at its
# init (INIT in its log), not at the fault.
NEVER_REACHED_SCHEDULER = "is not reachable: "


# Where a start-up kill landed, from the victim's state just before the kill:
PHASES = (
    "launch",      # not connected to the scheduler yet (importing, or the scheduler not listening yet);
                   # for the scheduler: not listening yet
    "rendezvous",  # connected (or listening), not every worker READY: rendezvous, shared memory, servers
    "training",    # every worker READY: the first steps
)


def _phase(role, victim, every_worker_ready, scheduler_port):
    if every_worker_ready:
        return "training"
    return "rendezvous" if _touches_port(victim.pid, scheduler_port, listening=(role == "scheduler")) else "launch"


def _touches_port(pid, port, listening):
    """Whether process pid holds a TCP socket connected to (or, listening, bound to) port on this host."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if inode not in inodes:
                continue
            if listening and state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
            if not listening and state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def _victim_words(role, name):
    if role == "worker":
        rank = int(name.split()[1])
        return [f"worker {rank}", f"rank {rank}", f"local rank {rank % 2}"]
    if role == "server":
        # Killed while registering it has no id yet: "server (127.0.0.1:...)".
        return ["server 0", "server ("]
    return ["scheduler"]


class _Strangers:
    """Connections to host:port that never finish their handshake."""

    def __init__(self, host, port, count, drip):
        self.socks, self.stop, self.drip = [], threading.Event(), drip
        for _ in range(count):
            try:
                s = socket.create_connection((host, port), timeout=2)
                s.sendall(b"BPSN\x02\x00")  # the start of a hello, then silence
                self.socks.append(s)
            except OSError:
                pass
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.drip and not self.stop.wait(0.3):
            for s in list(self.socks):
                try:
                    s.send(b"\0")
                except OSError:
                    self.socks.remove(s)

    def close(self):
        self.stop.set()
        self.thread.join(2)
        for s in self.socks:
            s.close()


def _listening_port(proc, timeout=10):
    """The server's port, from its 'listening on host:port' line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in proc.output().splitlines():
            if "listening on" in line:
                return int(line.split("listening on", 1)[1].split()[0].rsplit(":", 1)[1])
        time.sleep(0.05)
    return None


def run_trial(role, kind, rng, log_dir, steps_alive=150):
    """One trial; returns a dict of what happened."""
    if kind == "storestop":
        return run_store_host_trial(rng, log_dir)
    if kind == "agentstop":
        return run_agent_store_host_trial(rng, log_dir)
    env = dict(BYTEPS_TIMEOUT=TIMEOUT, BYTEPS_RENDEZVOUS_TIMEOUT=TIMEOUT)
    result = dict(role=role, kind=kind, memory_errors=[], wrong_results=0, left_running=[], shm_left=[],
                  times=[], exits=[], slow_exits=[], unnamed=[], detail="")
    with Cluster(log_dir, machines=2, local_size=2, servers=1, **env) as c:
        job_id = c.env["BYTEPS_JOB_ID"]
        bad = None
        role_env = {}
        if kind == "badconfig":
            bad = rng.choice([b for b in BAD_CONFIGS if b[0] == role])
            role_env = {bad[1]: bad[2]}
            result["detail"] = f"{bad[1]}={bad[2]}"
        steps = steps_alive if kind in ("stranger", "drip") else 0  # 0: until something fails
        names = {"scheduler": "scheduler", "server": "server 0"}
        c.start_role("scheduler", "scheduler", **(role_env if role == "scheduler" else {}))
        c.start_role("server", "server 0", **(role_env if role == "server" else {}))
        victim_rank = rng.randrange(4)
        victim = names.get(role, f"worker {victim_rank}")
        workers = []
        for m in range(2):
            for lr in range(2):
                rank = m * 2 + lr
                wenv = role_env if (role == "worker" and rank == victim_rank) else {}
                workers.append(c.start_worker(m, lr, "train_loop.py", steps, **wenv))
        strangers = None
        fault_at = time.monotonic()
        if kind == "startkill":
            launched = fault_at
            kill_at = launched + rng.random() * (_startup_seconds[0] + 1.0)
            all_ready_at = None
            while time.monotonic() < kill_at:
                if all_ready_at is None and all("READY" in w.output() for w in workers):
                    all_ready_at = time.monotonic()
                time.sleep(max(0.0, min(0.05, kill_at - time.monotonic())))
            ready = sum("READY" in w.output() for w in workers)
            result["phase"] = _phase(role, c.procs[victim], ready == len(workers), int(c.env["DMLC_PS_ROOT_PORT"]))
            fault_at = time.monotonic()
            c.procs[victim].kill(signal.SIGKILL)
            if all_ready_at is not None:  # follow the host's load: the window ends 1 s past the start-up
                _startup_seconds[0] = (_startup_seconds[0] + all_ready_at - launched) / 2
            result["detail"] = f"at {fault_at - launched:.2f} s, {ready}/4 workers READY ({result['phase']})"
        elif kind != "badconfig":
            if not all(w.wait_for("READY", 30) for w in workers):
                result["detail"] = "job did not start"
                result["unnamed"] = ["job did not start"]
                result["left_running"] = [n for n, p in c.procs.items() if p.poll() is None]
                result["memory_errors"] = _scan(c)
                return result
            _startup_seconds[0] = time.monotonic() - fault_at  # launch to every worker's READY
            time.sleep(rng.uniform(0.1, 1.0))
            target = c.procs[victim]
            fault_at = time.monotonic()
            if kind == "kill9":
                target.kill(signal.SIGKILL)
            elif kind == "sigstop":
                target.kill(signal.SIGSTOP)
            else:
                port = int(c.env["DMLC_PS_ROOT_PORT"]) if role == "scheduler" else _listening_port(target)
                count = rng.randint(1, 40) if kind == "stranger" else 60
                strangers = _Strangers("127.0.0.1", port, count, drip=(kind == "drip"))
        init_at = {}
        first_error = _watch(c.procs, [n for n in c.procs if n != victim or kind in ("stranger", "drip")], fault_at,
                             fault_at + TIMEOUT * 2 + GRACE + (40 if steps else 0), init_at)
        survivors = [n for n in c.procs if n != victim or kind in ("stranger", "drip")]

        if strangers:
            strangers.close()
        codes = {n: p.poll() for n, p in c.procs.items()}
        result["left_running"] = [n for n in survivors if codes[n] is None or _group_alive(c.procs[n])]
        _note_exits(result, c.procs, survivors, fault_at, kind in ("stranger", "drip"),
                    waits_from={n: max(fault_at, init_at.get(n, fault_at)) for n in survivors
                                if role == "scheduler" and NEVER_REACHED_SCHEDULER in c.procs[n].output()})
        if kind == "sigstop":
            c.procs[victim].kill(signal.SIGKILL)
            c.procs[victim].wait(5)
        result["memory_errors"] = _scan(c, ignore_killed=victim if kind in ("kill9", "sigstop", "startkill") else None)
        result["wrong_results"] = sum("WRONG SUM" in w.output() for w in workers)
        result["shm_left"] = [p for p in glob.glob(f"/dev/shm/bpsn-{job_id}-*")
                              if not _owned_by_stopped_victim(p, c.procs[victim], kind)]
        if kind in ("stranger", "drip"):
            bad_exit = {n: rc for n, rc in codes.items() if rc != 0}
            if bad_exit:
                result["detail"] = f"job did not survive the {kind}: exit codes {bad_exit}"
                result["unnamed"] = sorted(bad_exit)
            return result
        words = bad[3] if bad else _victim_words(role, victim)
        for n in survivors:
            out = c.procs[n].output()
            if n in first_error:
                result["times"].append(first_error[n])
            if n == victim:  # bad config: the misconfigured process names its setting
                if not any(w in out for w in words):
                    result["unnamed"].append(n)
                continue
            if bad and bad[2] in ("8192", "1"):
                # A setting that is valid alone (BYTEPS_PARTITION_BYTES=8192 on
                # one worker, BYTEPS_ENABLE_ASYNC=1 on the server): every worker
                # must fail naming the disagreement; the others may then end
                # in order (the workers shut down after handling the error).
                if n.startswith("worker") and not (first_error.get(n) and any(w in out for w in words)):
                    result["unnamed"].append(n)
            elif codes[n] == 0 and not first_error.get(n):
                result["unnamed"].append(n + " (exited 0)")
            elif not bad and not any(w in out for w in words):
                result["unnamed"].append(n)
        return result


def _watch(procs, survivors, fault_at, deadline, init_at=None):
    """Polls until every survivor exited or the deadline; returns {name: seconds from the fault to its first
    BYTEPS_ERROR line or non-zero exit}. init_at: filled with when each survivor's INIT line was first seen
    (at the fault for those that printed it before)."""
    first_error = {}
    init_at = {} if init_at is None else init_at
    while time.monotonic() < deadline:
        running = [n for n in survivors if procs[n].poll() is None]
        for n in survivors:
            if n not in init_at and "INIT" in procs[n].output():
                init_at[n] = time.monotonic()
            if n not in first_error and ("BYTEPS_ERROR" in procs[n].output() or procs[n].poll() not in (None, 0)):
                first_error[n] = time.monotonic() - fault_at
        if not running:
            break
        time.sleep(0.05)
    return first_error


def _note_exits(result, procs, survivors, fault_at, job_goes_on, waits_from=None):
    """Seconds from the fault to each survivor's exit; those later than EXIT_WITHIN are slow. waits_from: for
    survivors that never reached the scheduler, the start of their own wait, which their exit is held to
    instead (NEVER_REACHED_SCHEDULER); result["own_waits"] gets those exits from it."""
    if job_goes_on:
        return
    waits_from = waits_from or {}
    for n in survivors:
        ended = procs[n].ended
        if ended is not None:
            result["exits"].append(ended - fault_at)
            since = waits_from.get(n, fault_at)
            if n in waits_from:
                result.setdefault("own_waits", []).append(ended - since)
            if ended - since > EXIT_WITHIN:
                what = "after its own wait began" if n in waits_from else "after the fault"
                result["slow_exits"].append(f"{n} ({ended - since:.1f} s {what})")


def run_store_host_trial(rng, log_dir):
    """SIGSTOP of torch rank 0 (TCPStore host, machine 0's colocated server) in a 2 x 2 DDP job
    without an agent: every other rank must fail and exit on its own within BYTEPS_TIMEOUT + 5 s."""
    result = dict(role="worker", kind="storestop", memory_errors=[], wrong_results=0, left_running=[],
                  shm_left=[], times=[], exits=[], slow_exits=[], unnamed=[], detail="")
    env = role_env(BYTEPS_TIMEOUT=TIMEOUT)
    for k in [k for k in env if k.startswith("DMLC_")] + ["BYTEPS_JOB_ID"]:
        env.pop(k, None)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="4", LOCAL_WORLD_SIZE="2")
    procs = {}
    try:
        for r in range(4):
            procs[f"rank {r}"] = LoggedProcess(f"rank {r}", [sys.executable, os.path.join(WORKERS, "ddp_loop.py"), "0"],
                                               dict(env, RANK=str(r), LOCAL_RANK=str(r % 2), GROUP_RANK=str(r // 2)),
                                               os.path.join(log_dir, f"rank_{r}.log"))
        if not all(p.wait_for("READY", 120) for p in procs.values()):
            result["detail"] = "job did not start"
            result["unnamed"] = ["job did not start"]
            return result
        victim, survivors, first_error = _stop_rank0_and_watch(procs, rng, result)
        result["left_running"] = [n for n in survivors if procs[n].poll() is None or _group_alive(procs[n])]
        for n in survivors:
            if procs[n].poll() == 0 and n not in first_error:
                result["unnamed"].append(n + " (exited 0)")
            elif not _names_store_host(procs[n].output()):
                result["unnamed"].append(n)
        victim.kill(signal.SIGKILL)
        victim.wait(5)
        result["memory_errors"] = [f for f in _scan_procs(procs) if not f.startswith("rank 0: died")]
        result["shm_left"] = [p for p in glob.glob("/dev/shm/bpsn-*") if _created_by(p, procs)]
        return result
    finally:
        for p in procs.values():
            p.stop()


def _stop_rank0_and_watch(procs, rng, result):
    """SIGSTOP of rank 0 (the TCPStore host) at a random moment of training,
    then the other ranks watched until they exit or TIMEOUT x 2 + GRACE pass;
    notes their exits, each one's time to its first error and any wrong sum.
    Returns (rank 0, the other ranks' names, {name: seconds to first error})."""
    time.sleep(rng.uniform(0.1, 1.0))
    victim = procs["rank 0"]
    fault_at = time.monotonic()
    victim.kill(signal.SIGSTOP)
    survivors = [n for n in procs if n != "rank 0"]
    first_error = _watch(procs, survivors, fault_at, fault_at + TIMEOUT * 2 + GRACE)
    _note_exits(result, procs, survivors, fault_at, False)
    result["times"] += [first_error[n] for n in survivors if n in first_error]
    result["wrong_results"] = sum("WRONG SUM" in p.output() for p in procs.values())
    return victim, survivors, first_error


def _names_store_host(output):
    """Whether the error a rank raised names the stopped rank 0 or its colocated server 0."""
    raised = [line for line in output.splitlines() if line.startswith("BYTEPS_ERROR")]
    return any("rank 0" in line or "server 0 (" in line for line in raised)


AGENTS_END_WITHIN = 15  # seconds from the stopped rank's kill to both torchrun agents' exit


class _AgentChild:
    """A rank that a torchrun agent started: its pid comes from its READY
    line, its output from its own log (ddp_loop.py's RANK_LOG_DIR). Its exit
    status belongs to the agent: poll() says 0 once it is gone, so a survivor
    counts as failed by its BYTEPS_ERROR line only."""

    def __init__(self, name, log_path):
        self.name, self.log_path, self.pid, self.ended = name, log_path, None, None

    def output(self):
        return read_log(self.log_path)

    def find_pid(self):
        for line in self.output().splitlines():
            if line.startswith("READY") and " pid " in line:
                self.pid = int(line.rsplit(" pid ", 1)[1].split()[0])
        return self.pid

    def poll(self):
        if self.pid is None or self.ended is not None:
            return None if self.ended is None else 0
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            state = "gone"
        if state in ("Z", "X", "gone"):  # a zombie has exited; its agent reaps it
            self.ended = time.monotonic()
            return 0
        return None

    def kill(self, sig):
        if self.pid is not None and self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


def run_agent_store_host_trial(rng, log_dir, store_host=None):
    """SIGSTOP of torch rank 0 (TCPStore host, machine 0's colocated server) in a 2 x 2 DDP job under
    torchrun with its elastic agent (two torchrun invocations: two emulated machines on loopback). Every other
    rank must fail naming the cause and exit on its own within BYTEPS_TIMEOUT + 5 s; once the stopped rank is
    killed, both agents must end within AGENTS_END_WITHIN s."""
    result = dict(role="worker", kind="agentstop", memory_errors=[], wrong_results=0, left_running=[],
                  shm_left=[], times=[], exits=[], slow_exits=[], unnamed=[], detail="", store_host="")
    env = role_env(BYTEPS_TIMEOUT=TIMEOUT)
    for k in [k for k in env if k.startswith("DMLC_")] + ["BYTEPS_JOB_ID"]:
        env.pop(k, None)
    # Three times in four rank 0 hosts the workers' TCPStore (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, as before
    # torch 2.4); else torch's default, machine 0's agent (then rank 0 holds colocated server 0 only).
    if store_host is None:
        store_host = "rank 0" if rng.random() < 0.75 else "agent 0"
    result["store_host"] = store_host
    env.update(RANK_LOG_DIR=log_dir)
    if store_host == "rank 0":
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    rdzv = f"127.0.0.1:{free_port()}"
    agents, ranks = {}, {f"rank {r}": _AgentChild(f"rank {r}", os.path.join(log_dir, f"rank_{r}.log"))
                         for r in range(4)}
    try:
        for m in range(2):
            agents[f"agent {m}"] = LoggedProcess(
                f"agent {m}",
                [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                 "--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv, "--rdzv-id", os.path.basename(log_dir),
                 "--max-restarts", "0", "--monitor-interval", "0.1", os.path.join(WORKERS, "ddp_loop.py"), "0"],
                env, os.path.join(log_dir, f"agent_{m}.log"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(r.find_pid() for r in ranks.values()):
            if any(a.poll() is not None for a in agents.values()):
                break
            time.sleep(0.05)
        if not all(r.pid for r in ranks.values()):
            result["detail"] = "job did not start"
            result["unnamed"] = ["job did not start"]
            return result
        victim, survivors, _ = _stop_rank0_and_watch(ranks, rng, result)
        result["left_running"] = [n for n in survivors if ranks[n].poll() is None]
        result["unnamed"] += [n for n in survivors if not _names_store_host(ranks[n].output())]
        agents_alive = [n for n, a in agents.items() if a.poll() is None]
        killed_at = time.monotonic()
        victim.kill(signal.SIGKILL)
        for a in agents.values():
            a.wait(max(0.0, killed_at + AGENTS_END_WITHIN - time.monotonic()))
        result["left_running"] += [n for n, a in agents.items() if a.poll() is None or _group_alive(a)]
        result["agents_end"] = max([a.ended - killed_at for a in agents.values() if a.ended] + [0.0])
        result["detail"] = (f"store on {store_host}; agents running at the kill: {', '.join(agents_alive) or 'none'}; "
                            f"the last ended {result['agents_end']:.1f} s after it")
        result["memory_errors"] = [f for f in _scan_procs(dict(ranks, **agents)) if not f.startswith("rank 0: ")]
        pids = [r.pid for r in ranks.values()]
        result["shm_left"] = [p for p in glob.glob("/dev/shm/bpsn-*") if _created_by_pids(p, pids)]
        return result
    finally:
        for r in ranks.values():
            r.kill(signal.SIGKILL)
        for a in agents.values():
            a.stop()


def _created_by_pids(path, pids):
    pid = path.rsplit("-p", 1)[-1].split("-")[0]
    return pid.isdigit() and int(pid) in pids


def _created_by(path, procs):
    pid = path.rsplit("-p", 1)[-1].split("-")[0]
    return pid.isdigit() and int(pid) in [p.pid for p in procs.values()]


def _group_alive(proc):
    try:
        os.killpg(proc.pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _owned_by_stopped_victim(path, victim, kind):
    # A SIGKILLed local rank 0 that never unlinked: bpslaunch's job. Counted.
    return False


def _scan(c, ignore_killed=None):
    return _scan_procs(c.procs, ignore_killed)


def _scan_procs(procs, ignore_killed=None):
    found = []
    for n, p in procs.items():
        out = p.output()
        for marker in MEMORY_ERRORS:
            if marker in out:
                found.append(f"{n}: {marker}")
        rc = p.poll()
        if rc is not None and rc < 0 and -rc in [int(s) for s in ABNORMAL_SIGNALS] and n != ignore_killed:
            found.append(f"{n}: died of signal {-rc}")
    return found


def quick_cells(rng):
    """The quick profile: kill -9 of every role, and one role each for the
    other kinds (chosen at random), so it stays under a minute."""
    cells = [(role, "kill9") for role in ROLES]
    for kind in KINDS[1:-1]:  # not agentstop (two torchrun agents: ~18 s), a test of its own
        cells.append((rng.choice([r for r in ROLES if applicable(r, kind)]), kind))
    return cells


def run_campaign(trials, roles=ROLES, kinds=KINDS, seed=None, log_root=None, progress=print, steps_alive=150,
                 cells=None, trials_of=None, only=None, repeat=1):
    """trials per cell (role, kind); trials_of: {kind: trials} for kinds that differ. only: the indices of the
    plan's trials to run (a replay), each `repeat` times with the same draws."""
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    log_root = log_root or tempfile.mkdtemp(prefix="bps-faults-")
    if cells == "quick":
        cells = quick_cells(rng)
    cells = cells or [(r, k) for r in roles for k in kinds if applicable(r, k)]
    trials_of = trials_of or {}
    plan = [cell for cell in cells for _ in range(trials_of.get(cell[1], trials))]
    rng.shuffle(plan)
    chosen = [(i, cell) for i, cell in enumerate(plan) if only is None or i in only]
    if only is not None and len(chosen) != len(set(only)):
        raise ValueError(f"--only {sorted(only)}: this plan has trials 0-{len(plan) - 1}")
    chosen = [(i, cell, k) for i, cell in chosen for k in range(repeat)]
    results = []
    for n, (i, (role, kind), k) in enumerate(chosen):
        log_dir = os.path.join(log_root, f"{i:03d}-{role}-{kind}" + (f"-{k}" if repeat > 1 else ""))
        os.makedirs(log_dir)
        started = time.monotonic()
        r = run_trial(role, kind, random.Random(f"{seed}/{i}"), log_dir, steps_alive)
        r["log_dir"], r["wall"] = log_dir, time.monotonic() - started
        results.append(r)
        bad = (r["memory_errors"] or r["wrong_results"] or r["left_running"] or r["shm_left"] or r["unnamed"]
               or r.get("slow_exits"))
        progress(f"[{n + 1}/{len(chosen)}] {i:03d} {role:9s} {kind:9s} {r['wall']:5.1f}s {r['detail'] if not bad else ''} "
                 f"{'FAIL ' + str({k: r[k] for k in ('memory_errors', 'wrong_results', 'left_running', 'slow_exits', 'shm_left', 'unnamed', 'detail') if r.get(k)}) if bad else 'ok'}"
                 f" ({log_dir})")
    return seed, results


def _percentiles(times):
    if not times:
        return "n/a"
    q = sorted(times)
    pick = lambda f: q[min(len(q) - 1, int(round(f * (len(q) - 1))))]  # noqa: E731
    return f"{pick(0.5):.2f} / {pick(0.9):.2f} / {pick(0.99):.2f} / {q[-1]:.2f}"


def table(results):
    """Markdown: one row per role and fault kind, and one per phase of the start-up kills."""
    rows = ["| Role | Fault | Trials | Memory errors | Wrong results | Left running | Slow exits | shm leaks | Unnamed | "
            "Time to named error on survivors (p50 / p90 / p99 / max, s) | "
            "Exit after the fault (p50 / p90 / p99 / max, s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in results:
        cells.setdefault((r["role"], r["kind"], ""), []).append(r)
        if r.get("phase"):  # start-up kills: a row per phase too
            cells.setdefault((r["role"], r["kind"], r["phase"]), []).append(r)
    def order(cell):
        (role, kind, phase), _ = cell
        return ROLES.index(role), KINDS.index(kind), (("",) + PHASES).index(phase)

    for (role, kind, phase), rs in sorted(cells.items(), key=order):
        kind = f"{kind}: {phase}" if phase else kind
        times = [t for r in rs for t in r["times"]]
        exits = [t for r in rs for t in r.get("exits", [])]
        span = f"{_percentiles(times)} ({len(times)} survivors)" if times else "n/a: the job goes on"
        rows.append(f"| {role} | {kind} | {len(rs)} | {sum(len(r['memory_errors']) for r in rs)} | "
                    f"{sum(r['wrong_results'] for r in rs)} | {sum(len(r['left_running']) for r in rs)} | "
                    f"{sum(len(r.get('slow_exits', [])) for r in rs)} | "
                    f"{sum(len(r['shm_left']) for r in rs)} | {sum(len(r['unnamed']) for r in rs)} | {span} | "
                    f"{_percentiles(exits) if exits else 'n/a'} |")
    return "\n".join(rows)


def failures(results):
    return [r for r in results if r["memory_errors"] or r["wrong_results"] or r["left_running"] or r["shm_left"]
            or r["unnamed"] or r.get("slow_exits")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="trials per role and fault kind")
    parser.add_argument("--roles", default=",".join(ROLES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--trials-of", default="", metavar="KIND=N,...",
                        help="trials per role for these kinds instead of --trials, e.g. storestop=50,agentstop=50")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--logs", help="folder for the trials' logs (default: a new temp folder)")
    parser.add_argument("--quick", action="store_true", help="the quick profile of the pytest test")
    parser.add_argument("--only", default="", metavar="I,...",
                        help="run only these trials of the plan (indices as in the log folders' names): a replay")
    parser.add_argument("--repeat", type=int, default=1, help="run each trial this many times (with --only)")
    parser.add_argument("--window", type=float, default=_startup_seconds[0],
                        help="start-up window's first value in seconds (launch to every worker's READY)")
    args = parser.parse_args()
    _startup_seconds[0] = args.window
    trials_of = {kind: int(n) for kind, n in (kv.split("=") for kv in args.trials_of.split(",") if kv)}
    started = time.monotonic()
    seed, results = run_campaign(args.trials, args.roles.split(","), args.kinds.split(","), args.seed, args.logs,
                                 cells="quick" if args.quick else None,
                                 trials_of=trials_of,
                                 only={int(i) for i in args.only.split(",") if i} or None, repeat=args.repeat)
    print(f"\nseed {seed}, {len(results)} trials in {time.monotonic() - started:.0f} s\n")
    print(table(results))
    own = [t for r in results for t in r.get("own_waits", [])]
    if own:
        print(f"\n{len(own)} survivors of scheduler kills never reached it: exit {_percentiles(own)} s (p50 / p90 / "
              f"p99 / max) after their own wait began (their init)")
    agents = [r["agents_end"] for r in results if "agents_end" in r]
    if agents:
        print(f"\nagentstop: both torchrun agents ended {_percentiles(agents)} s (p50 / p90 / p99 / max) after the "
              f"stopped rank 0 was killed, in {len(agents)} trials")
    bad = failures(results)
    print(f"\n{len(bad)} trials with a finding")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
