"""`python -m byteps_native.info` is framework-lazy (it took 6 s importing
TensorFlow), and GPU users are addressed: docs, requirements and an example."""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts):
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def test_info_imports_no_framework():
    code = ("import runpy, sys\n"
            "runpy.run_module('byteps_native.info', run_name='__main__')\n"
            "print('IMPORTED', sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED []" in out.stdout, out.stdout
    assert "engine: byteps-native engine" in out.stdout
    assert re.search(r"^torch installed: ", out.stdout, re.M) and re.search(r"^tensorflow installed: ", out.stdout, re.M)


def test_info_load_checks_the_adapters_for_real():
    out = subprocess.run([sys.executable, "-m", "byteps_native.info", "--load"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    for framework in ("torch", "tensorflow"):
        line = re.search(rf"^{framework} adapter: .*$", out.stdout, re.M).group(0)
        assert "loads into" in line or "not built" in line or "NOT LOADABLE" in line, line


def test_gpu_users_are_addressed():
    readme, quickstart, at_scale = _read("README.md"), _read("docs", "quickstart.md"), _read("docs", "at_scale.md")
    for name, text in (("README.md", readme), ("quickstart.md", quickstart)):
        assert re.search(r"^## GPUs$", text, re.M), f"{name}: no GPU section"
        assert "--device cuda" in text and "set_device" in text, name
    assert "BYTEPS_WITH_CUDA=1" in readme and "cuda: yes" in readme
    assert "--nnodes 2 --nproc_per_node 8" in quickstart  # multi-machine GPU recipe
    assert "### GPU machines" in at_scale
    gpu_requirements = _read("requirements-gpu.txt")
    assert "tensorflow-cpu" not in gpu_requirements and "torch==" in gpu_requirements
    example = _read("byteps_native", "examples", "ddp_digits.py")
    assert "torch.cuda.set_device" in example and "device_ids=" in example and ".to(device)" in example


def test_at_scale_names_the_kubernetes_objects_it_uses():
    at_scale = _read("docs", "at_scale.md")
    assert "Deployment" not in at_scale  # the servers are a batch/v1 Job
    assert "training-operator >= 1.7" in at_scale and "TrainJob" in at_scale


def test_gpu_docs_script_runs_what_the_docs_say():
    """scripts/check_gpu_docs.sh runs the docs' GPU commands on a GPU machine;
    here (no GPU) it checks that the documents still say those commands."""
    out = subprocess.run(["bash", os.path.join(REPO, "scripts", "check_gpu_docs.sh"), "--check-docs"],
                         capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the documents still say what this script runs" in out.stdout


def test_capabilities_agree_with_the_build_and_the_faces():
    """Issue 40: one capabilities query (bps_capabilities) instead of searching
    the build description's text; the torch face's cuda_built() and the core
    face's capabilities() read it."""
    from byteps_native._runtime import library
    from byteps_native.torch import basics
    import byteps_native.core as core
    caps = library.capabilities()
    assert set(caps) == {"cuda", "nccl"} and all(isinstance(v, bool) for v in caps.values())
    assert caps["cuda"] == ("cuda: yes" in library.build_info())
    assert caps["nccl"] == ("; nccl: " in library.build_info())  # the CUDA build names NCCL's version
    assert basics.cuda_built() is caps["cuda"]
    assert core.capabilities() == caps


def test_capability_bits_are_the_c_headers():
    """library.CAPABILITY_BITS repeats byteps_c.h's BPS_CAP_* values (ctypes
    cannot read a #define); a bit added or renumbered there fails here."""
    from byteps_native._runtime import library
    header = _read("csrc", "c_api", "byteps_c.h")
    declared = {name.lower(): int(value) for name, value in re.findall(r"#define BPS_CAP_(\w+) (\d+)u", header)}
    assert declared == library.CAPABILITY_BITS
