"""Dedicated CPU servers join a torchrun job through MASTER_ADDR/MASTER_PORT."""
import os
import subprocess
import sys
import textwrap

from tests.support.ports import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = textwrap.dedent("""
    import torch, torch.distributed as dist
    import byteps_native.torch  # registers 'byteps'
    import byteps_native.core as core
    dist.init_process_group("byteps")
    r = dist.get_rank()
    t = torch.arange(300000, dtype=torch.float32) * (r + 1)
    dist.all_reduce(t)
    assert torch.equal(t, torch.arange(300000, dtype=torch.float32) * 3), t[:4]
    stats = core.stats()
    assert stats["num_servers"] == 2 and stats["bytes_pushed"] > 0, stats
    print("WORKER_OK", r, stats["bytes_pushed_per_server"], flush=True)
    dist.destroy_process_group()
""")



def test_dedicated_servers_join_torchrun_through_master_addr(tmp_path):
    script = os.path.join(str(tmp_path), "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env.update(DMLC_NUM_SERVER="2", BYTEPS_FORCE_DISTRIBUTED="1", BYTEPS_TIMEOUT="60",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    servers = [subprocess.Popen([sys.executable, "-m", "byteps_native.server"], env=dict(env, DMLC_ROLE="server"),
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for _ in range(2)]
    try:
        job = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                              "--master_addr", "127.0.0.1", "--master_port", str(port), script],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
        assert job.stdout.count("WORKER_OK") == 2, job.stdout
        for s in servers:
            out, _ = s.communicate(timeout=60)  # servers leave when the job's workers have left
            assert s.returncode == 0, out
    finally:
        for s in servers:
            if s.poll() is None:
                s.kill()
