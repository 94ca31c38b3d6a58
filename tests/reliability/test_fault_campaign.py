"""The quick profile of the fault campaign (tests/reliability/fault_campaign.py):
a randomized trial of kill -9 against every role and of each other fault
kind (SIGSTOP, stranger, drip, bad config) against a random role. The long
profile (>= 20 trials each) is documented in docs/reliability.md."""
import os
import random

from tests.reliability.fault_campaign import failures, run_campaign, table


def test_fault_campaign_quick_profile(tmp_path):
    seed = int(os.environ.get("BYTEPS_FAULT_SEED", random.randrange(1 << 30)))
    lines = []
    _, results = run_campaign(1, seed=seed, log_root=str(tmp_path), progress=lines.append, steps_alive=60,
                              cells="quick")
    bad = failures(results)
    assert not bad, (f"fault campaign seed {seed} (rerun: BYTEPS_FAULT_SEED={seed}):\n" + "\n".join(lines) + "\n\n" +
                     table(results))
