import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import byteps_native.torch  # noqa: F401
except ImportError as error:  # the extension was not built: say how, once
    pytest.skip(f"byteps_native.torch unavailable: {error}", allow_module_level=True)
