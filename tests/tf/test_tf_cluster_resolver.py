"""BytePSOps(cluster_resolver=...) and TF1's strategy.configure(cluster_spec=):
with a cluster spec, the job's size and this process's rank come from the
spec (as MultiWorkerMirroredStrategy reads them) without any peer running,
the engine starts at the first collective and must agree with the spec, and
update_config_proto writes what MWMS writes. 2 processes x 2 logical CPU
devices, real engine job."""
import json
import os
import subprocess
import sys
import tempfile

from tests.support.jobs import describe, job_env, require_success
from tests.support.results import collect
from tests.tf import WORKERS, run_job


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
        configured = o.result["configured"]
        assert configured["num_replicas_in_sync"] == 4 and len(configured["devices"]) == 2, configured
        assert all("job:" not in d or "localhost" in d for d in configured["devices"]), configured
        task = "/job:chief/task:0" if o.rank == 0 else "/job:worker/task:0"
        assert configured["device_filters"] == [task]
        assert "task worker:2 of a cluster of 3" in configured["error"] and f"rank {o.rank} of 2" in configured["error"]
        assert configured["num_replicas_after_refusal"] == 4  # a refused cluster changes nothing


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
    env = job_env(result_dir=out_dir, extra={"TF_CONFIG": json.dumps({
        "cluster": {"worker": ["localhost:1", "localhost:2", "localhost:3"]}, "task": {"type": "worker", "index": 2}})})
    proc = subprocess.run([sys.executable, os.path.join(WORKERS, "cluster_resolver_worker.py"), "tf_config"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = collect(out_dir)[0]
    assert result["num_replicas_in_sync"] == 6 and result["replica_ids"] == [4, 5], result
    assert result["engine_started"] is False
    assert "task worker:2 of a cluster of 3" in result["error"] and "rank 0 of 1" in result["error"], result
