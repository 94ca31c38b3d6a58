"""A failed push_pull still closes its round: the next push_pull of the same
name runs at once instead of waiting for BYTEPS_TIMEOUT (issue 13, bug 2).

Real processes: two local ranks on one machine (shared memory), so the failure
is seen by both ranks' engines; the retry uses the same name and agrees."""
import time

from tests.support.jobs import bpslaunch_source

RETRY_SAME_NAME = """
import time
import numpy as np
import byteps_native.core as bps
bps.init()
r = bps.rank()
outcomes = []
for step in range(3):
    # Disagreeing shapes under one name: every rank must fail this one...
    bad = np.ones((10, 5 + r), np.float32)
    try:
        bps.push_pull(bad, name="fc1.weight")
        outcomes.append("ok")
    except bps.BytePSError as e:
        outcomes.append("error")
    # ...and the same name, now agreeing, must reduce right away.
    good = np.full((10, 5), r + 1.0, np.float32)
    t0 = time.monotonic()
    try:
        bps.push_pull(good, name="fc1.weight", average=False)
        outcomes.append("ok" if np.all(good == 3.0) else "wrong sum %r" % good.ravel()[:3])
    except bps.BytePSError as e:
        outcomes.append("error: " + str(e)[:300])
    outcomes.append(time.monotonic() - t0)
report({"outcomes": outcomes})
bps.shutdown()
"""


def test_same_name_after_a_failed_round_reduces_at_once(tmp_path):
    # BYTEPS_TIMEOUT well above the bound below: a retry stuck behind the
    # failed round would take the whole timeout, then fail.
    start = time.monotonic()
    results = bpslaunch_source(tmp_path, RETRY_SAME_NAME, local_workers=2, timeout=120,
                               env={"BYTEPS_TIMEOUT": "30"}).results
    assert sorted(results) == [0, 1], results
    for rank, r in results.items():
        out = r["outcomes"]
        for step in range(3):
            bad, good, seconds = out[3 * step:3 * step + 3]
            assert bad == "error", f"rank {rank} step {step}: the mismatched push_pull did not fail: {out}"
            assert good == "ok", f"rank {rank} step {step}: the retry under the same name failed: {good}"
            assert seconds < 10, f"rank {rank} step {step}: the retry waited {seconds:.1f} s behind the failed round"
    assert time.monotonic() - start < 100
