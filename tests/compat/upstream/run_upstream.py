"""Run Horovod's own unit tests (third_party/horovod/test/, import lines
swapped) with 2 processes under torchrun, one pytest per rank, and print
per-test outcomes: a test passes when it passes on every rank.

    python3 -m tests.compat.upstream.run_upstream            # every stored suite
    python3 -m tests.compat.upstream.run_upstream horovod/test_torch.py -k allreduce
    python3 -m tests.compat.upstream.run_upstream --legacy-keras horovod/test_tensorflow2_keras.py

--legacy-keras: TF_USE_LEGACY_KERAS=1, so that tf.keras is Keras 2 (the
tf_keras package), as Horovod's Keras tests expect on TensorFlow >= 2.16;
failures are then classified by expected.EXPECTED_LEGACY_KERAS.
"""
import argparse
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

from tests.compat.upstream.expected import SUITES, expected_failure
from tests.support.jobs import torchrun
from tests.support.paths import THIRD_PARTY


def _outcomes(report):
    """{(class, test name): (outcome, message)} from one rank's JUnit report."""
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag, kind in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
            node = case.find(tag)
            if node is not None:
                outcome = kind
                lines = (node.get("message") or node.text or "").strip().splitlines()
                message = lines[0][:200] if lines else ""
                break
        found[(case.get("classname").split(".")[-1], case.get("name"))] = (outcome, message)
    return found


def _outcomes_jsonl(path):
    """{(class, test name): (outcome, message)} from one rank's outcomes file
    (written test by test: complete even when the job hung). A test may report
    several times (TF's run_all_in_graph_and_eager_modes: graph, eager, whole):
    a failure wins over a skip, a skip over a pass."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    found = {}
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            key = tuple(entry["test"])
            if rank[entry["outcome"]] > rank[found.get(key, ("passed",))[0]] or key not in found:
                found[key] = (entry["outcome"], entry["message"])
    return found


def _merge(outcomes):
    failed = [o for o in outcomes if o[0] in ("failed", "missing")]
    skipped = [o for o in outcomes if o[0] == "skipped"]
    return failed[0] if failed else (skipped[0] if skipped else ("passed", ""))


def run_suite(path, pytest_args=(), nproc=2, timeout=1800, env=None, max_jobs=40, progress=None, tests=None):
    """Returns ({test: (outcome, message)} merged over ranks, log). A job that
    stopped after an engine failure is followed by a fresh job for the tests
    it did not reach."""
    project, file = path.split("/")
    suite = os.path.join(THIRD_PARTY, project, "test", file)
    results, log = {}, ""
    for job in range(max_jobs):
        with tempfile.TemporaryDirectory() as result_dir:
            decided_file = os.path.join(result_dir, "decided.txt")
            with open(decided_file, "w") as f:
                f.writelines(f"{cls}::{name}\n" for (cls, name) in results)
            # BYTEPS_TIMEOUT: long enough for a rank still importing under load (2 shared
            # cores: 10 s failed the CI subset once in 7 runs), short enough for a hang.
            extra = {"BYTEPS_TIMEOUT": "60"}
            extra["UPSTREAM_DECIDED"] = decided_file
            extra.update(env or {})
            launched = torchrun(os.path.join(HERE, "rank_pytest.py"),
                                [*([f"{suite}::{t}" for t in tests] if tests else [suite]), *pytest_args],
                                nproc=nproc, result_dir=result_dir, env=extra, timeout=timeout,
                                pythonpath=[os.path.join(HERE, "utils")])
            if launched.timed_out:
                open(os.path.join(result_dir, "restart.job"), "w").close()
            log += launched.output
            restart = any(name.startswith("restart.") for name in os.listdir(result_dir))
            carried = set()
            for name in os.listdir(result_dir):
                if name.startswith("carried."):
                    with open(os.path.join(result_dir, name)) as f:
                        carried.update(line.strip() for line in f if line.strip())
            per_rank = [_outcomes_jsonl(os.path.join(result_dir, f"outcomes.{r}.jsonl")) for r in range(nproc)
                        if os.path.exists(os.path.join(result_dir, f"outcomes.{r}.jsonl"))]
            # A collection error has no test outcome: the JUnit report has it.
            if not per_rank:
                per_rank = [_outcomes(os.path.join(result_dir, f"junit.{r}.xml")) for r in range(nproc)
                            if os.path.exists(os.path.join(result_dir, f"junit.{r}.xml"))]
        if not per_rank:
            break
        reached = set().union(*per_rank)
        # A test some rank did not reach (it stopped after an engine failure
        # first), or that failed only because the engine was already broken,
        # runs again in the next job, unless this job decided nothing else.
        everywhere = {t for t in reached if len(per_rank) == nproc and all(t in rank for rank in per_rank)}
        decided = {t for t in everywhere if t[1] not in carried}
        if restart and decided:
            reached = decided
        if progress:
            progress(f"{path}: job {job + 1}: {len(reached)} tests decided, "
                     f"{'restarting after an engine failure' if restart else 'done'}")
        if not reached:
            break
        for test in reached:
            results[test] = _merge([rank.get(test, ("missing", "not reached on every rank")) for rank in per_rank]
                                   + [("missing", "no report from a rank")] * (nproc - len(per_rank)))
        if not restart:
            break
    if not results:
        return None, log
    return {name: outcome for (cls, name), outcome in results.items()}, log


def summarize(path, merged, legacy_keras=False):
    counts = {"passed": 0, "skipped": 0, "expected": 0, "unexpected": 0}
    unexpected = []
    for name, (outcome, message) in sorted(merged.items()):
        if outcome in ("passed", "skipped"):
            counts[outcome] += 1
            continue
        why = expected_failure(path, name, legacy_keras)
        if why:
            counts["expected"] += 1
        else:
            counts["unexpected"] += 1
            unexpected.append(f"{name}: {message}")
    return counts, unexpected


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", default=list(SUITES))
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("-v", action="store_true", help="print every test's outcome")
    parser.add_argument("--legacy-keras", action="store_true", help="TF_USE_LEGACY_KERAS=1: tf.keras is Keras 2")
    parser.add_argument("--nproc", type=int, default=2,
                        help="processes (2; 1 on a one-GPU machine: NCCL refuses two ranks on one GPU)")
    args = parser.parse_args()
    status = 0
    env = {"TF_USE_LEGACY_KERAS": "1"} if args.legacy_keras else None
    for path in args.suites:
        merged, log = run_suite(path, ["-k", args.k] if args.k else [], nproc=args.nproc, env=env,
                                progress=lambda m: print(m, flush=True))
        if merged is None:
            print(f"{path}: no report from every rank\n{log[-4000:]}")
            status = 1
            continue
        counts, unexpected = summarize(path, merged, args.legacy_keras)
        failed_classes = {}
        for name, (outcome, _) in merged.items():
            why = expected_failure(path, name, args.legacy_keras) if outcome == "failed" else None
            if why:
                failed_classes[why[0]] = failed_classes.get(why[0], 0) + 1
        print(f"{path}: {len(merged)} tests: {counts['passed']} passed, {counts['skipped']} skipped, "
              f"{counts['expected']} failed as classified {failed_classes}, {counts['unexpected']} unexpected")
        if args.v:
            for name, (outcome, message) in sorted(merged.items()):
                print(f"  {outcome:8} {name} {message}")
        for line in unexpected:
            print(f"  UNEXPECTED {line}")
        status = status or (1 if unexpected else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
