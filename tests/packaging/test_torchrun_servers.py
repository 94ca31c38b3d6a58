"""docs/at_scale.md's "dedicated CPU servers next to torchrun", with both
rendezvous forms torchrun offers.

With `--rdzv_backend c10d --rdzv_endpoint H:P` torchrun gives the workers a
store on another port than P; a server pointed at P never met them ("server 0
of 1 never registered") and then crashed (a heap overrun in the store error
path: segmentation fault). The server now follows the rendezvous to the
workers' store (`--rdzv-endpoint`).
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.ports import free_port

pytest.importorskip("torch")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = textwrap.dedent("""
    import torch, torch.distributed as dist
    import byteps_native.torch  # registers 'byteps'
    import byteps_native.core as core
    dist.init_process_group("byteps")
    r = dist.get_rank()
    t = torch.arange(200000, dtype=torch.float32) * (r + 1)
    dist.all_reduce(t)
    assert torch.equal(t, torch.arange(200000, dtype=torch.float32) * 3), t[:4]
    stats = core.stats()
    assert stats["num_servers"] == 1 and stats["bytes_pushed"] > 0, stats
    print("WORKER_OK", r, flush=True)
    dist.destroy_process_group()
""")



def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_", "PET_", "MASTER_"))}
    env.update(DMLC_NUM_SERVER="1", BYTEPS_FORCE_DISTRIBUTED="1", BYTEPS_TIMEOUT="60",
               BYTEPS_RENDEZVOUS_TIMEOUT="120", TORCH_CPP_LOG_LEVEL="ERROR")
    return env


@pytest.mark.parametrize("form", ["c10d", "master_addr"])
@pytest.mark.parametrize("server_first", [True, False], ids=["server-first", "workers-first"])
def test_dedicated_server_joins_torchrun(tmp_path, form, server_first):
    if form == "master_addr" and not server_first:
        pytest.skip("covered by tests/torch/test_dedicated_servers.py")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    env = _env()
    if form == "c10d":
        rdzv = ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "job7"]
        server_cmd = [sys.executable, "-m", "byteps_native.server", "--rdzv-endpoint", f"127.0.0.1:{port}",
                      "--rdzv-id", "job7"]
        server_env = env
    else:
        rdzv = ["--master_addr", "127.0.0.1", "--master_port", str(port)]
        server_cmd = [sys.executable, "-m", "byteps_native.server"]
        server_env = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    workers_cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2"] + rdzv + [
        str(script)]

    def start_server():
        return subprocess.Popen(server_cmd, env=dict(server_env, DMLC_ROLE="server"), cwd=str(tmp_path),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    server = start_server() if server_first else None
    workers = subprocess.Popen(workers_cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        if server is None:
            time.sleep(3)  # the workers' rendezvous is under way or done
            server = start_server()
        out, _ = workers.communicate(timeout=240)
        server_out, _ = server.communicate(timeout=60)  # leaves when the job's workers have left
        assert workers.returncode == 0, out[-4000:] + "\nserver:\n" + server_out[-3000:]
        assert out.count("WORKER_OK") == 2, out
        assert server.returncode == 0, server_out[-3000:]
    finally:
        for p in (workers, server):
            if p is not None and p.poll() is None:
                p.kill()


def test_server_reports_a_vanished_store_without_crashing(tmp_path):
    """The store closes under a waiting server: one line naming the cause, exit 1, no segfault."""
    port = free_port()
    master = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, torch.distributed as dist
        store = dist.TCPStore("127.0.0.1", {port}, is_master=True, wait_for_workers=False)
        print("READY", flush=True)
        sys.stdin.readline()  # closes when the test says so
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert master.stdout.readline().strip() == "READY"
        env = dict(_env(), DMLC_ROLE="server", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   BYTEPS_RENDEZVOUS_TIMEOUT="60")
        server = subprocess.Popen([sys.executable, "-m", "byteps_native.server"], env=env, cwd=str(tmp_path),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(8)  # the server has connected and waits for the workers (slow machines: still fine)
        master.stdin.close()  # the store goes away under it
        _, stderr = server.communicate(timeout=120)
        server = subprocess.CompletedProcess(server.args, server.returncode, "", stderr)
    finally:
        master.kill()
    assert server.returncode == 1, (server.returncode, server.stderr[-3000:])
    assert "byteps server failed" in server.stderr and "closed" in server.stderr, server.stderr[-3000:]


def test_server_names_a_rendezvous_that_never_completes(tmp_path):
    port = free_port()
    master = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time, torch.distributed as dist
        store = dist.TCPStore("127.0.0.1", {port}, is_master=True, wait_for_workers=False)
        print("READY", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert master.stdout.readline().strip() == "READY"
        env = dict(_env(), BYTEPS_RENDEZVOUS_TIMEOUT="3")
        start = time.monotonic()
        server = subprocess.run([sys.executable, "-m", "byteps_native.server", "--rdzv-endpoint",
                                 f"127.0.0.1:{port}", "--rdzv-id", "nojob"], env=env, cwd=str(tmp_path),
                                capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - start
    finally:
        master.kill()
    assert server.returncode == 1, server.stderr[-3000:]
    assert "no torchrun rendezvous with id 'nojob' completed" in server.stderr, server.stderr[-3000:]
    assert elapsed < 45, elapsed  # bounded by the timeout, not a hang
