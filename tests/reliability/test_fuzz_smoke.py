"""CI smoke of the libFuzzer harnesses in csrc/fuzz/: build them (cached in
build/fuzz) and run each for a few thousand inputs from the committed corpus
under AddressSanitizer + UBSan. The million-input run is a documented command
(docs/reliability.md). Skipped, with the reason, where clang/libFuzzer is
missing (Debian: apt-get install -y clang)."""
import os
import shutil
import subprocess

import pytest

from tests.support.paths import REPO

HARNESSES = [("frame_decoder_fuzz", "frame", "frame.dict"),
             ("handshake_store_fuzz", "handshake_store", "handshake_store.dict")]
RUNS = int(os.environ.get("BYTEPS_FUZZ_SMOKE_RUNS", "5000"))


@pytest.fixture(scope="module")
def fuzz_bin_dir():
    if shutil.which("clang++") is None:
        pytest.skip("clang++ not found: the fuzz harnesses need clang with libFuzzer (apt-get install -y clang)")
    out = os.path.join(REPO, "build", "fuzz")
    r = subprocess.run(["bash", os.path.join(REPO, "csrc", "fuzz", "build.sh"), out], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        if "fuzzer" in r.stderr and ("cannot find" in r.stderr or "not found" in r.stderr):
            pytest.skip("clang++ has no libFuzzer runtime: " + r.stderr.strip().splitlines()[-1])
        pytest.fail("fuzz harness build failed:\n" + r.stdout + r.stderr)
    return out


@pytest.mark.parametrize("harness,corpus,dictionary", HARNESSES)
def test_fuzz_smoke(fuzz_bin_dir, tmp_path, harness, corpus, dictionary):
    work = tmp_path / "new_units"  # first corpus dir receives new inputs: keep the repo's untouched
    work.mkdir()
    cmd = [os.path.join(fuzz_bin_dir, harness), f"-runs={RUNS}", "-max_total_time=60",
           "-dict=" + os.path.join(REPO, "csrc", "fuzz", dictionary), f"-artifact_prefix={tmp_path}/",
           str(work), os.path.join(REPO, "tests", "fuzz_corpus", corpus)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, " ".join(cmd) + "\n" + r.stderr[-6000:]
    assert "Done" in r.stderr, r.stderr[-3000:]
