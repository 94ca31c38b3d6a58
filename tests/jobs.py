"""Run a real byteps job (scheduler, servers, worker processes, real sockets)
through bpslaunch and collect what each worker reports."""
import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_job(tmp_path, script, local_workers=1, machines=1, servers=0, env=None, timeout=180, expect_ok=True,
            force_distributed=False):
    """Runs `script` (Python source) on every worker; returns (proc, results).

    A worker reports with `report(obj)` (injected), collected per rank.
    """
    path = os.path.join(str(tmp_path), "worker.py")
    prelude = textwrap.dedent("""
        import json as _json, os as _os
        def report(obj):
            rank = int(_os.environ.get("DMLC_WORKER_ID", 0)) * int(_os.environ.get("BYTEPS_LOCAL_SIZE", 1)) + \\
                int(_os.environ.get("BYTEPS_LOCAL_RANK", 0))
            with open(_os.path.join(%r, "result.%%d.json" %% rank), "w") as f:
                _json.dump(obj, f)
    """ % str(tmp_path))
    with open(path, "w") as f:
        f.write(prelude + textwrap.dedent(script))
    cmd = [sys.executable, "-m", "byteps_native.launch", "--local-workers", str(local_workers),
           "--machines", str(machines), "--servers", str(servers)]
    if force_distributed:
        cmd.append("--force-distributed")
    cmd += ["--", sys.executable, path]
    full_env = dict(os.environ)
    full_env.setdefault("BYTEPS_TIMEOUT", "60")
    # The warm staging pool at 8 MiB a local rank, not 128: these jobs' tensors
    # are small (larger ones still take the path past the pool), and a suite of
    # jobs need not back and map 128 MiB per rank each.
    full_env.setdefault("BYTEPS_LOCAL_STAGING_RESERVE", str(8 << 20))
    full_env.update(env or {})
    proc = subprocess.run(cmd, env=full_env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if expect_ok and proc.returncode != 0:
        raise AssertionError(f"job failed with {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}")
    results = {}
    for name in os.listdir(str(tmp_path)):
        if name.startswith("result."):
            with open(os.path.join(str(tmp_path), name)) as f:
                results[int(name.split(".")[1])] = json.load(f)
    return proc, results
