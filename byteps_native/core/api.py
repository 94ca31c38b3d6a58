"""Python core API: the data path over the pybind11 module `_core` (which
wraps the C ABI); lifecycle and topology are byteps_native/_runtime's."""
import json

import numpy as np

from byteps_native import compression as _compression
from byteps_native._runtime import config, library, lifecycle
from byteps_native._runtime.orphaned_shm import remove_orphaned_segments
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


class _EnvironmentStarter(lifecycle.Starter):
    """This face always starts from the environment (bps_init(NULL)), which
    reads bpslaunch's or torchrun's variables itself; errors are BytePSError."""

    def from_environment(self):
        code = library.engine().bps_init(None)
        if code != 0:
            error = library.failure(code, BytePSError)  # the engine's words and .code, as _core's errors
            remove_orphaned_segments(config.job_id())  # a local rank 0 killed at start-up
            raise error

    through_torchrun = alone = from_environment


def init():
    """Initialise the engine from the environment (idempotent)."""
    lifecycle.start("core", _EnvironmentStarter())


def shutdown():
    lifecycle.shutdown()


def initialized():
    return lifecycle.initialized()


def rank():
    return library.engine().bps_rank()


def size():
    return library.engine().bps_size()


def local_rank():
    return library.engine().bps_local_rank()


def local_size():
    return library.engine().bps_local_size()


def build_info():
    return library.build_info()


def capabilities():
    """What this build can do, by name ({"cuda": bool, "nccl": bool}): test
    these instead of build_info()'s words, which are for people."""
    return library.capabilities()


def stats():
    """Counters of this process: bytes pushed/pulled, per-stage seconds, queue depth."""
    return json.loads(library.stats_json())


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


_KDL_CUDA, _KDL_CUDA_MANAGED = 2, 13


def _on_gpu(array):
    """True for arrays in CUDA memory (CuPy, or any CUDA DLPack producer)."""
    if hasattr(array, "__cuda_array_interface__"):
        return True
    dlpack_device = getattr(array, "__dlpack_device__", None)
    if dlpack_device is None or isinstance(array, np.ndarray):
        return False
    try:
        return dlpack_device()[0] in (_KDL_CUDA, _KDL_CUDA_MANAGED)
    except Exception:
        return False


def _cuda_view(array, what):
    """(pointer, device, stream, shape) of a C-contiguous CUDA array."""
    if not hasattr(array, "__cuda_array_interface__"):
        # A DLPack-only producer: CuPy reads it without a copy.
        import cupy
        array = cupy.from_dlpack(array)
    cai = array.__cuda_array_interface__
    shape = tuple(int(d) for d in cai["shape"])
    itemsize = np.dtype(cai["typestr"]).itemsize if cai["typestr"][1] != "V" else int(cai["typestr"][2:])
    strides = cai.get("strides")
    if strides is not None:
        expect = itemsize
        for dim, stride in zip(reversed(shape), reversed(strides)):
            if dim > 1 and stride != expect:
                raise ValueError(f"push_pull: {what} is not C-contiguous; pass cupy.ascontiguousarray(x)")
            expect *= dim
    if cai["data"][1]:
        raise ValueError(f"push_pull: {what} is read-only; the result is written in place")
    if hasattr(array, "__dlpack_device__"):
        device = int(array.__dlpack_device__()[1])
    else:
        device = int(array.device.id)
    # CUDA array interface v3: the producer's stream (1 = legacy default,
    # 2 = per-thread default, None = nothing to wait for), which are also the
    # cudaStream_t values of those special streams.
    stream = cai.get("stream") or 0
    if type(array).__module__.startswith("cupy"):
        # CuPy's own notion wins: the stream current now is where the caller
        # queued the work that produces this array.
        import cupy
        stream = cupy.cuda.get_current_stream().ptr or 0
    return int(cai["data"][0]), device, int(stream), shape, array


def _push_pull_device_async(array, name, average, priority, output, timeout):
    code = _dtype_code(array)
    ptr, device, stream, shape, array = _cuda_view(array, f"array '{name}'")
    out_ptr, out_array = ptr, None
    if output is not None:
        if _dtype_code(output) != code:
            raise TypeError(f"push_pull: output dtype {output.dtype} differs from input dtype {array.dtype}")
        out_ptr, out_device, _, out_shape, out_array = _cuda_view(output, f"output of '{name}'")
        if out_device != device or int(np.prod(out_shape)) != int(np.prod(shape)):
            raise ValueError(f"push_pull: output of '{name}' must have the input's size and be on cuda:{device}")
    numel = int(np.prod(shape)) if shape else 1
    return _core.push_pull_device_async(ptr, out_ptr, numel, code, device, list(shape), str(name), bool(average),
                                        int(priority), stream, (array, out_array), timeout)


def declare_compression(name, compression, segments=None):
    """Tensor `name` travels compressed through the servers from its next push_pull
    on: "onebit", "topk:ratio=0.01", "randomk:ratio=0.01,seed=0" (",ef=0": without
    error feedback), or byteps_native.compression.onebit() etc.; None: uncompressed.
    `segments`: sizes of the tensors fused into it (onebit: a scale per tensor).
    Every rank must declare the same (docs/compression.md)."""
    _compression.declare_compression(str(name), compression, segments)


# BytePSError.code of an op whose deadline passed, or that was cancelled.
DEADLINE_EXCEEDED = _core.DEADLINE_EXCEEDED
CANCELLED = _core.CANCELLED


def _deadline(timeout):
    if timeout is None:
        return 0.0
    seconds = float(timeout)
    if not seconds > 0:
        raise ValueError(f"push_pull: timeout must be None or > 0 seconds, got {timeout!r}")
    return seconds


def push_pull_async(array, name, average=True, priority=0, output=None, compression=None, timeout=None):
    """Start a sum (average=True: mean) of `array` over all ranks.

    compression: as declare_compression (declared for `name` before this push).
    timeout: seconds (None: only BYTEPS_TIMEOUT, which fails the job). If the
    op has not completed by then, it fails (BytePSError, code
    DEADLINE_EXCEEDED) on every rank still waiting in its round, naming the
    rank whose deadline passed and what it waited for; the job and the name
    stay usable. Handle.cancel(why) fails it the same way (code CANCELLED).

    The result goes into `output` (same size and dtype) or, by default, into
    `array` itself. Returns a Handle with .poll() and .wait(); keep the arrays
    alive and untouched until then. `name` must identify the same tensor on
    every rank; higher `priority` goes first on the network.

    CUDA arrays (CuPy, `__cuda_array_interface__` or DLPack) need the GPU
    build: the work is ordered after the array's stream, and once the handle
    is done the result is in device memory, usable from any stream. Every
    local rank must push its GPU arrays in the same order.
    """
    if compression is not None:
        declare_compression(name, compression)
    if _on_gpu(array):
        return _push_pull_device_async(array, name, average, priority, output, _deadline(timeout))
    code = _dtype_code(array)
    if output is not None and _dtype_code(output) != code:
        raise TypeError(f"push_pull: output dtype {output.dtype} differs from input dtype {array.dtype}")
    out = None if output is None else _as_buffer(output)
    return _core.push_pull_async(_as_buffer(array, output is None), str(name), bool(average), int(priority), code, out,
                                 _deadline(timeout))


def push_pull(array, name, average=True, priority=0, output=None, compression=None, timeout=None):
    """Blocking push_pull; returns the array holding the result."""
    push_pull_async(array, name, average, priority, output, compression, timeout).wait()
    return array if output is None else output
