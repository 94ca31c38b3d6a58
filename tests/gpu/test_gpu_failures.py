"""GPU failure semantics (issue 13, bugs 7 and 8).

Bug 7: on one machine a GPU push_pull completes its Future stream-ordered,
before the result exists; a failure found later cannot reach that Future, so
the engine latches it: the next GPU push_pull raises with the cause.
Bug 8 (a failed GPU submit leaked events, staging and scratch): a device op's
events and staging now belong to the engine's partitions and go back when the
op completes or its failed rounds settled (SequencedLocalReducer::Settled);
covered by the queue_depth checks of test_torch_gpu.py."""
import json
import os
import socket
import subprocess
import sys

import pytest

from gpu_env import GPUS, NO_GPU, needs_gpus, requires_cuda_build

if GPUS == 0:
    pytest.skip(NO_GPU, allow_module_level=True)
pytestmark = [requires_cuda_build, needs_gpus(2)]

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# Open: on 2 x H200 (fresh machine, 2026-11-23) the job hung past the test's
# 120 s limit instead of raising on rank 0's next all_reduce; the engine half of
# the fix is in, the adapter half (csrc/torch turning the latched failure into an
# error, not a warning) is not. Kept, expected to fail, until it passes there.
@pytest.mark.xfail(reason="issue 13 bug 7: adapter half not done; the job hangs on 2 x H200", strict=False)
def test_a_failure_after_stream_ordered_completion_fails_the_next_push_pull(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, BYTEPS_TIMEOUT="5", NCCL_NVLS_ENABLE="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(port),
           os.path.join(HERE, "workers", "late_failure_worker.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    path = os.path.join(str(tmp_path), "result.0.json")
    assert os.path.exists(path), proc.stdout[-4000:] + proc.stderr[-4000:]
    with open(path) as f:
        next_result = json.load(f)["next"]
    assert next_result != "ok", "a push_pull ran on after an earlier stream-ordered one failed"
    assert "all_reduce" in next_result or "'" in next_result, next_result
    assert "BYTEPS_TIMEOUT" in next_result or "no progress" in next_result, next_result
