"""A representative subset of PyTorch's own distributed tests, on gloo and on
'byteps' in one run: byteps must pass every case gloo passes (the full run:
tests/torch/upstream/run_conformance.py, see docs/torch.md)."""

from tests.torch.upstream import run_conformance


def test_byteps_passes_what_gloo_passes(tmp_path):
    out = tmp_path / "conformance.json"
    run_conformance.main(["--subset", "ci", "--json", str(out)])
    import json

    report = json.loads(out.read_text())
    summary, cases = report["summary"], report["cases"]
    assert summary["cases"] == len(run_conformance.CI_CASES), cases
    assert summary["gloo_pass"] == len(run_conformance.CI_CASES), f"reference run broke: {cases}"
    assert summary["gloo_pass_byteps_not"] == [], cases
