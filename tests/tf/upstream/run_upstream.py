"""Runs the adapted copies of TensorFlow's distribute tests on each layout
(processes x local CPU devices) with the layout's TensorFlow reference and
with BytePSOps in the same run, and reports per case: pass/fail/skip for
both, and the cases the reference passes but BytePSOps does not.

    python tests/tf/upstream/run_upstream.py [--layouts 1x2,2x1,2x2]
        [--tests strategy_gather_test] [-k SUBSTRING ...] [--json out.json]

Needs TensorFlow's multi-process test dependencies `dill` and `tblib`
(pip install dill tblib). The 2x2 layout has no TensorFlow reference on CPU
(MultiWorkerMirroredStrategy uses one CPU device per worker); its cases are
compared with the same case of the 2x1 reference when both layouts run.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TESTS = ["strategy_gather_test"]
CASE = re.compile(r"^(?P<test>\w+?)_test_(?P<params>.*)_strategy_(?P<strategy>\w+)$")


def run_file(test, layout, out_dir, timeout, extra_args=()):
    """One adapted test file on one layout; returns {(case, strategy): status}."""
    xml_path = os.path.join(out_dir, f"{test}_{layout}.xml")
    log_path = os.path.join(out_dir, f"{test}_{layout}.log")
    env = dict(os.environ, BPS_UPSTREAM_TEST=test, BPS_UPSTREAM_LAYOUT=layout, BPS_UPSTREAM_LOG_DIR=out_dir,
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("BYTEPS_TIMEOUT", "30")
    with open(log_path, "w") as log:
        try:
            subprocess.run([os.path.join(HERE, "upstream_test"), f"--xml_output_file={xml_path}", *extra_args],
                           env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, cwd=HERE)
        except subprocess.TimeoutExpired:
            print(f"{test} {layout}: timed out after {timeout} s (log {log_path})", file=sys.stderr)
    return parse_xml(xml_path)


def parse_xml(path):
    results = {}
    if not os.path.exists(path):
        return results
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        match = CASE.match(case.get("name", ""))
        if not match:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            status = "fail"
        elif case.find("skipped") is not None or case.get("result") == "suppressed":
            status = "skip"
        else:
            status = "pass"
        strategy = "bytepsops" if match["strategy"].startswith("BytePSOps") else "reference"
        results[(f"{match['test']}[{match['params']}]", strategy)] = status
    return results


def summarise(layout, results, fallback_reference=None):
    cases = sorted({case for case, _ in results})
    rows, regressions = [], []
    for case in cases:
        reference = results.get((case, "reference")) or (fallback_reference or {}).get((case, "reference"), "n/a")
        byteps = results.get((case, "bytepsops"), "missing")
        rows.append({"case": case, "reference": reference, "bytepsops": byteps})
        if reference == "pass" and byteps != "pass":
            regressions.append(case)
    count = lambda who, status: sum(1 for r in rows if r[who] == status)  # noqa: E731
    totals = {who: {s: count(who, s) for s in ("pass", "fail", "skip")} for who in ("reference", "bytepsops")}
    return {"layout": layout, "totals": totals, "reference_passes_bytepsops_does_not": regressions, "cases": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="1x2,2x1,2x2")
    parser.add_argument("--tests", default=",".join(TESTS))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per test file and layout")
    parser.add_argument("--json", help="write the full per-case report here")
    parser.add_argument("-k", dest="patterns", action="append", default=[],
                        help="run only test methods matching this substring (repeatable)")
    args = parser.parse_args(argv)
    out_dir = tempfile.mkdtemp(prefix="bps_upstream_")
    reports, by_layout = [], {}
    for layout in args.layouts.split(","):
        results = {}
        for test in args.tests.split(","):
            extra = ["--"] + [arg for pattern in args.patterns for arg in ("-k", pattern)] if args.patterns else []
            results.update(run_file(test, layout, out_dir, args.timeout, extra))
        by_layout[layout] = results
        report = summarise(layout, results, by_layout.get("2x1") if layout == "2x2" else None)
        reports.append(report)
        t = report["totals"]
        print(f"{layout}: reference pass/fail/skip {t['reference']['pass']}/{t['reference']['fail']}/"
              f"{t['reference']['skip']}, BytePSOps {t['bytepsops']['pass']}/{t['bytepsops']['fail']}/"
              f"{t['bytepsops']['skip']}; reference passes, BytePSOps does not: "
              f"{len(report['reference_passes_bytepsops_does_not'])}")
        for case in report["reference_passes_bytepsops_does_not"]:
            print(f"    {case}")
    print(f"logs: {out_dir}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 0 if all(not r["reference_passes_bytepsops_does_not"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
