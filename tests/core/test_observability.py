"""Timeline traces, stats counters and the build report."""
import json
import os
import subprocess
import sys

from byteps_native import trace
from tests.support.jobs import bpslaunch_source
from tests.support.paths import REPO

TRAINING = """
import numpy as np
import byteps_native.core as bps
bps.init()
a = np.ones(300000, np.float32)      # 1.2 MB: 3 partitions of 409600 bytes
for step in range(5):
    bps.push_pull(a, "grad", average=False)
report({"stats": bps.stats()})
bps.shutdown()
"""


def test_trace_has_every_partition_and_stage_and_merges(tmp_path):
    trace_dir = os.path.join(str(tmp_path), "traces")
    bpslaunch_source(tmp_path, TRAINING, local_workers=2, machines=2, servers=1,
                     env={"BYTEPS_TRACE_ON": "1", "BYTEPS_TRACE_DIR": trace_dir, "BYTEPS_TRACE_START_STEP": "1",
                          "BYTEPS_TRACE_END_STEP": "3", "BYTEPS_PARTITION_BYTES": "409600"})
    files = sorted(os.listdir(trace_dir))
    assert files == ["rank0.json", "rank1.json", "rank2.json", "rank3.json", "server0.json"]
    for name in files[:4]:
        with open(os.path.join(trace_dir, name)) as f:
            events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
        seen = {(e["cat"], e["args"]["partition"], e["args"]["step"]) for e in events}
        for stage in ("stage_in", "local_reduce", "push_pull", "gather"):
            for partition in range(3):
                for step in (1, 2, 3):
                    assert (stage, partition, step) in seen, (name, stage, partition, step)
        assert {e["args"]["step"] for e in events} == {1, 2, 3}  # steps outside the window are not traced
        assert all(e["dur"] >= 0 and e["ts"] > 0 for e in events)
    merged = trace.merge(trace_dir)
    total = 0
    for name in files:
        with open(os.path.join(trace_dir, name)) as f:
            total += len(json.load(f)["traceEvents"])
    assert len(merged["traceEvents"]) == total
    assert {e["pid"] for e in merged["traceEvents"]} == {"worker 0", "worker 1", "worker 2", "worker 3", "server 0"}


def test_stats_count_the_bytes_actually_moved(tmp_path):
    results = bpslaunch_source(tmp_path, TRAINING, local_workers=1, machines=2, servers=1).results
    for r in results.values():
        # One local rank: the whole tensor goes to the server and back, 5 times.
        assert r["stats"]["bytes_pushed"] == 5 * 300000 * 4
        assert r["stats"]["bytes_pulled"] == 5 * 300000 * 4
        assert r["stats"]["ops_completed"] == 5
        # Where the engine thread's time went: every op moved in some pass,
        # no pass longer than all of them, and no device work on the host path.
        s = r["stats"]
        assert s["engine_passes"] >= 5
        assert 0 < s["engine_pass_max_seconds"] <= s["engine_pass_seconds"]
        assert s["device_issue_seconds"] == 0 and s["device_issue_max_seconds"] == 0


def test_local_ranks_share_the_network_work(tmp_path):
    results = bpslaunch_source(tmp_path, TRAINING, local_workers=2, machines=2, servers=1).results
    pushed = [r["stats"]["bytes_pushed"] for r in results.values()]
    # Each local rank pushes only its slice: a machine's ranks together push the tensor once.
    assert sum(pushed) == 2 * 5 * 300000 * 4
    assert max(pushed) - min(pushed) <= 5 * 3 * 64 * 4  # slices differ by alignment at most


def test_info_command_reports_the_build():
    out = subprocess.run([sys.executable, "-m", "byteps_native.info"], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "engine: byteps-native engine" in out.stdout and "transports: tcp" in out.stdout
    assert "NUMA nodes:" in out.stdout


STATS_WHILE_BUSY = """
import threading, time
import numpy as np
import byteps_native.core as bps
bps.init()
a = np.ones(300000, np.float32)
def train():  # the same number of push_pulls on every rank
    for _ in range(300):
        bps.push_pull(a, "grad", average=False)
t = threading.Thread(target=train)
t.start()
reads, broken = 0, []
while t.is_alive():
    try:
        bps.stats()
    except ValueError as e:  # json.JSONDecodeError
        broken.append(str(e))
    reads += 1
t.join()
report({"reads": reads, "broken": broken[:3], "broken_count": len(broken)})
bps.shutdown()
"""


def test_stats_read_while_the_engine_works_are_whole(tmp_path):
    # The counters move between the call that sizes the buffer and the one
    # that fills it; a JSON grown meanwhile once came back cut short. Reads
    # run as long as 300 push_pulls do.
    results = bpslaunch_source(tmp_path, STATS_WHILE_BUSY, local_workers=1, machines=2, servers=1).results
    for rank, r in results.items():
        assert r["reads"] > 100, r
        assert r["broken_count"] == 0, (rank, r)
