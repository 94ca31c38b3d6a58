"""Loads the compiled adapter (``_c10d``) and checks it matches the running torch.

The extension is compiled against one torch's C++ ABI and headers; loading it
under another torch crashes or misbehaves in ways far from the cause, so the
mismatch is caught here with the rebuild command.
"""
import os

import torch

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REBUILD = f"cd {_REPO} && pip install --no-build-isolation -e ."

try:
    from byteps_native.torch import _c10d
except ImportError as error:
    raise ImportError(
        f"byteps_native.torch: the compiled extension _c10d could not be loaded ({error}). "
        f"Build it against the installed torch {torch.__version__}: {REBUILD}") from error


def _release(version):
    """'2.13.0+cpu' -> '2.13.0': the local build tag does not change the C++ ABI."""
    return version.split("+")[0]


if _release(torch.__version__) != _release(_c10d.built_with_torch_version):
    raise ImportError(
        f"byteps_native.torch was built against torch {_c10d.built_with_torch_version} but torch "
        f"{torch.__version__} is installed. Rebuild: {REBUILD}")

__all__ = ["_c10d", "REBUILD"]
