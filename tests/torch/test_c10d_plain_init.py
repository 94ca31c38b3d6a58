"""'byteps' without importing byteps_native: torch's `torch.backends` entry
point (declared here by a minimal dist-info, as an installed wheel declares
it), and TORCH_DISTRIBUTED_DEBUG=DETAIL."""
import os

from tests.support.jobs import torchrun
from tests.torch import WORKERS

ENTRY_POINT = "byteps = byteps_native.torch_autoload:register"


def _installed_entry_point(tmp_path):
    info = tmp_path / "site" / "byteps_native_entry_point-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: byteps-native-entry-point\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[torch.backends]\n{ENTRY_POINT}\n")
    (tmp_path / "out").mkdir()
    return str(tmp_path / "site")


def test_init_by_backend_string_alone(tmp_path):
    site = _installed_entry_point(tmp_path)
    env = {"PYTHONPATH": site + os.pathsep + os.environ.get("PYTHONPATH", "")}
    results = torchrun(os.path.join(WORKERS, "plain_init.py"), nproc=2, env=env,
                       result_dir=tmp_path / "out").check().results
    for rank, checks in results.items():
        assert checks == {"init": "ok", "collectives": "ok", "backend": "byteps",
                          "byteps_loaded_by_torch": True}, f"rank {rank}: {checks}"


def test_debug_detail_wraps_byteps(tmp_path):
    site = _installed_entry_point(tmp_path)
    env = {"PYTHONPATH": site + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
    results = torchrun(os.path.join(WORKERS, "plain_init.py"), nproc=2, env=env,
                       result_dir=tmp_path / "out").check().results
    for rank, checks in results.items():
        assert checks["init"] == "ok" and checks["collectives"] == "ok", f"rank {rank}: {checks}"
