"""Fault campaign: randomized trials of one fault against one role of a
training job, and what every process did about it.

    python tests/reliability/fault_campaign.py --trials 20            # long profile
    python tests/reliability/fault_campaign.py --trials 1 --seed 7    # one of each

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

Checked per trial: no memory error (ASan/UBSan reports, SIGSEGV, SIGBUS,
aborts, uncaught exceptions in any log or exit status), no wrong sum (the
loop checks every result), no process left running once the job should be
over (BYTEPS_TIMEOUT + 15 s), no /dev/shm segment of the job left, and, for
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
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster  # noqa: E402

ROLES = ("worker", "server", "scheduler")
KINDS = ("kill9", "sigstop", "stranger", "drip", "badconfig")
TIMEOUT = 4  # BYTEPS_TIMEOUT of every trial
GRACE = 15   # seconds after TIMEOUT by which every process must be gone

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
    return not (role == "worker" and kind in ("stranger", "drip"))


def _victim_words(role, name):
    if role == "worker":
        rank = int(name.split()[1])
        return [f"worker {rank}", f"rank {rank}", f"local rank {rank % 2}"]
    if role == "server":
        return ["server 0"]
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
    env = dict(BYTEPS_TIMEOUT=TIMEOUT, BYTEPS_RENDEZVOUS_TIMEOUT=TIMEOUT)
    result = dict(role=role, kind=kind, memory_errors=[], wrong_results=0, left_running=[], shm_left=[],
                  times=[], unnamed=[], detail="")
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
        if kind != "badconfig":
            if not all(w.wait_for("READY", 30) for w in workers):
                result["detail"] = "job did not start"
                result["unnamed"] = ["job did not start"]
                result["left_running"] = [n for n, p in c.procs.items() if p.poll() is None]
                result["memory_errors"] = _scan(c)
                return result
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
        # Watch every process until it exits or the deadline passes.
        deadline = fault_at + TIMEOUT * 2 + GRACE + (40 if steps else 0)
        first_error = {}
        survivors = [n for n in c.procs if n != victim or kind in ("stranger", "drip")]
        while time.monotonic() < deadline:
            running = [n for n in survivors if c.procs[n].poll() is None]
            for n in survivors:
                if n not in first_error and ("BYTEPS_ERROR" in c.procs[n].output() or c.procs[n].poll() not in (None, 0)):
                    first_error[n] = time.monotonic() - fault_at
            if not running:
                break
            time.sleep(0.05)
        if strangers:
            strangers.close()
        codes = {n: p.poll() for n, p in c.procs.items()}
        result["left_running"] = [n for n in survivors if codes[n] is None or _group_alive(c.procs[n])]
        if kind == "sigstop":
            c.procs[victim].kill(signal.SIGKILL)
            c.procs[victim].wait(5)
        result["memory_errors"] = _scan(c, ignore_killed=victim if kind in ("kill9", "sigstop") else None)
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
    found = []
    for n, p in c.procs.items():
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
    for kind in KINDS[1:]:
        cells.append((rng.choice([r for r in ROLES if applicable(r, kind)]), kind))
    return cells


def run_campaign(trials, roles=ROLES, kinds=KINDS, seed=None, log_root=None, progress=print, steps_alive=150,
                 cells=None):
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    log_root = log_root or tempfile.mkdtemp(prefix="bps-faults-")
    if cells == "quick":
        cells = quick_cells(rng)
    cells = cells or [(r, k) for r in roles for k in kinds if applicable(r, k)]
    plan = [cell for cell in cells for _ in range(trials)]
    rng.shuffle(plan)
    results = []
    for i, (role, kind) in enumerate(plan):
        log_dir = os.path.join(log_root, f"{i:03d}-{role}-{kind}")
        os.makedirs(log_dir)
        started = time.monotonic()
        r = run_trial(role, kind, rng, log_dir, steps_alive)
        r["log_dir"], r["wall"] = log_dir, time.monotonic() - started
        results.append(r)
        bad = r["memory_errors"] or r["wrong_results"] or r["left_running"] or r["shm_left"] or r["unnamed"]
        progress(f"[{i + 1}/{len(plan)}] {role:9s} {kind:9s} {r['wall']:5.1f}s {r['detail'] if not bad else ''} "
                 f"{'FAIL ' + str({k: r[k] for k in ('memory_errors', 'wrong_results', 'left_running', 'shm_left', 'unnamed', 'detail') if r[k]}) if bad else 'ok'}"
                 f" ({log_dir})")
    return seed, results


def table(results):
    """Markdown: one row per role and fault kind."""
    rows = ["| Role | Fault | Trials | Memory errors | Wrong results | Left running | shm leaks | Unnamed | "
            "Time to named error on survivors (min / median / max, s) |",
            "|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in results:
        cells.setdefault((r["role"], r["kind"]), []).append(r)
    for (role, kind), rs in sorted(cells.items(), key=lambda kv: (ROLES.index(kv[0][0]), KINDS.index(kv[0][1]))):
        times = [t for r in rs for t in r["times"]]
        span = (f"{min(times):.2f} / {statistics.median(times):.2f} / {max(times):.2f} ({len(times)} survivors)"
                if times else "n/a: the job goes on")
        rows.append(f"| {role} | {kind} | {len(rs)} | {sum(len(r['memory_errors']) for r in rs)} | "
                    f"{sum(r['wrong_results'] for r in rs)} | {sum(len(r['left_running']) for r in rs)} | "
                    f"{sum(len(r['shm_left']) for r in rs)} | {sum(len(r['unnamed']) for r in rs)} | {span} |")
    return "\n".join(rows)


def failures(results):
    return [r for r in results if r["memory_errors"] or r["wrong_results"] or r["left_running"] or r["shm_left"]
            or r["unnamed"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="trials per role and fault kind")
    parser.add_argument("--roles", default=",".join(ROLES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int)
    parser.add_argument("--logs", help="folder for the trials' logs (default: a new temp folder)")
    parser.add_argument("--quick", action="store_true", help="the quick profile of the pytest test")
    args = parser.parse_args()
    started = time.monotonic()
    seed, results = run_campaign(args.trials, args.roles.split(","), args.kinds.split(","), args.seed, args.logs,
                                 cells="quick" if args.quick else None)
    print(f"\nseed {seed}, {len(results)} trials in {time.monotonic() - started:.0f} s\n")
    print(table(results))
    bad = failures(results)
    print(f"\n{len(bad)} trials with a finding")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
