"""Rank 1 dies (SIGKILL) after one successful push_pull; rank 0's next
push_pull must fail with an error, not hang."""
import os
import signal
import time

import common

tf = common.setup_tensorflow(logical_devices=1)
import byteps_native.tf as bps  # noqa: E402

bps.init()
rank = bps.rank()
first = bps.push_pull(tf.ones([4]), average=False, name="before_death")
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(1.0)
started = time.monotonic()
outcome = {"rank": rank, "first": first}
try:
    bps.push_pull(tf.ones([4]), average=False, name="after_death")
    outcome["error"] = None
except tf.errors.OpError as err:
    outcome["error"] = type(err).__name__
    outcome["message"] = err.message
outcome["seconds_to_fail"] = time.monotonic() - started
common.write_result(rank, outcome)
os._exit(0)  # the job is broken: skip an orderly engine shutdown
