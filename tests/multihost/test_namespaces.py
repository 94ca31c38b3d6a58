"""Scheduler, 2 servers and 2 workers, each a separate emulated host (own network namespace
and address on a shaped bridge), doing push_pull with checksums.

Skipped, with the reason, where namespaces cannot be created (not root, no iproute2, ...).
"""
import json
import os
import secrets
import sys

import pytest

from tests.support.netns import Cluster

REASON = Cluster.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"multi-host test needs network namespaces: {REASON}")

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "push_pull_worker.py")
PORT = 9000
NUM_WORKER, NUM_SERVER = 2, 2


def role_env(cluster, role, **extra):
    env = {
        "DMLC_ROLE": role,
        "DMLC_PS_ROOT_URI": cluster.host(0).address,
        "DMLC_PS_ROOT_PORT": PORT,
        "DMLC_NUM_WORKER": NUM_WORKER,
        "DMLC_NUM_SERVER": NUM_SERVER,
        "BYTEPS_JOB_TOKEN": cluster.job_token,
        "BYTEPS_JOB_ID": cluster.tag,
        "BYTEPS_TIMEOUT": 40,
    }
    env.update(extra)
    return env


def start_job(cluster, server_placement):
    """host 0: scheduler; hosts 1-2: servers; hosts 3-4: workers."""
    procs = {"scheduler": cluster.start(0, "scheduler", [sys.executable, "-m", "byteps_native.scheduler"],
                                        role_env(cluster, "scheduler"))}
    for s in range(NUM_SERVER):
        host = cluster.host(1 + s)
        # Server 0 picks its address by interface, server 1 by explicit address: both must work.
        extra = {"DMLC_INTERFACE": "eth0"} if s == 0 else {"DMLC_NODE_HOST": host.address}
        procs[f"server{s}"] = cluster.start(host, f"server{s}", [sys.executable, "-m", "byteps_native.server"],
                                            role_env(cluster, "server", **extra))
    for w in range(NUM_WORKER):
        procs[f"worker{w}"] = cluster.start(3 + w, f"worker{w}", [sys.executable, WORKER],
                                            role_env(cluster, "worker", DMLC_WORKER_ID=w,
                                                     BYTEPS_LOCAL_RANK=0, BYTEPS_LOCAL_SIZE=1))
    return procs


def results(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("RESULT ")]
    assert lines, f"{proc.name} printed no RESULT:\n{proc.output()}"
    return json.loads(lines[-1][len("RESULT "):])


def test_push_pull_across_namespaced_hosts():
    with Cluster(hosts=1 + NUM_SERVER + NUM_WORKER, rate="1gbit") as cluster:
        cluster.job_token = secrets.token_hex(16)
        procs = start_job(cluster, "dedicated")
        workers = [procs[f"worker{w}"] for w in range(NUM_WORKER)]
        everyone = list(procs.values())
        cluster.wait(workers, timeout=45, watch=everyone)
        # Servers and the scheduler leave by themselves once the workers have shut down.
        cluster.wait(everyone, timeout=10)

        per_worker = [results(p) for p in workers]
        for r in per_worker:
            assert r["size"] == NUM_WORKER
            failed = [c for c in r["checks"] if not c["ok"]]
            assert not failed, f"rank {r['rank']}: wrong sums {failed}"
        # Every rank ends with the same bytes.
        crcs = [[c["crc"] for c in r["checks"]] for r in per_worker]
        assert crcs[0] == crcs[1]

        # The bytes went over the emulated links, and both server links carried a fair share.
        links = cluster.link_stats()
        pushed = [r["stats"]["bytes_pushed"] for r in per_worker]
        for w, r in enumerate(per_worker):
            tx, rx = links[cluster.host(3 + w).name]
            assert tx >= pushed[w] and rx >= r["stats"]["bytes_pulled"], (links, r["stats"])
        server_rx = [links[cluster.host(1 + s).name][1] for s in range(NUM_SERVER)]
        assert min(server_rx) > 0.4 * sum(pushed) / NUM_SERVER, f"unbalanced servers: {server_rx}"
