"""BytePSOps(cluster_resolver=...): with a cluster spec, the job's size and
this process's rank come from the spec (as MultiWorkerMirroredStrategy reads
them) without any peer running, the engine starts at the first collective
and must agree with the spec, and update_config_proto writes what MWMS
writes. 2 processes x 2 logical CPU devices, real engine job."""
import json
import os
import subprocess
import sys
import tempfile

from tf_cluster import REPO, WORKERS_DIR, describe, require_success, run_job


def test_strategy_from_cluster_spec_needs_no_peers_and_agrees_with_the_job():
    outcomes = run_job("cluster_resolver_worker.py", num_workers=2, args=["agree"])
    require_success(outcomes)
    for o in outcomes:
        lone = o.result["lone"]
        assert lone["engine_started"] is False, describe(outcomes)
        assert lone["num_replicas_in_sync"] == 6  # 3 workers x 2 devices
        assert lone["replica_ids"] == [2, 3]  # worker 1 of 3
        assert lone["input_context"] == [3, 1, 2]  # pipelines, this pipeline, per-replica batch of 12
        assert lone["group_leader"] == "/job:worker/replica:0/task:0"
        assert lone["device_filters"] == ["/job:worker/task:1"]
        assert lone["scoped_allocator"] and lone["scoped_allocator_ops"] == ["CollectiveReduce"]
        assert o.result["engine_started_before_collective"] is False
        assert o.result["num_replicas_in_sync"] == 4
        assert o.result["engine"] == [o.rank, 2]
        assert o.result["sum"] == 1 + 2 + 3 + 4


def test_cluster_spec_that_contradicts_the_job_fails_at_the_first_collective():
    outcomes = run_job("cluster_resolver_worker.py", num_workers=2, args=["disagree"])
    require_success(outcomes)
    for o in outcomes:
        error = o.result["error"]
        assert error and "the BytePS engine runs as rank" in error and f"rank {o.rank} of 2" in error, \
            describe(outcomes)
        assert f"(rank {1 - o.rank})" in error and "DMLC_WORKER_ID" in error
        assert o.result["seconds"] < 30


def test_tf_config_without_a_byteps_job_is_read_and_then_named_as_missing():
    out_dir = tempfile.mkdtemp(prefix="bps_tf_test_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "BYTEPS_"))}
    env.update(BPS_TF_TEST_OUT=out_dir, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CONFIG=json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2", "localhost:3"]},
                                     "task": {"type": "worker", "index": 2}}))
    proc = subprocess.run([sys.executable, os.path.join(WORKERS_DIR, "cluster_resolver_worker.py"), "tf_config"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(out_dir, "rank0.json")) as f:
        result = json.load(f)
    assert result["num_replicas_in_sync"] == 6 and result["replica_ids"] == [4, 5], result
    assert result["engine_started"] is False
    assert "task worker:2 of a cluster of 3" in result["error"] and "rank 0 of 1" in result["error"], result
