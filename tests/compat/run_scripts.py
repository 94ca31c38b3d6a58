"""Run the ported upstream scripts (third_party/*/scripts) with 2 processes
under torchrun, offline, and check that the ranks agree.

    python3 -m tests.compat.run_scripts            # all
    python3 -m tests.compat.run_scripts NAME...    # some
    python3 -m tests.compat.run_scripts --legacy-keras NAME...

--legacy-keras runs them as Horovod users on TensorFlow >= 2.16 run their
Keras 2 scripts: with TF_USE_LEGACY_KERAS=1, so that tf.keras is Keras 2
(the tf_keras package; pip install tf_keras==<TensorFlow's version>).
Without NAMEs it runs the TF scripts that fail under Keras 3.

Prints one line per script: PASS (exit 0 on both ranks and identical
trained-state fingerprints), or FAIL with the last error line.
"""
import argparse
import json
import os
import sys
import tempfile
import time

from tests.compat import HERE
from tests.compat.ported_scripts import script_path
from tests.compat.scripts_table import EXIT_STATUS_ONLY, LEGACY_KERAS_SCRIPTS, LOG_MUST_NOT_CONTAIN, SCRIPT_ENV, TABLE
from tests.support.jobs import torchrun

OFFLINE = os.path.join(HERE, "offline")


def run_script(name, timeout=600, legacy_keras=False):
    """(passed, detail, seconds); legacy_keras: tf.keras is Keras 2 (tf_keras)."""
    args, _ = TABLE[name]
    fingerprints = tempfile.mkdtemp(prefix="compat_fp_")
    workdir = tempfile.mkdtemp(prefix="compat_cwd_")
    env = {"COMPAT_FINGERPRINT_DIR": fingerprints, "BYTEPS_TIMEOUT": "60", "HOME": workdir,
           **SCRIPT_ENV.get(name, {}), **({"TF_USE_LEGACY_KERAS": "1"} if legacy_keras else {})}
    start = time.time()
    job = torchrun(script_path(name, workdir), args=args, env=env, timeout=timeout, cwd=workdir,
                   pythonpath=[OFFLINE])
    if job.timed_out:
        return False, f"still running after {timeout} s (killed)", time.time() - start
    code, log = job.returncode, job.output
    seconds = time.time() - start
    if code != 0:
        errors = [line for line in log.splitlines()
                  if ("Error" in line or "error:" in line or "Exception" in line)
                  and "torch.distributed.elastic" not in line and not line.lstrip().startswith("File ")]
        return False, (errors[0] if errors else log[-300:]).strip()[:300], seconds
    forbidden = LOG_MUST_NOT_CONTAIN.get(name)
    if forbidden and forbidden in log:
        line = next(line for line in log.splitlines() if forbidden in line)
        return False, f"the script reports a wrong result: {line.strip()[:200]}", seconds
    if name in EXIT_STATUS_ONLY:
        return True, "exit 0 on both ranks (no wrapped model to compare)", seconds
    found = {}
    for entry in os.listdir(fingerprints):
        with open(os.path.join(fingerprints, entry)) as f:
            found[entry] = json.load(f)
    if len(found) != 2:
        return False, f"trained state fingerprinted on {len(found)} of 2 ranks", seconds
    digests = {v["digest"] for v in found.values()}
    if len(digests) != 1:
        return False, "ranks disagree: trained state differs", seconds
    arrays = next(iter(found.values()))["arrays"]
    return True, f"ranks agree on {arrays} arrays", seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--legacy-keras", action="store_true", help="TF_USE_LEGACY_KERAS=1: tf.keras is Keras 2")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per script")
    args = parser.parse_args()
    names = args.names or sorted(LEGACY_KERAS_SCRIPTS if args.legacy_keras else TABLE)
    passed = 0
    for name in names:
        ok, detail, seconds = run_script(name, timeout=args.timeout, legacy_keras=args.legacy_keras)
        passed += ok
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.0f}s): {detail}", flush=True)
    print(f"{passed} of {len(names)} pass")
    return 0 if passed == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
