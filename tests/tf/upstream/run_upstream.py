"""Runs the adapted copies of TensorFlow's distribute tests on each layout
(processes x local CPU devices) with the layout's TensorFlow reference and
with BytePSOps in the same run, and reports per case: pass/fail/skip for
both, and the cases the reference passes but BytePSOps does not.

    python -m tests.tf.upstream.run_upstream [--layouts 1x2,2x1,2x2]
        [--tests strategy_gather_test] [-k SUBSTRING ...] [--json out.json]

Needs TensorFlow's multi-process test dependencies `dill` and `tblib`
(pip install dill tblib). References (byteps_combinations.py): 1x2 =
MirroredStrategy on 2 CPUs; 2x1 = MultiWorkerMirroredStrategy chief + worker;
2x2 = both 4-replica CPU strategies TensorFlow has, MirroredStrategy on 4 CPUs
of one process (Mirrored4CPUs) and MWMS chief + 3 workers
(MultiWorkerMirrored4x1CPU; MWMS gives a worker one CPU device, so it has no
2 x 2 CPU form). A case counts as a reference pass when any reference of its
layout passes it. Where a layout has two references, a case that one passes
and the other fails depends on what differs between them (one process or
several, one device per process or several), so the report lists those
apart, with the references that pass them; the exit status is 1 when a case
that every reference of its layout passes fails with BytePSOps.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TESTS = ["strategy_gather_test", "strategy_common_test", "mirrored_strategy_test", "cross_device_ops_test",
         "collective_all_reduce_strategy_test"]
# Files that swap the cross-device ops rather than take a strategy parameter:
# each runs twice ($BPS_UPSTREAM_CROSS_DEVICE_OPS = reference, bytepsops), on
# the layouts listed (they start their own 1- and 2-process pools of one CPU
# device each at 2x1; at 1x2 and 2x2 cross_device_ops_test runs its cases of
# that many processes with 2 logical CPUs each where they ask for 2 GPUs,
# byteps_combinations.CPUS_AS_GPUS; collective_all_reduce_strategy_test starts
# its own 3-worker clusters).
OPS_SWAPPED = {"cross_device_ops_test": ("2x1", "1x2", "2x2"), "collective_all_reduce_strategy_test": ("2x1",)}
# testName_test_[<params>_]strategy_<Name>[_<more params>] (the parameter is
# `distribution` in some files); strategy names have no "_"
CASE = re.compile(r"^(?P<test>test\w+?)_test_(?:(?P<pre>.*?)_)?(?:strategy|distribution)_(?P<strategy>[A-Za-z0-9]+)"
                  r"(?P<post>_.*)?$")


def run_file(test, layout, out_dir, timeout, extra_args=(), variant=None):
    """One adapted test file on one layout; returns {(case, strategy): status}.
    variant: for OPS_SWAPPED files, which cross-device ops this run uses."""
    suffix = f"_{variant}" if variant else ""
    xml_path = os.path.join(out_dir, f"{test}_{layout}{suffix}.xml")
    log_path = os.path.join(out_dir, f"{test}_{layout}{suffix}.log")
    env = dict(os.environ, BPS_UPSTREAM_TEST=test, BPS_UPSTREAM_LAYOUT=layout, BPS_UPSTREAM_LOG_DIR=out_dir,
               TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([HERE, REPO] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    if variant:
        env["BPS_UPSTREAM_CROSS_DEVICE_OPS"] = variant
        # its timeout cases abandon engine operations (see docs/tf.md); the
        # engine must not fail the job before the file ends
        env.setdefault("BYTEPS_TIMEOUT", "900")
    env.setdefault("BYTEPS_TIMEOUT", "30")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([os.path.join(HERE, "upstream_test"), f"--xml_output_file={xml_path}",
                                 *extra_args], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=HERE,
                                start_new_session=True)
        deadline, exit_grace = time.monotonic() + timeout, None
        while proc.poll() is None:
            if exit_grace is None and os.path.exists(xml_path) and os.path.getsize(xml_path) > 0:
                # results are in (absltest creates the file empty at start): bound the exit
                exit_grace = time.monotonic() + 60
            if time.monotonic() > min(deadline, exit_grace or deadline):
                what = "did not exit 60 s after writing its results" if exit_grace else f"timed out after {timeout} s"
                print(f"{test} {layout}: {what} (log {log_path}); stopped", file=sys.stderr)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(1)
    return parse_xml(xml_path, variant)


def parse_xml(path, variant=None):
    results = {}
    if not os.path.exists(path):
        return results
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        match = CASE.match(case.get("name", ""))
        if variant and case.get("name", "").startswith("test") and case.get("name") != "test_session":
            test_class = case.get("classname", "").split(".")[-1]
            results[(f"{test_class}.{case.get('name')}", variant)] = _status(case)
            continue
        if not match:
            continue
        status = _status(case)
        strategy = "bytepsops" if match["strategy"].startswith("BytePSOps") else f"reference:{match['strategy']}"
        params = (match["pre"] or "") + (match["post"] or "")
        # the class is part of the case: one file may hold a method name in several classes
        test_class = case.get("classname", "").split(".")[-1]
        name = f"{test_class}.{match['test']}" if test_class else match["test"]
        results[(f"{name}[{params}]", strategy)] = status
    return results


def _status(case):
    if case.find("failure") is not None or case.find("error") is not None:
        return "fail"
    if case.find("skipped") is not None or case.get("result") == "suppressed":
        return "skip"
    return "pass"


def _combined(statuses):
    """A case's reference result over several references: pass if any passes."""
    for status in ("pass", "fail", "skip"):
        if status in statuses:
            return status
    return "n/a"


def summarise(layout, results):
    """Per case: each reference's status ("reference:<strategy>" keys, or
    "reference" for the files run once per cross-device ops), their
    combination (pass if any passes) and BytePSOps'."""
    cases = sorted({case for case, _ in results})
    reference_names = sorted({who for _, who in results if who.startswith("reference")})
    rows, regressions, some_only = [], [], {}
    for case in cases:
        references = {who: results[(case, who)] for who in reference_names if (case, who) in results}
        reference = _combined(set(references.values()))
        byteps = results.get((case, "bytepsops"), "missing")
        rows.append({"case": case, "reference": reference, "references": references, "bytepsops": byteps})
        if reference == "pass" and byteps != "pass":
            regressions.append(case)
            passing = sorted(who.split(":", 1)[-1] for who, status in references.items() if status == "pass")
            if len(passing) < len(references):
                some_only[case] = passing
    count = lambda column, status: sum(1 for r in rows if column(r) == status)  # noqa: E731
    columns = {"reference": lambda r: r["reference"], "bytepsops": lambda r: r["bytepsops"]}
    if len(reference_names) > 1:
        # per-strategy columns ("reference" alone, of the files run once per
        # cross-device ops, would shadow the combined column)
        columns.update({who: (lambda r, who=who: r["references"].get(who))
                        for who in reference_names if who.startswith("reference:")})
    totals = {who: {s: count(column, s) for s in ("pass", "fail", "skip")} for who, column in columns.items()}
    return {"layout": layout, "totals": totals, "reference_passes_bytepsops_does_not": regressions,
            "every_reference_passes_bytepsops_does_not": [c for c in regressions if c not in some_only],
            "only_some_references_pass": some_only, "cases": rows}


def _format_totals(totals):
    def triple(who):
        return "/".join(str(totals[who][s]) for s in ("pass", "fail", "skip"))
    parts = [f"reference pass/fail/skip {triple('reference')}"]
    parts += [f"{who.split(':', 1)[1]} {triple(who)}" for who in totals if who.startswith("reference:")]
    return ", ".join(parts) + f", BytePSOps {triple('bytepsops')}"


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
    reports = []
    for layout in args.layouts.split(","):
        results = {}
        for test in args.tests.split(","):
            extra = ["--"] + [arg for pattern in args.patterns for arg in ("-k", pattern)] if args.patterns else []
            file_results = {}
            if test in OPS_SWAPPED:
                if layout not in OPS_SWAPPED[test]:
                    continue
                for variant in ("reference", "bytepsops"):
                    file_results.update(run_file(test, layout, out_dir, args.timeout, extra, variant))
            else:
                file_results = run_file(test, layout, out_dir, args.timeout, extra)
            print(f"  {test} {layout}: {_format_totals(summarise(layout, file_results)['totals'])}", flush=True)
            results.update(file_results)
        report = summarise(layout, results)
        reports.append(report)
        print(f"{layout}: {_format_totals(report['totals'])}; reference passes, BytePSOps does not: "
              f"{len(report['reference_passes_bytepsops_does_not'])}")
        for case in report["reference_passes_bytepsops_does_not"]:
            only = report["only_some_references_pass"].get(case)
            print(f"    {case}" + (f"  (passed by {', '.join(only)} only)" if only is not None else ""))
    print(f"logs: {out_dir}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 0 if all(not r["every_reference_passes_bytepsops_does_not"] for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
