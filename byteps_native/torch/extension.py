"""Loads the compiled adapter (``_c10d``) and checks it matches the running torch.

The extension is compiled against one torch's C++ ABI and headers; loading it
under another torch crashes or misbehaves in ways far from the cause, so the
mismatch is caught here with the rebuild command.
"""
import importlib

import torch

from byteps_native.install_facts import missing_adapter_message, rebuild_command

REBUILD = rebuild_command()

try:
    # By module path, not `from byteps_native.torch import _c10d`: while the
    # package is still importing, that form reports a missing extension as a
    # "circular import".
    _c10d = importlib.import_module("byteps_native.torch._c10d")
except ImportError as error:
    raise ImportError(missing_adapter_message("torch", error)) from None


def _release(version):
    """'2.13.0+cpu' -> '2.13.0': the local build tag does not change the C++ ABI."""
    return version.split("+")[0]


if _release(torch.__version__) != _release(_c10d.built_with_torch_version):
    raise ImportError(
        f"byteps_native.torch was built against torch {_c10d.built_with_torch_version} but torch "
        f"{torch.__version__} is installed. Rebuild: {REBUILD}")

__all__ = ["_c10d", "REBUILD"]
