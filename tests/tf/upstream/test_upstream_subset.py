"""CI subset of the TensorFlow-test harness (run_upstream.py): a few cases of
TensorFlow's strategy_gather_test on 2 processes x 1 device, each with
MultiWorkerMirroredStrategy and with BytePSOps in the same run; every case
the reference passes must pass with BytePSOps. The full run is
`python tests/tf/upstream/run_upstream.py` (docs/tf.md has its counts)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_upstream  # noqa: E402

pytest.importorskip("dill", reason="TensorFlow's multi_process_runner needs dill and tblib: pip install dill tblib")
pytest.importorskip("tblib", reason="TensorFlow's multi_process_runner needs dill and tblib: pip install dill tblib")

CASES = ["testGatherDiffShapeAtAxis1", "testGatherRaiseDiffShapeAtNonAxis", "testAllGatherGradient"]


def test_gather_cases_match_multi_worker_mirrored(tmp_path):
    extra = ["--"] + [arg for case in CASES for arg in ("-k", case)]  # after "--": unittest's, not absl's
    results = run_upstream.run_file("strategy_gather_test", "2x1", str(tmp_path), 600, extra)
    report = run_upstream.summarise("2x1", results)
    assert report["totals"]["reference"]["pass"] >= 4, f"the reference did not run: {report}"
    assert report["totals"]["bytepsops"]["pass"] + report["totals"]["bytepsops"]["fail"] \
        + report["totals"]["bytepsops"]["skip"] == len(report["cases"]), report
    assert report["reference_passes_bytepsops_does_not"] == [], report
