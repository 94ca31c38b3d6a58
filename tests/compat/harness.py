"""Launch real multi-process jobs for the compatibility tests: torchrun for
torch and TF scripts (TF joins through torchrun's variables), and a tiny
result protocol: each rank writes result.<rank>.json to $RESULT_DIR."""
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKERS = os.path.join(HERE, "workers")
SCRIPTS = os.path.join(HERE, "scripts")


def job_env(result_dir=None, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    extra = dict(extra or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in [extra.pop("PYTHONPATH", ""), REPO, HERE,
                                                   env.get("PYTHONPATH", "")] if p)
    if result_dir is not None:
        env["RESULT_DIR"] = str(result_dir)
    env["BYTEPS_TIMEOUT"] = "60"
    env["OMP_NUM_THREADS"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    if os.environ.get("COMPAT_GPU") != "1":  # COMPAT_GPU=1: the GPU cases on a GPU machine
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def results(result_dir):
    found = {}
    for name in os.listdir(str(result_dir)):
        if name.startswith("result.") and name.endswith(".json"):
            with open(os.path.join(str(result_dir), name)) as f:
                found[int(name.split(".")[1])] = json.load(f)
    return found


def torchrun(script, args=(), nproc=2, result_dir=None, env=None, timeout=300, extra_run_args=(),
             machines=1, cwd=REPO):
    """Run `script` under torchrun with `nproc` processes per machine on
    `machines` simulated machines; returns (returncode, combined log)."""
    if machines == 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               *extra_run_args, script, *map(str, args)]
        proc = subprocess.run(cmd, env=job_env(result_dir, env), cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr
    port = free_port()
    agents = []
    for machine in range(machines):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(machines), "--node_rank",
               str(machine), "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1", "--master_port",
               str(port), *extra_run_args, script, *map(str, args)]
        agents.append(subprocess.Popen(cmd, env=job_env(result_dir, env), cwd=cwd, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True))
    log, code = "", 0
    for agent in agents:
        try:
            out, _ = agent.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            agent.kill()
            out, _ = agent.communicate()
            out += "\n[harness: killed after timeout]"
        log += out
        code = code or agent.returncode
    return code, log


def report(obj):
    """Called inside a worker: write this rank's findings."""
    rank = int(os.environ.get("RANK", os.environ.get("DMLC_WORKER_ID", "0")))
    with open(os.path.join(os.environ["RESULT_DIR"], f"result.{rank}.json"), "w") as f:
        json.dump(obj, f)
