"""Python core API over the pybind11 module `_core` (which wraps the C ABI)."""
import json

import numpy as np

from byteps_native.core import _core

BytePSError = _core.BytePSError
Handle = _core.Handle

_DTYPE_CODES = {
    np.dtype(np.float32): _core.FLOAT32,
    np.dtype(np.float64): _core.FLOAT64,
    np.dtype(np.float16): _core.FLOAT16,
    np.dtype(np.int32): _core.INT32,
    np.dtype(np.int64): _core.INT64,
    np.dtype(np.uint8): _core.UINT8,
}


def _dtype_code(array):
    dtype = getattr(array, "dtype", None)
    if dtype is None:
        return -1
    if dtype in _DTYPE_CODES:
        return _DTYPE_CODES[dtype]
    if str(dtype) == "bfloat16":  # ml_dtypes.bfloat16 (NumPy has no native one)
        return _core.BFLOAT16
    raise TypeError(f"push_pull: unsupported dtype {dtype} "
                    "(supported: float32, float64, float16, bfloat16, int32, int64, uint8)")


def init():
    """Initialise the engine from the environment (idempotent)."""
    _core.init()


def shutdown():
    _core.shutdown()


def initialized():
    return _core.initialized()


def rank():
    return _core.rank()


def size():
    return _core.size()


def local_rank():
    return _core.local_rank()


def local_size():
    return _core.local_size()


def build_info():
    return _core.build_info()


def stats():
    """Counters of this process: bytes pushed/pulled, per-stage seconds, queue depth."""
    return json.loads(_core.stats_json())


def _as_buffer(array, writable=True):
    if isinstance(array, np.ndarray):
        if not array.flags.c_contiguous:
            raise ValueError("push_pull: array is not C-contiguous; pass numpy.ascontiguousarray(x)")
        if writable and not array.flags.writeable:
            raise ValueError("push_pull: array is read-only; the result is written in place")
        # ml_dtypes bfloat16 arrays do not export a buffer format: view as uint16.
        return array.view(np.uint16) if str(array.dtype) == "bfloat16" else array
    if hasattr(array, "__dlpack__"):
        return np.from_dlpack(array)
    return array


def push_pull_async(array, name, average=True, priority=0, output=None):
    """Start a sum (average=True: mean) of `array` over all ranks.

    The result goes into `output` (same size and dtype) or, by default, into
    `array` itself. Returns a Handle with .poll() and .wait(); keep the arrays
    alive and untouched until then. `name` must identify the same tensor on
    every rank; higher `priority` goes first on the network.
    """
    code = _dtype_code(array)
    if output is not None and _dtype_code(output) != code:
        raise TypeError(f"push_pull: output dtype {output.dtype} differs from input dtype {array.dtype}")
    out = None if output is None else _as_buffer(output)
    return _core.push_pull_async(_as_buffer(array, output is None), str(name), bool(average), int(priority), code, out)


def push_pull(array, name, average=True, priority=0, output=None):
    """Blocking push_pull; returns the array holding the result."""
    push_pull_async(array, name, average, priority, output).wait()
    return array if output is None else output
