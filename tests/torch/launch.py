"""Start real multi-process torch jobs for the tests: torchrun, or bare worker
processes with torch's env:// variables (when a test needs ranks to outlive a
dead peer, which torchrun would not allow: it kills the job)."""
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKERS = os.path.join(HERE, "workers")


def _env(result_dir, extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["RESULT_DIR"] = str(result_dir)
    env.setdefault("BYTEPS_TIMEOUT", "60")
    env["OMP_NUM_THREADS"] = "1"  # 2 cores shared by every rank
    env.update(extra or {})
    return env


def _results(result_dir):
    results = {}
    for name in os.listdir(str(result_dir)):
        if name.startswith("result.") and name.endswith(".json"):
            with open(os.path.join(str(result_dir), name)) as f:
                results[int(name.split(".")[1])] = json.load(f)
    return results


def _check(proc, expect_ok):
    if expect_ok and proc.returncode != 0:
        raise AssertionError(f"job failed with exit code {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}"
                             f"\nstderr:\n{proc.stderr[-8000:]}")


def torchrun(result_dir, worker, nproc, args=(), env=None, timeout=240, expect_ok=True):
    """`torchrun --standalone --nproc_per_node nproc workers/<worker> args...`;
    returns (completed process, {rank: reported object})."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
           os.path.join(WORKERS, worker), *map(str, args)]
    proc = subprocess.run(cmd, env=_env(result_dir, env), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    _check(proc, expect_ok)
    return proc, _results(result_dir)


def torchrun_machines(result_dir, worker, machines, nproc_per_machine, args=(), env=None, timeout=240):
    """`machines` torchrun agents on this host, each a "machine" of
    `nproc_per_machine` ranks (LOCAL_WORLD_SIZE < WORLD_SIZE), so the engine
    runs its multi-machine path: a server colocated on each machine's local rank 0.
    `nproc_per_machine` may be a list: machines of different sizes (issue 29)."""
    port = free_port()
    agents = []
    per_machine = nproc_per_machine if isinstance(nproc_per_machine, (list, tuple)) else [nproc_per_machine] * machines
    for machine in range(machines):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(machines), "--node_rank",
               str(machine), "--nproc_per_node", str(per_machine[machine]), "--master_addr", "127.0.0.1",
               "--master_port", str(port), os.path.join(WORKERS, worker), *map(str, args)]
        agents.append(subprocess.Popen(cmd, env=_env(result_dir, env), cwd=REPO, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True))
    for agent in agents:
        try:
            out, err = agent.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            agent.kill()
            out, err = agent.communicate()
        _check(subprocess.CompletedProcess(agent.args, agent.returncode, out, err), expect_ok=True)
    return _results(result_dir)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_ranks(result_dir, worker, nproc, args=(), env=None, timeout=240):
    """Each rank a plain process with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
    (rank 0 hosts the TCPStore). Returns ([completed processes], results)."""
    port = free_port()
    procs = []
    for rank in range(nproc):
        rank_env = _env(result_dir, env)
        rank_env.update(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank),
                        LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.join(WORKERS, worker), *map(str, args)],
                                      env=rank_env, cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    finished = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += "\n[test harness: killed after timeout]"
        finished.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return finished, _results(result_dir)
